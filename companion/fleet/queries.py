"""Fleet verbs: init, add, cancel, jobs, results, status, keys (the fleet
folder), deploy, sync, net (through a link) and serve (boards sync to this
companion). Verbs call the fleet's record operations (companion/fleet/folder.py),
the sync library (companion/sync/syncer.py) and the core; they never parse bytes
themselves."""
import bisect
import json
import os
import sys
import time

from sporadic.core import groups, jobline, leader, plan, rollout
from sporadic.desktop import merging
from sporadic.core.timefmt import format_time
from sporadic.core.timeutil import parse_duration
from companion.errors import UserError, console
from companion.fleet.folder import USER_ACTIONS, Fleet, add_job, cancel_job, verify_result
from companion.fleet.provision import DEFAULT_SYNC_PORT


def fleet_of(args, require=True):
    f = Fleet(args.fleet)
    return f.require() if require else f


# -- init / add / cancel ------------------------------------------------------------

def cmd_init(args):
    f = fleet_of(args, require=False)
    os.makedirs(f.dir, exist_ok=True)
    meta, pub = f.init(args.name, args.insecure)
    print('fleet %r in %s (%s)' % (meta['name'], f.dir, meta['mode']))
    if pub:
        print('key pair: keys/fleet.pem (private, mode 0600, never leaves this folder), keys/fleet.pub')
    else:
        print('INSECURE fleet: jobs are not signed and boards accept any record. For bench work only.')
    return 0


def cmd_add(args):
    f = fleet_of(args)
    now = int(time.time())
    j = add_job(f, args.line, now)
    print(j.id)
    if j.cal is None and j.t0 < now - j.within:   # a calendar series starts anew each time
        print('note: its first instance is already past its window; it will be recorded as missed',
              file=sys.stderr)
    from companion.fleet import zones
    w = zones.job_warning(j, now)
    if w:
        print('warning: ' + w, file=sys.stderr)
    return 0


def cmd_cancel(args):
    f = fleet_of(args)
    for jid in args.ids:
        cancel_job(f, jid)
        print('cancelled %s' % jid)
    return 0


# -- jobs / results / status ----------------------------------------------------------

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
                plan.position = pos
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
        plan.position = None
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


def _next_text(n):
    if not n:
        return ''
    if n['what'] == plan.WAIT:
        return ', next %s at %s' % (n['instance'], n['time'])
    return ', %s %s now' % ({plan.RUN: 'runs', plan.ABORT: 'aborts'}.get(n['what'], 'records a miss of'),
                            n['instance'])


def cmd_jobs(args):
    f = fleet_of(args)
    rows = job_states(f)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    from rich.table import Table
    t = Table(title='jobs in %s (per board: its last result; what it does next, as planned on the fleet\'s copy)'
              % f.meta['name'])
    t.add_column('id')
    t.add_column('job')
    t.add_column('devices')
    for r in rows:
        devs = '; '.join('%s: %s%s' % (h, (v.get('instance', '') + ' ' + v['outcome']).strip(), _next_text(v.get('next')))
                         for h, v in sorted(r['devices'].items()))
        if r.get('rollout'):
            devs = 'rollout ' + rollout_text(r['rollout']) + '; ' + devs
        t.add_row(r['job'], r['line'] or '(cancelled)', devs)
    console().print(t)
    if not f.devices():
        print('no board deployed yet: `companion deploy PORT` then `companion sync PORT`')
    return 0


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


def since_time(text, now=None):
    """--since: a UTC time (2026-12-01T06:00Z) or a duration ago (2d, 90m)."""
    from sporadic.core.timeutil import parse_time
    now = int(time.time()) if now is None else now
    try:
        return now - parse_duration(text)
    except ValueError:
        pass
    try:
        return parse_time(text)
    except ValueError:
        raise UserError('--since %s: give a UTC time (2026-12-01T06:00Z) or a duration ago (2d, 90m)' % text)


