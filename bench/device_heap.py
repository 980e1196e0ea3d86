"""Peak heap of the device runtime over job files of 1,000, 5,000 and 20,000
lines, on the MicroPython unix port under -X heapsize=64K.

    python bench/device_heap.py [--heap 64K]

Each file holds N/2 jobs (each/who/any/one, most due tomorrow, 40 due now)
and one result record of another host per job, plus host records. The board
boots (store recovery streams the file once), then two passes run: the 40
due jobs run (`sleep 0`), their records go to the log and a compaction
streams the whole file into a new one. The live heap is sampled every 25
lines of every stream (gc.collect(), then gc.mem_alloc()): "peak_heap" is
the highest sample, code included; "code" is the heap after the imports.
Flat figures across N mean the file is streamed, never loaded.
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

from sporadic.core import jobline, merge  # noqa: E402
from sporadic.desktop import merging
from tests.devutil import make_flash, boot, T0  # noqa: E402
from tests.mpy import MPY_CROSS  # noqa: E402

D = 86400
DRIVER = r'''
import gc, json
gc.collect()
from sporadic.device import store, runtime
gc.collect()
code = gc.mem_alloc()
peak = [code]
def watched(read):
    # the store's reader, sampling the heap every 25 lines it yields
    def lines(self):
        n = 0
        for line in read(self):
            n += 1
            if n %% 25 == 0:
                gc.collect()
                a = gc.mem_alloc()
                if a > peak[0]:
                    peak[0] = a
            yield line
    return lines
store.Store.stream = watched(store.Store.stream)
store.Store.jobs_lines = watched(store.Store.jobs_lines)
rt = runtime.get()
rt.step(%d)
rt.step(%d)
rt.store.compact()
print('RESULT ' + json.dumps({'code': code, 'peak': peak[0], 'jobs': rt.jobs,
                              'pending': rt.pending, 'compactions': rt.store.compactions}))
'''


def job_file(n):
    lines = ['.h dev-1', '.h other-1', '.h other-2']
    kinds = ['each', 'who:dev', 'any:0.01', 'one']
    i = 0
    while len(lines) < n:
        due = '2026-12-01T00:00Z' if i < 40 else '2026-12-02T06:00Z'
        text = '%s %s sleep 0 ; every=1d' % (kinds[i % 4], due)
        j = jobline.parse_job(text, salt=str(i))
        lines.append(j.line())
        lines.append(jobline.Result(j.id, 'other-%d' % (i % 2 + 1), 0, T0 - D, 'ok', 1, '-', 'x').line())
        i += 1
    return merging.merge(lines[:n])


def main():
    if '--heap' in sys.argv:
        out, detail = measure(sys.argv[sys.argv.index('--heap') + 1])
    else:
        # 64K, the budget: the 64-bit unix port holds ~38 KB of loaded code in
        # the heap (about 1.4 times a 32-bit board's, docs/device.md#memory)
        out, detail = measure('64K')
    print(json.dumps({'peak_heap': out}))


def measure(heap):
    out = {}
    detail = {}
    for n in (1000, 5000, 20000):
        tmp = tempfile.mkdtemp(prefix='heap-')
        try:
            d = make_flash(tmp, jobs=job_file(n))
            # the driver is compiled by mpy-cross too: no compiler in the heap
            src = os.path.join(tmp, 'benchdrv.py')
            with open(src, 'w') as f:
                f.write(DRIVER % (T0 + 60, T0 + 120))
            subprocess.run([MPY_CROSS, '-o', os.path.join(tmp, 'benchdrv.mpy'), src], check=True)
            os.remove(src)
            p = boot(d, 'import benchdrv', start=T0 + 60, heap=heap, timeout=600, check=False)
            res = [l for l in p.stdout.splitlines() if l.startswith('RESULT ')]
            if p.returncode or not res:
                print('%d lines: failed under %s: %s' % (n, heap, (p.stderr.strip().splitlines() or ['?'])[-1]))
                out[str(n)] = None
                continue
            r = json.loads(res[0][7:])
            out[str(n)] = r['peak']
            detail[str(n)] = r
            print('%6d lines: peak %d B (code %d B, working set %d B), %d jobs, %d compactions' % (
                n, r['peak'], r['code'], r['peak'] - r['code'], r['jobs'], r['compactions']))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps({'heap': heap, 'detail': detail}))
    return out, detail


if __name__ == '__main__':
    main()
