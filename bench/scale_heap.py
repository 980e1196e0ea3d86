"""The heap a sync of #27's pieces needs on the unix board (64-bit .mpy).

    python bench/scale_heap.py [--jobs 1000] [--hours 720] [--step 8] [--parts month]
                               [--interpreter bench/.mp32/micropython]   # JSON last line
    (bench/scale.py runs it with the other bench/scale_*.py modules; keys heap_*)

The smallest `-X heapsize` (KiB, found by bisection, --step apart) at which
a virtual board (the unix port on a pseudo-terminal, `companion vboard`)
set up with the product's commands passes each sync:

  - first_sync_signed: a signed fleet (`companion init`) of JOBS daily jobs
    added in one `companion add -f FILE` (seal slots: 64 lines a `.b @SLOT`
    record), a board deployed with `companion deploy`, then restarted at the
    trial heap and synced once (`companion sync`): every job must arrive
    (seal records verified, the digest index written, splices). Beside it,
    first_sync_insecure: the same file in an `--insecure` fleet (no seal
    record to verify): what the signatures cost;
  - calendar_sync: test_calendar_jobs' board: deployed with its position
    (`--lat --lon`, a `.h` record with it), a cron job in a zone and a
    sunset job added, one sync (the parser's calendar modules and the
    signature check in one P);
  - month_outbox_sync: HOURS board hours of 10 hourly jobs with no sync
    (bench/scale_outbox.py's month, on the step clock), then one sync at
    the trial heap: every result of the month must be in the fleet.

A trial that fails is a board that ran out of memory (the sync's error is
kept: `errors`). The figures are this port's: 8-byte pointers and the .mpy
code in the heap (a 32-bit board needs about 0.6x; bench/heap_sync.py has
the 32-bit rows), and fragmentation makes them steps, not lines: a heap a
step above the figure can still fail on another day's job file
(docs/budgets.md#27).
"""
import argparse
import contextlib
import io
import json
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

LO, HI = 48, 256      # KiB: the bisection's range


def _cli(fleet, *argv):
    from companion import cli
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        rc = cli.main(['--fleet', fleet] + [str(a) for a in argv])
    return rc, out.getvalue()


def _deployed(base, insecure=False, position=None):
    """A fleet and a board deployed into it (at a large heap: deploy is not
    what is measured). Returns (fleet, flash)."""
    from companion.vboard.board import VBoard
    fleet = os.path.join(base, 'fleet')
    flash = os.path.join(base, 'flash')
    assert _cli(fleet, 'init', *(['--insecure'] if insecure else []))[0] == 0
    vb = VBoard(flash, board_id='b-1', heap='512K')
    try:
        extra = ['--lat', position[0], '--lon', position[1]] if position else []
        rc, out = _cli(fleet, 'deploy', vb.start(), '--id', 'b-1', '-q', *extra)
        assert rc == 0, out
    finally:
        vb.stop()
    return fleet, flash


def _trial(prepared, heap_k, check):
    """Copy a prepared (fleet, flash), start the board at heap_k, sync once;
    (ok, error)."""
    from companion.sync import syncer
    from companion.fleet.folder import Fleet
    from companion.vboard.board import VBoard
    fleet0, flash0 = prepared
    t = tempfile.mkdtemp(prefix='trial-', dir=os.path.dirname(fleet0))
    try:
        fleet, flash = os.path.join(t, 'fleet'), os.path.join(t, 'flash')
        shutil.copytree(fleet0, fleet)
        shutil.copytree(flash0, flash, symlinks=True)
        vb = VBoard(flash, board_id='b-1', heap='%dK' % heap_k)
        try:
            rep = syncer.sync(Fleet(fleet), vb.start(), progress=False)
        except Exception as e:
            return False, str(e)[:200]
        finally:
            vb.stop()
        return check(fleet, flash, rep)
    finally:
        shutil.rmtree(t, ignore_errors=True)


def smallest(works, step):
    """The smallest heap (KiB) in LO..HI at which works(k) -> (ok, err)
    holds, by bisection; (None, err at HI) when even HI fails. Also the
    error of the largest heap that failed."""
    ok, err = works(HI)
    if not ok:
        return None, err
    lo, hi, last = LO, HI, None
    while hi - lo > step:
        mid = (lo + hi) // 2 // step * step or step
        if mid <= lo:
            break
        ok, e = works(mid)
        if ok:
            hi = mid
        else:
            lo, last = mid, e
    return hi, last


