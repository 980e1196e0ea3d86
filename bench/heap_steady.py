"""The smallest heap from which a board's image boots and runs a job at every
heap above it, in bytes (#31, docs/budgets.md#31):

    python bench/heap_steady.py [BOARD] [--step 128] [--span 4096]

bench/heap_boards.py bisects in 1 KiB steps, which assumes that a heap that
works makes every bigger one work. On a small heap it need not: the .mpy
code a pass loads (the scanner, the index's code) needs pieces of 100-800
bytes in one run, and fragmentation cuts a heap of each size differently,
so a heap a KiB or two above the bisection's answer can fail where a smaller
one passed (the ESP8266 image on the 32-bit port, 2026-12-06: 44,032 B
boots, 44,288-45,696 B fail in places). This script takes the bisection's
answer K (KiB), then tries the heaps from K KiB + SPAN down in STEP bytes
until one fails: the figure is the last that passed, every heap from it to
the top of the window booting and running the job. The same boot as
bench/heap_boards.py (its image, and `boots` with the heap in bytes), but
for the due job's time: the last minute of the day before (UTC), not a
minute ago, so that both trees of one bench/esp8266.py run boot the same
job line (a minute's other text is another layout of the heap: the figure
of one tree moves by a few hundred bytes from minute to minute). The interpreter: the 32-bit build (bench/.mp32/micropython or
$SPORADIC_MICROPYTHON32), else the 64-bit PyPI `micropython`, labelled so.
bench/esp8266.py runs this tree's copy on the base tree too. The last line
is JSON.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

from companion.fleet import files  # noqa: E402
from companion.make import image  # noqa: E402
from heap_boards import MICROPYTHON, interpreters_32bit  # noqa: E402


def prepare(name, tmp):
    """heap_boards.prepare, the job due at the day's start (a minute before)."""
    import time
    lib = os.path.join(tmp, "host")
    os.makedirs(lib)
    for n in ("tests/lfsboot.py", "companion/vboard/onboard/vboard_blockdev.py", "tests/standin/machine.py",
              "tests/standin/neopixel.py"):
        with open(os.path.join(lib, os.path.basename(n)[:-3] + ".mpy"), "wb") as f:
            f.write(files.compile_mpy(os.path.join(ROOT, n)))
    if name == "unix":
        due = 1796083200
        env = {"SPORADIC_CLOCK": "step", "SPORADIC_CLOCK_START": str(due + 60)}
    else:
        due, env = int(time.time()) // 86400 * 86400 - 60, {}
    clean = os.path.join(tmp, "clean.bin")
    jobs = "each %s log hello ; within=1d\n" % time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime(due))
    image.build_image(name, "bench-1", clean, jobs, secret=b"\x33" * 16)
    return lib, clean, env


def smallest(name, lib, clean, env, tmp, interpreter):
    """heap_boards.smallest's bisection (1 KiB steps), on this image."""
    lo, hi = 8, 256
    if not boots(name, hi * 1024, lib, clean, env, tmp, interpreter):
        return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if boots(name, mid * 1024, lib, clean, env, tmp, interpreter):
            hi = mid
        else:
            lo = mid
    return hi


def boots(name, heap, lib, clean, env, tmp, interpreter):
    """heap_boards.boots with the heap in bytes."""
    g = image.geometry(name)
    img = os.path.join(tmp, "fs.bin")
    shutil.copyfile(clean, img)
    e = dict(os.environ, MICROPYPATH=lib, **env)
    p = subprocess.run([interpreter, "-X", "heapsize=%d" % heap, "-m", "lfsboot", img,
                        str(g["block_size"]), str(g["block_count"]), str(g["prog_size"]), lib],
                       capture_output=True, text=True, timeout=120, env=e)
    if p.returncode != 0 or "ID bench-1" not in p.stdout:
        return False
    with open(img, "rb") as f:
        found = image.read_image(f.read(), g)
    text = b"".join(found.get(n, b"") for n in ("/log.txt", "/jobs.txt")).decode()
    return any(" r bench-1 0 " in l and " ok " in l for l in text.splitlines())


def steady(name, interpreter, step, span):
    with tempfile.TemporaryDirectory() as tmp:
        lib, clean, env = prepare(name, tmp)
        k = smallest(name, lib, clean, env, tmp, interpreter)
        if k is None:
            return None, None, []
        heap = k * 1024 + span
        if not boots(name, heap, lib, clean, env, tmp, interpreter):
            return k, None, [heap]
        last = heap
        while heap - step >= 8 * 1024:
            heap -= step
            if not boots(name, heap, lib, clean, env, tmp, interpreter):
                return k, last, [heap]
            last = heap
        return k, last, []


def main(argv):
    step, span = 128, 4096
    if "--step" in argv:
        i = argv.index("--step")
        step = int(argv[i + 1])
        del argv[i:i + 2]
    if "--span" in argv:
        i = argv.index("--span")
        span = int(argv[i + 1])
        del argv[i:i + 2]
    name = argv[0] if argv else "esp8266"
    mp32 = interpreters_32bit()[0]
    label = "32-bit" if mp32 else "64-bit PyPI micropython (no 32-bit build: bench/build_micropython32.sh)"
    k, h, failed = steady(name, mp32 or MICROPYTHON, step, span)
    print("%s, %s: bisection (1 KiB steps) %s KiB; every heap from %s B (%s KiB) up to %s B boots and runs "
          "the job (%d-byte steps)%s" % (name, label, k, h, None if h is None else round(h / 1024.0, 2),
                                        None if k is None else k * 1024 + span, step,
                                        "; fails at %d B" % failed[0] if failed else ""))
    print(json.dumps({"board": name, "interpreter": label, "bisection_k": k, "steady_bytes": h,
                      "steady_k": None if h is None else -(-h // 1024), "step": step, "span": span,
                      "first_failure_below": failed[0] if failed else None}))


if __name__ == "__main__":
    main(sys.argv[1:])