def result_filter(args):
    """The rows --host, --job (an id or an instance ID.K) and --since keep."""
    since = since_time(args.since) if args.since else None
    for j in args.job or []:
        if not jobline.is_id(j.split('.')[0]):
            raise UserError('--job %s: not a job id (8 characters of 0-9a-v) or instance (ID.K)' % j)

    def keep(r):
        return ((not args.host or r['host'] in args.host) and
                (not args.job or r['job'] in args.job or r['instance'] in args.job) and
                (since is None or r['at'] >= since))
    return keep


def cmd_results(args):
    f = fleet_of(args)
    keep = result_filter(args)
    dups = duplicates(f)
    rows = [r for r in shown_rows(result_rows(f)) if keep(r)]
    for r in rows:
        d = dups.get(r['instance'])
        r['duplicate'] = d['hosts'] if d else []
    dups = {i: d for i, d in dups.items() if any(keep(dict(r, job=d['job'], instance=i)) for r in d['runs'])}
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    from rich.table import Table
    t = Table(title='results')
    for c in ('time', 'instance', 'host', 'outcome', 'output'):
        t.add_column(c)
    for r in rows:
        flag = '' if r['verified'] is not False else ' [UNVERIFIED]'
        if r['duplicate']:
            flag += ' [DUPLICATE]'
        t.add_row(r['time'], r['instance'], r['host'], r['outcome'] + flag, r['output'])
    c = console()
    c.print(t)
    if not rows:
        c.print('no results%s yet: a board reports what it ran at its next sync (`companion sync PORT`); '
                '`companion jobs` shows when each board runs each job next'
                % (' matching' if args.host or args.job or args.since else ''), markup=False)
    if dups:
        c.print('duplicates (single-run instances that ran on more than one board):', markup=False)
        for i, d in dups.items():
            c.print('  ' + duplicate_text(i, d), markup=False)
        c.print(DUPLICATE_NOTE, markup=False)
    return 0


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
    if last is None:
        out.append(('late', 'never synced since it was deployed: `companion sync PORT`'))
    elif every and now - last > OVERDUE_FACTOR * every:
        out.append(('late', 'not synced for %s, usually every %s' % (duration_text(now - last), duration_text(every))))
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


def cmd_status(args):
    f = fleet_of(args)
    dups = duplicates(f)
    rows = status_rows(f, dups=dups)
    insecure = f.insecure
    rollouts = rollout_states(f)
    if args.json:
        print(json.dumps({'fleet': f.meta['name'], 'mode': f.meta.get('mode'), 'devices': rows,
                          'duplicates': dups, 'rollouts': rollouts,
                          'quarantine': quarantine_info(f)}, indent=1))
        return 0
    from rich.table import Table
    c = console()
    if insecure:
        c.print('[bold red]INSECURE FLEET: records are not signed; any peer can inject jobs.[/]')
    t = Table(title='devices of %s' % f.meta['name'])
    for col in ('id', 'last sync', 'drift s', 'clock', 'pending', 'ok', 'failed', 'missed', 'aborted', 'dups',
                'unverified'):
        t.add_column(col)
    for r in rows:
        t.add_row(r['id'], format_time(r['last_sync']) if r['last_sync'] else 'never',
                  '%+.1f' % r['clock_drift_s'] if r['clock_drift_s'] is not None else '-',
                  str(r['clock'] or '-'), str(r['pending'] if r['pending'] is not None else '-'),
                  str(r['ok']), str(r['failed']), str(r['missed']), str(r['aborted']), str(len(r['duplicates'])),
                  ('[red]%d[/]' % r['unverified_records']) if r['unverified_records'] else '0')
    c.print(t)
    for r in rows:
        for kind, why in r['attention']:   # late or due a redeploy (the rest is said below)
            if kind in ('late', 'redeploy'):
                from rich.markup import escape
                c.print('[yellow]%s[/] %s' % (escape(r['id']), escape(why)))
        if r['quarantined']:
            c.print('[yellow]%s refused %d line(s)[/] (trust: %s); last:' % (r['id'], r['quarantined'], r['trust'] or '-'))
            for q in r['refusals']:
                c.print('  ' + q, markup=False)
        if r['clock_refused']:
            c.print('[yellow]%s[/] %s' % (r['id'], r['clock_refused']), markup=True)
        for note in r['recovered']:   # what its store's open found (docs/device.md#stamps)
            c.print('[yellow]%s[/] store: %s' % (r['id'], note), markup=True)
    for jid, st in rollouts.items():   # staged rollouts, per wave (docs/jobline.md#staged-rollouts)
        c.print('rollout ' + rollout_text(st), markup=False)
    q = quarantine_info(f)
    if q['count']:
        c.print('[yellow]the fleet quarantined %d record(s)[/] boards brought that do not verify '
                '(%s: never merged, never sent on); last:' % (q['count'], f.path('quar.txt')))
        for x in q['last']:
            c.print('  ' + x, markup=False)
    if dups:
        c.print('[yellow]duplicates detected[/] (single-run instances that ran on more than one board):')
        for i, d in dups.items():
            c.print('  ' + duplicate_text(i, d), markup=False)
        c.print(DUPLICATE_NOTE, markup=False)
    return 0