def job_file(base, n):
    path = os.path.join(base, 'jobs-%d.txt' % n)
    with open(path, 'w') as f:
        for i in range(n):
            f.write('each 2026-12-%02dT%02d:%02dZ log s%d ; every=1d within=1h\n'
                    % (2 + i % 20, i // 60 % 24, i % 60, i))
    return path


def first_sync(base, jobs, insecure):
    d = os.path.join(base, 'first-%s' % ('insecure' if insecure else 'signed'))
    os.makedirs(d)
    fleet, flash = _deployed(d, insecure)
    rc, out = _cli(fleet, 'add', '-f', job_file(d, jobs))
    assert rc == 0, out

    def check(fleet, flash, rep):
        with open(os.path.join(flash, 'jobs.txt')) as f:
            held = sum(1 for l in f if l[:1] != '.' and l.split()[1:2] == ['each'])
        return held == jobs, None if held == jobs else 'the board holds %d of %d jobs' % (held, jobs)
    return fleet, flash, check


def calendar_sync(base):
    d = os.path.join(base, 'calendar')
    os.makedirs(d)
    now = int(time.time())
    lon = round(((18.1 - ((now + 1800) % 86400) / 3600.0) * 15 + 180) % 360 - 180, 3)
    fleet, flash = _deployed(d, position=('0', lon))
    for line in ('each +1m log cron ; at="*/30 * * * *" tz=Asia/Kathmandu within=25m',
                 'each +1m log dusk ; at=sunset+20m within=1h'):
        assert _cli(fleet, 'add', line)[0] == 0

    def check(fleet, flash, rep):
        with open(os.path.join(flash, 'jobs.txt')) as f:
            text = f.read()
        ok = 'tz=Asia/Kathmandu' in text and 'at=sunset+20m' in text
        return ok, None if ok else 'the jobs did not arrive'
    return fleet, flash, check


def month_sync(base, hours, jobs=10):
    from scale_outbox import setup, run_loop, _month_rows
    d = os.path.join(base, 'month')
    os.makedirs(d)
    cli, flash, ids, t0 = setup(d, jobs)
    run_loop(flash, t0 + (hours - 1) * 3600 + 1800, True)
    want = jobs * hours

    def check(fleet, flash, rep):
        got = _month_rows(fleet, ids, hours)
        return got == want, None if got == want else '%d of %d results arrived' % (got, want)
    return cli.dir, flash, check


def measure(board=None, jobs=1000, hours=720, step=8, parts=('first', 'calendar', 'month')):
    """bench/scale.py's entry too (measure(board)): the figures are the
    unix board's whatever `board` is (the heap is a unix-port measure)."""
    base = tempfile.mkdtemp(prefix='scale-heap-')
    out, errors = {}, {}
    try:
        todo = []
        if 'first' in parts:
            todo.append(('first_sync_signed_k', first_sync(base, jobs, False)))
            todo.append(('first_sync_insecure_k', first_sync(base, jobs, True)))
        if 'calendar' in parts:
            todo.append(('calendar_sync_k', calendar_sync(base)))
        if 'month' in parts:
            todo.append(('month_outbox_sync_k', month_sync(base, hours)))
        for key, (fleet, flash, check) in todo:
            t = time.monotonic()
            k, err = smallest(lambda h: _trial((fleet, flash), h, check), step)
            out[key] = k
            errors[key] = err
            print('%-24s %6s KiB   (%.0f s; one step below: %s)'
                  % (key, k or '>%d' % HI, time.monotonic() - t, err or '-'), flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    out = {'heap_' + k: v for k, v in out.items()}
    out.update({'heap_jobs': jobs, 'heap_hours': hours, 'heap_step_k': step,
                'heap_errors': {'heap_' + k: v for k, v in errors.items()},
                'board': {k: 'unix' for k in out}})
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--jobs', type=int, default=1000)
    ap.add_argument('--hours', type=int, default=720)
    ap.add_argument('--step', type=int, default=8)
    ap.add_argument('--parts', default='first,calendar,month')
    ap.add_argument('--interpreter', help="the board's micropython (default: the PyPI 64-bit port; "
                    "bench/.mp32/micropython: the 32-bit build of bench/build_micropython32.sh)")
    a = ap.parse_args(argv)
    if a.interpreter:
        os.environ['SPORADIC_MICROPYTHON'] = os.path.abspath(a.interpreter)   # companion.vboard's
    print('smallest heap (KiB) in which a unix board passes each sync (bisection %d..%d, step %d; %s)'
          % (LO, HI, a.step, a.interpreter or '64-bit PyPI micropython'))
    d = measure(None, a.jobs, a.hours, a.step, a.parts.split(','))
    d['heap_interpreter'] = a.interpreter or '64-bit PyPI micropython'
    print(json.dumps(d))


if __name__ == '__main__':
    main()
