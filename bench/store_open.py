"""What the store's integrity check costs at boot (docs/device.md#stamps),
on the MicroPython unix port under -X heapsize=64K.

    python bench/store_open.py [--heap 64K] [--reps 5]

A signed board's flash (cfg.json with the fleet's key and the board's
secret) holds a job file of N = 100, 1,000 and 5,000 lines: N - 1 jobs
signed by a fresh fleet key in batches of 128 (companion.fleet.keys), laid out as
`companion image` writes it (companion.fleet.files.jobs_file: jobs.txt + its
jobs.ok stamp). Then, median of REPS boots of `store.open_store()` alone
(the first thing sporadic.boot does), each case on a fresh copy:

  - size_only: the check the store made before (a size stamp): the
    digest is replaced by the size in this run, nothing else changes;
  - stamp: the stamp matches (size + sha256 over the file in 512-byte
    pieces): what every boot of an unchanged store pays;
  - digest: stamp.file_stamp(jobs.txt) alone;
  - edited: one job line rewritten behind the store's back: every line is
    re-checked as an untrusted delivery (batch records verified, lines
    looked up), the edited one quarantined.

The edited case runs under --recheck-heap (128K): a re-check loads what a
signed sync loads (trust, batch, rsa), more than 64K on this 64-bit port.

Heap: the peak live heap of the open (gc.collect(); gc.mem_alloc() at every
watchdog feed, i.e. every 8 KB hashed or 64 lines read) for the 5,000-line
file, stamp matching and edited. JSON last line.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for p in (os.path.join(ROOT, 'firmware'), ROOT):
    if p not in sys.path:
        sys.path.insert(0, p)

from companion.fleet import files, keys  # noqa: E402
from companion.fleet.folder import Fleet  # noqa: E402
from sporadic.core import jobline, merge  # noqa: E402
from sporadic.desktop import merging
from tests.devutil import make_flash, boot, T0  # noqa: E402
from tests.mpy import MPY_CROSS  # noqa: E402

SIZES = (100, 1000, 5000)
DRIVER = r'''
import gc, json, time
from sporadic.device import store
CASE = %r
if CASE == 'size_only':
    def size_only(path):
        # the store's old check: jobs.ok held the size alone
        ok = open('jobs.ok').read()
        return ok if int(ok.split()[0]) == store.size(path) else None
    from sporadic.device import stamp
    stamp.file_stamp = size_only
peak = [0]
if CASE[:5] == 'heap_':
    def sample():
        gc.collect()
        a = gc.mem_alloc()
        if a > peak[0]:
            peak[0] = a
    store.feed = sample
if CASE == 'digest':
    from sporadic.device import stamp
gc.collect()
base = gc.mem_alloc()
t = time.time_ns()
if CASE == 'digest':
    stamp.file_stamp('jobs.txt')
    st = None
else:
    st = store.open_store()
us = (time.time_ns() - t) // 1000
print('RESULT ' + json.dumps({'us': us, 'base': base, 'peak': peak[0],
                              'notes': st.notes if st else [], 'quarantined': st.quarantined if st else 0}))
'''


def signed_flash(tmp, n):
    """A signed board's flash with an n-line job file, as `companion image` lays it out."""
    fleet = Fleet(os.path.join(tmp, 'fleet'))
    os.makedirs(fleet.dir)
    fleet.init('bench')
    jobs = []
    i = 0
    while len(jobs) < n - 1:
        jobs.append(jobline.parse_job('each 2026-12-02T06:00Z log job%d ; every=1d' % i, salt=str(i)).line())
        i += 1
    body = merging.merge(keys.sign_lines(fleet.dir, jobs) + jobs)
    jobs = body[:n]     # the .b records sort first: keep n lines, all covered
    from companion.fleet.board_keys import device_secret
    cfg = {'mode': 'signed', 'pubkey': keys.load_pub(fleet.dir),
           'secret': device_secret(fleet, 'dev-1', create=True)}
    d = make_flash(os.path.join(tmp, 'flash'), 'dev-1', cfg)
    for path, data in files.jobs_file('\n'.join(jobs) + '\n'):
        with open(os.path.join(d, path.lstrip('/')), 'wb') as f:
            f.write(data)
    return d


def one(flash, case, heap, tmp):
    d = os.path.join(tmp, 'run')
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(flash, d)
    if case in ('edited', 'heap_edited'):
        with open(os.path.join(d, 'jobs.txt')) as f:
            text = f.read()
        with open(os.path.join(d, 'jobs.txt'), 'w') as f:
            f.write(text.replace('log job1 ', 'log jobX ', 1))
    src = os.path.join(d, 'benchdrv.py')
    with open(src, 'w') as f:
        f.write(DRIVER % case)
    subprocess.run([MPY_CROSS, '-o', os.path.join(d, 'benchdrv.mpy'), src], check=True)
    os.remove(src)
    p = boot(d, 'import benchdrv', start=T0, heap=heap, timeout=900, check=False)
    res = [l for l in p.stdout.splitlines() if l.startswith('RESULT ')]
    if p.returncode or not res:
        return {'error': (p.stderr.strip().splitlines() or ['?'])[-1]}
    return json.loads(res[0][7:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--heap', default='64K')
    ap.add_argument('--reps', type=int, default=5)
    # a re-check loads what a signed sync loads (trust, batch, rsa): on this
    # 64-bit port that is more than 64K (bench/heap_sync.py: a signed sync 85K)
    ap.add_argument('--recheck-heap', default='128K')
    a = ap.parse_args()
    out = {'heap': a.heap, 'recheck_heap': a.recheck_heap, 'ms': {}, 'peak_heap': {}}
    for n in SIZES:
        tmp = tempfile.mkdtemp(prefix='store-open-')
        try:
            flash = signed_flash(tmp, n)
            size = os.path.getsize(os.path.join(flash, 'jobs.txt'))
            row = {'bytes': size}
            for case in ('size_only', 'stamp', 'digest', 'edited'):
                reps = a.reps if case != 'edited' or n <= 1000 else max(1, a.reps // 5)
                heap = a.recheck_heap if case == 'edited' else a.heap
                runs = [one(flash, case, heap, tmp) for _ in range(reps)]
                bad = [r['error'] for r in runs if 'error' in r]
                if bad:
                    row[case] = None
                    print('%5d lines %-9s failed: %s' % (n, case, bad[0]))
                    continue
                row[case] = round(statistics.median(r['us'] for r in runs) / 1000.0, 2)
                if case == 'edited':
                    assert runs[0]['quarantined'] == 1, runs[0]
            print('%5d lines (%7d bytes): open %s ms with a size stamp, %s ms with size + sha256 '
                  '(the sha256 alone %s ms); an edited file re-checked: %s ms'
                  % (n, size, row['size_only'], row['stamp'], row['digest'], row['edited']))
            out['ms'][str(n)] = row
            if n == SIZES[-1]:
                for case in ('heap_stamp', 'heap_edited'):
                    r = one(flash, case, a.recheck_heap if case == 'heap_edited' else a.heap, tmp)
                    out['peak_heap'][case[5:]] = r.get('peak') or r.get('error')
                print('%5d lines: peak heap of the open %s B under %s (stamp matches), %s B under %s (edited, re-checked)'
                      % (n, out['peak_heap']['stamp'], a.heap, out['peak_heap']['edited'], a.recheck_heap))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(out))


if __name__ == '__main__':
    main()
