"""Instructions of one full pass of a board's loop over its job file (issue
#27: what the first step after a board's clock is set costs, and the step
after a sync the wake index could not be carried across), counted by
valgrind's callgrind on the 32-bit MicroPython unix port (the boards' word
size: bench/build_micropython32.sh). Counts, not seconds: the same on a
loaded machine, run after run.

    python bench/full_pass.py [--jobs 1000] [--heap 160K] [--base COMMIT]
                              [--interpreter bench/.mp32/micropython]

The flash is bench/wake.py's (N daily `each` jobs due tomorrow, laid as
`companion image` lays them). One boot opens the store; another opens it
and takes one step with the wake index off (store.WAKE_INDEX = False): the
difference is the pass. --base: the same flash with the firmware of COMMIT
(`git archive`; its modules compiled as `companion image` compiles them).

Last line JSON: {"full_pass_instructions": {"base": N, "now": N},
"per_job": {...}, "jobs", "heap", "interpreter"}.
"""
import argparse
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for p in (HERE, os.path.join(ROOT, 'firmware'), ROOT):
    if p not in sys.path:
        sys.path.insert(0, p)

from companion.fleet import files  # noqa: E402
from tests.devutil import DEVBOOT, T0  # noqa: E402
from wake import flash  # noqa: E402

OPEN = '''
from sporadic.device import store
store.WAKE_INDEX = False
store.open_store()
from sporadic.device import runtime
rt = runtime.get()
'''
PASS = OPEN + 'rt.step(%d)\nprint("JOBS", rt.jobs)\n' % (T0 + 3600)


def lay_firmware(d, fw):
    # the flash's /lib/sporadic from the firmware tree fw (as files.firmware_files compiles it)
    lib = os.path.join(d, 'lib', 'sporadic')
    shutil.rmtree(lib)
    for rel in files.board_modules(fw):
        dest = os.path.join(d, 'lib', rel[:-3] + '.mpy')
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(dest, 'wb') as f:
            f.write(files.compile_mpy(os.path.join(fw, rel), None, '/lib/' + rel[:-3] + '.mpy'))


def counted(src, code, interp, heap, tmp):
    d = os.path.join(tmp, 'run')
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(src, d)
    drv = os.path.join(tmp, 'drv.py')
    with open(drv, 'w') as f:
        f.write(code)
    env = dict(os.environ, SPORADIC_CLOCK='step', SPORADIC_CLOCK_START=str(T0))
    p = subprocess.run(['valgrind', '--tool=callgrind', '--callgrind-out-file=/dev/null', interp,
                        '-X', 'heapsize=' + heap, DEVBOOT, d, drv], capture_output=True, text=True, env=env)
    m = re.search(r'Collected : (\d+)', p.stderr)
    if p.returncode or not m:
        raise SystemExit('bench/full_pass.py: the board failed: %s' % (p.stderr.strip().splitlines() or ['?'])[-1])
    return int(m.group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--jobs', type=int, default=1000)
    ap.add_argument('--heap', default='160K')
    ap.add_argument('--base')
    ap.add_argument('--interpreter', default=os.path.join(HERE, '.mp32', 'micropython'))
    a = ap.parse_args()
    if shutil.which('valgrind') is None or not os.path.isfile(a.interpreter):
        raise SystemExit('bench/full_pass.py needs valgrind and a MicroPython binary (%s: '
                         'bash bench/build_micropython32.sh)' % a.interpreter)
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        now = flash(tmp, a.jobs)
        variants = [('now', now)]
        if a.base:
            fw = os.path.join(tmp, 'base')
            tar = subprocess.run(['git', '-C', ROOT, 'archive', a.base, 'firmware'], capture_output=True, check=True)
            tarfile.open(fileobj=io.BytesIO(tar.stdout)).extractall(fw)
            base = os.path.join(tmp, 'flash-base')
            shutil.copytree(now, base)
            lay_firmware(base, os.path.join(fw, 'firmware'))
            variants.insert(0, ('base', base))
        for name, d in variants:
            opened = counted(d, OPEN, a.interpreter, a.heap, tmp)
            stepped = counted(d, PASS, a.interpreter, a.heap, tmp)
            out[name] = stepped - opened
            print('%-4s  open %13s  open + one full pass %13s  the pass %13s  (%s a job)' % (
                name, format(opened, ','), format(stepped, ','), format(out[name], ','),
                format(out[name] // a.jobs, ',')))
    print(json.dumps({'full_pass_instructions': out, 'per_job': {k: v // a.jobs for k, v in out.items()},
                      'jobs': a.jobs, 'heap': a.heap, 'interpreter': os.path.relpath(a.interpreter, ROOT)}))


if __name__ == '__main__':
    main()
