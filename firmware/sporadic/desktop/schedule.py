# The companion's side of plan.py (read as plan.NAME): the all-up schedule
# for `companion plan`. A board never loads this module.
from sporadic.core.jobline import P_ONE
from sporadic.core.plan import due, newest, score, eligible, next_k
from sporadic.core.rollout import waves


def expected_fire(job, k):
    """Expected first fire time of one host for an `any` instance (geometric)."""
    fails = (P_ONE - job.threshold) // job.threshold
    return due(job, k) + fails * job.tick


def schedule(job, hosts, t_from, t_until, limit=100000):
    """What would run where and when if every host were up and synced:
    dicts with job, instance, host, at, state (run | candidate | standby)
    and rank for `one`, wave for a staged rollout (its `at`: when the wave
    may start). Instances due in [t_from, t_until)."""
    if job.cal is not None:
        k = job.cal.first(t_from - 1)
    else:
        k = newest(job, t_from - 1) + 1 if t_from > job.t0 else 0
        if not job.every and k > 0:
            return
    ranked = None
    wave = waves(job, hosts) if job.roll is not None else None
    if job.kind == 'one':
        ranked = sorted(hosts, key=lambda h: score(job.id, h), reverse=True)
    n = 0
    while k >= 0:
        d = due(job, k)
        if d >= t_until:
            return
        inst = job.id + '.' + str(k)
        if job.cal is not None and job.cal.due(k) is None:   # a day without sunrise/sunset
            for h in hosts:
                if eligible(job, h):
                    yield {'job': job.id, 'instance': inst, 'host': h, 'at': d, 'state': 'missed',
                           'note': job.cal.missing()}
            k = next_k(job, k)
            continue
        if ranked is not None:
            for r in range(len(ranked)):
                t = d + r * job.grace
                row = {'job': job.id, 'instance': inst, 'host': ranked[r], 'at': t,
                       'state': 'run' if r == 0 else 'standby', 'rank': r}
                if r and t >= d + job.within:
                    row['note'] = 'outside window'
                yield row
                n += 1
        else:
            for h in hosts:
                if not eligible(job, h):
                    continue
                if job.kind == 'any':
                    yield {'job': job.id, 'instance': inst, 'host': h,
                           'at': min(expected_fire(job, k), d + job.within - 1),
                           'state': 'candidate', 'p': job.arg}
                elif wave is not None:
                    yield {'job': job.id, 'instance': inst, 'host': h, 'state': 'run', 'wave': wave[h],
                           'at': d + job.roll.starts(wave[h])}
                else:
                    yield {'job': job.id, 'instance': inst, 'host': h, 'at': d, 'state': 'run'}
                n += 1
        if n >= limit:
            raise ValueError('plan too long: more than %d rows; narrow --from/--until' % limit)
        k = next_k(job, k)