DUPLICATE_NOTE = ('(reported, never hidden: a board runs an `any`/`one` instance when no news of a run has '
                  'reached it; boards that did not sync in between are separate sections and each may run it. '
                  '`companion simulate` gives the odds for a sync schedule)')


# -- deploy / sync -----------------------------------------------------------------

def board_port(args):
    """The port the user gave, or the one USB port that looks like a board."""
    if args.port:
        return args.port
    from companion.link.serial import choose_port
    from companion.link.base import LinkError
    try:
        return choose_port()
    except LinkError as e:
        raise UserError(str(e)) from e


def cmd_deploy(args):
    from companion.link import open as links
    from companion.fleet import provision
    from companion.sync import syncer
    from companion.link.base import LinkError
    f = fleet_of(args)
    if args.board:
        syncer.known_board(args.board)
    if args.id is not None:
        try:
            jobline.check_host(args.id)
        except jobline.ParseError as e:
            raise UserError(str(e)) from None
    net = provision.network_config(args.sync_port, args.peer, args.wifi, mqtt_of(args))
    pos = provision.position_config(args.lat, args.lon)
    args.port = board_port(args)
    if not links.is_serial(args.port):
        raise UserError('deploy writes files through the REPL: give the board\'s serial port '
                        '(/dev/ttyUSB0, COM3), not the network address %s' % args.port)
    try:
        info = syncer.deploy(f, args.port, args.id, board=args.board, network=net,
                             compile=not args.no_compile, progress=not args.quiet, position=pos,
                             force=args.force)
    except LinkError as e:
        raise UserError(deploy_failure(args.port, e)) from e
    print('deployed %s to %s (%d files, %d bytes%s%s%s)' % (
        info['id'], args.port, info['files'], info['bytes'],
        '; sporadic is frozen in its firmware' if info['frozen'] else '',
        '; syncs on port %d' % info['network'] if info['network'] else '',
        '; syncs through %s' % args.mqtt if args.mqtt else ''))
    if info.get('moved_from'):
        print('moved %s from its other fleet (%s): its jobs and results of that fleet were cleared'
              % (info['id'], info['moved_from']))
    if info['note']:
        print(info['note'], file=sys.stderr)
    return 0


def deploy_failure(port, e):
    """One line for a link that failed opening the board or during deploy."""
    if getattr(e, 'at_open', False):
        return str(e)
    return ('deploy to %s broke off: %s (run it again: a file is replaced whole or not at all, '
            'and the board keeps its jobs)' % (port, e))


