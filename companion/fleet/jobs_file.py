"""The fleet's jobs.txt as its owner changes it: adding job lines (a
crontab-style file too; `+10m` resolved, each action checked against what the
fleet's boards run) and cancelling jobs, each in one go under one seal; and the
check of a hand-edited signed jobs.txt (`companion check`: signature_errors)."""
import os
import time

from sporadic.core import jobline
from sporadic.core.timefmt import format_time
from sporadic.desktop import merging
from companion.errors import UserError
from companion.fleet.actions import action_problem, action_table
from companion.fleet.when import relative
from companion.fleet.zonerule import zone_rule


def resolve_relative(line, now):
    """'each +10m log x' -> the same line with the time resolved now (UTC)."""
    parts = line.split(None, 2)
    t = relative(parts[1], now) if len(parts) >= 2 else None
    if t is not None:
        parts[1] = format_time(t)
        return ' '.join(parts)
    return line


def add_job(fleet, text, now=None):
    """Add one user-written job line; returns the Job (its id is salted with
    the time of adding, so adding the same text twice makes two jobs)."""
    return add_jobs(fleet, [text], now)[0]


def job_records(texts, now, where=None, cancelled=(), table=None):
    """User-written job lines (a crontab-style file: blank lines and
    `#` comments skipped) -> ([Job], [error]): each error one line,
    'WHERE:N: reason' when `where` names the file. The first line's id is
    salted with `now` alone (what `add LINE` has always done), the others
    with now and their line number, so a file may hold one text twice.
    table: action_table(fleet), each job's action checked against it."""
    recs = []
    errors = []
    for n, text in enumerate(texts, 1):
        text = text.strip()
        if where is not None and (not text or text[0] == '#'):
            continue
        at = '' if where is None else '%s:%d: ' % (where, n)
        why = merging.line_problem(text)
        if why is not None:
            errors.append('%sbad job line: %s' % (at, why))
            continue
        try:
            text = resolve_relative(text, now)
            rec = jobline.parse(text, salt=str(now) if not recs else '%d.%d' % (now, n), zone_rule=zone_rule)
        except (jobline.ParseError, UserError) as e:
            errors.append('%sbad job line: %s' % (at, e))
            continue
        why = None if not isinstance(rec, jobline.Job) or table is None else action_problem(rec, table)
        if not isinstance(rec, jobline.Job):
            errors.append('%snot a job line: %r' % (at, text))
        elif why:
            errors.append('%s%s: %s' % (at, text, why))
        elif rec.id in cancelled:
            errors.append('%sjob %s was cancelled; add it again a second later to get a new id' % (at, rec.id))
        else:
            recs.append(rec)
    return recs, errors


def add_jobs(fleet, texts, now=None, where=None):
    """Add user-written job lines in one go, under one seal: all of them,
    or (any line bad) none, UserError naming the first bad line and how
    many there are (bad_lines(e) lists them all)."""
    now = int(time.time()) if now is None else now
    held = fleet.lines()
    cancelled = {l[:jobline.ID_LEN] for l in held if l.endswith(' cancel')}
    recs, errors = job_records(texts, now, where, cancelled, action_table(fleet))
    if errors:
        raise _bad(errors, where)
    if not recs:
        raise UserError('%s holds no job line: nothing added' % (where or 'the input'))
    lines = [r.line() for r in recs]
    fleet.merge_in(lines + fleet.sign(lines, held), 'add')
    return recs


def _bad(errors, where):
    e = UserError(errors[0] + ('' if len(errors) == 1 else ' (and %d more bad line(s))' % (len(errors) - 1))
                  + ('; nothing added' if where is not None else ''))
    e.lines = errors
    return e


def bad_lines(e):
    """Every bad line of a refused file (add_jobs, cancel_jobs), else [str(e)]."""
    return getattr(e, 'lines', None) or [str(e)]


def cancel_job(fleet, jid):
    cancel_jobs(fleet, [jid])


def cancel_jobs(fleet, ids, where=None):
    """Cancel jobs by id in one go, under one seal: every id must be a job
    of the fleet (or one cancelled already), else nothing is cancelled.
    ids from a file (`where`): one a line, its first word (a job line as
    `companion jobs` shows it will do), blank lines and `#` comments skipped."""
    held = fleet.lines()
    known = set()
    cancelled = set()
    for l in held:
        if l[:1] != '.' and l[jobline.ID_LEN:jobline.ID_LEN + 3] not in (' r ', ' a '):
            (cancelled if l.endswith(' cancel') else known).add(l[:jobline.ID_LEN])
    todo = []
    errors = []
    for n, jid in enumerate(ids, 1):
        if where is not None:
            jid = jid.strip()
            if not jid or jid[0] == '#':
                continue
            jid = jid.split()[0]
        at = '' if where is None else '%s:%d: ' % (where, n)
        if not jobline.is_id(jid):
            errors.append('%s%r is not a job id (8 characters of 0-9a-v)' % (at, jid))
        elif jid not in known and jid not in cancelled:
            errors.append('%sno job %s in this fleet (see `companion jobs`)' % (at, jid))
        elif jid not in todo:
            todo.append(jid)
    if errors:
        e = _bad(errors, where)
        if where is not None:
            e.args = (str(e).replace('; nothing added', '; nothing cancelled'),)
        raise e
    if not todo:
        raise UserError('%s holds no job id: nothing cancelled' % (where or 'the input'))
    lines = [jid + ' cancel' for jid in todo]
    fleet.merge_in(lines + fleet.sign(lines, held), 'cancel')
    return todo


def signature_errors(path, lines):
    """'FILE:LINE: ...' for each fleet-authored line of a signed fleet's
    jobs.txt (path names the jobs.txt of a fleet folder) that no verified
    batch covers: a board refuses it, so it must not stand in for the text
    the owner signed (`companion check`). [] for any other file."""
    folder = os.path.dirname(os.path.abspath(path))
    from companion.fleet.folder import JOBS, Fleet
    fleet = Fleet(folder)
    if os.path.basename(path) != JOBS or not fleet.exists() or fleet.insecure:
        return []
    from sporadic.core import batch
    signed = fleet.signed_test(lines)
    texts = {}      # job id -> line number of its signed job text
    todo = []
    for n, raw in enumerate(lines, 1):
        line = merging.canonical(raw, zone_rule)[0]
        if line is None or not batch.needs_batch(line):
            continue
        if signed(line):
            texts[line[:jobline.ID_LEN]] = n
        else:
            todo.append((n, line))
    out = []
    for n, line in todo:
        at = texts.get(line[:jobline.ID_LEN]) if line[0] != '.' else None
        what = ('differs from the text the fleet signed under id %s (line %d)' % (line[:jobline.ID_LEN], at)
                if at is not None else 'is not signed by this fleet (no verified batch covers it)')
        out.append('%s:%d: this line %s: a board refuses it; restore the signed line (git checkout -- %s, or '
                   'a sync brings it back from a board that holds it), or cancel the job and add the text '
                   'you want' % (path, n, what, path))
    return out
