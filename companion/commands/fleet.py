"""Verbs on the fleet folder: init, add, cancel, keys, jobs, results, status.
argparse and printing only: the records are fleet/folder.py's, the
queries fleet/queries.py's, the keys fleet/keys.py's; `now` is the CLI's
clock (args.clock)."""
import json
import os
import sys

from sporadic.core import plan
from sporadic.core.timefmt import format_time
from sporadic.desktop import merging
from companion.errors import UserError, console
from companion.fleet.jobs_file import add_job, add_jobs, bad_lines, cancel_jobs
from companion.commands.options import fleet_of
from companion.fleet.queries import (DUPLICATE_NOTE, duplicate_text, duplicates, job_states, quarantine_info,
                                     result_filter, result_rows, rollout_states, rollout_text, shown_rows,
                                     status_rows)


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


def read_input(path):
    """(name, lines) of a file given with -f: a path, or '-' for standard input."""
    if path == '-':
        return '<stdin>', sys.stdin.read().splitlines()
    try:
        with open(path, encoding='utf-8') as fh:
            return path, fh.read().splitlines()
    except UnicodeDecodeError as e:
        raise UserError('%s is not UTF-8 text (byte %d): nothing added' % (path, e.start))
    except OSError as e:
        raise UserError('cannot read %s: %s' % (path, e.strerror or e))


def _refused(e):
    # a file with bad lines: each on stderr, then the one line of the error
    ls = bad_lines(e)
    if len(ls) > 1:
        for l in ls:
            print(l, file=sys.stderr)
    return e


def cmd_add(args):
    f = fleet_of(args)
    now = int(args.clock())
    if (args.line is None) == (args.file is None):
        raise UserError('add takes one job line, or -f FILE (- for standard input): not %s'
                        % ('both' if args.line is not None else 'neither'))
    if args.file is None:
        recs = [add_job(f, args.line, now)]
    else:
        name, texts = read_input(args.file)
        try:
            recs = add_jobs(f, texts, now, where=name)
        except UserError as e:
            raise _refused(e)
    from companion.fleet import zones
    for j in recs:
        print(j.id)
        what = '' if args.file is None else '%s: ' % j.id
        if j.cal is None and j.t0 < now - j.within:   # a calendar series starts anew each time
            print('note: %sits first instance is already past its window; it will be recorded as missed' % what,
                  file=sys.stderr)
        w = zones.job_warning(j, now)
        if w:
            print('warning: %s%s' % (what, w), file=sys.stderr)
    return 0


def cmd_cancel(args):
    f = fleet_of(args)
    if not args.ids and args.file is None:
        raise UserError('cancel takes job ids, or -f FILE (- for standard input)')
    done = []
    if args.ids:
        done += cancel_jobs(f, args.ids)
    if args.file is not None:
        name, texts = read_input(args.file)
        try:
            done += cancel_jobs(f, texts, where=name)
        except UserError as e:
            raise _refused(e)
    for jid in done:
        print('cancelled %s' % jid)
    return 0


def next_text(n):
    if not n:
        return ''
    if n['what'] == plan.WAIT:
        return ', next %s at %s' % (n['instance'], n['time'])
    return ', %s %s now' % ({plan.RUN: 'runs', plan.ABORT: 'aborts'}.get(n['what'], 'records a miss of'),
                            n['instance'])


def cmd_jobs(args):
    f = fleet_of(args)
    rows = job_states(f, int(args.clock()))
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
        devs = '; '.join('%s: %s%s' % (h, (v.get('instance', '') + ' ' + v['outcome']).strip(), next_text(v.get('next')))
                         for h, v in sorted(r['devices'].items()))
        if r.get('rollout'):
            devs = 'rollout ' + rollout_text(r['rollout']) + '; ' + devs
        t.add_row(r['job'], r['line'] or '(cancelled)', devs)
    console().print(t)
    if not f.devices():
        print('no board deployed yet: `companion deploy PORT` then `companion sync PORT`')
    return 0


def cmd_results(args):
    f = fleet_of(args)
    now = int(args.clock())
    keep = result_filter(args.host, args.job, args.since, now)
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
    print_duplicates(c, dups, 'duplicates')
    return 0


def print_duplicates(c, dups, head):
    """Each duplicate of a single-run instance, after `head` (rich markup)."""
    if dups:
        c.print(head + ' (single-run instances that ran on more than one board):')
        for i, d in dups.items():
            c.print('  ' + duplicate_text(i, d), markup=False)
        c.print(DUPLICATE_NOTE, markup=False)


def cmd_status(args):
    f = fleet_of(args)
    now = int(args.clock())
    dups = duplicates(f)
    rows = status_rows(f, now, dups=dups)
    insecure = f.insecure
    rollouts = rollout_states(f, now)
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
    for col in ('id', 'last sync', 'broker', 'drift s', 'clock', 'pending', 'ok', 'failed', 'missed', 'aborted',
                'dups', 'unverified'):
        t.add_column(col)
    for r in rows:
        t.add_row(r['id'], format_time(r['last_sync']) if r['last_sync'] else 'never',
                  format_time(r['last_broker_contact']) if r['last_broker_contact'] else '-',
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
        if r['results_dropped']:
            c.print('[red]%s dropped %d of its results for want of flash[/] (the oldest; sync it more often)'
                    % (r['id'], r['results_dropped']), markup=True)
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
    print_duplicates(c, dups, '[yellow]duplicates detected[/]')
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
        f.write_lines(merging.merge(live + chain + [rec] + keys.reseal(f.dir, live)))
        print('rotated to key %s; boards take it at their next sync and refuse the old key after' % keys.keyid(f.dir))
    else:
        print('%s  %s' % (keys.keyid(f.dir), keys.load_pub(f.dir)[:40] + '...'))
    return 0


def add_parsers(sub):
    s = sub.add_parser('keys', help='show the fleet key, or `keys rotate` to move the fleet to a new key')
    s.add_argument('action', nargs='?', choices=['show', 'rotate'], default='show')
    s.set_defaults(func=cmd_keys)

    s = sub.add_parser('init', help='make a fleet folder (job file, devices, key pair)')
    s.add_argument('--name')
    s.add_argument('--insecure', action='store_true', help='no signatures (bench work only; printed loudly)')
    s.set_defaults(func=cmd_init)

    s = sub.add_parser('add', help="add a job line ('+10m' times are resolved now), or every line of "
                       "-f FILE in one go; prints the ids")
    s.add_argument('line', nargs='?')
    s.add_argument('-f', '--file', metavar='FILE',
                   help="a file of job lines, one a line ('#' comments; - for standard input): all are "
                        "added under one signature, or none when a line is bad")
    s.set_defaults(func=cmd_add)

    s = sub.add_parser('cancel', help='cancel jobs by id (or the ids of -f FILE, one a line), in one go')
    s.add_argument('ids', nargs='*', metavar='ID')
    s.add_argument('-f', '--file', metavar='FILE', help='a file of job ids, one a line (- for standard input)')
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
