"""Bytes of a board's job file per byte of its job lines, 1,000 jobs added
one `companion add` each (issue #27; docs/security.md#seals).

    python bench/scale_jobfile.py [--jobs 1000] [--keep]

A board set up as a user does: `companion init`, 1,000 `companion add LINE`
(the command line's own code, cli.main, in this process: 1,000 interpreter
starts would measure Python, not the file), `companion vboard` (a unix-port
virtual board, 128K heap), `companion deploy`, `companion sync`. Then the
board's jobs.txt (with in.txt, if a delivery is not compacted in yet) is
read from its flash folder:

    bytes_per_job_ratio = bytes of the board's job file / bytes of its job lines

Baseline, same run, same 1,000 lines: a second fleet whose adds each sign a
batch of their own, as `add` did before seals (keys.sign_lines of the one
line, merged in with it), deployed and synced onto a second virtual board the
same way. The figure is a property of the file, not of the board's CPU: the
unix port stands for every board (the emulated Pico holds the same bytes).

measure(board) -> {'bytes_per_job_ratio': ..., 'bytes_per_job_ratio_baseline': ...,
                   'board': {'bytes_per_job_ratio': 'unix'}, ...}; run alone, it
prints the figures and the JSON last.
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
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'firmware'))

BUDGET = 1.3
BOARD = 'bench-1'

# job lines as users write them (67 bytes on average once they carry their
# ids, the size the issue measured): a mix of kinds, times and actions
KINDS = ['each 2026-12-01T06:%02dZ log pump-%04d ; every=1d within=1h',
         'who:greenhouse-%d 2026-12-01T07:00Z log vent-%04d ; every=1h within=10m',
         'one 2026-12-02T%02d:00Z log sample-%04d ; every=6h within=30m']


def job_text(i):
    return KINDS[i % len(KINDS)] % (i % 24, i)


def _cli(fleet, *argv):
    from companion import cli
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(['--fleet', fleet] + [str(a) for a in argv])
    if rc:
        raise RuntimeError('companion %s -> %d: %s' % (argv[0], rc, (err.getvalue().strip().splitlines() or ['?'])[-1]))
    return out.getvalue()


def _board_file(flash):
    lines = []
    for name in ('jobs.txt', 'in.txt'):
        p = os.path.join(flash, name)
        if os.path.exists(p):
            with open(p) as f:
                lines += f.read().splitlines()
    return lines


def _figures(lines):
    from sporadic.core import jobline
    job = 0
    for l in lines:
        try:
            r = jobline.parse(l)
        except jobline.ParseError:
            continue
        if isinstance(r, jobline.Job):
            job += len(l) + 1
    total = sum(len(l) + 1 for l in lines)
    recs = sum(1 for l in lines if l.startswith('.b '))
    return {'file_bytes': total, 'job_line_bytes': job, 'batch_records': recs,
            'jobs': sum(1 for l in lines if l[:1] != '.' and ' ' in l and l.split(' ', 2)[1] not in ('r', 'a', 'cancel')),
            'ratio': round(total / job, 4) if job else None}


def _deploy_and_sync(fleet, flash, heap):
    from companion.vboard.board import VBoard
    vb = VBoard(flash, board_id=BOARD, heap=heap)
    try:
        port = vb.start()
        _cli(fleet, 'deploy', port, '--board', 'unix', '--id', BOARD, '-q')
        t = time.monotonic()
        out = _cli(fleet, 'sync', port, '-q')
        secs = time.monotonic() - t
    finally:
        vb.stop()
    return out.strip(), secs


def measure(board='unix', jobs=1000, keep=False, log=print, heap='128K', order=('seal', 'baseline')):
    from companion.fleet import keys
    from companion.fleet.folder import Fleet
    tmp = tempfile.mkdtemp(prefix='scale-jobfile-')
    res = {}
    try:
        for name in order:
            fleet = os.path.join(tmp, name)
            _cli(fleet, 'init')
            t = time.monotonic()
            if name == 'seal':
                for i in range(jobs):
                    _cli(fleet, 'add', job_text(i))
            else:
                # `add` before seals: the line and a batch of its own
                from companion.fleet.folder import job_records
                f = Fleet(fleet)
                for i in range(jobs):
                    [rec], _ = job_records([job_text(i)], int(time.time()))
                    f.merge_in([rec.line()] + keys.sign_lines(f.dir, [rec.line()]), 'add')
            adds = time.monotonic() - t
            fleet_fig = _figures(Fleet(fleet).lines())
            flash = os.path.join(tmp, name + '.flash')
            said, secs = _deploy_and_sync(fleet, flash, heap)
            fig = _figures(_board_file(flash))
            fig.update({'fleet_file_bytes': fleet_fig['file_bytes'], 'fleet_ratio': fleet_fig['ratio'],
                        'adds_s': round(adds, 1), 'sync_s': round(secs, 1)})
            res[name] = fig
            log('%-8s %d adds in %.1f s; board after deploy + sync (%.1f s): %d jobs, %d job-line bytes, '
                'file %d bytes, %d batch records: %.3fx (fleet folder %.3fx)'
                % (name, jobs, adds, secs, fig['jobs'], fig['job_line_bytes'], fig['file_bytes'],
                   fig['batch_records'], fig['ratio'], fleet_fig['ratio']))
            log('         ' + said)
    finally:
        if keep:
            log('kept ' + tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    if len(res) < 2:
        return res
    s, b = res['seal'], res['baseline']
    return {'bytes_per_job_ratio': s['ratio'], 'bytes_per_job_ratio_baseline': b['ratio'],
            'bytes_per_job_ratio_budget': BUDGET,
            'bytes_per_job': round(s['file_bytes'] / jobs, 1), 'bytes_per_job_baseline': round(b['file_bytes'] / jobs, 1),
            'jobfile': {'jobs': jobs, 'seal': s, 'baseline': b},
            'board': {'bytes_per_job_ratio': 'unix'}}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--jobs', type=int, default=1000)
    ap.add_argument('--keep', action='store_true')
    ap.add_argument('--heap', default='128K', help="the virtual boards' heap (default 128K, as `companion vboard`)")
    ap.add_argument('--baseline-first', action='store_true')
    ap.add_argument('--only', choices=('seal', 'baseline'), help='one of the two boards (no JSON)')
    args = ap.parse_args(argv)
    if args.only:
        measure('unix', args.jobs, args.keep, heap=args.heap, order=(args.only,))
        return
    out = measure('unix', args.jobs, args.keep, heap=args.heap,
                  order=('baseline', 'seal') if args.baseline_first else ('seal', 'baseline'))
    r = out['bytes_per_job_ratio']
    print('bytes_per_job_ratio %.3f (budget %.1f: %s), baseline (a batch an add) %.3f; %.1f vs %.1f bytes a job'
          % (r, BUDGET, 'met' if r <= BUDGET else 'NOT met', out['bytes_per_job_ratio_baseline'],
             out['bytes_per_job'], out['bytes_per_job_baseline']))
    print(json.dumps(out))


if __name__ == '__main__':
    main()
