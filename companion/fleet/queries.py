"""The fleet queries every view uses (`companion jobs/results/status/plan`,
the demo, the web page): each job's state per board and what each board
does next (the core planner on the fleet's copy), the plan's rows, the
results history, the duplicates of single-run jobs, staged rollouts, each
board's status row and what needs its owner. Plain values in, plain dicts
out: no argparse, no printing; `now` (UTC seconds) is the caller's clock."""
import bisect
import os
import time

from sporadic.core import groups, jobline, leader, plan, rollout
from sporadic.core.timefmt import format_time
from companion.errors import UserError
from companion.fleet.folder import Fleet
from companion.fleet.actions import USER_ACTIONS
from companion.fleet.board_keys import verify_result
from companion.fleet.when import since_time


def job_states(fleet, now=None, plan_next=True):
    """Per job: its text and, per known device, the latest result it reported
    and (plan_next) what it does next (next_for: one scan of the job file
    per device; the fleet page leaves it to its planner rows)."""
    now = int(time.time()) if now is None else now
    latest = {}
    for l in fleet.lines():
        r = jobline.parse(l)
        if isinstance(r, jobline.Result):
            latest[(r.id, r.host)] = r
    devices = [d['id'] for d in fleet.devices()]
    nxt = {h: next_for(fleet, h, now) if plan_next else {} for h in devices}
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
        out.append({'job': j.id, 'line': j.text(), 'words': job_words(j), 'type': j.kind, 'current_instance': k,
                    'next_due': _next_due(j, k, now), 'devices': per})
        if j.roll is not None:
            out[-1]['rollout'] = rollout_state(j, latest, fleet.hosts(), now)
    for jid in fleet.cancelled():
        out.append({'job': jid, 'line': None, 'type': 'cancelled', 'devices': {}})
    return out


DAYS = ('Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday', 'Sunday')
MACROS = {'@yearly': 'every 1 January 00:00', '@annually': 'every 1 January 00:00',
          '@monthly': 'on the 1st of every month 00:00', '@weekly': 'every Sunday 00:00',
          '@daily': 'every day 00:00', '@midnight': 'every day 00:00', '@hourly': 'every hour'}


def job_words(j):
    """A job line in words: "pump on 30 every weekday 06:00 Europe/Berlin on
    boards matching pump, within 1h" (what, when, where)."""
    from sporadic.core.timefmt import format_duration
    when = _when_words(j, format_duration)
    if j.kind == 'who' or j.on:
        who = 'on boards matching %s' % (j.arg if j.kind == 'who' else j.on)
    else:
        who = {'each': 'on every board', 'one': 'on one board (ranked; the next after %s)'
               % format_duration(j.grace) if j.grace else 'on one board',
               'any': 'on any one board (p=%s a %s tick)' % (j.arg, format_duration(j.tick or 60))}.get(j.kind, j.kind)
    return '%s %s %s, within %s' % (' '.join(j.words), when, who, format_duration(j.within))


def _when_words(j, dur):
    if j.cal is None:
        if j.every:
            return 'every %s from %s' % (dur(j.every), format_time(j.t0))
        return 'once at %s' % format_time(j.t0)
    at = j.cal.at
    zone = j.cal.tz or 'UTC'
    if at.startswith(('sunrise', 'sunset')):
        return "at each board's %s" % at
    if at in MACROS:
        return '%s %s' % (MACROS[at], zone)
    f = at.split()
    if len(f) == 5 and f[0].isdigit() and f[1].isdigit() and f[3] == '*':
        hm = '%02d:%02d %s' % (int(f[1]), int(f[0]), zone)
        dom, dow = f[2], f[4]
        if dom == '*' and dow in ('*', '0-6', '0-7'):
            return 'every day ' + hm
        if dom == '*' and dow == '1-5':
            return 'every weekday ' + hm
        if dom == '*' and dow in ('0,6', '6,0', '6-7', '6,7'):
            return 'every weekend day ' + hm
        if dom == '*' and dow.isdigit() and int(dow) <= 7:
            return 'every %s %s' % (DAYS[int(dow)], hm)
        if dow == '*' and dom.isdigit():
            return 'on day %s of every month %s' % (dom, hm)
    return 'at "%s" %s' % (at, zone)


def decisions(fleet, host, now):
    """[(job id, what, k, at)]: plan.decide for each live job of the fleet's
    copy of its file, as board `host` would decide now (its own scanner,
    core/groups.py, and its rank and heard, _standing); `what` IDLE included."""
    rnd = plan.hash_rnd(host)
    out = []
    tally = [-1, 0, 0]

    def visit(jid, text, cancelled, mine, done_k, asg, hosts):
        if text is None or cancelled:
            return
        j = jobline.parse(text)
        rnk, heard = _standing(j, host, hosts, tally)
        what, k, at = plan.decide(j, host, now, mine, done_k, rnk, rnd, heard=heard)[:3]
        out.append((jid, what, k, at))
    groups.scan(fleet.lines(), host, None, visit, tally)
    return out


