"""The smallest MicroPython heap in which each board's desktop-built image
boots: LittleFS mounted as /, /lib/sporadic/*.mpy + /lib/board.py imported,
/cfg.json loaded, and the run loop makes 3 passes that run one due job.

    python bench/heap_boards.py [BOARD ...]

Found by bisection of `micropython -X heapsize=N` (1 KiB steps) on the unix
port. The boot script and the stand-in `machine` module are .mpy too, so
nothing is compiled in the heap. Caveat: the unix port here is 64-bit, so
every object pointer is 8 bytes where an ESP8266/ESP32/RP2040 has 4: the
figure is an upper bound for a 32-bit board, not the board's own figure.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from companion import files, image  # noqa: E402

MICROPYTHON = shutil.which("micropython")
BOARDS = ["esp8266", "esp32", "esp32s3", "rp2-pico-w", "unix"]


def prepare(name, tmp):
    lib = os.path.join(tmp, "host")
    os.makedirs(lib)
    for n in ("lfsboot.py", "fileblockdev.py", "standin/machine.py", "standin/neopixel.py"):
        src = os.path.join(ROOT, "tests", n)
        with open(os.path.join(lib, os.path.basename(n)[:-3] + ".mpy"), "wb") as f:
            f.write(files.compile_mpy(src))
    if name == "unix":
        due = 1796083200
        env = {"SPORADIC_CLOCK": "step", "SPORADIC_CLOCK_START": str(due + 60)}
    else:
        due, env = int(time.time()) - 60, {}
    when = time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime(due))
    clean = os.path.join(tmp, "clean.bin")
    image.build_image(name, "bench-1", clean, "each %s log hello ; within=1d\n" % when, secret=b"\x33" * 16)
    return lib, clean, env


def boots(name, heap_k, lib, clean, env, tmp):
    g = image.geometry(name)
    img = os.path.join(tmp, "fs.bin")
    shutil.copyfile(clean, img)
    e = dict(os.environ, MICROPYPATH=lib, **env)
    p = subprocess.run([MICROPYTHON, "-X", "heapsize=%dK" % heap_k, "-m", "lfsboot", img,
                        str(g["block_size"]), str(g["block_count"]), str(g["prog_size"]), lib],
                       capture_output=True, text=True, timeout=120, env=e)
    if p.returncode != 0 or "ID bench-1" not in p.stdout:
        return False
    with open(img, "rb") as f:
        found = image.read_image(f.read(), g)
    text = b"".join(found.get(n, b"") for n in ("/log.txt", "/jobs.txt")).decode()
    return any(" r bench-1 0 " in l and " ok " in l for l in text.splitlines())


def smallest(name):
    with tempfile.TemporaryDirectory() as tmp:
        lib, clean, env = prepare(name, tmp)
        lo, hi = 8, 256
        if not boots(name, hi, lib, clean, env, tmp):
            return None
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if boots(name, mid, lib, clean, env, tmp):
                hi = mid
            else:
                lo = mid
        return hi


def main(argv):
    names = argv or BOARDS
    print("smallest heap that boots the image and runs a job (unix port, 64-bit, .mpy)")
    print("%-12s %10s %14s" % ("board", "heap KiB", "board heap KiB"))
    for n in names:
        k = smallest(n)
        heap = files.boards().load(n)["heap_bytes"] // 1024
        print("%-12s %10s %14d" % (n, k if k else ">256", heap))


if __name__ == "__main__":
    main(sys.argv[1:])
