"""Where a small board's heap goes, module by module: the bytes of heap each
import of the loop's modules (or a sync's) costs on the 32-bit unix port,
the firmware as .mpy files (as an ESP8266 image holds them), and the
MicroPython qstr pool after them (#31, docs/budgets.md#31).

    python bench/heap_imports.py [--sync] [--interpreter PATH] [MODULE ...]

Two columns, both `gc.mem_alloc()` after `gc.collect()` around each import,
in the order given (each module's imports are counted with the first module
that loads them):

- `bytes`: as the board meets them, the qstr pool's growth included. The
  pool grows in blocks that double (20, 40, 80, 160, 320, 640 entries on this
  port: 7 bytes an entry on a 32-bit port, 11 on a 64-bit one), each
  allocated whole when the last fills, so one module pays for the next
  block (2.2 KB at the 301st qstr, 4.5 KB at the 621st);
- `marginal`: the same imports after 1,300 qstrs interned beforehand (the
  pool then has room for 1,200 more): what the module itself costs, the
  figure to compare two versions of it with.

Then the qstrs the imports interned and the pool's bytes (text and tables).

--rom adds two columns: `rom`, the marginal bytes of the same imports from
a ROMFS image (`companion image --romfs`'s files, mounted at /rom) on the
32-bit port with a ROM segment (bench/.mp32/micropython-romfs, or
$SPORADIC_MICROPYTHON32_ROMFS; $MICROPY_ROMFS names the image), where the
bytecode, constants and names stay in the image; and `code`, marginal
less rom: the bytes of each module's .mpy code a LittleFS install copies
into the heap, which no change but a smaller module can take out of it.
The 32-bit port is bench/.mp32/micropython (bench/build_micropython32.sh) or
$SPORADIC_MICROPYTHON32; without it the 64-bit PyPI `micropython`, labelled
so. The last line is JSON.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

from companion.fleet import files  # noqa: E402
from heap_boards import MICROPYTHON, interpreters_32bit  # noqa: E402

# the loop's modules in the order a boot and its first pass load them
LOOP = ["sporadic.core.timeutil", "sporadic.core.jobline", "sporadic.core.order", "sporadic.device.store",
        "board", "sporadic.device.clock", "sporadic.core.plan", "sporadic.device.runtime",
        "sporadic.device.actions", "sporadic.core.hmac", "sporadic.core.groups"]
# a signed sync's at the peak of its first P (the fleet's seal record's RSA
# check): sys.modules there, logged on the ROM build on 2026-12-06 (the
# parser, timeutil and the digest index's splice are not loaded there any
# more), in the order the session loads them
SYNC = ["board", "sporadic.device.clock", "sporadic.device.syncsrv", "sporadic.device.stamp", "sporadic.core.order",
        "sporadic.device.store", "sporadic.device.storesync", "sporadic.core.merge", "sporadic.core.recon",
        "sporadic.core.batchid", "sporadic.core.batch", "sporadic.core.rsa", "sporadic.device.trust"]

SCRIPT = r'''
import gc, sys
sys.path[:] = [sys.argv[1]]
pre = sys.argv[2] == "1"
if pre:
    for i in range(1300):
        getattr(int, "q%d" % i, None)   # interns "q<i>": the pool grown past the modules' needs
import micropython
for m in sys.argv[3:]:
    gc.collect()
    b = gc.mem_alloc()
    __import__(m)
    gc.collect()
    print("IMPORT", m, gc.mem_alloc() - b)
micropython.qstr_info()
'''


def image_lib(tmp, board="esp8266"):
    """The board's /lib as its image holds it (.mpy, the 32-bit arch of the
    board), the unix stand-in `machine` beside it."""
    _lay(tmp, files.firmware_files(board) + [
        ("/lib/machine.mpy", files.compile_mpy(os.path.join(ROOT, "tests", "standin", "machine.py")))])
    return os.path.join(tmp, "lib")


def _lay(root, pairs):
    # the (path, bytes) pairs under /lib/ written below root
    for path, body in pairs:
        if not path.startswith("/lib/"):
            continue
        dest = os.path.join(root, path.lstrip("/"))
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(dest, "wb") as f:
            f.write(body)


def rom_image(tmp, board="esp8266"):
    """The board's package and board module as a ROMFS image file (as
    companion/make/romfs.py builds it), the stand-in `machine` beside them."""
    from mpremote import romfs
    import contextlib
    import io
    src = os.path.join(tmp, "romsrc")
    _lay(src, files.firmware_files(board, under="/rom") + [
        ("/lib/machine.mpy", files.compile_mpy(os.path.join(ROOT, "tests", "standin", "machine.py"), None,
                                               "/rom/lib/machine.mpy"))])
    with contextlib.redirect_stdout(io.StringIO()):
        data = romfs.make_romfs(src, mpy_cross=False)
    path = os.path.join(tmp, "rom.img")
    with open(path, "wb") as f:
        f.write(data)
    return path


def measure(exe, lib, mods, pre, rom=None):
    env = dict(os.environ, MICROPY_ROMFS=rom) if rom else None
    p = subprocess.run([exe, "-X", "heapsize=512K", "-c", SCRIPT, lib, "1" if pre else "0"] + mods,
                       capture_output=True, text=True, timeout=120, env=env)
    if p.returncode != 0:
        raise SystemExit("%s failed: %s" % (exe, p.stderr[-800:]))
    costs = {m: int(n) for m, n in re.findall(r"^IMPORT (\S+) (\d+)$", p.stdout, re.M)}
    q = re.search(r"n_pool=(\d+), n_qstr=(\d+), n_str_data_bytes=(\d+), n_total_bytes=(\d+)", p.stdout)
    pool = dict(zip(("pools", "qstrs", "text_bytes", "total_bytes"), map(int, q.groups())))
    return costs, pool


def main(argv):
    exe = None
    if "--interpreter" in argv:
        i = argv.index("--interpreter")
        exe = argv[i + 1]
        del argv[i:i + 2]
    sync = "--sync" in argv
    want_rom = "--rom" in argv
    argv = [a for a in argv if a not in ("--sync", "--rom")]
    mods = argv or (SYNC if sync else LOOP)
    exe = exe or interpreters_32bit()[0]
    label = "32-bit" if exe else "64-bit PyPI micropython (no 32-bit build: bench/build_micropython32.sh)"
    exe = exe or MICROPYTHON
    with tempfile.TemporaryDirectory() as tmp:
        lib = image_lib(tmp)
        raw, pool = measure(exe, lib, mods, False)
        marginal, _ = measure(exe, lib, mods, True)
        rom = None
        if want_rom:
            from heap_romfs import MICROPYTHON32_ROMFS, has_rom
            if not has_rom(MICROPYTHON32_ROMFS):
                raise SystemExit("--rom: no ROM build at %s: run bench/build_micropython32.sh" % MICROPYTHON32_ROMFS)
            rom, _ = measure(MICROPYTHON32_ROMFS, "/rom/lib", mods, True, rom_image(tmp))
    print("heap per import (bytes), %s, the ESP8266 image's .mpy files" % label)
    print("%-28s %8s %9s" % ("module", "bytes", "marginal") + (" %8s %8s" % ("rom", "code") if rom else ""))
    for m in mods:
        print("%-28s %8d %9d" % (m, raw[m], marginal[m]) + (" %8d %8d" % (rom[m], marginal[m] - rom[m]) if rom else ""))
    print("%-28s %8d %9d" % ("total", sum(raw.values()), sum(marginal.values()))
          + (" %8d %8d" % (sum(rom.values()), sum(marginal.values()) - sum(rom.values())) if rom else ""))
    print("qstr pool after them: %(qstrs)d qstrs in %(pools)d blocks, %(total_bytes)d bytes "
          "(%(text_bytes)d of text)" % pool)
    out = {"interpreter": label, "modules": mods, "bytes": raw, "marginal": marginal, "qstr_pool": pool}
    if rom:
        out.update(rom=rom, code={m: marginal[m] - rom[m] for m in mods},
                   code_total=sum(marginal.values()) - sum(rom.values()))
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
