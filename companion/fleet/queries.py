"""The fleet queries every view uses (`companion jobs/results/status`, the
demo, the web page): each job's state per board and what each board does
next (the core planner on the fleet's copy), the results history, the
duplicates of single-run jobs, staged rollouts, each board's status row.
Plain values in, plain dicts out: no argparse, no printing; `now` (UTC
seconds) is the caller's clock."""
import time

from sporadic.core import groups, jobline, leader, plan, rollout
from sporadic.core.timefmt import format_time
from companion.errors import UserError
from companion.fleet.folder import verify_result
from companion.fleet.when import since_time


def job_states(fleet, now=None):
    """Per job: its text and, per known device, the latest result it reported."""
    now = int(time.time()) if now is None else now
    latest = {}
    for l in fleet.lines():
        r = jobline.parse(l)
        if isinstance(r, jobline.Result):
            latest[(r.id, r.host)] = r
    devices = [d['id'] for d in fleet.devices()]
    nxt = {h: next_for(fleet, h, now) for h in devices}
    out = []
    for j in fleet.jobs():
        per = {}
        for h in devices:
            r = latest.get((j.id, h))
            if r is not None:
                per[h] = {'instance': r.instance(), 'outcome': r.outcome, 'at': r.at, 'output': r.output}
            elif not plan.eligible(j, h):
                per[h] = {'outcome': 'not eligible'}
            else:
                per[h] = {'outcome': 'pending'}
            per[h]['next'] = nxt[h].get(j.id)
        k = plan.newest(j, now)
        out.append({'job': j.id, 'line': j.text(), 'type': j.kind, 'current_instance': k,
                    'next_due': _next_due(j, k, now), 'devices': per})
        if j.roll is not None:
            out[-1]['rollout'] = rollout_state(j, latest, fleet.hosts(), now)
    for jid in fleet.cancelled():
        out.append({'job': jid, 'line': None, 'type': 'cancelled', 'devices': {}})
    return out


def next_for(fleet, host, now):
    """{job id: {'instance', 'at', 'time', 'what'}}: what board `host` does next
    about each job and when, decided by the core planner (plan.decide) on the
    fleet's copy of its file, as the board would if it synced now: `run` or
    `miss` (now), `wait` (at its due time, or its turn for an `any`/`one`);
    nothing for a job it will never run again."""
    rnd = plan.hash_rnd(host)
    out = {}
    tally = [-1, 0, 0]

    def visit(jid, text, cancelled, mine, done_k, asg, hosts):
        if text is None or cancelled:
            return
        j = jobline.parse(text)
        rnk, heard = _standing(j, host, hosts, tally)
        what, k, at = plan.decide(j, host, now, mine, done_k, rnk, rnd, heard=heard)[:3]
        if what != plan.IDLE and k >= 0:
            out[jid] = {'instance': '%s.%d' % (jid, k), 'at': at, 'time': format_time(at), 'what': what}
    groups.scan(fleet.lines(), host, None, visit, tally)
    return out


def _standing(j, host, hosts, tally):
    # plan.decide's rnk and heard for host, as its board finds them (runtime._job)
    if j.kind == 'one':
        return plan.rank(j.id, host, hosts), None
    if j.roll is not None:
        return rollout.wave(j, host, hosts), tuple(tally)
    return None, None


ROLLOUT_STATES = ('ran', 'failed', 'aborted', 'missed', 'waiting')


def rollout_state(j, latest, hosts, now):
    """A staged rollout's current instance, per wave: its hosts, when it may
    start, and how many ran (ok), failed, aborted, missed or are waiting
    (no outcome yet); latest: {(job, host): newest Result}."""
    k = plan.newest(j, now)
    if k < 0:
        k = 0 if j.cal is None else j.cal.first(now)
    per = {}
    for h, w in rollout.waves(j, hosts).items():
        s = per.get(w)
        if s is None:
            s = per[w] = dict({'wave': w, 'hosts': 0, 'start': plan.start_at(j, k, w)},
                              **{x: 0 for x in ROLLOUT_STATES})
        s['hosts'] += 1
        r = latest.get((j.id, h))
        if r is None or r.k < k or r.outcome == 'run':
            s['waiting'] += 1
        elif r.outcome == 'ok':
            s['ran'] += 1
        elif r.outcome == 'err':
            s['failed'] += 1
        elif r.output.startswith('abort'):
            s['aborted'] += 1
        else:
            s['missed'] += 1
    return {'instance': '%s.%d' % (j.id, k), 'waves': [per[w] for w in sorted(per)]}


