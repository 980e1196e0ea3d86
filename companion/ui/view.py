"""What the fleet page shows, as one JSON-able dict, made by the same queries
the CLI prints (companion/fleetcmd.py: status_rows, duplicates, job_states,
result_rows/shown_rows, plan_rows, quarantine_info, rollout_states): no second
parser, no second rule. A folder the queries refuse (a torn jobs.txt, a
damaged devices/ID.json, no fleet at all) is a `problems` line on the page,
never a traceback."""
import os

from sporadic.core.timefmt import format_time
from companion.errors import UserError
from companion.fleet.folder import Fleet
from companion.fleet import queries as fleetcmd

SPANS = ('1h', '6h', '1d', '7d', '30d')   # the timeline spans the page offers
AHEAD = 86400                             # the planner's look ahead per board
PLAN_PER_BOARD = 12                       # rows of it shown per board
PLAN_BOARDS = 24                          # boards it is shown for unless the page names others
PLAN_LIMIT = 200000                       # rows the planner may make in all (plan --limit)


def stamp(folder):
    """What changes when a sync, a serve, add or cancel changes the folder:
    the (name, size, mtime) of its files and of devices/*.json."""
    out = []
    for name in ('fleet.json', 'jobs.txt', 'results.txt', 'quar.txt', 'actions.py', 'devices'):
        try:
            st = os.stat(os.path.join(folder, name))
            out.append((name, st.st_size, st.st_mtime_ns))
        except OSError:
            out.append((name, None, None))
    try:
        with os.scandir(os.path.join(folder, 'devices')) as it:
            for e in it:
                if e.name.endswith('.json'):
                    st = e.stat()
                    out.append((e.name, st.st_size, st.st_mtime_ns))
    except OSError:
        pass
    out.sort(key=repr)
    return out


def _try(problems, what, fn, default=None):
    """fn() or default, a refusal of the folder's files noted in problems."""
    try:
        return fn()
    except UserError as e:
        msg = ' '.join(str(e).split())
        if msg not in problems:
            problems.append(msg)
        return default


def snapshot(folder, now, span=86400, plan_for=None):
    """The page's data for the fleet folder at time `now` (seconds), the
    timeline over the `span` seconds before it, the planner's next hours
    for the boards plan_for names (default: the first PLAN_BOARDS)."""
    problems = []
    out = {'now': now, 'time': format_time(now), 'span': span, 'fleet': None, 'mode': None,
           'boards': [], 'duplicates': {}, 'jobs': [], 'timeline': [], 'plan': {}, 'quarantine': None,
           'rollouts': {}, 'problems': problems}
    f = Fleet(folder)
    if not f.exists():
        problems.append('%s is not a fleet folder (no fleet.json): run `companion init` there, '
                        'or start `companion --fleet DIR ui`' % f.dir)
        return out
    meta = _try(problems, 'fleet', lambda: f.meta)
    if meta is None:
        return out
    out['fleet'], out['mode'] = meta.get('name'), meta.get('mode')
    dups = _try(problems, 'duplicates', lambda: fleetcmd.duplicates(f), {})
    out['duplicates'] = dups
    out['boards'] = _try(problems, 'boards', lambda: fleetcmd.status_rows(f, now, dups), None)
    if out['boards'] is None:     # the devices alone, as their files say
        out['boards'] = _try(problems, 'devices', lambda: _bare_rows(f), [])
    out['jobs'] = _try(problems, 'jobs', lambda: fleetcmd.job_states(f, now, plan_next=False), [])
    out['timeline'] = _try(problems, 'results', lambda: timeline(f, now, span, dups), [])
    ids = [b['id'] for b in out['boards']]
    shown = [h for h in plan_for if h in ids] if plan_for else ids[:PLAN_BOARDS]
    out['plan'] = _try(problems, 'plan', lambda: next_per_board(f, now, shown), {})
    out['quarantine'] = _try(problems, 'quarantine', lambda: fleetcmd.quarantine_info(f))
    out['rollouts'] = _try(problems, 'rollouts', lambda: fleetcmd.rollout_states(f, now), {})
    never = [b['id'] for b in out['boards'] if b.get('last_sync') is None and b.get('last_broker_contact') is None]
    if never:
        problems.append('%s %s deployed but never synced: nothing of %s is known yet (`companion sync PORT`)' % (
            ', '.join(never[:5]) + (' and %d more' % (len(never) - 5) if len(never) > 5 else ''),
            'was' if len(never) == 1 else 'were', 'it' if len(never) == 1 else 'them'))
    return out


def _bare_rows(f):
    # a board's row when the queries cannot read the job file: what devices/ID.json says
    return [{'id': d['id'], 'board': d.get('board'), 'last_sync': d.get('last_sync'),
             'clock_drift_s': d.get('drift'), 'attention': [('trouble', 'the fleet\'s files cannot be read')]}
            for d in f.devices()]


def timeline(f, now, span, dups):
    """The results shown by `companion results` (shown_rows) from now - span
    to now, each marked with the boards of its duplicate (as `results`
    marks it); a miss carries the reason its board recorded (output)."""
    since = now - span
    rows = [r for r in fleetcmd.shown_rows(fleetcmd.result_rows(f)) if since <= r['at'] <= now]
    for r in rows:
        d = dups.get(r['instance'])
        r['duplicate'] = d['hosts'] if d else []
    return rows


def next_per_board(f, now, shown, ahead=AHEAD, per_board=PLAN_PER_BOARD):
    """{host: the first rows of `companion plan` from now to now + ahead}
    for the hosts in shown: the planner's (plan_rows) on the fleet's job
    file and host list."""
    from companion.fleet.host_list import host_records
    if not shown:
        return {}
    lines = f.lines()
    records = host_records(lines)
    hosts = sorted(set(records) | {d['id'] for d in f.devices()})
    placed = {h: (la, lo) for h, (_, la, lo) in records.items() if la is not None}
    out = {h: [] for h in shown}
    for r in fleetcmd.plan_rows(f.jobs(), hosts, now, now + ahead, PLAN_LIMIT, placed, fleet_dir=f.dir,
                                only=shown):
        rows = out.get(r['host'])
        if rows is not None and len(rows) < per_board:
            r['time'] = format_time(r['at'])
            rows.append(r)
    return out
