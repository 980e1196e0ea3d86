"""Bytes on the wire of `companion sync` with a board holding 10,000 records,
over a real serial line (a virtual board on a pseudo-terminal, driven through
its raw REPL: every byte counted, REPL prompts, raw-paste flow control and
the board's echo included), beside `mpremote cp` of the same file over the
same line.

    python bench/sync_bytes.py [--n 10000] [--heap 1M] [--keep]

Phases (one board, one run):

1. first full sync: a fleet that holds nothing syncs with the board (the
   board's 10,000 records come over); throughput = bytes of records / s;
2. unchanged sync: the same pair again, the parts listed (opening the port,
   soft reset, each request, letting the board go);
3. 10 new records each way: 10 new lines in the fleet, 10 own records in the
   board's log;
4. `mpremote cp :jobs.txt FILE` of the board's job file over the same line,
   through mpremote's own SerialTransport (bytes counted on its serial
   object), and the other way (`cp FILE :x.txt`, 256-byte repr chunks);
   throughput = bytes of the file / s.

The board's state is written straight into its flash folder (jobs.txt: the
records, canonical and sorted by sporadic.desktop.merging.merge), not synced in. The
fleet is `insecure`: signatures are beside the point for bytes.
The last line is JSON.
"""
import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'firmware'))

from sporadic.core import merge  # noqa: E402
from sporadic.desktop import merging
from companion.sync import syncer  # noqa: E402
from companion.fleet.folder import Fleet  # noqa: E402
from companion.link.serial import SerialLink  # noqa: E402
from companion.vboard.board import VBoard  # noqa: E402

BOARD = 'bench-1'


def records(n, seed, tag=''):
    """Result records of about 66 bytes (as bench/recon_bytes.py)."""
    r = random.Random(seed)
    return ['%08x r pump-%d %d %d ok %016x sensor %s%d' % (
        r.getrandbits(32), i % 40, i, 1796968800 + 60 * i, r.getrandbits(64), tag, i) for i in range(n)]


class PartsLink(SerialLink):
    """A SerialLink that keeps a running byte total and a list of parts."""

    def __init__(self, port, **kw):
        self.total = 0
        self.parts = []
        self._mark = 0
        super().__init__(port, **kw)
        self._part('open (Ctrl-C, raw REPL)')

    def _count(self, sent=0, received=0):
        super()._count(sent, received)
        self.total += sent + received

    def _part(self, name):
        self.parts.append((name, self.total - self._mark))
        self._mark = self.total

    def soft_reset(self):
        super().soft_reset()
        self._part('soft reset')

    def call(self, request, stream=False):
        r = super().call(request, stream)
        self._part('%s (%d+%d payload)' % (request.split(' ', 1)[0], len(request), len(r)))
        return r

    def close(self, resume=True):
        if self._mark != self.total:
            self._part('other')
        super().close(resume)
        self._part('close (Ctrl-B, soft reset: main.py again)')


def sync(fleet, path, now=None):
    link = PartsLink(path)
    t = time.perf_counter()
    rep = syncer.sync(fleet, path, progress=False, link=link, now=now)
    link.close()
    return rep, link, time.perf_counter() - t


class CountingSerial:
    def __init__(self, ser):
        self._ser = ser
        self.n = 0

    def read(self, size=1):
        d = self._ser.read(size)
        self.n += len(d)
        return d

    def write(self, data):
        r = self._ser.write(data)
        self.n += len(data)
        return r

    def __getattr__(self, name):
        return getattr(self._ser, name)