def next_for(fleet, host, now):
    """{job id: {'instance', 'at', 'time', 'what'}}: what board `host` does next
    about each job and when (decisions): `run` or `miss` (now), `wait` (at its
    due time, or its turn for an `any`/`one`); nothing for a job it will
    never run again."""
    return {jid: {'instance': '%s.%d' % (jid, k), 'at': at, 'time': format_time(at), 'what': what}
            for jid, what, k, at in decisions(fleet, host, now) if what != plan.IDLE and k >= 0}


def _standing(j, host, hosts, tally):
    # plan.decide's rnk and heard for host, as its board finds them (runtime._job)
    if j.kind == 'one':
        return plan.rank(j.id, host, hosts), None
    if j.roll is not None:
        return rollout.wave(j, host, hosts), tuple(tally)
    return None, None


def plan_rows(jobs, hosts, t_from, t_until, limit=100000, placed=None, lat=None, lon=None, fleet_dir=None,
              only=None):
    """What would run where and when from t_from to t_until, every host up
    and synced (`companion plan`, the page's next 24 hours): the rows of
    schedule.schedule for each job over hosts, sorted by time; a sun job's
    hosts each at their own position (lat/lon for every host, else placed
    {host: (lat, lon)} from the host list, else devices/HOST.json of the
    fleet folder at fleet_dir); a calendar job's rows carry its zone's time.
    only: the rows of these hosts alone (a `one` job is still ranked, a
    rollout's waves still made, over all hosts; an each/any host's rows do
    not depend on the others, so only those hosts are scheduled)."""
    from sporadic.desktop import schedule
    rows = []
    only = None if only is None else set(only)
    try:
        for j in jobs:
            sun = j.cal is not None and j.cal.sun()
            alone = only is not None and j.kind != 'one' and j.roll is None
            among = sorted(h for h in hosts if h in only) if alone else hosts
            for pos, hs in (_positions(lat, lon, fleet_dir, among, j, placed or {}) if sun else [(None, among)]):
                if sun:
                    j.cal.place(pos)
                for row in schedule.schedule(j, among, t_from, t_until, limit=limit):
                    if row['host'] in hs and (only is None or row['host'] in only):
                        row['command'] = ' '.join(j.words)
                        if pos is not None:   # where the host's sun was computed
                            row['lat'], row['lon'] = pos
                        if j.cal is not None:
                            row['local'] = _zone_time(j, row['at'])
                        rows.append(row)
    except ValueError as e:
        raise UserError(str(e))
    finally:
        for j in jobs:   # the caller's jobs as they came: placed nowhere
            if j.cal is not None:
                j.cal.place(None)
    rows.sort(key=lambda r: (r['at'], r['instance'], r.get('rank', 0), r['host']))
    return rows


def _zone_time(job, t):
    # "2026-03-30T06:00 Europe/Berlin": the job's zone clock at UTC instant t
    from sporadic.core import calendar
    return format_time(calendar.local_time(job.cal.s, t))[:-1] + ' ' + (job.cal.tz or 'UTC')


