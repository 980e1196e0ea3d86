"""Anti-entropy on a fleet: rounds and bytes until a new record reaches every
board, for 5, 10 and 20 boards with random pairwise syncs. Each round every
board syncs with one peer chosen at random (push-pull). The sync is the real
protocol (sporadic.recon: Responder on the answering board, reconcile on the
initiating one), run in-process on CPython: the same core the boards run.

Every board starts with the same BASE lines (a fleet in steady state); one
board then gets a new record. Bytes are the request + response characters of
every sync of the rounds until the record is everywhere (unchanged pairs
included: that is what anti-entropy costs). JSON last line:
{"rounds": {"5": r, ...}, "bytes": {"5": b, ...}, "log2": {...}, "trials": T}
"""
import json
import math
import random
import sys
import os

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'firmware'))
from sporadic.core import jobline, recon  # noqa: E402
from sporadic.core import recondrv

BASE = 300
TRIALS = 20


class Board:
    def __init__(self, lines):
        self.lines = set(lines)

    def source(self):
        return iter(sorted(self.lines))

    def receive(self, lines):
        self.lines.update(lines)
        return []


def sync(a, b):
    r = recon.Responder(b.source, b.receive)
    st = recondrv.reconcile(a.source, a.receive, r.handle, verify=False)
    return st['bytes_out'] + st['bytes_in']


def trial(n, rnd, base):
    boards = [Board(base) for _ in range(n)]
    new = jobline.Result('0123abcd', 'b%d' % rnd.randrange(n), rnd.randrange(1000), 1796083200, 'ok').line()
    boards[rnd.randrange(n)].lines.add(new)
    rounds = 0
    nbytes = 0
    while not all(new in b.lines for b in boards):
        rounds += 1
        for i in range(n):
            j = rnd.randrange(n - 1)
            j = j + 1 if j >= i else j
            nbytes += sync(boards[i], boards[j])
    return rounds, nbytes


def main():
    rnd = random.Random(7)
    base = [jobline.Result('%08d' % (i % 97), 'h%d' % (i % 40), i, 1796083200 + i, 'ok').line() for i in range(BASE)]
    rounds = {}
    nbytes = {}
    logs = {}
    print('%6s %10s %10s %14s %14s' % ('boards', 'rounds', 'log2(n)', 'bytes total', 'bytes/board'))
    for n in (5, 10, 20):
        rs = []
        bs = []
        for _ in range(TRIALS):
            r, b = trial(n, rnd, base)
            rs.append(r)
            bs.append(b)
        rounds[str(n)] = round(sum(rs) / len(rs), 2)
        nbytes[str(n)] = int(sum(bs) / len(bs))
        logs[str(n)] = round(math.log2(n), 2)
        print('%6d %10.2f %10.2f %14d %14d' % (n, rounds[str(n)], logs[str(n)], nbytes[str(n)], nbytes[str(n)] // n))
    print(json.dumps({'rounds': rounds, 'bytes': nbytes, 'log2': logs, 'trials': TRIALS, 'base_lines': BASE}))


if __name__ == '__main__':
    main()