def cmd_sync(args):
    from companion.sync import syncer
    from companion.link.base import LinkError
    f = fleet_of(args)
    if args.port and args.port.startswith(('mqtt://', 'mqtts://')):
        from companion.sync import mqtt
        args.mqtt = args.port
        known = set(duplicates(f))
        mqtt.sync(f, mqtt_of(args), log=lambda t: print(t, flush=True))
        for i, d in duplicates(f).items():
            if i not in known:
                print('duplicate: ' + duplicate_text(i, d))
        return 0
    for o in ('mqtt_user', 'mqtt_password', 'mqtt_ca', 'mqtt_topic'):
        if getattr(args, o, None) is not None:
            raise UserError('--%s goes with a broker: companion sync mqtt://HOST[:PORT]' % o.replace('_', '-'))
    args.port = board_port(args)
    known = set(duplicates(f))
    try:
        rep = syncer.sync(f, args.port, progress=not args.quiet)
    except LinkError as e:   # the link did not open (sync itself reports a break-off)
        raise UserError(str(e)) from e
    print('synced %s: sent %d line(s), received %d line(s), %d new result(s); %d bytes on the wire; clock drift %+.1f s'
          % (rep['id'], rep['lines_sent'], rep['lines_received'], rep['new_results'], rep['bytes'], rep['drift']))
    for q in rep.get('refused', []):
        print('refused by board: %s' % q)
    for q in rep.get('flagged', []):
        print('flagged: %s' % q)
    for i, d in duplicates(f).items():   # what this sync brought to light (`status` lists them all)
        if i not in known:
            print('duplicate: ' + duplicate_text(i, d))
    return 0


def cmd_net(args):
    """A board's network status over TCP (its `net?` answer): the leader
    it follows, the hosts it hears, its counters, duplicates it found."""
    from companion.fleet import folder as fleet
    from companion.link import open as links
    from companion.link.base import LinkError
    f = fleet_of(args)
    try:
        link = links.open_link(args.address, fleet.secret_for(f), timeout=args.timeout)
    except LinkError as e:
        raise UserError('cannot reach %s: %s' % (args.address, e))
    try:
        st = json.loads(link.call('net?'))
    except (LinkError, ValueError) as e:
        raise UserError('%s did not answer net?: %s' % (args.address, e))
    finally:
        link.close()
    if args.json:
        print(json.dumps(st, indent=1, sort_keys=True))
        return 0
    print('%s: leader %s (term %s), hears %s; syncs %d ok, %d failed%s' % (
        st.get('id'), st.get('leader') or '-', st.get('term', '-'), ', '.join(st.get('alive') or []) or 'nobody',
        st['sync']['syncs'], st['sync']['sync_fail'],
        '; last error: ' + st['last_error'] if st.get('last_error') else ''))
    for d in st.get('duplicates') or []:
        print('duplicate: %s' % d)
    return 0


def cmd_keys(args):
    f = fleet_of(args)
    if f.insecure:
        raise UserError('this fleet is insecure (no keys); make a signed fleet with `companion init`')
    from companion.fleet import keys
    if args.action == 'rotate':
        rec = keys.rotate(f.dir)
        # batches under the old key are refused from now on: re-sign the live
        # lines and keep the chain of .k records for boards that missed one
        old = f.lines()
        live = [l for l in old if not l.startswith(('.b ', '.k '))]
        chain = [l for l in old if l.startswith('.k ')]
        f.write_lines(merging.merge(live + chain + [rec] + keys.sign_lines(f.dir, live)))
        print('rotated to key %s; boards take it at their next sync and refuse the old key after' % keys.keyid(f.dir))
    else:
        print('%s  %s' % (keys.keyid(f.dir), keys.load_pub(f.dir)[:40] + '...'))
    return 0