def rollout_text(st):
    return '%s: ' % st['instance'] + '; '.join(
        'wave %d (%d board(s), from %s): %s' % (
            s['wave'], s['hosts'], format_time(s['start']),
            ', '.join('%d %s' % (s[x], x) for x in ROLLOUT_STATES if s[x]) or '-')
        for s in st['waves'])


def _next_due(j, k, now):
    # when the job's next instance is due (None: no more, or a sun job: per board)
    if j.cal is not None and j.cal.sun():
        return None
    nk = (0 if j.cal is None else j.cal.first(now)) if k < 0 else plan.next_k(j, k)
    return plan.due(j, nk) if nk >= 0 else None


OUTCOME_WORDS = {'err': 'error', 'miss': 'missed', 'run': 'started'}   # `run`: started, no outcome yet


def result_rows(fleet):
    """The results history as dicts; 'verified' tells whether the board's MAC checked."""
    rows = []
    for r in fleet.results():
        rows.append({'job': r.id, 'instance': r.instance(), 'host': r.host, 'at': r.at,
                     'time': format_time(r.at), 'outcome': OUTCOME_WORDS.get(r.outcome, r.outcome),
                     'attempt': r.attempt, 'output': r.output, 'verified': verify_result(fleet, r)})
    rows.sort(key=lambda x: (x['at'], x['job'], x['host']))
    return rows


def duplicates(fleet):
    """Instances of single-run jobs (any/one) that more than one board started
    or ran, from the whole record (Fleet.record_lines: a compaction folds
    old runs out of jobs.txt, the results history keeps them), by the
    board's own rule (leader.duplicate_runs):
    {'ID.K': {'job', 'type', 'hosts', 'runs': [{'host', 'at', 'time',
    'outcome', 'last_sync'}]}}. last_sync: the host's newest sync with this
    companion before it ran, its section's news (None: none on record)."""
    syncs = {}
    out = {}
    for inst, kind, rs in leader.duplicate_runs(fleet.record_lines()):
        runs = []
        for host, at, outcome in rs:
            if host not in syncs:
                d = fleet.device(host) or {}
                syncs[host] = sorted(d.get('syncs') or ([d['last_sync']] if d.get('last_sync') else []))
            before = [t for t in syncs[host] if t <= at]
            runs.append({'host': host, 'at': at, 'time': format_time(at), 'outcome': outcome,
                         'last_sync': before[-1] if before else None})
        out[inst] = {'job': inst.split('.')[0], 'type': kind, 'hosts': sorted(r['host'] for r in runs),
                     'runs': runs}
    return out


def duplicate_text(inst, d):
    """One line for a duplicate: who ran it when, after which sync."""
    return '%s (%s) ran on %s' % (inst, d['type'], '; '.join(
        '%s at %s (%s, last synced %s)' % (r['host'], r['time'], r['outcome'],
                                         format_time(r['last_sync']) if r['last_sync'] else 'never')
        for r in d['runs']))


def shown_rows(rows):
    """The rows a user reads: every outcome, and a `run` (started) record only
    where its board has reported no outcome of that instance (yet)."""
    settled = {(r['instance'], r['host']) for r in rows if r['outcome'] != 'started'}
    return [r for r in rows if r['outcome'] != 'started' or (r['instance'], r['host']) not in settled]


def pending_for(fleet, host, now):
    """Jobs this host still has an instance of to run, decided by the core
    planner on the fleet's copy (the same file the board holds after a sync,
    read by the board's own scanner, core/groups.py)."""
    rnd = plan.hash_rnd(host)
    n = [0]
    tally = [-1, 0, 0]

    def visit(jid, text, cancelled, mine, done_k, asg, hosts):
        if text is None or cancelled:
            return
        j = jobline.parse(text)
        rnk, heard = _standing(j, host, hosts, tally)
        if plan.decide(j, host, now, mine, done_k, rnk, rnd, heard=heard)[0] != plan.IDLE:
            n[0] += 1
    groups.scan(fleet.lines(), host, None, visit, tally)
    return n[0]


