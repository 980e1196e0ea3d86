"""The core's verbs: check, merge, plan (the job-line contract: sporadic.core
jobline / merge / plan). argparse and printing only. A git merge driver
starts one `companion merge` per file: this module imports neither the
fleet folder (companion.fleet.folder) nor the other verb groups at load."""
import json
import os
import sys

from sporadic.core import jobline
from sporadic.desktop import merging
from sporadic.core.timefmt import format_time
from companion.errors import UserError, console
from companion.fleet.atomic import atomic_write
from companion.fleet.mergefiles import read_lines, merged_text
from companion.fleet.when import parse_when
from companion.fleet.zonerule import zone_rule
from companion.commands.options import add_position_args


def add_parsers(sub):
    s = sub.add_parser('check', help='lint job-line files: FILE:LINE: reason per bad line')
    s.add_argument('files', nargs='+', metavar='FILE')
    s.add_argument('-q', '--quiet', action='store_true')
    s.set_defaults(func=cmd_check)

    s = sub.add_parser('merge', help='merge job-line files (also a git merge driver)')
    s.add_argument('files', nargs='+', metavar='FILE')
    s.add_argument('-o', '--output')
    s.add_argument('--workers', type=int, default=None,
                   help='1: merge in this process (default: the two halves of the id space side by side, '
                        'given two CPUs)')
    s.set_defaults(func=cmd_merge)

    s = sub.add_parser('plan', help='what would run where and when, every host up and synced')
    s.add_argument('file')
    s.add_argument('--hosts', default=None, help="comma-separated host ids (default: the file's host list)")
    s.add_argument('--from', dest='from_', default='now')
    s.add_argument('--until', required=True)
    s.add_argument('--json', action='store_true')
    s.add_argument('--limit', type=int, default=100000, help='refuse plans with more rows')
    add_position_args(s)
    s.set_defaults(func=cmd_plan)


def zone_warnings(path, lines, now):
    """'FILE:LINE: warning: ...' for each calendar job whose zone's tzdb table differs
    from the POSIX rule its board follows (companion/fleet/zones.py job_warning)."""
    from companion.fleet import zones
    out = []
    for n, line in enumerate(lines, 1):
        if 'tz=' not in line:
            continue
        try:
            r = jobline.parse(line, zone_rule=zone_rule)
        except jobline.ParseError:
            continue   # reported as an error
        w = zones.job_warning(r, now) if isinstance(r, jobline.Job) else None
        if w:
            out.append('%s:%d: warning: %s' % (path, n, w))
    return out


def action_errors(path, lines, fleet_dir):
    """'FILE:LINE: no board of this fleet ... has an action ...' for each job whose
    action no board of the fleet at fleet_dir runs (fleet.action_problem); none
    when fleet_dir is not a fleet folder (no boards to ask)."""
    from companion.fleet.folder import Fleet, action_table, action_problem
    fleet = Fleet(fleet_dir)
    if not fleet.exists():
        return []
    table = None
    out = []
    for n, line in enumerate(lines, 1):
        try:
            r = jobline.parse(line, zone_rule=zone_rule)
        except jobline.ParseError:
            continue   # reported as an error
        if isinstance(r, jobline.Job):
            table = action_table(fleet) if table is None else table
            why = action_problem(r, table)
            if why:
                out.append('%s:%d: %s' % (path, n, why))
    return out


def _relative(resolve, line, now):
    try:
        return resolve(line, now) if '+' in line or 'now' in line else line
    except UserError:
        return line      # the parse reports it


def cmd_check(args):
    errors = []
    warnings = []
    n = 0
    now = int(args.clock())
    from companion.fleet.folder import resolve_relative
    for path in args.files:
        lines = read_lines(path)
        # a line `add -f` takes: '+10m' and 'now' are resolved as it resolves them
        lines = [_relative(resolve_relative, l, now) for l in lines]
        for _ in merging.canonical_lines(lines, path, errors, zone_rule=zone_rule):
            n += 1
        if os.path.basename(path) == 'jobs.txt':   # a fleet's: its lines must be signed (fleet.py)
            from companion.fleet.folder import signature_errors
            errors += signature_errors(path, lines)
        warnings += zone_warnings(path, lines, now)
        acts = action_errors(path, lines, args.fleet)
        n -= len(acts)
        errors += acts
    for e in errors + warnings:
        print(e)
    if not args.quiet:
        print('%d good record(s), %d bad line(s)' % (n, len(errors)) +
              (', %d warning(s)' % len(warnings) if warnings else ''), file=sys.stderr)
    return 1 if errors else 0