def cmd_serve(args):
    """Listen so that boards that wake up sync to this companion (a sleeping
    board cannot be reached): each authenticates with its own secret."""
    from companion.sync import syncer
    from companion.link import tcp as transport_tcp
    f = fleet_of(args)
    if args.seconds is not None and args.seconds <= 0:
        raise UserError('--for %g: want a number of seconds above 0' % args.seconds)
    if args.mqtt:
        from companion.sync import mqtt
        cfg = mqtt_of(args)
        if args.every <= 0:
            raise UserError('--every %g: want a number of seconds above 0' % args.every)
        print('serving fleet %s through %s every %g s (Ctrl-C to stop)' % (f.dir, args.mqtt, args.every), flush=True)
        try:
            mqtt.serve(f, cfg, args.every, None if args.seconds is None else time.time() + args.seconds,
                       log=lambda t: print(t, flush=True))
        except KeyboardInterrupt:
            pass
        return 0
    if not 0 <= args.port < 65536:
        raise UserError('--port %d: want a port number 1..65535 (0: one the system chooses)' % args.port)
    try:
        server = syncer.fleet_server(f, args.port, args.bind, log=print)
    except OSError as e:
        raise UserError('cannot listen on %s:%d: %s' % (args.bind, args.port, e.strerror or e)) from None
    # the port bound (--port 0: one the system chose)
    print('serving fleet %s on %s:%d (Ctrl-C to stop)' % (f.dir, args.bind, server.sock.getsockname()[1]),
          flush=True)
    try:
        transport_tcp.serve(server, None if args.seconds is None else time.time() + args.seconds)
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0


def add_network_args(p):
    """--sync-port, --peer, --wifi: deploy, image and flash (docs/wifi.md)."""
    p.add_argument('--sync-port', type=int, default=None,
                   help='run the network loop: TCP sync server and UDP heartbeats on this port '
                        '(default 7370 when --peer or --wifi is given; none: no network)')
    p.add_argument('--peer', action='append', default=[], metavar='HOST:PORT',
                   help='a board (or `companion serve`) to sync with on its own; repeatable')
    p.add_argument('--wifi', metavar='SSID:KEY', help='the Wi-Fi network the board joins')
    add_mqtt_args(p, 'the MQTT broker the board syncs through (docs/mqtt.md); a board other than '
                     'the unix one needs --wifi too')


def add_mqtt_args(p, what):
    """--mqtt URL and the broker's credentials: deploy, image, flash, serve."""
    p.add_argument('--mqtt', metavar='mqtt://HOST[:PORT]', help=what)
    p.add_argument('--mqtt-user', metavar='USER', help='user name on the broker')
    p.add_argument('--mqtt-password', metavar='PASSWORD', help='password on the broker')
    p.add_argument('--mqtt-ca', metavar='FILE', help='CA certificate (PEM) the broker\'s TLS certificate is checked '
                   'with (mqtts://)')
    p.add_argument('--mqtt-topic', metavar='PREFIX', help='topic prefix (default sporadic/ + the fleet key\'s id)')


def mqtt_of(args):
    """cfg['mqtt'] from the --mqtt options, or None."""
    from companion.fleet import provision
    if not getattr(args, 'mqtt', None):
        for o in ('mqtt_user', 'mqtt_password', 'mqtt_ca', 'mqtt_topic'):
            if getattr(args, o, None) is not None:
                raise UserError('--%s goes with --mqtt URL' % o.replace('_', '-'))
        return None
    return provision.mqtt_config(args.mqtt, args.mqtt_user, args.mqtt_password, args.mqtt_ca, args.mqtt_topic)


def add_position_args(p):
    """--lat, --lon: deploy, image and flash (sunrise/sunset jobs, docs/jobline.md)."""
    p.add_argument('--lat', type=float, default=None, help="the board's latitude, degrees north (sunrise/sunset jobs)")
    p.add_argument('--lon', type=float, default=None, help="the board's longitude, degrees east")