def quarantine_by_host(fleet):
    """{host: records in the fleet's quarantine written in its name}
    (a result names its board; an assignment, its leader)."""
    out = {}
    for q in fleet.quarantined():
        f = q.split(': ', 2)
        if len(f) < 3 or not f[1].startswith('unverified '):
            continue
        f = f[2].split()
        if len(f) > 5 and f[1] in ('r', 'a'):
            h = f[2] if f[1] == 'r' else f[5]
            out[h] = out.get(h, 0) + 1
    return out


def quarantine_info(fleet, n=4):
    q = fleet.quarantined()
    return {'count': len(q), 'last': [x[:160] for x in q[-n:]]}


def status_rows(fleet, now=None, dups=None):
    now = int(time.time()) if now is None else now
    dups = duplicates(fleet) if dups is None else dups
    rows = []
    results = fleet.results()
    quar = quarantine_by_host(fleet)
    for d in fleet.devices():
        mine = [r for r in results if r.host == d['id']]
        unverified = [r for r in mine if verify_result(fleet, r) is False]
        st = d.get('status') or {}
        rows.append({
            'id': d['id'], 'port': d.get('port'), 'board': d.get('board'),
            'last_sync': d.get('last_sync'), 'clock_drift_s': d.get('drift'),
            'clock': st.get('clock'),
            'pending': st['pending'] if st.get('pending') is not None else pending_for(fleet, d['id'], now),
            'failed': sum(1 for r in mine if r.outcome == 'err'),
            'missed': sum(1 for r in mine if r.outcome == 'miss'),
            'aborted': sum(1 for r in mine if r.outcome == 'miss' and r.output.startswith('abort')),
            'ok': sum(1 for r in mine if r.outcome == 'ok'),
            'duplicates': sorted(i for i, dd in dups.items() if d['id'] in dd['hosts']),
            'unverified_records': len(unverified) + quar.get(d['id'], 0),
            'quarantined': st.get('quarantined'),
            'trust': (st.get('trust') or {}).get('mode'),
            'refusals': (st.get('trust') or {}).get('refusals') or [],
            'clock_refused': (st.get('trust') or {}).get('clock_refused'),
            'recovered': (st.get('store') or {}).get('recovered') or [],
        })
    return rows


def rollout_states(fleet, now=None):
    """{job id: rollout_state} of the fleet's staged rollouts."""
    now = int(time.time()) if now is None else now
    jobs = [j for j in fleet.jobs() if j.roll is not None]
    if not jobs:
        return {}
    ids = {j.id for j in jobs}
    latest = {}
    for r in fleet.results():
        if r.id in ids:
            o = latest.get((r.id, r.host))
            if o is None or r.rank() > o.rank():
                latest[(r.id, r.host)] = r
    hosts = fleet.hosts()
    return {j.id: rollout_state(j, latest, hosts, now) for j in jobs}


DUPLICATE_NOTE = ('(reported, never hidden: a board runs an `any`/`one` instance when no news of a run has '
                  'reached it; boards that did not sync in between are separate sections and each may run it. '
                  '`companion simulate` gives the odds for a sync schedule)')


def result_filter(hosts=None, jobs=None, since=None, now=None):
    """The test a results row passes for --host (ids), --job (ids or
    instances ID.K) and --since (a UTC time or a duration ago)."""
    now = int(time.time()) if now is None else now
    since = since_time(since, now) if since else None
    for j in jobs or []:
        if not jobline.is_id(j.split('.')[0]):
            raise UserError('--job %s: not a job id (8 characters of 0-9a-v) or instance (ID.K)' % j)

    def keep(r):
        return ((not hosts or r['host'] in hosts) and
                (not jobs or r['job'] in jobs or r['instance'] in jobs) and
                (since is None or r['at'] >= since))
    return keep
