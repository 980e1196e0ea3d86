"""Merge two 100,000-line job-line files with `companion merge` (the command
a user or git runs: a new process reading both files and writing the
result) beside `LC_ALL=C sort -u` of the same two files, in one run,
alternating them ROUNDS times and keeping each one's best. JSON last
line: ours_s, sort_u_s, ratio (ours_s / sort_u_s; issue #15 asks <= 5),
one_process_s and one_process_ratio (the same command with --workers 1, the
baseline: before the merge split the id space over two CPUs),
library_s (merging.merge alone, in this process, for the same files), and
the same two commands' CPU time (user + sys) and cpu_ratio: on a loaded
machine the wall clock mostly measures the other processes. round_ratios:
each round's own wall-clock ratio; load_1m: the load average at the start.

    python bench/merge.py [--lines 100000] [--rounds 3]
"""
import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time

from sporadic.core import jobline
from sporadic.desktop import merging


def make_file(path, n, seed, jobs):
    rnd = random.Random(seed)
    hosts = ['pump-%d' % i for i in range(400)]
    lines = set()
    for j in jobs[:n // 20]:
        lines.add(j)
    ids = [j[:8] for j in jobs]
    while len(lines) < n:
        jid = rnd.choice(ids)
        r = jobline.Result(jid, rnd.choice(hosts), rnd.randrange(1000), 1796000000 + rnd.randrange(10 ** 7),
                           rnd.choice(('ok', 'err', 'miss')), 1, '%016x' % rnd.getrandbits(64), 'out %d' % rnd.randrange(99))
        lines.add(r.line())
    lines = list(lines)
    rnd.shuffle(lines)
    with open(path, 'w') as f:
        f.write('\n'.join(lines) + '\n')


def _children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--lines', type=int, default=100000)
    ap.add_argument('--rounds', type=int, default=3)
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix='sporadic-bench-')
    rnd = random.Random(0)
    jobs = [jobline.parse('each 2026-12-01T06:00Z log job%d ; every=%dm' % (i, 1 + rnd.randrange(600))).line()
            for i in range(a.lines // 10)]
    A, B = os.path.join(d, 'a.txt'), os.path.join(d, 'b.txt')
    make_file(A, a.lines, 1, jobs)
    make_file(B, a.lines, 2, jobs)

    out_ours, out_sort = os.path.join(d, 'ours.txt'), os.path.join(d, 'sortu.txt')
    out_one = os.path.join(d, 'one.txt')
    ours = sort_u = library = ours_cpu = sort_cpu = one_process = float('inf')
    load = os.getloadavg()[0]
    round_ratios = []
    for _ in range(a.rounds):
        t, c = time.perf_counter(), _children_cpu()
        subprocess.run([sys.executable, '-m', 'companion.cli', 'merge', A, B, '-o', out_ours], check=True)
        ours_round = time.perf_counter() - t
        ours = min(ours, ours_round)
        ours_cpu = min(ours_cpu, _children_cpu() - c)

        t = time.perf_counter()
        subprocess.run([sys.executable, '-m', 'companion.cli', 'merge', A, B, '-o', out_one, '--workers', '1'],
                       check=True)
        one_process = min(one_process, time.perf_counter() - t)

        t, c = time.perf_counter(), _children_cpu()
        subprocess.run(['sort', '-u', A, B, '-o', out_sort], check=True, env=dict(os.environ, LC_ALL='C'))
        sort_round = time.perf_counter() - t
        sort_u = min(sort_u, sort_round)
        sort_cpu = min(sort_cpu, _children_cpu() - c)
        round_ratios.append(round(ours_round / sort_round, 2))

        t = time.perf_counter()
        with open(A) as fa, open(B) as fb:
            merged = merging.merge(('a', fa.read().splitlines()), ('b', fb.read().splitlines()))
        library = min(library, time.perf_counter() - t)
    with open(out_ours) as f:
        n = sum(1 for _ in f)
    assert n == len(merged), (n, len(merged))
    with open(out_ours) as f, open(out_one) as g:
        assert f.read() == g.read(), 'two workers and one gave different files'
    print('merged %d + %d lines -> %d lines' % (a.lines, a.lines, n))
    print('companion merge: %.3f s   sort -u: %.3f s   (merging.merge alone: %.3f s)' % (ours, sort_u, library))
    print('companion merge --workers 1: %.3f s (%.2fx)' % (one_process, one_process / sort_u))
    print('CPU time (user + sys): companion merge %.3f s, sort -u %.3f s' % (ours_cpu, sort_cpu))
    print('each round: %s (load %.1f on %d cores)' % (' '.join('%.2fx' % r for r in round_ratios), load,
                                                      os.cpu_count()))
    print(json.dumps({'lines': a.lines, 'ours_s': round(ours, 4), 'sort_u_s': round(sort_u, 4),
                      'ratio': round(ours / sort_u, 2), 'one_process_s': round(one_process, 4),
                      'one_process_ratio': round(one_process / sort_u, 2), 'library_s': round(library, 4),
                      'ours_cpu_s': round(ours_cpu, 4), 'sort_u_cpu_s': round(sort_cpu, 4),
                      'cpu_ratio': round(ours_cpu / sort_cpu, 2), 'round_ratios': round_ratios,
                      'load_1m': round(load, 2)}))


if __name__ == '__main__':
    main()