def _positions(lat, lon, fleet_dir, hosts, job, placed):
    """[(pos, {host})] for a sun job: lat/lon for every host, else each host's
    position from the plan file's host list (`.h HOST SINCE LAT LON`, written by
    deploy/image/flash --lat --lon), else from devices/HOST.json of the fleet folder."""
    if lat is not None:
        return [((lat, lon), set(hosts))]
    fleet = Fleet(fleet_dir or '.')
    out = []
    for h in hosts:
        if not plan.eligible(job, h):
            continue
        pos = placed.get(h)
        if pos is None:
            info = fleet.device(h) if os.path.isdir(fleet.dir) else None
            if info and info.get('lat') is not None:
                pos = (info['lat'], info['lon'])
        if pos is None:
            raise UserError('job %s (at=%s) needs the position of %s: deploy it with --lat --lon, '
                            'or give plan --lat --lon' % (job.id, job.cal.at, h))
        out.append((pos, {h}))
    return out


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
            n = bisect.bisect_right(syncs[host], at)      # its syncs at or before the run
            runs.append({'host': host, 'at': at, 'time': format_time(at), 'outcome': outcome,
                         'last_sync': syncs[host][n - 1] if n else None})
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
    """Jobs this host still has an instance of to run (decisions: the core
    planner on the fleet's copy, the same file the board holds after a sync)."""
    return sum(1 for d in decisions(fleet, host, now) if d[1] != plan.IDLE)


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
    by_host = {}
    for r in fleet.results():
        by_host.setdefault(r.host, []).append(r)
    quar = quarantine_by_host(fleet)
    actions_at = _mtime(fleet.path(USER_ACTIONS))
    dups_of = {}
    for i, dd in dups.items():
        for h in set(dd['hosts']):
            dups_of.setdefault(h, []).append(i)
    for d in fleet.devices():
        mine = by_host.get(d['id'], [])
        unverified = [r for r in mine if verify_result(fleet, r) is False]
        st = d.get('status') or {}
        rows.append({
            'id': d['id'], 'port': d.get('port'), 'board': d.get('board'),
            'last_sync': d.get('last_sync'), 'clock_drift_s': d.get('drift'),
            'last_broker_contact': d.get('broker_contact'),
            'clock': st.get('clock'),
            'pending': st['pending'] if st.get('pending') is not None else pending_for(fleet, d['id'], now),
            'failed': sum(1 for r in mine if r.outcome == 'err'),
            'missed': sum(1 for r in mine if r.outcome == 'miss'),
            'aborted': sum(1 for r in mine if r.outcome == 'miss' and r.output.startswith('abort')),
            'ok': sum(1 for r in mine if r.outcome == 'ok'),
            'duplicates': sorted(dups_of.get(d['id'], ())),
            'unverified_records': len(unverified) + quar.get(d['id'], 0),
            'quarantined': st.get('quarantined'),
            'trust': (st.get('trust') or {}).get('mode'),
            'refusals': (st.get('trust') or {}).get('refusals') or [],
            'clock_refused': (st.get('trust') or {}).get('clock_refused'),
            'recovered': (st.get('store') or {}).get('recovered') or [],
            'deployed': provisioned_at(d),
            'usual_interval_s': usual_interval(d.get('syncs') or []),
            # own records the board dropped for want of flash: those the
            # companion counted (syncer.outbox) and those it has not read yet
            'results_dropped': d.get('results_dropped', 0) + ((st.get('store') or {}).get('outbox_dropped') or 0),
        })
        rows[-1]['attention'] = attention(rows[-1], d, now, actions_at)
    return rows


def _mtime(path):
    try:
        return int(os.stat(path).st_mtime)
    except OSError:
        return None


def provisioned_at(d):
    """When the board was last given its files (deploy, image or flash), or None."""
    t = [d[k] for k in ('deployed', 'imaged', 'flashed') if d.get(k) is not None]
    return max(t) if t else None


def usual_interval(syncs):
    """A board's usual time between syncs (the median gap of its recorded
    sync times, seconds), or None with fewer than two syncs on record."""
    gaps = sorted(b - a for a, b in zip(syncs, syncs[1:]) if b > a)
    return gaps[len(gaps) // 2] if gaps else None


OVERDUE_FACTOR = 2      # not synced in twice its usual interval: late


def attention(row, d, now, actions_at=None):
    """Why a board needs its owner (status_rows' row, its devices/ID.json d):
    [(kind, text)], kind 'late' (not synced in OVERDUE_FACTOR times its usual
    interval, or a sync that broke off), 'redeploy' (the fleet's actions.py
    changed since its deploy; a board of another fleet's key), 'trouble'
    (refused lines, a refused clock, a recovered store, unverified records);
    [] when none."""
    out = []
    last, every = row['last_sync'], row['usual_interval_s']
    heard = max(last or 0, row.get('last_broker_contact') or 0) or None     # a broker's word counts as contact
    if heard is None:
        out.append(('late', 'never synced since it was deployed: `companion sync PORT`'))
    elif every and now - heard > OVERDUE_FACTOR * every:
        out.append(('late', 'not synced for %s, usually every %s' % (duration_text(now - heard), duration_text(every))))
    if last is not None and d.get('complete') is False:
        out.append(('late', 'its last sync did not finish (it broke off, or runs now): sync it again'))
    if actions_at is not None and row['deployed'] is not None and actions_at > row['deployed']:
        out.append(('redeploy', "the fleet's actions.py changed after its deploy: `companion deploy PORT`"))
    if row['quarantined']:
        last = row['refusals'][-1] if row['refusals'] else None
        out.append(('trouble', 'refused %d line(s)%s' % (row['quarantined'], '; last: %s' % str(last)[:120] if last else '')))
    if row['clock_refused']:
        out.append(('trouble', str(row['clock_refused'])))
    if row['unverified_records']:
        out.append(('trouble', '%d record(s) in its name do not verify' % row['unverified_records']))
    for note in row['recovered']:
        out.append(('trouble', 'store: %s' % note))
    return out


def duration_text(s):
    """90061 -> '1d 1h', 3600 -> '1h', 42 -> '42s': two units at most."""
    s = int(s)
    parts = []
    for unit, n in (('d', 86400), ('h', 3600), ('m', 60), ('s', 1)):
        if s >= n or (unit == 's' and not parts):
            parts.append('%d%s' % (s // n, unit))
            s %= n
        if len(parts) == 2:
            break
    return ' '.join(parts)


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
