"""The `companion` command line: verbs only. Verbs never touch bytes (links
do, in transport*.py) and never re-implement a rule of the core (they call
sporadic.jobline / merge / plan)."""
import argparse
import importlib
import json
import os
import sys
import time

from sporadic.core import jobline, merge, plan
from sporadic.desktop import schedule
from sporadic.desktop import merging
from sporadic.core.timeutil import parse_time, parse_duration
from sporadic.core.timefmt import format_time


from companion.errors import UserError, console
# a git merge driver starts one `companion merge` per file: it imports neither
# the fleet (companion.fleet.folder) nor the fleet verbs (build_parser)
from companion.fleet.atomic import atomic_write
from companion.fleet.mergefiles import read_lines, merged_text


def parse_when(text, now=None):
    """An absolute UTC time, 'now', or '+10m' relative to now."""
    now = int(time.time()) if now is None else now
    if text == 'now':
        return now
    if text.startswith('+'):
        try:
            return now + parse_duration(text[1:])
        except ValueError as e:
            raise UserError(str(e))
    try:
        return parse_time(text)
    except ValueError as e:
        raise UserError(str(e))


# -- check / merge / plan: the core's contract -------------------------------

def zone_warnings(path, lines, now):
    """'FILE:LINE: warning: ...' for each calendar job whose zone's tzdb table differs
    from the POSIX rule its board follows (companion/fleet/zones.py job_warning)."""
    from companion.fleet import zones
    out = []
    for n, line in enumerate(lines, 1):
        if 'tz=' not in line:
            continue
        try:
            r = jobline.parse(line)
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
            r = jobline.parse(line)
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
    now = int(time.time())
    from companion.fleet.folder import resolve_relative
    for path in args.files:
        lines = read_lines(path)
        # a line `add -f` takes: '+10m' and 'now' are resolved as it resolves them
        lines = [_relative(resolve_relative, l, now) for l in lines]
        for _ in merging.canonical_lines(lines, path, errors):
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


def _zone_time(job, t):
    # "2026-03-30T06:00 Europe/Berlin": the job's zone clock at UTC instant t
    from sporadic.core import calendar
    return format_time(calendar.local_time(job.cal.s, t))[:-1] + ' ' + (job.cal.tz or 'UTC')


def _positions(args, hosts, job, placed):
    """[(pos, {host})] for a sun job: --lat/--lon for every host, else each host's
    position from the plan file's host list (`.h HOST SINCE LAT LON`, written by
    deploy/image/flash --lat --lon), else from devices/HOST.json of the fleet folder."""
    if args.lat is not None:
        return [((args.lat, args.lon), set(hosts))]
    from companion.fleet.folder import Fleet
    fleet = Fleet(args.fleet)
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
    lines = merging.merge((args.file, read_lines(args.file)), errors=errors)
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
    t_from = parse_when(args.from_)
    t_until = parse_when(args.until)
    if t_until <= t_from:
        raise UserError('--until must be after --from')
    rows = []
    try:
        for j in jobs:
            sun = j.cal is not None and j.cal.sun()
            # a sunrise/sunset job: each host at its own position
            for pos, hs in (_positions(args, hosts, j, placed) if sun else [(None, hosts)]):
                plan.position = pos
                for row in schedule.schedule(j, hosts, t_from, t_until, limit=args.limit):
                    if row['host'] in hs:
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


# -- wiring -------------------------------------------------------------------

# Verbs that live in their own modules: (module, add_parser function, command function).
EXTERNAL = [
    ('companion.fleet.queries', 'add_parsers'),
    ('companion.vboard.cmd', 'add_vboard_parser'),
    ('companion.make.image', 'add_image_parser'),
    ('companion.make.flash', 'add_flash_parser'),
    ('companion.simulate', 'add_parser'),
    ('companion.demo', 'add_parser'),
]


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line too (`companion VERB -h` for the usage)."""

    def error(self, message):
        raise UserError('%s (see `%s -h`)' % (message, self.prog))


CORE_VERBS = ('check', 'merge', 'plan')


def verb_of(argv):
    """The verb on a command line (the first word that is not an option or
    --fleet's value), or None."""
    skip = False
    for a in argv:
        if skip:
            skip = False
        elif a == '--fleet':
            skip = True
        elif not a.startswith('-'):
            return a
    return None


def build_parser(core_only=False, verb=None):
    """The whole command line; core_only: the core's verbs alone, without
    importing the verb modules (a git merge driver starts one per file),
    and of those only `verb`'s options in full."""
    p = Parser(prog='companion', description='sporadic: jobs for sometimes-connected MicroPython boards')
    p.add_argument('--version', action='version', version='companion %s' % version())
    p.add_argument('--debug', action='store_true',
                   help='on an error, show the traceback instead of one line')
    p.add_argument('--fleet', default=os.environ.get('SPORADIC_FLEET', '.'),
                   help='fleet folder (default: $SPORADIC_FLEET or the current folder)')
    sub = p.add_subparsers(dest='verb', metavar='VERB')
    sub.required = True

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
    if not core_only or verb == 'plan':
        from companion.fleet.queries import add_position_args
        add_position_args(s)
    s.set_defaults(func=cmd_plan)

    for mod, fn in () if core_only else EXTERNAL:
        try:
            m = importlib.import_module(mod)
        except ImportError as e:
            if e.name != mod:
                raise
            continue
        getattr(m, fn)(sub)
    return p


def version():
    """The installed sporadic distribution's version (pyproject.toml)."""
    try:
        from importlib.metadata import version as v
        return v('sporadic')
    except Exception:   # a checkout that was never installed
        return 'unknown (not installed)'


def one_line(text):
    return ' '.join(str(text).split())


def main(argv=None):
    """Run one verb. A condition the user can cause ends in one line on
    stderr, `companion: <what happened>`, exit status 2 (UserError: raised by
    the verbs, which turn link, esptool and file failures into one). Anything
    else is a bug: one line naming it, exit status 70 (EX_SOFTWARE), with
    --debug (or SPORADIC_DEBUG=1) the traceback instead, for the report."""
    argv = sys.argv[1:] if argv is None else list(argv)
    # --debug anywhere on the line (`companion sync PORT --debug` too)
    debug = '--debug' in argv or bool(os.environ.get('SPORADIC_DEBUG'))
    argv = [a for a in argv if a != '--debug']
    try:
        verb = verb_of(argv)
        args = build_parser(core_only=verb in CORE_VERBS, verb=verb).parse_args(argv)
        return args.func(args) or 0
    except UserError as e:
        if debug:
            raise
        print('companion: ' + one_line(e), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        if debug:
            raise
        print('companion: interrupted', file=sys.stderr)
        return 130
    except OSError as e:
        if debug:
            raise
        if e.filename is not None:   # a file or folder the user named or holds: not a bug
            print('companion: %s: %s' % (e.filename, one_line(e.strerror or e)), file=sys.stderr)
            return 2
        print('companion: internal error (a bug, please report it): %s: %s; run with --debug for the traceback'
              % (type(e).__name__, one_line(e)), file=sys.stderr)
        return 70
    except Exception as e:
        if debug:
            raise
        print('companion: internal error (a bug, please report it): %s: %s; run with --debug for the traceback'
              % (type(e).__name__, one_line(e)), file=sys.stderr)
        return 70


if __name__ == '__main__':
    sys.exit(main())
