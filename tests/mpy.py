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
    """A folder holding sporadic/*.mpy compiled from the current sources."""
    src = os.path.join(FIRMWARE, 'sporadic')
    stamp = tuple(sorted((f, os.stat(os.path.join(src, f)).st_mtime_ns)
                         for f in os.listdir(src) if f.endswith('.py')))
    if _built.get('stamp') != stamp:
        out = tempfile.mkdtemp(prefix='sporadic-mpy-')
        os.mkdir(os.path.join(out, 'sporadic'))
        for f, _ in stamp:
            # -O3 as deploy compiles (companion/files.py): no line-number tables
            subprocess.run([MPY_CROSS, '-O3', '-o', os.path.join(out, 'sporadic', f[:-3] + '.mpy'),
                            os.path.join(src, f)], check=True)
        _built['stamp'] = stamp
        _built['dir'] = out
    return _built['dir']


def run_mpy(code, heap='64K', timeout=120, stdin=None, source=False):
    """Run `code` under `micropython -X heapsize=HEAP`; return stdout.
    Raises AssertionError with stderr/stdout on a non-zero exit."""
    lib = FIRMWARE if source else mpy_lib()
    prelude = 'import sys\nsys.path.insert(0, %r)\n' % lib
    p = subprocess.run([MICROPYTHON, '-X', 'heapsize=' + heap, '-c', prelude + code],
                       input=stdin, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise AssertionError('micropython failed (%d):\n%s\n%s' % (p.returncode, p.stdout[-3000:], p.stderr[-3000:]))
    return p.stdout
