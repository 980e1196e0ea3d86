# MicroPython manifest: freezes the sporadic package into a board's firmware
# (docs/hardware.md#frozen-firmware). Frozen bytecode runs from flash, so the code
# costs no heap: the way to run sync sessions on an ESP8266's 38K heap.
# From a board manifest, or FROZEN_MANIFEST for a port build:
#   include("/path/to/sporadic/firmware/manifest.py")
package("sporadic", opt=3)
