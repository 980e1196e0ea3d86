"""Benchmark: staged rollouts with abort on a simulated fleet (issue #34).

1,000 boards, a companion visiting each of them once a day (random phase,
no failures, clocks without drift), a job whose action fails on 100 % of
the boards (abort=fail>10%/3) and the same job with an action that
succeeds, under three wave settings. `companion simulate` runs them on the
real core (plan.decide, groups.scan's tally through the record logs); for
each setting the number of boards that ran the failing job is printed
beside the analytic bound of docs/simulate.md#rollouts (report.rollout_bound:
the waves starting less than two sync intervals after the wave whose
failures alone pass the threshold).

    python bench/rollout.py              # 1,000 boards
    python bench/rollout.py --boards 200

The last line is JSON: `boards`, `settings` (a list of {setting, ran,
bound, aborted}), `succeeding_job_reached` (boards that ran the succeeding
job, the smallest over the settings), `within_bound` (every ran <= bound).
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..'))
sys.path.insert(0, os.path.join(HERE, '..', 'firmware'))

from companion.simulate.engine import Sim  # noqa: E402

SETTINGS = ['waves=1%,10%,100% wave=1d', 'waves=1%,10%,100% wave=2d', 'waves=5%,25%,100% wave=12h']


def scenario(boards, setting):
    opts = setting + ' abort=fail>10%/3 within=7d'
    return {'name': 'rollout', 'start': '2026-01-01T00:00Z', 'end': '2026-01-12T00:00Z',
            'failing_actions': ['fwupdate'],
            'jobs': 'each 2026-01-02T00:00Z fwupdate ; %s\neach 2026-01-02T00:00Z log ok ; %s\n' % (opts, opts),
            'hosts': [{'ids': 'b{%04d..%04d}' % (1, boards)}],
            'visit': [{'companion': 'laptop', 'hosts': '*', 'interval': '1d', 'phase': 'random'}]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--boards', type=int, default=1000)
    ap.add_argument('--seed', type=int, default=1)
    a = ap.parse_args(argv)
    rows = []
    reached = None
    t0 = time.time()
    for s in SETTINGS:
        rep = Sim(scenario(a.boards, s), a.seed).run()
        bad, good = rep['jobs']
        ro = bad['rollout']
        rows.append({'setting': s, 'ran': ro['ran'], 'bound': ro['bound'], 'aborted': ro['aborted'],
                     'per_wave': [(w['hosts'], w['ran'], w['aborted']) for w in ro['waves']]})
        g = good['rollout']['ran']
        reached = g if reached is None else min(reached, g)
        print('%-28s failing job ran on %4d of %d boards (bound %4d), aborted on %4d; per wave (hosts, ran, '
              'aborted) %s; the succeeding job reached %d' % (s, ro['ran'], a.boards, ro['bound'], ro['aborted'],
                                                             rows[-1]['per_wave'], g))
    out = {'boards': a.boards, 'settings': [{k: r[k] for k in ('setting', 'ran', 'bound', 'aborted')} for r in rows],
           'succeeding_job_reached': reached, 'within_bound': all(r['ran'] <= r['bound'] for r in rows),
           'sync_interval': '1d', 'wall_s': round(time.time() - t0, 1)}
    print(json.dumps(out))


if __name__ == '__main__':
    main()
