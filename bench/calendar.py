"""Planner decisions per second on the MicroPython unix port: a cron job in a zone
with DST and a sunset job against an `every=` job, each decided at a wake spread
over 2026-2027 as a board's loop does (plan.decide, the host's newest result known).
JSON last line: decisions_per_s per job kind, and the ratio to `every=`.

    python bench/calendar.py [--n 3000] [--micropython PATH]
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tests.mpy import run_mpy, MICROPYTHON  # noqa: E402

BENCH = r'''
N = %d
wakes = [None] * N   # allocated first: compiling the sources fragments the heap
import time
from sporadic.core import jobline, plan
JOBS = {
    'every': 'each 2026-01-01T00:00Z log x ; every=1h',
    'cron': 'each 2026-01-01T00:00Z log x ; at="0 6 * * 1-5" tz=Europe/Berlin tzr=CET-1CEST,M3.5.0,M10.5.0/3',
    'cron_dense': 'each 2026-01-01T00:00Z log x ; at="*/5 8-17 * * mon-fri" tz=America/Chicago tzr=CST6CDT,M3.2.0,M11.1.0',
    'sunset': 'each 2026-01-01T00:00Z log x ; at=sunset+20m',
}
out = {}
for name in ('every', 'cron', 'cron_dense', 'sunset'):
    job = jobline.parse(JOBS[name])
    if job.cal is not None:
        job.cal.place((52.52, 13.40))
    t = 1767225600 + 3600
    step = 63072000 // N
    for i in range(N):
        now = t + i * step
        k = plan.newest(job, now)
        wakes[i] = (now, (k - 1 if job.cal is None else job.cal.prev(k), 'ok', 1) if k > 0 else None)
    t0 = time.ticks_ms()
    for now, mine in wakes:
        plan.decide(job, 'pump-1', now, mine)
    ms = time.ticks_diff(time.ticks_ms(), t0)
    out[name] = round(N * 1000 / max(ms, 1))
print(out)
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--n', type=int, default=3000)
    ap.add_argument('--micropython', default=MICROPYTHON)
    a = ap.parse_args()
    text = run_mpy(BENCH % a.n, heap='1M', binary=a.micropython, timeout=600)
    got = eval(text.strip().splitlines()[-1])
    for name, n in got.items():
        print('%-10s %7d decisions/s  (%.2f x every=)' % (name, n, n / got['every']))
    res = {'micropython': a.micropython, 'n': a.n, 'decisions_per_s': got,
           'ratio_to_every': {k: round(v / got['every'], 3) for k, v in got.items()}}
    print(json.dumps(res))


if __name__ == '__main__':
    main()
