"""The smallest heap that boots an ESP8266 image and runs a job when the
firmware's .mpy files are in a ROMFS partition (MicroPython 1.25+, the stock
ESP8266_GENERIC FLASH_2M_ROMFS download) instead of on the LittleFS
filesystem: a .mpy in ROMFS runs in place, its bytecode is not copied into
the heap.

    python bench/heap_romfs.py [BOARD] [--rows "32-bit ROM,32-bit,64-bit"]
    python bench/heap_romfs.py --sync [--step 2] [--rows ...] [--batch 30]

--sync: the smallest heap in which a virtual board whose ROMFS holds the
package (`companion vboard --romfs`, the image of `companion image
--romfs`) syncs twice with a signed fleet, as bench/heap_sync.py measures
it (deploy finds the package in /rom and writes no /lib/sporadic).
--batch N: instead, tests/test_esp8266.py's cycle: a signed batch of N jobs
(`add -f`) in one sync, the due one run, its result synced back.

As bench/heap_boards.py (the same image, the same job, three passes, 1 KiB
bisection of -X heapsize), except that the image is built without
/lib/sporadic (`--frozen`'s file list) and the package goes into a ROMFS
image (`companion image --romfs`'s builder), mounted at /rom with /rom and
/rom/lib on sys.path before /lib, as the ESP8266 firmware does (mp_init()
mounts the partition and appends both; main() then appends /lib).

The rows:

- `32-bit ROM` (**measured**): the 32-bit unix port with a ROM segment,
  bench/.mp32/micropython-romfs (bench/build_micropython32.sh, or
  $SPORADIC_MICROPYTHON32_ROMFS): it maps the image file named by
  $MICROPY_ROMFS read-only outside the GC heap and mounts it at /rom at
  start-up, as a board's firmware its memory-mapped partition; the heap
  found is the board's. That build also has the virtual board's boot shim
  frozen in (the relay then runs it with -m, as a board its frozen
  _boot.py): --sync's figure holds none of the shim's names or bytecode.
- `32-bit` and `64-bit` (estimates): a port without ROM (bench/.mp32/micropython,
  the PyPI `micropython`) reads the image into a bytes object in the heap
  first (one block, never freed); what that costs the heap is subtracted
  from the heap found: its bytes and the GC's allocation and finaliser
  tables' share for them, measured in the same run (rom_heap_bytes: the
  smallest heap that reads the image and then allocates a 20,000-byte
  block, less the smallest that allocates the block alone). Good to about
  1 KiB (docs/budgets.md#31 has both beside each other).

The last line is JSON: per row heap_k (the figure) and measured (true for
the ROM build).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

from heap_boards import MICROPYTHON, interpreters_32bit, is_32bit  # noqa: E402

# tests/lfsboot.py with the ROMFS read first and mounted at /rom (a port
# without ROM: argument 7 names the image), or found mounted there by the
# port itself (micropython-romfs: argument 7 is "-"); sys.path as the
# ESP8266 firmware's ('/' is last there: this shim's host folder instead)
BOOT = r"""
import os, sys, vfs
a = sys.argv[1:]
if a[6] != "-":
    f = open(a[6], "rb")
    rom = f.read()
    f.close()
elif not vfs.rom_ioctl(1):
    raise SystemExit("no ROM segment: MICROPY_ROMFS unset?")
from vboard_blockdev import FileBlockDevice
dev = FileBlockDevice(a[0], int(a[1]), int(a[2]))
vfs.mount(vfs.VfsLfs2(dev, progsize=int(a[3])), "/")
if a[6] != "-":
    vfs.mount(vfs.VfsRom(rom), "/rom")
if a[4] != "-":
    vfs.mount(vfs.VfsPosix(a[4]), "/host")
os.chdir("/")
sys.path[:] = ["", ".frozen", "/rom", "/rom/lib", "/lib", "/host"]
steps = int(a[5])
del a
try:
    from sporadic.device import boot
    if not boot.__file__.startswith("/rom/"):
        raise SystemExit("not from the ROMFS: " + boot.__file__)
    try:
        boot.main(max_steps=steps)
        print("LOOP DONE")
    finally:
        from sporadic.device import runtime
        print("ID", runtime.get().id)
