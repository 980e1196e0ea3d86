"""The smallest MicroPython heap in which each board's desktop-built image
boots: LittleFS mounted as /, /lib/sporadic/*.mpy + /lib/board.mpy imported,
/cfg.json loaded, and the run loop makes 3 passes that run one due job.

    python bench/heap_boards.py [--typical] [BOARD ...]

--typical puts bench/rp2.py's typical file of 100 jobs beside the due one,
so that the wake index's agenda is full (runtime.AGENDA entries: 32 on an
ESP32 or a Pico, 8 on an ESP8266) when the pass records it.

Found by bisection of `micropython -X heapsize=N` (1 KiB steps) on the unix
port. The boot script and the stand-in `machine` module are .mpy too, so
nothing is compiled in the heap.

Interpreters side by side. The PyPI `micropython` is 64-bit: every
pointer is 8 bytes and a GC block 32, where an ESP8266/ESP32/RP2040 has 4
and 16, so its figure is an upper bound. The board's own figure comes from
the same unix port built 32-bit (bench/build_micropython32.sh, or any
32-bit build named by $SPORADIC_MICROPYTHON32); without one that column
says so. The ESP8266's 38K heap is the target the 32-bit figure answers.
The third column is that 32-bit build with firmware/manifest.py frozen in
(bench/.mp32/micropython-frozen or $SPORADIC_MICROPYTHON32_FROZEN) and an
image made with --frozen (no /lib/sporadic): code run from flash.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from companion.fleet import files  # noqa: E402
from companion.make import image

MICROPYTHON = shutil.which("micropython")
MICROPYTHON32 = os.environ.get("SPORADIC_MICROPYTHON32") or os.path.join(ROOT, "bench", ".mp32", "micropython")
MICROPYTHON32_FROZEN = (os.environ.get("SPORADIC_MICROPYTHON32_FROZEN")
                        or os.path.join(ROOT, "bench", ".mp32", "micropython-frozen"))
BOARDS = ["esp8266", "esp32", "esp32s3", "rp2-pico-w", "unix"]


def prepare(name, tmp, frozen=False, typical=False):
    lib = os.path.join(tmp, "host")
    os.makedirs(lib)
    for n in ("tests/lfsboot.py", "companion/vboard/onboard/vboard_blockdev.py", "tests/standin/machine.py",
              "tests/standin/neopixel.py"):
        src = os.path.join(ROOT, n)
        with open(os.path.join(lib, os.path.basename(n)[:-3] + ".mpy"), "wb") as f:
            f.write(files.compile_mpy(src))
    if name == "unix":
        due = 1796083200
        env = {"SPORADIC_CLOCK": "step", "SPORADIC_CLOCK_START": str(due + 60)}
    else:
        due, env = int(time.time()) - 60, {}
    when = time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime(due))
    clean = os.path.join(tmp, "clean.bin")
    jobs = "each %s log hello ; within=1d\n" % when
    if typical:
        import rp2   # bench/ is on sys.path: this script's folder
        jobs += "".join(l + "\n" for l in rp2.typical_job_file())
    image.build_image(name, "bench-1", clean, jobs, secret=b"\x33" * 16, frozen=frozen)
    return lib, clean, env


def boots(name, heap_k, lib, clean, env, tmp, interpreter=None):
    g = image.geometry(name)
    img = os.path.join(tmp, "fs.bin")
    shutil.copyfile(clean, img)
    e = dict(os.environ, MICROPYPATH=lib, **env)
    p = subprocess.run([interpreter or MICROPYTHON, "-X", "heapsize=%dK" % heap_k, "-m", "lfsboot", img,
                        str(g["block_size"]), str(g["block_count"]), str(g["prog_size"]), lib],
                       capture_output=True, text=True, timeout=120, env=e)
    # "MemoryError": boot.main's last resort printed it and restarted the board (a failure here)
    if p.returncode != 0 or "ID bench-1" not in p.stdout or "MemoryError" in p.stdout:
        return False
    with open(img, "rb") as f:
        found = image.read_image(f.read(), g)
    text = b"".join(found.get(n, b"") for n in ("/log.txt", "/jobs.txt")).decode()
    return any(" r bench-1 0 " in l and " ok " in l for l in text.splitlines())


def smallest(name, interpreter=None, frozen=False, typical=False):
    with tempfile.TemporaryDirectory() as tmp:
        lib, clean, env = prepare(name, tmp, frozen, typical)
        lo, hi = 8, 256
        if not boots(name, hi, lib, clean, env, tmp, interpreter):
            return None
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if boots(name, mid, lib, clean, env, tmp, interpreter):
                hi = mid
            else:
                lo = mid
        return hi


def is_32bit(path):
    try:
        p = subprocess.run([path, "-c", "import sys; print(sys.maxsize)"], capture_output=True, text=True,
                           timeout=30)
    except OSError:
        return False
    return p.returncode == 0 and p.stdout.strip() == str(2 ** 31 - 1)


def interpreters_32bit():
    """(32-bit build, 32-bit build with the firmware frozen): paths, or None
    where bench/build_micropython32.sh (or $SPORADIC_MICROPYTHON32[_FROZEN])
    gave none. bench/heap_sync.py uses the same."""
    return tuple(p if os.path.isfile(p) and is_32bit(p) else None
                 for p in (MICROPYTHON32, MICROPYTHON32_FROZEN))


def main(argv):
    typical = "--typical" in argv
    names = [a for a in argv if a != "--typical"] or BOARDS
    mp32, frz = interpreters_32bit()
    print("smallest heap (KiB) that boots the board's image and runs a job%s"
          % (" beside the typical 100" if typical else ""))
    print("%-12s %10s %10s %14s %12s %6s" % ("board", "64-bit", "32-bit", "32-bit frozen", "board heap",
                                             "fits"))
    out = {}
    for n in names:
        k64 = smallest(n, typical=typical)
        k32 = smallest(n, mp32, typical=typical) if mp32 else None
        kfz = smallest(n, frz, frozen=True, typical=typical) if frz else None
        heap = files.boards().load(n)["heap_bytes"] // 1024
        fits = (k32 <= heap) if k32 else None
        out[n] = {"heap_k_64bit": k64, "heap_k_32bit": k32, "heap_k_32bit_frozen": kfz,
                  "board_heap_k": heap, "fits_32bit": fits}
        print("%-12s %10s %10s %14s %12d %6s" % (n, k64 or ">256", k32 or ("-" if not mp32 else ">256"),
                                                 kfz or ("-" if not frz else ">256"), heap,
                                                 {True: "yes", False: "NO", None: "?"}[fits]))
    if not mp32:
        print("no 32-bit interpreter (%s): run bench/build_micropython32.sh for the board's own figure"
              % MICROPYTHON32)
    print(json.dumps({"interpreter_32bit": mp32, "interpreter_32bit_frozen": frz, "typical": typical,
                      "boards": out}))


if __name__ == "__main__":
    main(sys.argv[1:])
