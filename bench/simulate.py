"""Benchmark: `companion simulate` on a large fleet.

Default (the budget of issues 8 and 15): 1,000 hosts, 100 jobs of mixed
types (each / who / any / one; daily, weekly and monthly), a companion
visiting every host daily (2 h jitter, 2 % failed visits), hosts with random
outages and 20 ppm clock drift. The budget is 365 simulated days; the
default runs 30 of them. A day costs less in the first month (the weekly
and monthly jobs have not all come due, the files are still filling up)
and about the same after it, so `year_cpu_s_projected` (365/days of this
run) is low for short runs (one process, 2026-12-04: 30 days project
91 s, --full measured 97 s); --full runs the year.

    python bench/simulate.py                 # 1,000 hosts x 100 jobs x 30 days
    python bench/simulate.py --full          # the budget: 365 days
    python bench/simulate.py --hosts 200 --days 90
    python bench/simulate.py --full --toml year.toml   # the scenario as a file, for
    companion simulate year.toml                       # the command a user runs

The jobs are shared among one process per CPU, as `companion simulate`
does (`--workers 1`: one process, the figure to compare with runs before
the sharing). Prints wall time, CPU time (with the workers') and simulated
host-days per second; the last line is JSON with `wall_s`, `cpu_s`,
`host_days_per_s` (wall), `host_days_per_cpu_s`, `year_cpu_s_projected`,
`year_wall_s_projected`, `workers` (and the counts behind them). The
budget is wall time; on a shared machine CPU time is the steadier figure.
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..'))
sys.path.insert(0, os.path.join(HERE, '..', 'firmware'))

from companion.simulate import parallel  # noqa: E402
from companion.simulate.engine import Sim  # noqa: E402
from companion.simulate.parallel import simulate  # noqa: E402
from companion.simulate.scenario import dumps  # noqa: E402
from sporadic.core.timeutil import parse_time
from sporadic.core.timefmt import format_time  # noqa: E402


def scenario(hosts, days, jobs=100):
    start = parse_time('2026-01-01T00:00Z')
    pumps = hosts * 3 // 5
    loggers = hosts - pumps
    lines = []
    # 100 jobs: 30 each, 20 who, 20 any, 30 one; a spread of periods
    periods = ['1d'] * 2 + ['7d'] * 4 + ['30d'] * 4      # 10 % daily, 40 % weekly, 50 % monthly
    for i in range(jobs):
        kind = ('each', 'who', 'any', 'one')[0 if i < jobs * 3 // 10 else 1 if i < jobs // 2 else
                                            2 if i < jobs * 7 // 10 else 3]
        every = periods[i % len(periods)]
        t0 = format_time(start + 3600 * (i % 24) + 60 * (i % 7))
        if kind == 'each':
            opt = ' on=pump' if i % 2 else ''
            lines.append('each %s job%d run ; every=%s%s' % (t0, i, every, opt))
        elif kind == 'who':
            lines.append('who:%s %s job%d run ; every=%s' % (('pump-00', 'logger-1', 'pump-1', 'logger-00')[i % 4],
                                                          t0, i, every))
        elif kind == 'any':
            lines.append('any:0.002 %s job%d run ; every=%s within=6h tick=1h' % (t0, i, every))
        else:
            lines.append('one %s job%d run ; every=%s grace=1h' % (t0, i, every))
    return {
        'name': 'bench-%d-hosts-%d-days' % (hosts, days),
        'start': format_time(start),
        'end': format_time(start + days * 86400),
        'jobs': '\n'.join(lines),
        'hosts': [
            {'ids': 'pump-{0001..%04d}' % pumps, 'uptime': 'outages 1/w 6h', 'drift_ppm': 20},
            {'ids': 'logger-{001..%03d}' % loggers, 'uptime': 'always', 'drift_ppm': 20},
        ],
        'visit': [{'companion': 'laptop', 'hosts': '*', 'interval': '1d', 'jitter': '2h', 'fail': 0.02}],
    }


def _cpu():
    """CPU seconds of this process and of its finished children (the workers)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--hosts', type=int, default=1000)
    p.add_argument('--days', type=int, default=30)
    p.add_argument('--full', action='store_true', help='365 simulated days (the budget of issue 8)')
    p.add_argument('--jobs', type=int, default=100)
    p.add_argument('--seed', type=int, default=1)
    p.add_argument('--workers', type=int, default=None,
                   help='processes to share the jobs among (default: one per CPU)')
    p.add_argument('--toml', metavar='OUT', help='write the scenario to OUT (for `companion simulate OUT`) and stop')
    a = p.parse_args()
    if a.full:
        a.days = 365
    scn = scenario(a.hosts, a.days, a.jobs)
    if a.toml:
        with open(a.toml, 'w') as f:
            f.write(dumps(scn))
        print('wrote %s: companion simulate %s --seed %d' % (a.toml, a.toml, a.seed))
        return
    workers = parallel.workers_for(Sim(scn, a.seed), a.workers)   # the count simulate() will use
    t = time.perf_counter()
    c0 = _cpu()
    rep = simulate(scn, a.seed, workers=workers)
    wall = time.perf_counter() - t
    cpu = _cpu() - c0
    hd = a.hosts * a.days
    c = rep['counts']
    print('%d hosts x %d jobs x %d days: %.1f s wall (%.1f s CPU, %d worker%s), %.0f host-days/s (%.0f a CPU-second)'
          % (a.hosts, a.jobs, a.days, wall, cpu, workers, '' if workers == 1 else 's', hd / wall, hd / cpu))
    print('  %d sync events, %d job wakes, %d decisions (%.0f decisions/s), %d syncs moving %.1f MB'
          % (c['sync_events'], c['job_wakes'], c['decisions'], c['decisions'] / wall, rep['sync']['ok'],
             rep['sync']['bytes'] / 1e6))
    for k, t2 in rep['by_type'].items():
        print('  %-4s runs %d of %d expected, duplicate runs %d, missed %d'
              % (k, t2['runs'], t2['expected_runs'], t2['duplicate_runs'], t2['missed']))
    f = rep['file_at_end']
    print('  host file at end: %.0f lines / %.0f kB mean' % (f['host_lines_mean'], f['host_bytes_mean'] / 1e3))
    print(json.dumps({'bench': 'simulate', 'hosts': a.hosts, 'jobs': a.jobs, 'days': a.days,
                      'wall_s': round(wall, 2), 'cpu_s': round(cpu, 2), 'host_days_per_s': round(hd / wall, 1),
                      'host_days_per_cpu_s': round(hd / cpu, 1), 'year_cpu_s_projected': round(cpu * 365 / a.days, 1),
                      'year_wall_s_projected': round(wall * 365 / a.days, 1), 'workers': workers,
                      'sync_events': c['sync_events'], 'job_wakes': c['job_wakes'], 'decisions': c['decisions'],
                      'syncs': rep['sync']['ok'],
                      'bytes_synced': rep['sync']['bytes']}, sort_keys=True))


if __name__ == '__main__':
    main()
