"""#31's four figures for the smallest boards, on this tree and on a base
commit, in one run:

    python bench/esp8266.py [--base REV] [--skip-sync] [--step 2]

1. smallest heap that boots an ESP8266 image and runs a job, as .mpy
   (bench/heap_boards.py esp8266, 32-bit unix port);
2. smallest heap that makes a signed sync, as .mpy (bench/heap_sync.py
   --modes signed, 32-bit unix port);
3. the same two with the firmware frozen (a 32-bit unix port with that
   tree's firmware/manifest.py frozen in, built here for each tree), and the
   both with the .mpy files in a ROMFS partition, as the stock
   ESP8266_GENERIC FLASH_2M_ROMFS firmware runs them (bench/heap_romfs.py:
   measured on bench/.mp32/micropython-romfs, a 32-bit unix port that maps
   the image outside its heap as a board's flash; an estimate, labelled so,
   without that build);
   (beside the signed sync, tests/test_esp8266.py's cycle: a signed batch
   of 30 jobs in one sync, `heap_romfs.py --sync --batch 30`);
4. bytes written to flash per completion on a provisioned board
   (bench/flash_writes.py);
5. beside 1., the heap from which every heap up (128-byte steps) boots and
   runs the job (bench/heap_steady.py, this tree's script on both trees):
   fragmentation makes 1.'s bisection land below heaps that still fail.

Each tree runs its own bench scripts (PYTHONPATH = the tree and its
firmware/), so the base column is what the base commit measured of itself,
but for bench/heap_romfs.py: this tree's runs on both (on each tree's own
firmware and companion), so that both measure the ROMFS alike, and the
virtual board's boot shim, relay and interpreter look-up (vboard_boot.py,
relay.py, unixport.py under companion/vboard/): this tree's on both, the ones that leave a ROM
build's /rom mounted as it is and run its frozen shim.
The base tree is a `git worktree` of REV (default: scale-base, the commit the
#31 work started from), removed afterwards. The 32-bit interpreters come
from bench/build_micropython32.sh (bench/.mp32/); without them the rows say
why and fall back to the 64-bit PyPI `micropython` figure, labelled so.
The last line is JSON.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MP32 = os.environ.get("MP32_OUT") or os.path.join(ROOT, "bench", ".mp32")   # as bench/build_micropython32.sh
BASE = "origin/scale-base"


def last_json(out):
    for line in reversed(out.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    return None


def run(tree, argv, env_extra, timeout=7200):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([tree, os.path.join(tree, "firmware")]), **env_extra)
    p = subprocess.run([sys.executable] + argv, cwd=tree, capture_output=True, text=True, env=env,
                       timeout=timeout)
    data = last_json(p.stdout)
    if data is None:
        sys.stderr.write("%s %s failed:\n%s\n%s\n" % (tree, argv, p.stdout[-2000:], p.stderr[-2000:]))
    return data


def frozen_build(tree, tag):
    """A 32-bit unix port with `tree`'s firmware frozen in (as
    build_micropython32.sh makes micropython-frozen), or None without the
    MicroPython checkout bench/build_micropython32.sh leaves."""
    src = os.path.join(MP32, "src")
    if not os.path.isdir(os.path.join(src, "ports", "unix")):
        return None
    manifest = os.path.join(MP32, "frozen-%s.py" % tag)
    with open(manifest, "w") as f:
        f.write('include("$(PORT_DIR)/variants/standard/manifest.py")\ninclude("%s")\n'
                % os.path.join(os.path.abspath(tree), "firmware", "manifest.py"))
    build = "build-frozen-%s" % tag
    p = subprocess.run(["make", "-C", os.path.join(src, "ports", "unix"), "VARIANT=standard", "BUILD=" + build,
                        "FROZEN_MANIFEST=" + manifest, "MICROPY_PY_FFI=0", "MICROPY_PY_BTREE=0",
                        "MICROPY_PY_SSL=0", "CFLAGS_EXTRA=-m32", "LDFLAGS_EXTRA=-m32", "-j2"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.stderr.write("frozen build for %s failed: %s\n" % (tree, p.stderr[-1000:]))
        return None
    out = os.path.join(MP32, "micropython-frozen-%s" % tag)
    shutil.copyfile(os.path.join(src, "ports", "unix", build, "micropython"), out)
    os.chmod(out, 0o755)
    return out


def rom_build():
    """bench/.mp32/micropython-romfs ($SPORADIC_MICROPYTHON32_ROMFS): the
    32-bit unix port with a ROM segment, or None."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    from heap_romfs import has_rom
    exe = os.environ.get("SPORADIC_MICROPYTHON32_ROMFS") or os.path.join(MP32, "micropython-romfs")
    return exe if has_rom(exe) else None