def fleet_signed(args):
    """merge's `signed` test in a signed fleet folder (--fleet, or where git
    runs its merge driver), from the files' batch records; else None."""
    if not os.path.isfile(os.path.join(args.fleet, 'fleet.json')):
        return None
    from companion.fleet.folder import Fleet
    from companion.fleet.mergefiles import batch_records
    return Fleet(args.fleet).signed_test(batch_records(args.files))


def cmd_merge(args):
    errors = []
    conflicts = []
    if args.workers is not None and args.workers < 1:
        raise UserError('--workers %d: want 1 or more' % args.workers)
    text = merged_text(args.files, errors, conflicts, workers=args.workers, signed=fleet_signed(args))
    for e in errors + conflicts:
        print(e, file=sys.stderr)
    if args.output:
        try:
            atomic_write(args.output, text)
        except OSError as e:
            raise UserError('cannot write %s: %s' % (args.output, e.strerror or e)) from None
    else:
        for part in text:
            sys.stdout.write(part)
    return 1 if errors else 0


def cmd_plan(args):
    from companion.fleet.folder import host_records
    errors = []
    lines = merging.merge((args.file, read_lines(args.file)), errors=errors, zone_rule=zone_rule)
    jobs = [r for r in map(jobline.parse, lines) if isinstance(r, jobline.Job)]
    for e in errors:
        print(e, file=sys.stderr)
    records = host_records(lines)
    if args.hosts is None:   # the file's host list
        hosts = sorted(records)
        if not hosts:
            raise UserError('%s holds no host list (.h lines): give --hosts a,b,c' % args.file)
    else:
        hosts = [h for h in args.hosts.split(',') if h]
    placed = {h: (la, lo) for h, (_, la, lo) in records.items() if la is not None}
    for h in hosts:
        try:
            jobline.check_host(h)
        except jobline.ParseError as e:
            raise UserError(str(e))
    from companion.fleet.provision import position_config
    position_config(args.lat, args.lon)
    if args.limit < 1:
        raise UserError('--limit %d: want 1 or more rows' % args.limit)
    now = int(args.clock())
    t_from = parse_when(args.from_, now)
    t_until = parse_when(args.until, now)
    if t_until <= t_from:
        raise UserError('--until must be after --from')
    from companion.fleet.queries import plan_rows
    rows = plan_rows(jobs, hosts, t_from, t_until, args.limit, placed, args.lat, args.lon, args.fleet)
    if args.json:
        for r in rows:
            r['time'] = format_time(r['at'])
        print(json.dumps(rows, indent=1))
        return 0
    from rich.table import Table
    t = Table(title='plan %s .. %s for %s' % (format_time(t_from), format_time(t_until), ','.join(hosts)))
    local = any('local' in r for r in rows)
    for c in ('time',) + (('zone time',) if local else ()) + ('instance', 'host', 'state', 'command'):
        t.add_column(c)
    for r in rows:
        state = r['state']
        if state == 'standby':
            state = 'standby (rank %d)' % r['rank']
        elif state == 'candidate':
            state = 'candidate p=%s' % r['p']
        elif state == 'missed':
            state = 'missed: ' + r['note']
        elif 'wave' in r:
            state = 'run (wave %d)' % r['wave']
        host = r['host']
        if 'lat' in r:
            host += ' at %s,%s' % (r['lat'], r['lon'])
        t.add_row(format_time(r['at']), *(((r.get('local', ''),) if local else ()) +
                                           (r['instance'], host, state, r['command'])))
    console().print(t)
    return 0
