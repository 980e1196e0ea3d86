"""What a sync costs at a fleet's scale (issue #27), on the real rp2
firmware in the emulated Pico (`companion vboard --board rp2-pico`) when
SPORADIC_RP2_UF2 / SPORADIC_RP2_BOOTROM name it, else on the unix port's
virtual board. Boards are set up with the product's commands only
(`companion init`, `add`, `image`, `deploy`, `sync`).

    python bench/scale_sync.py [--board rp2|unix] [--held 1000] [--new 30]
                               [--first 300] [--big 5000] [--ran 0]

Keys (measure(board) returns them; run alone, the last line is JSON):

- sync_30_onto_1000_s: a sync carrying --new new jobs onto a board holding
  --held (the held ones from `companion image`, the clock set by a first
  sync); beside it the board's work (instructions, flash sectors erased on
  the Pico), rounds and bytes, and the target (10 s);
- after_sync_instructions (the Pico): the loop's step after that sync,
  from its end to the board's next sleep (the store's open, the step, the
  wake index written); the first sync's own step (a full pass: the index
  is made) is waited for before the measured sync starts;
- unchanged_sync_wire_bytes / unchanged_sync_payload_bytes: the next sync,
  nothing changed on either side: every byte on the wire of
  `companion sync` (REPL framing, the interrupt and the board's chatter
  included), and the requests and answers alone;
- first_sync_300_vs_mpremote: a deployed board, --first jobs added, the
  first sync that carries them: its time over `mpremote cp` of as many
  bytes up the same line in the same run (the baseline);
- pico_jobs_synced: the largest file measured to take a sync of --new more
  (tried at --big jobs, then at --held).

Jobs are added with `companion add -f FILE` where the companion has it,
else one `add` each (the figure says which: `added_with`).
"""
import argparse
import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, 'firmware'))
sys.path.insert(0, HERE)

from companion.vboard.rp2 import RP2VBoard, missing  # noqa: E402
from rp2 import UF2, BOOTROM, mpremote, _first_sleep_after  # noqa: E402
from rp2_requests import profiled_sync  # noqa: E402

TARGET_S = 10.0


class _Skip(Exception):
    pass


def _cli(fleet, *args):
    from companion import cli
    out = io.StringIO()
    err = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = cli.main(['--fleet', fleet] + list(args))
    except SystemExit as e:
        rc = e.code
    if rc not in (None, 0):
        raise RuntimeError('companion %s: exit %s: %s' % (args[0], rc, err.getvalue().strip()[-300:]))
    if rc not in (None, 0):
        raise RuntimeError('companion %s: exit %s' % (args[0], rc))
    return out.getvalue()


def has_add_file():
    p = subprocess.run([sys.executable, '-m', 'companion.cli', 'add', '--help'], capture_output=True, text=True)
    return '-f' in p.stdout