def add_parsers(sub):
    s = sub.add_parser('keys', help='show the fleet key, or `keys rotate` to move the fleet to a new key')
    s.add_argument('action', nargs='?', choices=['show', 'rotate'], default='show')
    s.set_defaults(func=cmd_keys)

    s = sub.add_parser('init', help='make a fleet folder (job file, devices, key pair)')
    s.add_argument('--name')
    s.add_argument('--insecure', action='store_true', help='no signatures (bench work only; printed loudly)')
    s.set_defaults(func=cmd_init)

    s = sub.add_parser('add', help="add a job line ('+10m' times are resolved now); prints its id")
    s.add_argument('line')
    s.set_defaults(func=cmd_add)

    s = sub.add_parser('cancel', help='cancel jobs by id')
    s.add_argument('ids', nargs='+', metavar='ID')
    s.set_defaults(func=cmd_cancel)

    s = sub.add_parser('jobs', help='jobs with their state per device')
    s.add_argument('--json', action='store_true')
    s.set_defaults(func=cmd_jobs)

    s = sub.add_parser('results', help='what ran where (and every duplicate of a single-run job)')
    s.add_argument('--json', action='store_true')
    s.add_argument('--host', action='append', metavar='ID', help='only this board (repeatable)')
    s.add_argument('--job', action='append', metavar='ID[.K]', help='only this job or instance (repeatable)')
    s.add_argument('--since', metavar='TIME', help='only results from this UTC time, or this long ago (2d)')
    s.set_defaults(func=cmd_results)

    s = sub.add_parser('status', help='each device: last sync, drift, pending, failed, missed, duplicates')
    s.add_argument('--json', action='store_true')
    s.set_defaults(func=cmd_status)

    s = sub.add_parser('deploy', help='put the firmware, identity and secret on a board')
    s.add_argument('port', nargs='?', help='serial port (default: the one USB port that looks like a board)')
    s.add_argument('--id', help='host id (default: derived from the board unique id)')
    s.add_argument('--board', default=None, help='board folder name (default: ask the board)')
    add_network_args(s)
    add_position_args(s)
    s.add_argument('--no-compile', action='store_true', help='copy .py sources instead of .mpy')
    s.add_argument('--force', action='store_true',
                   help='move a board deployed from another fleet into this one (clears its jobs and results)')
    s.add_argument('-q', '--quiet', action='store_true')
    s.set_defaults(func=cmd_deploy)

    s = sub.add_parser('net', help="a board's network status over TCP: leader, hosts heard, syncs, duplicates")
    s.add_argument('address', metavar='HOST:PORT')
    s.add_argument('--json', action='store_true')
    s.add_argument('--timeout', type=float, default=5.0)
    s.set_defaults(func=cmd_net)

    s = sub.add_parser('sync', help='merge both ways with a board (serial port or HOST[:PORT]) or a broker '
                       '(mqtt://HOST[:PORT])')
    s.add_argument('port', nargs='?', help='serial port, HOST[:PORT] or mqtt://HOST[:PORT] (default: the one '
                   'USB port that looks like a board)')
    s.add_argument('--mqtt-user', metavar='USER', help='user name on the broker')
    s.add_argument('--mqtt-password', metavar='PASSWORD', help='password on the broker')
    s.add_argument('--mqtt-ca', metavar='FILE', help='CA certificate (PEM) for an mqtts:// broker')
    s.add_argument('--mqtt-topic', metavar='PREFIX', help='topic prefix (default sporadic/ + the fleet key\'s id)')
    s.add_argument('-q', '--quiet', action='store_true')
    s.set_defaults(func=cmd_sync)

    s = sub.add_parser('serve', help='listen so that boards that wake up sync to this companion')
    s.add_argument('--port', type=int, default=DEFAULT_SYNC_PORT,
                   help='TCP port (default %d)' % DEFAULT_SYNC_PORT)
    s.add_argument('--bind', default='0.0.0.0', help='address to listen on (default all)')
    s.add_argument('--for', dest='seconds', type=float, default=None, help='stop after this many seconds')
    add_mqtt_args(s, 'sync through this MQTT broker instead of listening (docs/mqtt.md)')
    s.add_argument('--every', type=float, default=5.0, help='with --mqtt: seconds between two visits (default 5)')
    s.set_defaults(func=cmd_serve)
