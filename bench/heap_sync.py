"""The smallest heap in which a board syncs: a virtual board (the unix board
on a pseudo-terminal) is deployed, then restarted with `-X heapsize=N` and
synced twice by the companion (jobs and time in, results back after the
board ran for a while), as `companion demo` does with one board.

    python bench/heap_sync.py [--modes signed,insecure] [--step 2]
    python bench/heap_sync.py --held 1000 [--new 30]   # a board holding many jobs


Found by bisection of N (KiB, --step apart) for each interpreter present:

- `64-bit .mpy`: the PyPI `micropython` (8-byte pointers: an upper bound);
- `32-bit .mpy`: the same unix port built 32-bit (bench/build_micropython32.sh,
  or $SPORADIC_MICROPYTHON32), the firmware as .mpy files on the flash;
- `32-bit frozen`: that build with firmware/manifest.py frozen in
  (bench/.mp32/micropython-frozen or $SPORADIC_MICROPYTHON32_FROZEN): the
  code runs from flash as on a board built with boards/<name>/manifest.py.

With --held N (signed only) the sync is instead the one bench/rp2.py
--sync-heap measures on the real rp2 firmware: the board boots an image
(`companion image --board unix`) of a fleet of N signed jobs added one by
one, a first sync sets its clock, then --new jobs are added and a second
sync must carry them all.

With --tcp the board is deployed with a sync port (`companion deploy
--sync-port`) and both syncs go over TCP (`companion sync 127.0.0.1:PORT`):
the heap of the network loop (net/node.py) serving the companion.
--interpreters picks rows by label (e.g. "32-bit .mpy").

An ESP8266 has a 38K heap: the row that answers it is 32-bit. The last line
is JSON.
"""
import argparse
import contextlib
import io
import json
import os
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

from companion.fleet import queries as fleetcmd, provision  # noqa: E402
from companion.sync import syncer
from companion.fleet.jobs_file import add_job  # noqa: E402
from companion.errors import UserError  # noqa: E402
from companion.link.base import LinkError  # noqa: E402
from companion.demo import JOBS, DemoClock  # noqa: E402
from companion.fleet.folder import Fleet  # noqa: E402
from companion.vboard.board import VBoard  # noqa: E402

from heap_boards import MICROPYTHON, MICROPYTHON32, interpreters_32bit  # noqa: E402
from tests.devutil import PortReservation  # noqa: E402

LISTEN_S = 30   # a TCP board's wait to listen after its (re)start


def interpreters():
    mp32, frz = interpreters_32bit()
    return [(label, path) for label, path in (("64-bit .mpy", MICROPYTHON), ("32-bit .mpy", mp32),
                                               ("32-bit frozen", frz)) if path]


def tcp_sync(fleet, vb, where, now):
    """`companion sync HOST:PORT` once the board listens; raises UserError
    when it never does (or it died: a heap too small)."""
    deadline = time.monotonic() + LISTEN_S
    while True:
        try:
            return syncer.sync(fleet, where, progress=False, now=now)
        except (UserError, LinkError) as e:
            if 'nothing listens' not in str(e) or not vb.alive() or time.monotonic() > deadline:
                raise
        time.sleep(0.2)


@contextlib.contextmanager
def interpreter(exe):
    """The virtual boards started inside run on exe ($SPORADIC_MICROPYTHON)."""
    before = os.environ.get("SPORADIC_MICROPYTHON")
    os.environ["SPORADIC_MICROPYTHON"] = exe
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("SPORADIC_MICROPYTHON", None)
        else:
            os.environ["SPORADIC_MICROPYTHON"] = before


def syncs(exe, heap_k, insecure, tcp=False):
    """True when deploy, sync, run and sync again all work at heap_k."""
    with interpreter(exe):
        return _syncs(heap_k, insecure, tcp)


def _syncs(heap_k, insecure, tcp):
    base = tempfile.mkdtemp(prefix="heap-sync-")
    ports = PortReservation()   # a TCP board's port, held bound until the board is gone
    try:
        fleet = Fleet(os.path.join(base, "fleet"))
        fleet.init("bench", insecure=insecure)
        clock = DemoClock(600)
        vb = VBoard(os.path.join(base, "b"), board_id="b-1", heap="512K", clock_scale=600)
        port = ports.take(1)[0] if tcp else None
        network = provision.network_config(sync_port=port) if tcp else None
        syncer.deploy(fleet, vb.start(), "b-1", board="unix", network=network, progress=False)
        vb.stop()
        for line in JOBS:
            add_job(fleet, line, now=clock.now())
        vb = VBoard(os.path.join(base, "b"), board_id="b-1", heap="%dK" % heap_k, clock_scale=600)
        path = vb.start()
        try:
            if tcp:
                where = "127.0.0.1:%d" % port
                tcp_sync(fleet, vb, where, clock.now())
                time.sleep(2)   # 20 board minutes: the first jobs run
                rep = tcp_sync(fleet, vb, where, clock.now())
                return rep["new_results"] > 0
            syncer.sync(fleet, path, progress=False, now=clock.now())
            time.sleep(2)   # 20 board minutes: the first jobs run
            rep = syncer.sync(fleet, path, progress=False, now=clock.now())
            return rep["new_results"] > 0
        except Exception:
            return False
        finally:
            vb.stop()
    finally:
        ports.release()
        shutil.rmtree(base, ignore_errors=True)


