"""Run code on the real MicroPython unix port with the firmware importable as
a board has it: compiled to .mpy by mpy-cross (a 64 KB heap cannot compile
the sources at import time, and a deployed board never does)."""
import os
import shutil
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIRMWARE = os.path.join(ROOT, 'firmware')
MICROPYTHON = shutil.which('micropython')
MPY_CROSS = shutil.which('mpy-cross')
_built = {}


def mpy_lib():
    """A folder holding sporadic/**.mpy compiled from the current sources
    (desktop/ too: the differential tests run it on MicroPython)."""
    stamp = []
    for top, dirs, names in os.walk(os.path.join(FIRMWARE, 'sporadic')):
        dirs[:] = [d for d in dirs if not d.startswith(('_', '.'))]
        for n in names:
            if n.endswith('.py'):
                p = os.path.join(top, n)
                stamp.append((os.path.relpath(p, FIRMWARE), os.stat(p).st_mtime_ns))
    stamp = tuple(sorted(stamp))
    if _built.get('stamp') != stamp:
        out = tempfile.mkdtemp(prefix='sporadic-mpy-')
        for rel, _ in stamp:
            dest = os.path.join(out, rel[:-3] + '.mpy')
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            # -O3 as deploy compiles (companion/fleet/files.py): no line-number tables
            subprocess.run([MPY_CROSS, '-O3', '-o', dest, os.path.join(FIRMWARE, rel)], check=True)
        _built['stamp'] = stamp
        _built['dir'] = out
    return _built['dir']


def run_mpy(code, heap='64K', timeout=120, stdin=None, source=False, binary=None):
    """Run `code` under `micropython -X heapsize=HEAP` (or another build's `binary`);
    return stdout.
    Raises AssertionError with stderr/stdout on a non-zero exit."""
    lib = FIRMWARE if source else mpy_lib()
    prelude = 'import sys\nsys.path.insert(0, %r)\n' % lib
    p = subprocess.run([binary or MICROPYTHON, '-X', 'heapsize=' + heap, '-c', prelude + code],
                       input=stdin, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise AssertionError('micropython failed (%d):\n%s\n%s' % (p.returncode, p.stdout[-3000:], p.stderr[-3000:]))
    return p.stdout
