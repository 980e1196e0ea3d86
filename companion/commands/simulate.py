# `companion simulate`: the verb, its --sweep over one scenario key.
import copy
import json
import sys
from contextlib import contextmanager

from sporadic.core.timeutil import parse_duration
from sporadic.core.timefmt import format_duration
from companion.errors import UserError
from companion.simulate.scenario import load
from companion.simulate.parallel import simulate
from companion.simulate.report import rounded
from companion.simulate.output import text, sweep_text, plot


def _setkey(scn, key, value):
    parts = key.split('.')
    obj = scn
    for i, p in enumerate(parts[:-1]):
        if isinstance(obj, list):
            if p.isdigit():
                obj = obj[int(p)]
                continue
            for o in obj:
                _setkey(o, '.'.join(parts[i:]), value)
            return
        if p not in obj:
            raise UserError('--sweep: no %r in the scenario' % '.'.join(parts[:i + 1]))
        obj = obj[p]
    last = parts[-1]
    if isinstance(obj, list):
        for o in obj:
            o[last] = value
    else:
        obj[last] = value


def sweep_values(spec, steps):
    if ',' in spec:
        return [_num_or(s.strip()) for s in spec.split(',')]
    a, sep, b = spec.partition('..')
    if not sep:
        return [_num_or(spec)]
    if a and a[-1] in 'smhdw':
        lo, hi = parse_duration(a), parse_duration(b)
        out = []
        for i in range(steps):
            v = lo * (hi / lo) ** (i / (steps - 1)) if steps > 1 else lo
            v = _nice(int(round(v)))
            if v not in out:
                out.append(v)
        return [format_duration(v) for v in out]
    lo, hi = float(a), float(b)
    return [rounded(lo + (hi - lo) * i / (steps - 1)) if steps > 1 else lo for i in range(steps)]


def _nice(v):
    for unit in (86400, 3600, 60):
        if v >= 2 * unit:
            return int(round(v / unit)) * unit
    return max(1, v)


def _num_or(s):
    try:
        return float(s) if '.' in s else int(s)
    except ValueError:
        return s


def add_parsers(subparsers):
    s = subparsers.add_parser('simulate', help='how a fleet behaves under a sync schedule (discrete-event, real core)')
    s.add_argument('scenario', help='scenario file (TOML; see examples/)')
    s.add_argument('--seed', type=int, default=None, help='world seed (default: the scenario\'s, else 1)')
    s.add_argument('--json', action='store_true', help='the report as JSON')
    s.add_argument('--sweep', metavar='KEY=A..B', help='vary one scenario key, e.g. visit.interval=1h..30d '
                   'or mesh.0.interval=5m,10m,1h')
    s.add_argument('--steps', type=int, default=6, help='points of an A..B sweep (default 6)')
    s.add_argument('--plot', metavar='OUT.png', help='with --sweep: plot duplicates and misses (needs matplotlib)')
    s.add_argument('--verify', action='store_true', help='also keep literal line sets and check every sync '
                   'against merging.merge (slow; small scenarios)')
    s.add_argument('--workers', type=int, default=None, metavar='N',
                   help='processes to share the jobs among (default: one per CPU for a large run)')
    s.set_defaults(func=command)
    return s


@contextmanager
def _progress(label):
    """A progress bar on stderr over the simulated time, when stderr is a
    terminal (the report goes to stdout) -> the callback, or None. Drawn
    by the callback, not by a thread of its own: the workers are forked
    (parallel.py)."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import Progress, TextColumn, BarColumn, TimeElapsedColumn
    with Progress(TextColumn('[bold]%s' % label), BarColumn(), TextColumn('{task.percentage:>3.0f} %'),
                  TimeElapsedColumn(), console=Console(stderr=True), transient=True, auto_refresh=False) as bar:
        task = bar.add_task(label, total=1.0)
        yield lambda done: bar.update(task, completed=done, refresh=True)


def command(args):
    scn = load(args.scenario)
    if args.plot and not args.sweep:
        raise UserError('--plot needs --sweep')
    if not args.sweep:
        with _progress('simulate') as progress:
            rep = simulate(scn, args.seed, args.verify, args.workers, progress)
        if args.json:
            sys.stdout.write(json.dumps(rep, sort_keys=True, indent=1) + '\n')
        else:
            sys.stdout.write(text(rep))
        return 0
    key, eq, spec = args.sweep.partition('=')
    if not eq or not spec:
        raise UserError('--sweep KEY=A..B (or KEY=v1,v2,...)')
    rows = []
    values = sweep_values(spec, args.steps)
    for i, v in enumerate(values):
        s = copy.deepcopy(scn)   # TOML date-times are not JSON: copy the objects
        _setkey(s, key, v)
        with _progress('simulate %s=%s (%d of %d)' % (key, v, i + 1, len(values))) as progress:
            rows.append((v, simulate(s, args.seed, args.verify, args.workers, progress)))
    if args.json:
        sys.stdout.write(json.dumps({'sweep': key, 'points': [{'value': v, 'report': r} for v, r in rows]},
                                    sort_keys=True, indent=1) + '\n')
    else:
        sys.stdout.write(sweep_text(key, rows))
    if args.plot:
        plot(key, rows, args.plot)
        if not args.json:
            sys.stdout.write('plot: %s\n' % args.plot)
    return 0


def main(argv=None):
    import argparse
    p = argparse.ArgumentParser(prog='companion simulate')
    sub = p.add_subparsers(dest='verb')
    add_parsers(sub)
    args = p.parse_args(['simulate'] + list(sys.argv[1:] if argv is None else argv))
    try:
        return command(args)
    except UserError as e:
        print('companion: ' + str(e), file=sys.stderr)
        return 2


if __name__ == '__main__':
    sys.exit(main())