def measure(tree, tag, skip_sync, step, rom=None):
    mp32 = os.path.join(MP32, "micropython")
    have32 = os.path.isfile(mp32)
    frz = frozen_build(tree, tag) if have32 else None
    env = {"SPORADIC_MICROPYTHON32": mp32 if have32 else "/nonexistent",
           "SPORADIC_MICROPYTHON32_FROZEN": frz or "/nonexistent",
           "SPORADIC_MICROPYTHON32_ROMFS": rom or "/nonexistent"}
    row = {}
    b = run(tree, ["bench/heap_boards.py", "esp8266"], env)
    e = (b or {}).get("boards", {}).get("esp8266", {})
    row["run_mpy_k"] = e.get("heap_k_32bit")
    row["run_mpy_k_64bit"] = e.get("heap_k_64bit")
    row["run_frozen_k"] = e.get("heap_k_32bit_frozen")
    if not skip_sync:
        labels = "32-bit .mpy,32-bit frozen" if have32 else "64-bit .mpy"
        s = run(tree, ["bench/heap_sync.py", "--modes", "signed", "--step", str(step),
                       "--interpreters", labels], env)
        h = (s or {}).get("heap_k", {})
        row["sync_mpy_k"] = h.get("32-bit .mpy", {}).get("signed")
        row["sync_frozen_k"] = h.get("32-bit frozen", {}).get("signed")
        if not have32:
            row["sync_mpy_k_64bit"] = h.get("64-bit .mpy", {}).get("signed")
    # the run's heap from which every heap up boots (bisection assumes
    # monotony; fragmentation breaks it): this tree's bench/heap_steady.py
    # on each tree, the same job line on both (the day's first minute)
    script = os.path.join(tree, "bench", "heap_steady.py")
    if os.path.abspath(tree) != ROOT:
        shutil.copyfile(os.path.join(ROOT, "bench", "heap_steady.py"), script)
    st = run(tree, ["bench/heap_steady.py", "esp8266"], env)
    row["run_mpy_steady_b"] = (st or {}).get("steady_bytes")
    if have32:
        # the firmware in a ROMFS partition: this tree's bench/heap_romfs.py
        # and vboard boot shim run on each tree's own firmware and
        # companion, so both columns measure it the same way: on the ROM
        # build when there is one (measured), else the 32-bit port with the
        # image's heap subtracted (an estimate)
        for rel in ("bench/heap_romfs.py", "companion/vboard/onboard/vboard_boot.py", "companion/vboard/relay.py",
                    "companion/vboard/unixport.py"):
            if os.path.abspath(tree) != ROOT:
                shutil.copyfile(os.path.join(ROOT, rel), os.path.join(tree, rel))
        label = "32-bit ROM" if rom else "32-bit"
        r = run(tree, ["bench/heap_romfs.py", "esp8266", "--rows", label], env)
        r = (r or {}).get("romfs", {}).get(label, {})
        row["run_romfs_k"] = r.get("heap_k")
        row["romfs_measured"] = r.get("measured")
        if not skip_sync:   # needs `companion vboard --romfs` (#31): none on an older tree
            r = run(tree, ["bench/heap_romfs.py", "--sync", "--step", str(step), "--rows", label], env)
            row["sync_romfs_k"] = (r or {}).get("romfs_sync", {}).get(label, {}).get("heap_k")
            # tests/test_esp8266.py's cycle: a signed batch of 30 jobs in one sync
            r = run(tree, ["bench/heap_romfs.py", "--sync", "--batch", "30", "--step", str(step),
                           "--rows", label], env)
            row["sync_batch30_romfs_k"] = (r or {}).get("romfs_sync", {}).get(label, {}).get("heap_k")
    w = run(tree, ["bench/flash_writes.py"], {})
    row["bytes_per_completion"] = (w or {}).get("bytes_per_completion")
    return row


