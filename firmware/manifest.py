# MicroPython manifest: freezes the sporadic package into a board's firmware
# (docs/hardware.md#frozen-firmware). Frozen bytecode runs from flash, so the code
# costs no heap: the way to run sync sessions on an ESP8266's 38K heap.
# From a board manifest, or FROZEN_MANIFEST for a port build:
#   include("/path/to/sporadic/firmware/manifest.py")
# Every file a board carries (companion/fleet/files.py board_modules): sporadic/
# and its subpackages, never sporadic/desktop/. Paths are relative to this
# file (makemanifest runs it from here).
import os

_files = []
for _top, _dirs, _names in os.walk("sporadic"):
    _dirs[:] = sorted(d for d in _dirs if d != "desktop" and not d.startswith(("_", ".")))
    _files += [os.path.relpath(os.path.join(_top, n), "sporadic") for n in sorted(_names) if n.endswith(".py")]
package("sporadic", files=_files, opt=3)
