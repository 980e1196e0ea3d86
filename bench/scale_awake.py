"""Awake time per idle hour of a board as a user deploys it, at 100 and
1,000 jobs (issue #27): flat in the job file's size?

    SPORADIC_RP2_UF2=RPI_PICO.uf2 SPORADIC_RP2_BOOTROM=rp2040-bootrom-b1.bin \\
        python bench/scale_awake.py [--hours 2.5] [--files same,spread,mix] [--sizes 100,1000]
                                    [--setup image|deploy] [--board rp2|unix] [--trace]

For each file and size a fleet is made with the product's own commands
(`companion init`, one `companion add` a job (signed), then `companion image
--board rp2-pico`, booted with `vboard --image`; or with --setup deploy
`companion deploy` onto a bare Pico, the jobs then carried by the sync: the
same figures, minutes longer at 1,000 jobs), the real MicroPython rp2
firmware runs it in the emulated Pico, a `companion sync` sets its clock
(2026-12-01T01:00Z; every job is due tomorrow), and main.py's own loop is
left alone for --hours continuous emulated hours (unpaced: the emulated
clock skips the time the core sleeps). Counted from outside the chip
(run.mjs): the cycles the core executed, as ms at 125 MHz per emulated
hour (awake_ms_per_idle_hour), the instructions and the WFIs (the loop's
sleeps and the watchdog's chunk wakes) an hour, and boots. The span starts
at the loop's first sleep after the sync: the step after a sync that
changed the store (open, stamp, one full pass, the index written) is
counted apart (after_sync_ms), and awake_ms_per_hour_from_sync is the span
counted from the sync's end, that step included.

Files (N jobs each, nothing due in the span):
  same    N daily `each` jobs all due tomorrow at 06:00 (a fleet's 06:00 run)
  spread  N daily `each` jobs due tomorrow, one a minute from 06:00
  mix     N daily jobs due tomorrow at 06:00, a quarter each of `each`,
          `who:pico` (this board), `any:0.5`, `one`
  runs    as same, but RUNS of the N due today at 01:05: their runs pass
          store.LOG_MAX and the loop compacts; the span starts RUNS_SPAN_S
          after the sync (the idle hours after a fleet's burst of runs)

The 100-job figure is the baseline of the 1,000-job one, in the same run.
Without the emulated Pico (or --board unix) the unix board (companion
vboard, its clock 600x) runs the same loop from `companion image --board
unix` of the same fleet, synced the same way, and awake is its
interpreter's CPU time (10 ms ticks: coarse); `board` says which board
each key came from.

Last line JSON: {"awake_ms_per_idle_hour": {"100", "1000", "spread_100",
"spread_1000", "mix_100", "mix_1000", "runs_100", "runs_1000"}, "instructions_per_idle_hour",
"after_sync_ms", "awake_ms_per_hour_from_sync" (same keys), "ratio_1000_vs_100",
"targets", "runs", "board"}.
"""
import argparse
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for p in (HERE, os.path.join(ROOT, 'firmware'), ROOT):
    if p not in sys.path:
        sys.path.insert(0, p)

T0 = 1796083200            # 2026-12-01T00:00Z
T_SET = T0 + 3600          # the sync sets the clock to 01:00; the jobs are due tomorrow 06:00
RUNS = 24                  # 'runs': jobs due at 01:05, their records past store.LOG_MAX (a compaction)
RUNS_SPAN_S = 900          # 'runs': the span starts this long after the sync, their runs done
TARGET_MS = 300
TARGET_RATIO = 1.2


def job_texts(kind, n):
    """The `companion add` arguments of a file: see the module's doc."""
    out = []
    if kind == 'runs':
        out = ['each 2026-12-01T01:05Z log r%d ; every=1d' % i for i in range(RUNS)]
        n -= RUNS
    for i in range(n):
        if kind == 'spread':
            at = T0 + 86400 + 6 * 3600 + 60 * i
            out.append('each %s log s%d ; every=1d' % (_iso(at), i))
            continue
        what = 'each'
        if kind == 'mix':
            what = ('each', 'who:pico', 'any:0.5', 'one')[i % 4]
        out.append('%s 2026-12-02T06:00Z log j%d ; every=1d' % (what, i))
    return out


def _iso(t):
    return time.strftime('%Y-%m-%dT%H:%MZ', time.gmtime(t))