class HeldFleet:
    """A signed fleet of `held` jobs and the unix board's image of it, made
    once; each trial syncs a copy of both."""

    def __init__(self, held, new, base):
        from companion import cli
        from rp2_requests import add_jobs
        self.new = new
        self.base = base
        self.fleet = os.path.join(base, "fleet")
        with contextlib.redirect_stdout(io.StringIO()):
            cli.main(["--fleet", self.fleet, "init"])
        add_jobs(self.fleet, held, "h")
        size = os.path.getsize(os.path.join(self.fleet, "jobs.txt"))
        self.flash_mb = max(2, -(-4 * size // (1 << 20)))
        self.image = os.path.join(base, "fs.bin")
        with contextlib.redirect_stdout(io.StringIO()):
            cli.main(["--fleet", self.fleet, "image", "--board", "unix", "--id", "b-1", "--flash-size",
                      "%dMB" % self.flash_mb, "-o", self.image])

    def syncs(self, exe, heap_k):
        """True when the first sync and the sync of the new jobs both work at heap_k."""
        with interpreter(exe):
            return self._syncs(heap_k)

    def _syncs(self, heap_k):
        from rp2_requests import add_jobs
        trial = tempfile.mkdtemp(prefix="trial-", dir=self.base)
        fleet = os.path.join(trial, "fleet")
        shutil.copytree(self.fleet, fleet)
        img = os.path.join(trial, "fs.bin")
        shutil.copy(self.image, img)
        vb = VBoard(image=img, heap="%dK" % heap_k, flash_size="%dM" % self.flash_mb)
        try:
            path = vb.start()
            syncer.sync(Fleet(fleet), path, progress=False)
            add_jobs(fleet, self.new, "n")
            rep = syncer.sync(Fleet(fleet), path, progress=False)
            return rep["lines_sent"] == 2 * self.new     # each job and its batch record
        except Exception:
            return False
        finally:
            vb.stop()
            shutil.rmtree(trial, ignore_errors=True)


def smallest(exe, insecure, step, works=None, tcp=False):
    works = works or (lambda exe, k: syncs(exe, k, insecure, tcp))
    lo, hi = 8, 256
    if not works(exe, hi):
        return None
    while hi - lo > step:
        mid = (lo + hi) // 2
        if works(exe, mid):
            hi = mid
        else:
            lo = mid
    return hi


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--modes", default="signed,insecure")
    ap.add_argument("--step", type=int, default=2)
    ap.add_argument("--held", type=int, default=0, help="jobs the board holds (from an image) before the syncs")
    ap.add_argument("--new", type=int, default=30, help="with --held: jobs the second sync carries")
    ap.add_argument("--tcp", action="store_true", help="a board with a sync port, synced over TCP")
    ap.add_argument("--interpreters", default=None, help="comma-separated labels of the rows to run")
    args = ap.parse_args(argv)
    if args.held:
        base = tempfile.mkdtemp(prefix="heap-sync-held-")
        try:
            held = HeldFleet(args.held, args.new, base)
            print("smallest heap (KiB) in which a board holding %d signed jobs syncs %d new (unix board)"
                  % (args.held, args.new))
            out = {}
            for label, exe in interpreters():
                out[label] = smallest(exe, False, args.step, held.syncs)
                print("%-14s %10s" % (label, out[label] or ">256"), flush=True)
        finally:
            shutil.rmtree(base, ignore_errors=True)
        print(json.dumps({"heap_k_held": out, "held": args.held, "new": args.new, "step_k": args.step}))
        return
    modes = args.modes.split(",")
    print("smallest heap (KiB) in which a board syncs twice (unix board, demo jobs%s)"
          % (", over TCP" if args.tcp else ""))
    print("%-14s %s" % ("interpreter", " ".join("%10s" % m for m in modes)))
    out = {}
    for label, exe in interpreters():
        if args.interpreters and label not in args.interpreters.split(","):
            continue
        row = {m: smallest(exe, m == "insecure", args.step, tcp=args.tcp) for m in modes}
        out[label] = row
        print("%-14s %s" % (label, " ".join("%10s" % (row[m] or ">256") for m in modes)), flush=True)
    if not interpreters_32bit()[0]:
        print("no 32-bit interpreter (%s): run bench/build_micropython32.sh" % MICROPYTHON32)
    print(json.dumps({"heap_k": out, "step_k": args.step, "tcp": args.tcp}))


if __name__ == "__main__":
    main(sys.argv[1:])