def job_lines(n, tag):
    return ['each 2027-01-%02dT%02d:%02dZ log %s%d ; every=1d within=1h' % (1 + i % 28, i // 60 % 24, i % 60, tag, i)
            for i in range(n)]


def add_jobs(fleet, n, tag):
    """n jobs into the fleet as a user adds them: `add -f FILE` when the
    companion has it, else one `add` each. Returns how."""
    lines = job_lines(n, tag)
    if has_add_file():
        path = os.path.join(fleet, '..', 'add-%s.txt' % tag)
        with open(path, 'w') as f:
            f.write(''.join(l + '\n' for l in lines))
        _cli(fleet, 'add', '-f', path)
        return 'add -f'
    for l in lines:
        _cli(fleet, 'add', l)
    return 'add (one each)'


def cli_sync(fleet, port):
    """`companion sync PORT` as a user runs it: (seconds, wire bytes, stdout)."""
    t = time.monotonic()
    p = subprocess.run([sys.executable, '-m', 'companion.cli', '--fleet', fleet, 'sync', port],
                       capture_output=True, text=True, timeout=3600)
    dt = time.monotonic() - t
    if p.returncode:
        raise RuntimeError('companion sync: ' + (p.stderr.strip().splitlines() or ['?'])[-1])
    m = re.search(r'(\d+) bytes on the wire', p.stdout)
    return dt, int(m.group(1)) if m else None, p.stdout


class Board:
    """One board of the bench: the emulated Pico (from an image) or the unix
    port's virtual board (deployed)."""

    def __init__(self, kind, tmp, name, fleet, bare=False):
        # bare: MicroPython alone on a blank flash (the baseline's board: a
        # deployed one's loop has started the watchdog, which resets it
        # 8 s into an mpremote session on a Pico)
        self.kind = kind
        self.fleet = fleet
        self.vb = None
        self.proc = None
        if kind == 'rp2':
            img = None
            if not bare:
                img = os.path.join(tmp, name + '.img')
                _cli(fleet, 'image', '--board', 'rp2-pico', '--id', 'pico-1', '-o', img)
            self.vb = RP2VBoard(os.path.join(tmp, name + '.flash'), firmware=UF2, bootrom=BOOTROM, image=img,
                                stats=os.path.join(tmp, name + '.stats'))
            self.vb.start()
            self.path = self.vb.path
        else:
            from tests.devutil import VboardProcess
            self.proc = VboardProcess([sys.executable, '-m', 'companion.cli', '--fleet', fleet, 'vboard',
                                       '--id', 'unix-1', '--flash', os.path.join(tmp, name + '.flash')])
            self.path = self.proc.path
            if not bare:
                _cli(fleet, 'deploy', self.path, '--id', 'unix-1', '-q')

    def stats(self):
        return self.vb.stats(60) if self.vb else {}

    def stop(self):
        if self.vb:
            self.vb.stop()
        if self.proc:
            self.proc.stop()


def _profiled(fleet, b):
    if b.vb is not None:
        rows, total = profiled_sync(fleet, b.vb)
    else:
        rows, total = _profiled_unix(fleet, b.path)
    total['payload'] = sum(r['req'] + r['ans'] for r in rows)
    return rows, total


def _profiled_unix(fleet, port):
    from companion.sync import syncer
    from companion.fleet.folder import Fleet
    from companion.link.serial import SerialLink
    rows = []
    link = SerialLink(port)
    inner = link._call

    def timed(request, stream):
        answer = inner(request, stream)
        rows.append({'verb': request[:1], 'req': len(request), 'ans': len(answer)})
        return answer
    link._call = timed
    t = time.monotonic()
    try:
        rep = syncer.sync(Fleet(fleet), port, progress=False, link=link)
    finally:
        link.close()
    return rows, {'s': round(time.monotonic() - t, 1), 'lines_sent': rep['lines_sent'], 'bytes': rep['bytes'],
                  'rounds': rep['rounds']}


def sync_onto(kind, tmp, held, new, log, ran=0):
    """A board holding `held` jobs takes `new` more; then an unchanged sync.
    ran: jobs due at once besides, which the board runs after its first
    sync: the measured sync finds their records new on the board (a board
    that ran jobs since its last sync, as a fleet's do)."""
    fleet = os.path.join(tmp, 'held%d' % held, 'fleet')
    os.makedirs(os.path.dirname(fleet))
    _cli(fleet, 'init')
    how = add_jobs(fleet, held, 'h')
    now = time.strftime('%Y-%m-%dT%H:%MZ', time.gmtime())
    for i in range(ran):
        _cli(fleet, 'add', 'each %s log ran%d ; within=1h' % (now, i))
    b = Board(kind, tmp, 'held%d' % held, fleet)
    try:
        _, first = _profiled(fleet, b)
        log('%d held: first sync (the clock; the jobs came with the %s) %s' % (
            held, 'image' if kind == 'rp2' else 'deploy', json.dumps(first)))
        if b.vb is not None:
            # the loop's first step with the clock known (a full pass: no
            # index before it) ends before the measured sync starts
            s = b.stats()
            mark, _ = _first_sleep_after(b.vb, s['instructions'], 3600)
            log('%d held: the step after the first sync, %d instructions' % (held, mark - s['instructions']))
        add_jobs(fleet, new, 'n')
        s0 = b.stats()
        rows, tot = _profiled(fleet, b)
        s1 = b.stats()
        out = {'held': held, 'new': new, 'ran': ran, 'added_with': how, 's': tot['s'], 'rounds': tot['rounds'],
               'lines_sent': tot['lines_sent'], 'wire_bytes': tot['bytes'],
               'instructions': s1.get('instructions', 0) - s0.get('instructions', 0) or None,
               'sectors_erased': s1.get('erased_sectors', 0) - s0.get('erased_sectors', 0) if s1 else None,
               'per_request': [(r['verb'], r['req'], r['ans'], round(r.get('s', 0), 2), r.get('instr'), r.get('erased'))
                               for r in rows]}
        log('%d new onto %d%s: %.1f s, %d rounds, %s sectors erased, %s instructions; per request %s' % (
            new, held, ' (%d ran since)' % ran if ran else '', out['s'], out['rounds'], out['sectors_erased'], out['instructions'],
            json.dumps(out['per_request'])))
        if b.vb is not None:
            # the loop's step after that sync (main.py after the soft reset:
            # the store's open, the step, the index written), to its sleep
            mark, st = _first_sleep_after(b.vb, s1['instructions'], 3600)
            out['after_sync_instructions'] = mark - s1['instructions']
            out['after_sync_ms'] = round((st['cycles'] - s1['cycles']) / 125e3, 1)
            log('the step after it: %d instructions, ~%.0f ms of a 125 MHz chip' % (
                out['after_sync_instructions'], out['after_sync_ms']))
        # unchanged: as a user runs it (the wire, interrupt and framing included)
        _, wire, text = cli_sync(fleet, b.path)
        _, unch = _profiled(fleet, b)
        out['unchanged'] = {'wire_bytes': wire, 'payload_bytes': unch['payload'], 'rounds': unch['rounds'],
                            's': unch['s']}
        log('unchanged sync: %s B on the wire, %d B of requests and answers' % (wire, unch['payload']))
        return out
    finally:
        b.stop()


def first_sync(kind, tmp, n, log):
    """A board with no jobs (its clock set by a first sync) takes n new jobs
    in one sync; then `mpremote cp` of as many bytes up the same line."""
    fleet = os.path.join(tmp, 'first', 'fleet')
    os.makedirs(os.path.dirname(fleet))
    _cli(fleet, 'init')
    b = Board(kind, tmp, 'first', fleet)
    try:
        cli_sync(fleet, b.path)
        how = add_jobs(fleet, n, 'f')
        s0 = b.stats()
        dt, wire, text = cli_sync(fleet, b.path)
        s1 = b.stats()
    finally:
        b.stop()
    # the baseline: as many bytes up the same emulated USB line by mpremote cp
    blob = os.path.join(tmp, 'blob.txt')
    with open(blob, 'w') as f:
        f.write(('x' * 63 + '\n') * max(1, wire // 64))
    b = Board(kind, tmp, 'bare', fleet, bare=True)
    try:
        c0 = b.stats()
        _, dt_cp = mpremote(b.path, 'cp', blob, ':blob.txt')
        c1 = b.stats()
        ins = s1.get('instructions', 0) - s0.get('instructions', 0) or None
        out = {'jobs': n, 'added_with': how, 's': round(dt, 1), 'wire_bytes': wire,
               'Bps': round(wire / dt), 'mpremote_cp_s': round(dt_cp, 1),
               'mpremote_cp_Bps': round(os.path.getsize(blob) / dt_cp), 'ratio': round(dt / dt_cp, 2),
               'instructions': ins,
               'sectors_erased': s1.get('erased_sectors', 0) - s0.get('erased_sectors', 0) if s1 else None}
        if ins:
            # the emulator's pace in this run (instructions of the board a
            # second of the sync's wall time), and what mpremote cp itself
            # costs the board: what instruction count would give 2x
            # (docs/budgets.md#27)
            out['emulator_mips'] = round(ins / dt / 1e6, 1)
            out['mpremote_cp_instructions'] = c1.get('instructions', 0) - c0.get('instructions', 0)
        log('first sync of %d jobs: %d B in %.1f s (%d B/s), %s instructions on the board (%s M a second); '
            'mpremote cp of the same bytes %.1f s (%s instructions): %.2fx' % (
                n, wire, dt, out['Bps'], out['instructions'], out.get('emulator_mips'), dt_cp,
                out.get('mpremote_cp_instructions'), out['ratio']))
        return out
    finally:
        b.stop()


def measure(board=None, held=1000, new=30, first=300, big=5000, log=print, ran=0):
    if board is None:
        board = 'unix' if missing(UF2, BOOTROM) else 'rp2'
    fig = {'board': {}}
    tmp = tempfile.mkdtemp(prefix='scale-sync-')
    try:
        try:
            if not held:
                raise _Skip
            r = sync_onto(board, tmp, held, new, log, ran)
            fig['sync_%d_onto_%d' % (new, held)] = r
            fig['sync_30_onto_1000_s'] = r['s']
            fig['sync_30_onto_1000_target_s'] = TARGET_S
            if 'after_sync_instructions' in r:
                fig['after_sync_instructions'] = r['after_sync_instructions']
            fig['unchanged_sync_wire_bytes'] = r['unchanged']['wire_bytes']
            fig['unchanged_sync_payload_bytes'] = r['unchanged']['payload_bytes']
            fig['unchanged_sync_targets'] = {'wire_bytes': 1024, 'payload_bytes': 128}
            fig['pico_jobs_synced'] = held
            for k in ('sync_30_onto_1000_s', 'unchanged_sync_wire_bytes', 'unchanged_sync_payload_bytes',
                      'pico_jobs_synced'):
                fig['board'][k] = board
        except _Skip:
            pass
        except Exception as e:
            fig['sync_onto_error'] = '%s: %s' % (type(e).__name__, e)
            log('sync onto %d failed: %s' % (held, fig['sync_onto_error']))
        try:
            if not first:
                raise _Skip
            r = first_sync(board, tmp, first, log)
            fig['first_sync_%d' % first] = r
            fig['first_sync_300_vs_mpremote'] = r['ratio']
            fig['board']['first_sync_300_vs_mpremote'] = board
        except _Skip:
            pass
        except Exception as e:
            fig['first_sync_error'] = '%s: %s' % (type(e).__name__, e)
            log('first sync failed: %s' % fig['first_sync_error'])
        if big and big > held:
            try:
                r = sync_onto(board, tmp, big, new, log)
                fig['sync_%d_onto_%d' % (new, big)] = r
                fig['pico_jobs_synced'] = big
                fig['board']['pico_jobs_synced'] = board
            except Exception as e:
                fig['big_error'] = '%d jobs: %s: %s' % (big, type(e).__name__, e)
                log('sync onto %d failed: %s' % (big, fig['big_error']))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return fig


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument('--board', choices=('rp2', 'unix'))
    ap.add_argument('--held', type=int, default=1000)
    ap.add_argument('--new', type=int, default=30)
    ap.add_argument('--first', type=int, default=300)
    ap.add_argument('--big', type=int, default=5000, help='0: skip')
    ap.add_argument('--ran', type=int, default=0, help='jobs the board runs between its two syncs')
    a = ap.parse_args(argv)
    fig = measure(a.board, a.held, a.new, a.first, a.big, log=lambda m: print(m, flush=True), ran=a.ran)
    print(json.dumps(fig))


if __name__ == '__main__':
    main()