def make_fleet(tmp, kind, n, board='rp2-pico'):
    """(fleet folder, image file) made with the product's commands."""
    from companion import cli
    fleet = os.path.join(tmp, '%s%d.fleet' % (kind, n))
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        for argv in [['init']] + [['add', t] for t in job_texts(kind, n)]:
            if cli.main(['--fleet', fleet] + argv):
                raise RuntimeError('companion %s: %s' % (' '.join(argv), err.getvalue().strip()))
    img = os.path.join(tmp, '%s%d.bin' % (kind, n))
    p = subprocess.run([sys.executable, '-m', 'companion.cli', '--fleet', fleet, 'image', '--board', board,
                        '--id', 'pico-%s%d' % (kind, n), '-o', img], capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError('companion image: ' + (p.stderr.strip().splitlines() or ['?'])[-1])
    return fleet, img


def _flash_view(flash):
    from companion.make import image
    g = image.geometry('rp2-pico')
    for _ in range(5):
        try:
            with open(flash, 'rb') as f:
                f.seek(g['offset'])
                return image.read_image(f.read(g['size']), g)
        except Exception:
            time.sleep(0.05)
    return {}


def rp2_run(kind, n, hours, tmp, trace=False, timeout=3600, setup='image'):
    """One board: its figures over `hours` emulated hours of main.py's loop."""
    import rp2
    from companion.vboard.rp2 import RP2VBoard
    fleet, img = make_fleet(tmp, kind, n)
    name = '%s%d' % (kind, n)
    vb = RP2VBoard(os.path.join(tmp, name + '.flash'), firmware=rp2.UF2, bootrom=rp2.BOOTROM,
                   image=img if setup == 'image' else None, stats=os.path.join(tmp, name + '.stats'))
    vb.start()
    try:
        if setup == 'deploy':
            p = subprocess.run([sys.executable, '-m', 'companion.cli', '--fleet', fleet, 'deploy', vb.path, '--id',
                                'pico-%s%d' % (kind, n), '--board', 'rp2-pico', '-q'], capture_output=True, text=True)
            if p.returncode:
                raise RuntimeError('companion deploy: ' + (p.stderr.strip().splitlines() or ['?'])[-1])
        rp2._first_sleep_after(vb, -1, timeout)
        s_sync = rp2._sync_at(fleet, vb, T_SET)
        mark, _ = rp2._first_sleep_after(vb, s_sync['instructions'], timeout)
        since = vb.set_unpaced(True)
        if kind == 'runs':
            since = rp2._wait_emulated(vb, since, RUNS_SPAN_S, timeout)
        after_sync_ms = (since['cycles'] - s_sync['cycles']) / 125e3
        samples = []
        step = 600 if trace else hours * 3600
        t = 0
        last = since
        while t < hours * 3600 - 1:
            t = min(t + step, hours * 3600)
            st = rp2._wait_emulated(vb, since, t, timeout)
            if trace:
                files = _flash_view(vb.flash)
                idx = files.get('/wake.idx', b'').decode(errors='replace').split(' ')
                print('  %s +%5.0f s: %7.1f ms awake, %11d instructions, %4d wfis; log %d B, in %d B, jobs %d B, '
                      'idx key %s limit %s at %s' % (
                          name, st['emulated_s'] - since['emulated_s'], (st['cycles'] - last['cycles']) / 125e3,
                          st['instructions'] - last['instructions'], st['wfis'] - last['wfis'],
                          len(files.get('/log.txt', b'')), len(files.get('/in.txt', b'')),
                          len(files.get('/jobs.txt', b'')), idx[1] if len(idx) > 3 else '-',
                          idx[2] if len(idx) > 3 else '-', idx[3] if len(idx) > 3 else '-'), flush=True)
            samples.append(st)
            last = st
        b = samples[-1]
        vb.set_unpaced(False)
        span_h = (b['emulated_s'] - since['emulated_s']) / 3600
        return {'awake_ms_per_idle_hour': round((b['cycles'] - since['cycles']) / 125e3 / span_h, 1),
                'from_sync_ms_per_hour': round((b['cycles'] - s_sync['cycles']) / 125e3 / span_h, 1),
                'instructions_per_idle_hour': int((b['instructions'] - since['instructions']) / span_h),
                'wfis_per_hour': int((b['wfis'] - since['wfis']) / span_h),
                'boots': b['boots'] - since['boots'], 'hours': round(span_h, 2),
                'after_sync_ms': round(after_sync_ms, 1),
                'jobs_txt_bytes': len(_flash_view(vb.flash).get('/jobs.txt', b''))}
    finally:
        vb.stop()


def _cpu_s(pids):
    # user + system CPU seconds of processes (Linux /proc), the unix board's awake time
    t = 0
    for pid in pids:
        try:
            with open('/proc/%d/stat' % pid) as f:
                fields = f.read().rsplit(')', 1)[1].split()
            t += (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')
        except (OSError, IndexError, ValueError):
            pass
    return t


UNIX_SCALE = 600    # the unix board's clock runs 600x: an emulated hour is 6 wall s


def unix_run(kind, n, hours, tmp):
    """The fallback without the emulated Pico: the unix board (companion
    vboard, its clock SCALE x), the same fleet and image, the same sync;
    awake is the CPU time of its interpreter over the span (coarse: 10 ms
    ticks), per board hour."""
    from companion.vboard.board import VBoard
    import rp2
    fleet, img = make_fleet(tmp, kind, n, board='unix')
    vb = VBoard(image=img, heap='128K', clock_scale=UNIX_SCALE)
    vb.start()
    try:
        time.sleep(2)            # the boot (clock unknown: nothing dated runs)
        from companion.sync import syncer
        from companion.fleet.folder import Fleet
        t = time.monotonic()
        syncer.sync(Fleet(fleet), vb.path, progress=False, now=T_SET)
        pids = vb.interpreter_pids()
        c0 = _cpu_s(pids)
        time.sleep(3 + (RUNS_SPAN_S if kind == 'runs' else 360) / UNIX_SCALE)   # the pass after the sync (the runs)
        c1 = _cpu_s(vb.interpreter_pids())
        w = time.monotonic()
        time.sleep(hours * 3600.0 / UNIX_SCALE)   # hours of the board's clock
        c2 = _cpu_s(vb.interpreter_pids())
        span_h = (time.monotonic() - w) * UNIX_SCALE / 3600
        return {'awake_ms_per_idle_hour': round((c2 - c1) * 1e3 / span_h, 1), 'hours': round(span_h, 2),
                'after_sync_ms': round((c1 - c0) * 1e3, 1), 'instructions_per_idle_hour': None,
                'wfis_per_hour': None, 'boots': None, 'jobs_txt_bytes': os.path.getsize(os.path.join(fleet, 'jobs.txt')),
                'from_sync_ms_per_hour': round((c2 - c0) * 1e3 / span_h, 1)}
    finally:
        vb.stop()


def measure(board=None, hours=2.5, files=('same', 'spread', 'mix', 'runs'), sizes=(100, 1000), trace=False, setup='image'):
    """{'awake_ms_per_idle_hour': {...}, ..., 'board': {...}} (module doc)."""
    import rp2
    if board is None:
        board = 'unix' if rp2.missing(rp2.UF2, rp2.BOOTROM) else 'rp2'
    out = {'awake_ms_per_idle_hour': {}, 'instructions_per_idle_hour': {}, 'after_sync_ms': {},
           'awake_ms_per_hour_from_sync': {}, 'runs': {}, 'board': {}}
    tmp = tempfile.mkdtemp(prefix='scale-awake-')
    try:
        for kind in files:
            for n in sizes:
                key = str(n) if kind == 'same' else '%s_%d' % (kind, n)
                if board == 'rp2':
                    r = rp2_run(kind, n, hours, tmp, trace, setup=setup)
                else:
                    r = unix_run(kind, n, hours, tmp)
                out['runs'][key] = r
                out['awake_ms_per_idle_hour'][key] = r['awake_ms_per_idle_hour']
                out['instructions_per_idle_hour'][key] = r['instructions_per_idle_hour']
                out['after_sync_ms'][key] = r['after_sync_ms']
                out['awake_ms_per_hour_from_sync'][key] = r['from_sync_ms_per_hour']
                out['board'][key] = board
                print('%-7s %5d jobs (%6d B jobs.txt), %s: %7.1f ms awake per idle hour over %.2f h (%s instructions '
                      'an hour, %s wakes, %s boots); the step after the sync %.0f ms; counted from the sync\'s end %.1f ms an hour'
                      % (kind, n, r['jobs_txt_bytes'], board, r['awake_ms_per_idle_hour'], r['hours'],
                         r['instructions_per_idle_hour'], r['wfis_per_hour'], r['boots'], r['after_sync_ms'],
                         r['from_sync_ms_per_hour']), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    a = out['awake_ms_per_idle_hour']
    ratio = {}
    targets = {}
    for key in list(a):
        if key.endswith('1000'):
            base = key[:-4] + '100'
            if base in a and a[base]:
                ratio[key] = round(a[key] / a[base], 2)
                targets[key + '_le_%dms' % TARGET_MS] = a[key] <= TARGET_MS
                targets[key + '_le_1_2x_100'] = ratio[key] <= TARGET_RATIO
    out['ratio_1000_vs_100'] = ratio
    out['targets'] = targets
    if 'unix' in out['board'].values():
        out['note'] = ('unix: the interpreter\'s CPU time in %d ms ticks over the span, host-speed; coarse, '
                       'a check of the loop, not of a chip\'s budget' % (1000 // os.sysconf('SC_CLK_TCK')))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument('--hours', type=float, default=2.5)
    ap.add_argument('--files', default='same,spread,mix,runs')
    ap.add_argument('--sizes', default='100,1000')
    ap.add_argument('--board', choices=('rp2', 'unix'))
    ap.add_argument('--setup', choices=('image', 'deploy'), default='image')
    ap.add_argument('--trace', action='store_true', help='print the figures every 10 emulated minutes')
    a = ap.parse_args(argv)
    out = measure(a.board, a.hours, a.files.split(','), [int(x) for x in a.sizes.split(',')], a.trace, a.setup)
    print(json.dumps(out))


if __name__ == '__main__':
    main()