ROWS = [("run_mpy_k", "smallest heap that boots the image and runs a job, .mpy (KiB)", 28),
        ("run_mpy_steady_b", "  every heap from this one up runs it (bytes, heap_steady.py)", 28 * 1024),
        ("sync_mpy_k", "smallest heap that makes a signed sync, .mpy (KiB)", 32),
        ("run_romfs_k", "runs a job, .mpy in a ROMFS partition (KiB, %s: heap_romfs.py)", 28),
        ("sync_romfs_k", "signed sync, .mpy in a ROMFS partition (KiB, %s)", 32),
        ("sync_batch30_romfs_k", "  a signed batch of 30 jobs in one sync, ROMFS (KiB, %s)", 32),
        ("run_frozen_k", "the same, frozen: run (KiB)", None),
        ("sync_frozen_k", "the same, frozen: sync (KiB)", None),
        ("bytes_per_completion", "bytes written to flash per completion, provisioned", 128)]


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", default=BASE, help="the commit to measure beside this tree")
    ap.add_argument("--skip-sync", action="store_true", help="leave out the sync rows (they take longest)")
    ap.add_argument("--step", type=int, default=2, help="KiB between two sync trials")
    args = ap.parse_args(argv)
    have32 = os.path.isfile(os.path.join(MP32, "micropython"))
    if not have32:
        print("no 32-bit build (%s): run bench/build_micropython32.sh; the heap rows below are the "
              "64-bit PyPI micropython's (about 1.4x a board's)" % os.path.join(MP32, "micropython"))
    tmp = tempfile.mkdtemp(prefix="esp8266-base-")
    base_tree = os.path.join(tmp, "tree")
    subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", base_tree, args.base], check=True,
                   capture_output=True)
    try:
        rev = subprocess.run(["git", "-C", base_tree, "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True).stdout.strip()
        rom = rom_build() if have32 else None
        base = measure(base_tree, "base", args.skip_sync, args.step, rom)
        now = measure(ROOT, "now", args.skip_sync, args.step, rom)
    finally:
        subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", base_tree], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
    if not have32:
        for r in (base, now):
            r["run_mpy_k"] = r.get("run_mpy_k_64bit")
            r["sync_mpy_k"] = r.get("sync_mpy_k_64bit")
    print("#31, ESP8266 (32-bit unix port%s); base %s" % ("" if have32 else ": ABSENT, 64-bit figures", rev))
    print("%-66s %8s %8s %8s %5s" % ("figure", "base", "now", "target", "met"))
    for key, label, target in ROWS:
        if "%s" in label:
            label = label % ("measured" if rom else "estimate")
        b, n = base.get(key), now.get(key)
        limit = b if target is None else target     # "keep or better": the base's own figure
        met = "-" if n is None or limit is None else ("yes" if n <= limit else "NO")
        print("%-66s %8s %8s %8s %5s" % (label, "-" if b is None else b, "-" if n is None else n,
                                           target or "keep", met))
    print(json.dumps({"base_rev": rev, "interpreter_32bit": have32, "romfs_measured": bool(rom),
                      "base": base, "now": now,
                      "targets": {k: t for k, _, t in ROWS}}))


if __name__ == "__main__":
    main(sys.argv[1:])
