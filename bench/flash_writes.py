"""Bytes written to flash per job completion by the device store, over 1,000
completions including its compactions, beside the naive baseline of
rewriting the whole job file at each record.

    python bench/flash_writes.py

Ten jobs (`each`, every 10 minutes, staggered, action `sleep 0`: the action
itself writes nothing) on a virtual board with the step clock, until 1,000
completions. Counted: every byte the store writes (log appends, compaction
output, quarantine, run.txt), read from store.bytes_written. A completion
is run.txt before the action (`ID K AT ATTEMPT`, about 25 bytes, removed
after; the `run` record in the log before #31) plus the `ok` record after
it. The baseline rewrites jobs.txt (at its compacted size) for each of
those two records. The file system's own metadata (LittleFS's commits) is
not counted, for an append as for run.txt. The board's interpreter is
`micropython` on PATH: the 64-bit PyPI port leaves the outbox's packing to
the sync at this heap, a 32-bit build (bench/.mp32) packed in the loop
before #31 (213.7 there, 172.6 on the 64-bit port); since #31 neither packs
while the flash has room.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, 'firmware'))

from sporadic.core import jobline  # noqa: E402
from tests.devutil import make_flash, boot, T0  # noqa: E402
from tests.mpy import MPY_CROSS  # noqa: E402

N = 1000
JOBS = ['each 2026-12-01T00:%02dZ sleep 0 ; every=10m' % i for i in range(10)]
DRIVER = r'''
import json
from sporadic.device import store, runtime
rt = runtime.get()
b0 = store.bytes_written
done = 0
t = %d
while done < %d:
    t = rt.step(t)
    done = rt.done
print('RESULT ' + json.dumps({'bytes': store.bytes_written - b0, 'done': done,
                              'compactions': rt.store.compactions,
                              'jobs_bytes': store.size(rt.store.jobs), 'steps': rt.steps}))
'''


def main():
    tmp = tempfile.mkdtemp(prefix='flash-')
    try:
        d = make_flash(tmp, jobs=JOBS)
        src = os.path.join(tmp, 'benchdrv.py')
        code = DRIVER % (T0, N)
        # count completions without touching the runtime: wrap its recorder
        code = code.replace('rt = runtime.get()\n', '''rt = runtime.get()
rt.done = 0
_rec = rt._record
def _record(jid, k, at, outcome, attempt, text='', single=False):
    if outcome == 'ok':
        rt.done += 1
    return _rec(jid, k, at, outcome, attempt, text, single)
rt._record = _record
''')
        with open(src, 'w') as f:
            f.write(code)
        subprocess.run([MPY_CROSS, '-o', os.path.join(tmp, 'benchdrv.mpy'), src], check=True)
        os.remove(src)
        p = boot(d, 'import benchdrv', start=T0, heap='96K', timeout=600)
        r = json.loads([l for l in p.stdout.splitlines() if l.startswith('RESULT ')][0][7:])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    per = r['bytes'] / r['done']
    # baseline: the whole compacted file rewritten for the run and the ok record
    base = 2 * r['jobs_bytes']
    print('%d completions, %d compactions, %d bytes written; jobs.txt %d bytes' % (
        r['done'], r['compactions'], r['bytes'], r['jobs_bytes']))
    print('store: %.1f B/completion; naive rewrite: %d B/completion' % (per, base))
    print(json.dumps({'bytes_per_completion': round(per, 1), 'baseline_bytes_per_completion': base,
                      'completions': r['done'], 'compactions': r['compactions'],
                      'jobs_txt_bytes': r['jobs_bytes']}))


if __name__ == '__main__':
    main()