finally:
    vfs.umount("/")
    dev.f.close()
"""

MICROPYTHON32_ROMFS = (os.environ.get("SPORADIC_MICROPYTHON32_ROMFS")
                       or os.path.join(ROOT, "bench", ".mp32", "micropython-romfs"))


def has_rom(exe):
    """True when `exe` is a unix port with a ROM segment (micropython-romfs:
    the file $MICROPY_ROMFS mapped and mounted at /rom)."""
    if not exe or not os.path.isfile(exe):
        return False
    with tempfile.NamedTemporaryFile(suffix=".img") as f:
        f.write(b"\xd2\xcd\x31\x00")   # an empty ROMFS
        f.flush()
        p = subprocess.run([exe, "-c", "import vfs; print(vfs.rom_ioctl(1))"], capture_output=True, text=True,
                           env=dict(os.environ, MICROPY_ROMFS=f.name), timeout=30)
    return p.returncode == 0 and p.stdout.strip() == "1"


def rows_present():
    """[(label, interpreter, measured)] of the rows this machine can run."""
    mp32 = interpreters_32bit()[0]
    rom = MICROPYTHON32_ROMFS if has_rom(MICROPYTHON32_ROMFS) and is_32bit(MICROPYTHON32_ROMFS) else None
    return [(label, exe, measured) for label, exe, measured in
            (("32-bit ROM", rom, True), ("32-bit", mp32, False), ("64-bit", MICROPYTHON, False))]


# rom_heap_bytes's two scripts: the ROMFS image read as the boots read it
# (or not), then a block the size of a small loop's working set
_COST = r'''
import sys
if sys.argv[2] == "1":
    f = open(sys.argv[1], "rb")
    rom = f.read()
    f.close()
import gc
gc.collect()
x = bytearray(20000)
print("fits")
'''


def rom_heap_bytes(exe, rom_path):
    """The bytes of `exe`'s heap a ROMFS image read into it costs: its
    blocks and the GC tables' share for them, found by bisection (64-byte
    steps) of -X heapsize with and without the image."""
    def smallest(with_rom):
        lo, hi = 4096, 1 << 22
        while hi - lo > 64:
            mid = (lo + hi) // 2
            p = subprocess.run([exe, "-X", "heapsize=%d" % mid, "-c", _COST, rom_path, "1" if with_rom else "0"],
                               capture_output=True, text=True, timeout=60)
            if p.returncode == 0 and "fits" in p.stdout:
                hi = mid
            else:
                lo = mid
        return hi
    return smallest(True) - smallest(False)


def _companion():
    # (files, image) of the companion measured: bench/esp8266.py runs this
    # script on an older tree too, from before the companion's folders (#30)
    try:
        from companion.fleet import files
        from companion.make import image
    except ImportError:
        from companion import files, image
    return files, image


def rom_image(board, tmp):
    """The ROMFS image of the package files the board's image leaves out
    with --frozen (companion.fleet.files), .mpy for its architecture: the
    tree's own `companion image --romfs` builder (companion/make/romfs.py)
    where it has one."""
    try:
        from companion.make.romfs import romfs_image
    except ImportError:
        pass
    else:
        return romfs_image(board)
    files = _companion()[0]
    from mpremote import romfs
    src = os.path.join(tmp, "romsrc")
    frozen = {p for p, _ in files.firmware_files(board, frozen=True)}
    for path, body in files.firmware_files(board):
        if path in frozen:
            continue
        dest = os.path.join(src, path.lstrip("/"))
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(dest, "wb") as f:
            f.write(body)
    import contextlib
    import io
    with contextlib.redirect_stdout(io.StringIO()):
        return romfs.make_romfs(src, mpy_cross=False)


def smallest(board, exe, measured=False):
    """(KiB found, ROMFS bytes, their heap cost or None when measured on
    the ROM build) of the run with the package in ROMFS."""
    import heap_boards as hb
    files, image = _companion()
    with tempfile.TemporaryDirectory() as tmp:
        lib, _, env = hb.prepare(board, tmp)
        with open(os.path.join(lib, "romboot.mpy"), "wb") as f:
            src = os.path.join(tmp, "romboot.py")
            with open(src, "w") as s:
                s.write(BOOT)
            f.write(files.compile_mpy(src))
        rom = rom_image(board, tmp)
        rom_path = os.path.join(tmp, "rom.img")
        with open(rom_path, "wb") as f:
            f.write(rom)
        if measured:
            env = dict(env, MICROPY_ROMFS=rom_path)
        clean = os.path.join(tmp, "clean-frozen.bin")
        import time
        due = int(time.time()) - 60 if board != "unix" else 1796083200
        when = time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime(due))
        image.build_image(board, "bench-1", clean, "each %s log hello ; within=1d\n" % when,
                          secret=b"\x33" * 16, frozen=True)
        g = image.geometry(board)

        def boots(k):
            img = os.path.join(tmp, "fs.bin")
            shutil.copyfile(clean, img)
            p = subprocess.run([exe, "-X", "heapsize=%dK" % k, "-m", "romboot", img, str(g["block_size"]),
                                str(g["block_count"]), str(g["prog_size"]), lib, "3",
                                "-" if measured else rom_path],
                               capture_output=True, text=True, timeout=120, env=dict(os.environ, MICROPYPATH=lib,
                                                                                     **env))
            if p.returncode != 0 or "ID bench-1" not in p.stdout or "MemoryError" in p.stdout:   # boot.main's restart
                return False
            with open(img, "rb") as f:
                found = image.read_image(f.read(), g)
            text = b"".join(found.get(n, b"") for n in ("/log.txt", "/jobs.txt")).decode()
            return any(" r bench-1 0 " in l and " ok " in l for l in text.splitlines())

        cost = None if measured else rom_heap_bytes(exe, rom_path)
        lo, hi = 8, 512
        if not boots(hi):
            return None, len(rom), cost
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if boots(mid):
                hi = mid
            else:
                lo = mid
        return hi, len(rom), cost


def smallest_sync(exe, step, measured=False, batch=0):
    """(KiB found, ROMFS bytes, their heap cost or None when measured) of
    bench/heap_sync.py's signed sync on a unix virtual board with the
    package in its ROMFS (the vboard's relay names the image in
    $MICROPY_ROMFS: the ROM build maps it, another port's boot shim reads
    it into the heap); batch: tests/test_esp8266.py's signed batch of that
    many jobs in one sync instead (batch_syncs)."""
    import heap_sync
    from companion.make.romfs import romfs_image
    rom = romfs_image("unix", {})
    fd, path = tempfile.mkstemp(suffix=".img")
    with os.fdopen(fd, "wb") as f:
        f.write(rom)
    # MICROPY_ROMFS too: an older tree's relay does not set it
    before = {k: os.environ.get(k) for k in ("SPORADIC_VBOARD_ROMFS", "MICROPY_ROMFS")}
    os.environ["SPORADIC_VBOARD_ROMFS"] = path
    os.environ["MICROPY_ROMFS"] = path
    try:
        works = batch_syncs(batch) if batch else None
        return (heap_sync.smallest(exe, False, step, works=works), len(rom),
                None if measured else rom_heap_bytes(exe, path))
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        os.remove(path)


def batch_syncs(n):
    """works(exe, heap_k) for heap_sync.smallest: tests/test_esp8266.py's
    cycle with a signed batch of n jobs (`companion init`, `deploy`, then
    tests/devutil.small_board_cycle: `add -f`, `sync`, the due job's outcome
    recorded on the board, `sync` again): True when the first sync took
    every job (nothing broke off) and the second brought back the result of
    the one that was due."""
    def works(exe, heap_k):
        import contextlib
        import io
        import heap_sync
        from companion import cli
        from companion.vboard.board import VBoard
        from tests.devutil import small_board_cycle

        def companion(fleet, *argv):
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                if cli.main(["--fleet", fleet] + [str(a) for a in argv]):
                    raise RuntimeError(argv[0] + " failed")
        base = tempfile.mkdtemp(prefix="heap-batch-")
        vb = None
        try:
            fleet = os.path.join(base, "fleet")
            companion(fleet, "init")
            vb = VBoard(os.path.join(base, "b"), board_id="e-1", heap="%dK" % heap_k, clock_scale=600)
            with heap_sync.interpreter(exe):
                path = vb.start()
            companion(fleet, "deploy", path, "--id", "e-1", "--board", "unix")
            due, lines = small_board_cycle(companion, fleet, vb, "e-1", n, base)
            return any(l.startswith(due + " r e-1 ") for l in lines)
        except (RuntimeError, AssertionError, ValueError):
            return False      # a sync that broke off, a board that never recorded the run
        finally:
            if vb is not None:
                vb.stop()
            shutil.rmtree(base, ignore_errors=True)
    return works


def _rows(argv):
    want = None
    if "--rows" in argv:
        want = [w.strip() for w in argv[argv.index("--rows") + 1].split(",")]
    rows = rows_present()
    if want is not None:
        rows = [r for r in rows if r[0] in want]
    return rows


def _report(label, exe, measured, k, n, cost, over):
    if exe is None:
        why = ("no ROM build: run bench/build_micropython32.sh" if label == "32-bit ROM"
               else "no 32-bit build: run bench/build_micropython32.sh" if label == "32-bit"
               else "no micropython on PATH")
        print("%-10s %s" % (label, why))
        return None
    if measured:
        print("%-10s %s KiB (measured: the %d-byte ROMFS image mapped outside the heap)"
              % (label, k if k is not None else over, n), flush=True)
        return {"heap_k": k, "rom_bytes": n, "measured": True}
    est = None if k is None else -(-(k * 1024 - cost) // 1024)
    print("%-10s %s KiB (estimate: %s KiB found, less the %d bytes of heap the %d-byte ROMFS image takes)"
          % (label, est if est is not None else over, k, cost, n), flush=True)
    return {"heap_k_with_rom": k, "rom_bytes": n, "rom_heap_bytes": cost, "heap_k": est, "measured": False,
            "heap_k_less_rom_length": None if k is None else -(-(k * 1024 - n) // 1024)}


def main_sync(argv):
    step = int(argv[argv.index("--step") + 1]) if "--step" in argv else 2
    batch = int(argv[argv.index("--batch") + 1]) if "--batch" in argv else 0
    if batch:
        print("smallest heap (KiB) in which a unix virtual board with the package in ROMFS takes a signed batch "
              "of %d jobs in one sync, runs one and syncs its result back" % batch)
    else:
        print("smallest heap (KiB) in which a unix virtual board with the package in ROMFS syncs twice (signed)")
    out = _table(argv, lambda exe, measured: smallest_sync(exe, step, measured, batch), ">256")
    print(json.dumps({"romfs_sync": out, "step_k": step, "batch": batch}))


def _table(argv, smallest_of, over):
    # each row's smallest heap (smallest_of(exe, measured) -> (k, n, cost)), reported
    out = {}
    for label, exe, measured in _rows(argv):
        k, n, cost = smallest_of(exe, measured) if exe else (None, 0, None)
        row = _report(label, exe, measured, k, n, cost, over)
        if row is not None:
            out[label] = row
    return out


def main(argv):
    if "--sync" in argv:
        return main_sync(argv)
    pos = [a for i, a in enumerate(argv) if not a.startswith("--") and (i == 0 or argv[i - 1] != "--rows")]
    board = pos[0] if pos else "esp8266"
    print("smallest heap (KiB) that boots the %s image and runs a job, firmware in ROMFS" % board)
    out = _table(argv, lambda exe, measured: smallest(board, exe, measured), ">512")
    print(json.dumps({"board": board, "romfs": out}))


if __name__ == "__main__":
    main(sys.argv[1:])