def mpremote_cp(path, src=None, dest=None, data=None):
    """mpremote's own transport, as `mpremote connect PATH cp ...` uses it:
    raw REPL with a soft reset, fs_readfile / fs_writefile (256-byte
    chunks), then out of the raw REPL. Returns (bytes on the wire, seconds, data)."""
    from mpremote.transport_serial import SerialTransport
    t0 = time.perf_counter()
    tr = SerialTransport(path, baudrate=115200)
    cs = CountingSerial(tr.serial)
    tr.serial = cs
    try:
        tr.enter_raw_repl(soft_reset=True)
        if src is not None:
            out = tr.fs_readfile(src)
        else:
            tr.fs_writefile(dest, data)
            out = None
        tr.exit_raw_repl()
    finally:
        tr.close()
    return cs.n, time.perf_counter() - t0, out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--n', type=int, default=10000)
    ap.add_argument('--heap', default='1M', help='board heap (a first full sync of 10,000 records does not fit 128K yet: docs/sync.md)')
    ap.add_argument('--keep', action='store_true')
    args = ap.parse_args(argv)
    base = tempfile.mkdtemp(prefix='sync-bytes-')
    flash = os.path.join(base, 'flash')
    out = {}
    vb = None
    try:
        # the board: firmware through the line, then its state straight into its flash
        fleet = Fleet(os.path.join(base, 'fleet'))
        fleet.init('bench', insecure=True)
        vb = VBoard(flash, board_id=BOARD, heap=args.heap)
        syncer.deploy(fleet, vb.start(), BOARD, board='unix', progress=False)
        fleet.write_lines([])     # the fleet holds nothing (deploy's host line gone); the board is its own
        vb.stop()
        lines = merging.merge(('bench', records(args.n, 1)))
        text = ''.join(l + '\n' for l in lines)
        with open(os.path.join(flash, 'jobs.txt'), 'w') as f:
            f.write(text)
        vb = VBoard(flash, board_id=BOARD, heap=args.heap)
        path = vb.start()
        # a board in the field has been running before the companion comes:
        # wait until its loop has opened the store once (the store then
        # stamps jobs.txt as checked, see docs/device.md)
        deadline = time.monotonic() + 60
        while not os.path.exists(os.path.join(flash, 'jobs.ok')) and time.monotonic() < deadline:
            time.sleep(0.05)
        print('board %s on %s: %d records, jobs.txt %d bytes' % (BOARD, path, len(lines), len(text)))

        # 1. first full sync: the fleet holds nothing
        rep, link, secs = sync(fleet, path)
        assert rep['lines_received'] == len(lines), rep
        rec_bytes = sum(len(l) + 1 for l in lines)
        out['full_sync_bytes'] = link.total
        out['full_sync_s'] = round(secs, 3)
        out['full_sync_Bps'] = int(rec_bytes / secs)
        print('first full sync: %d records (%d bytes) in %.2f s, %d bytes on the wire: %d B/s'
              % (rep['lines_received'], rec_bytes, secs, link.total, out['full_sync_Bps']))

        # 2. unchanged
        rep, link, secs = sync(fleet, path)
        assert rep['lines_sent'] == rep['lines_received'] == 0, rep
        out['unchanged_bytes'] = link.total
        out['unchanged_parts'] = dict(link.parts)
        print('unchanged sync: %d bytes on the wire, %.2f s' % (link.total, secs))
        for name, n in link.parts:
            print('   %6d  %s' % (n, name))

        # 3. ten new records each way
        fleet.merge_in(records(10, 2, 'fleet'))
        with open(os.path.join(flash, 'log.txt'), 'a') as f:
            f.write(''.join(l + '\n' for l in records(10, 3, 'board')))
        rep, link, secs = sync(fleet, path)
        assert rep['lines_sent'] == 10 and rep['lines_received'] == 10, rep
        out['ten_new_each_way_bytes'] = link.total
        out['ten_new_each_way_parts'] = dict(link.parts)
        print('10 new records each way: %d bytes on the wire, %.2f s' % (link.total, secs))
        for name, n in link.parts:
            print('   %6d  %s' % (n, name))

        # 4. mpremote cp of the job file, both ways, over the same line
        n, secs, data = mpremote_cp(path, src='jobs.txt')
        size = len(data)
        out['full_copy_mpremote_bytes'] = n
        out['mpremote_cp_s'] = round(secs, 3)
        out['mpremote_cp_Bps'] = int(size / secs)
        print('mpremote cp :jobs.txt (board to laptop): %d bytes of file, %d bytes on the wire, %.2f s: %d B/s'
              % (size, n, secs, out['mpremote_cp_Bps']))
        n, secs, _ = mpremote_cp(path, dest='copy.txt', data=data)
        out['full_copy_mpremote_to_board_bytes'] = n
        out['mpremote_cp_to_board_Bps'] = int(size / secs)
        print('mpremote cp FILE :copy.txt (laptop to board): %d bytes on the wire, %.2f s: %d B/s'
              % (n, secs, out['mpremote_cp_to_board_Bps']))
        out['speedup_vs_mpremote_cp'] = round(out['full_sync_Bps'] / out['mpremote_cp_Bps'], 1)
        print('first full sync vs mpremote cp: %.1fx' % out['speedup_vs_mpremote_cp'])
        out['records'] = len(lines)
        out['heap'] = args.heap
    finally:
        if vb is not None:
            vb.stop()
        if args.keep:
            print('kept', base)
        else:
            shutil.rmtree(base, ignore_errors=True)
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == '__main__':
    sys.exit(main())
