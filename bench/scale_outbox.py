"""The outbox at a user's scale (issue #27): a month of 10 hourly jobs with
no sync, then one sync.

    python bench/scale_outbox.py [--hours 720] [--jobs 10]    # JSON last line
    (bench/scale.py runs it with the other bench/scale_*.py modules)

The board is set up as a user sets it up: `companion init` (signed),
`companion vboard` (the unix port, 128K heap), `deploy`, `add` of JOBS
hourly jobs, `sync` (the clock). Its flash is then copied, and the loop as
main.py runs it (boot.main) runs HOURS board hours on the step clock (time
moves only when the board sleeps: the month takes the board's own work) on
each copy:

  - new: the firmware as it is (device/outbox.py: log.txt renamed, one
    outcome line a result since #31 moved the action's start to run.txt;
    packed on flash only when the flash runs short, packed on the wire);
  - baseline: the same firmware with store.PACK False (never packed on
    flash), the same run: the same bytes while the flash has room. The
    code before #27 kept full lines with a `run` record before each
    outcome: 103.7 bytes a result; #27's on-flash packing made it 38.6, at
    the cost of writing every record twice (#31).

Figures:

  - outbox_bytes_per_result: the outbox's bytes on flash over the results
    it holds (new, and the baseline beside it);
  - results_in_one_sync: the results of the month that arrived in one
    `companion sync` of the new board (counted in the fleet's results.txt;
    the month's instances: JOBS x HOURS), with its wire bytes and seconds.
    The baseline beside it is the figure measured before #27 (issue #27:
    every sync failed once about 120 results were waiting, the old code's
    `O` answer built in RAM: 0 arrived), not measured again here: the old
    sync code is gone;
  - results_in_one_sync_64K: the same sync tried at -X heapsize=64K on a
    copy (what arrived, and the error when the sync breaks off);
    outbox_handover_64K: the records the outbox hand-over alone (a sync's
    soft reset and `T`, then outbox.outbox: `O` pieces and `A`) moved from
    that 64K board (the signed reconciliation before it is what a 64K
    sync of this port's .mpy firmware runs out of memory in).

With board "rp2" (the Pico firmware present): the new board's outbox files,
as its loop wrote them on the unix port, are copied onto an emulated Pico
deployed as the same board (`companion deploy --id`, `mpremote cp`), and
the Pico hands them over in one `companion sync` (with the log.txt not
sealed into the outbox yet, also copied): results_in_one_sync is
then the Pico's (its month of running is the unix port's: a month of the
emulated chip's loop is hours of emulation).
"""
import argparse
import json
import os
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

HOST = 'b-1'
BASELINE_RESULTS_IN_ONE_SYNC = 0   # issue #27, measured before: every sync failed at ~120 results


def _outbox_bytes(flash):
    d = os.path.join(flash, 'out')
    return sum(os.path.getsize(os.path.join(d, n)) for n in os.listdir(d) if n.lstrip('p').isdigit())


def _month_rows(fleet_dir, ids, hours):
    from companion.fleet.folder import Fleet
    n = set()
    for r in Fleet(fleet_dir).results():
        if r.id in ids and r.k < hours and r.outcome != 'run':
            n.add((r.id, r.k))
    return len(n)


def setup(tmp, jobs):
    """A fleet and a deployed, synced board; returns (cli, flash, ids, t0)."""
    from tests.devutil import CLI
    from companion.fleet.folder import Fleet
    from sporadic.core import jobline
    cli = CLI(os.path.join(tmp, 'fleet'))
    flash = os.path.join(tmp, 'flash')
    cli('init', '--name', 'scale')
    vb = cli.vboard('--id', HOST, '--flash', flash, '--heap', '128K')
    try:
        cli('deploy', vb.path, '--id', HOST)
        for i in range(jobs):
            cli('add', 'each +1h log j%d ; every=1h within=1h' % i)
        cli('sync', vb.path)
    finally:
        cli.stop_boards()
    js = [jobline.parse(l) for l in Fleet(cli.dir).lines() if l[:1] != '.' and l.split()[1] == 'each']
    return cli, flash, {j.id for j in js}, min(j.t0 for j in js)


def run_loop(flash, until, pack=True):
    """main.py's loop (boot.main) on the step clock until board time `until`."""
    from tests.devutil import boot
    code = ('from sporadic.device import store\nstore.PACK = %r\n'
            'from sporadic.device import boot\nboot.main(until=%d)\n' % (pack, until))
    t = time.monotonic()
    boot(flash, code, heap='128K', timeout=3600)
    return time.monotonic() - t


def sync_once(fleet_dir, flash, heap):
    from companion.sync import syncer
    from companion.fleet.folder import Fleet
    from companion.vboard.board import VBoard
    vb = VBoard(flash, board_id=HOST, heap=heap)
    vb.start()
    try:
        t = time.monotonic()
        try:
            rep = syncer.sync(Fleet(fleet_dir), vb.path, progress=False)
            return rep, time.monotonic() - t, None
        except Exception as e:
            return None, time.monotonic() - t, str(e)
    finally:
        vb.stop()


def outbox_only(fleet_dir, flash, heap):
    """The outbox hand-over alone (companion/sync/outbox.py, what a sync does after the
    reconciliation: `O` pieces and `A`) over the board's serial line, after
    the soft reset and `T` a sync starts with: what a board at `heap` hands
    over when the reconciliation before it is not what runs out of memory.
    Returns (records handed over, seconds, error)."""
    from companion.sync import outbox, syncer
    from companion.fleet.folder import Fleet
    from companion.link.serial import SerialLink
    from companion.vboard.board import VBoard
    vb = VBoard(flash, board_id=HOST, heap=heap)
    vb.start()
    t = time.monotonic()
    try:
        link = SerialLink(vb.path)
        try:
            syncer.fresh_heap(link)
            ans = link.call('T %d' % int(time.time())).split()
            got = outbox.outbox(Fleet(fleet_dir), ans[0], lambda r: link.call(r, stream=True), link.call,
                                int(ans[2]), [])
            return got['records'], time.monotonic() - t, None
        finally:
            link.close()
    except Exception as e:
        return 0, time.monotonic() - t, str(e)[:300]
    finally:
        vb.stop()


def rp2_sync(tmp, fleet_dir, outbox_dir, ids, hours):
    """The outbox files copied onto an emulated Pico deployed as the same
    board, then one sync (see the top)."""
    from companion.vboard.rp2 import RP2VBoard
    from companion.sync import syncer
    from companion.fleet.folder import Fleet
    fleet = Fleet(fleet_dir)
    from tests.devutil import CLI
    vb = RP2VBoard(os.path.join(tmp, 'pico.flash'), firmware=os.environ['SPORADIC_RP2_UF2'],
                   bootrom=os.environ['SPORADIC_RP2_BOOTROM'])
    vb.start()
    try:
        CLI(fleet_dir).run('deploy', vb.path, '--id', HOST, '--board', 'rp2-pico', '-q', timeout=900)
        names = sorted(n for n in os.listdir(outbox_dir) if n.lstrip('p').isdigit())
        args = [sys.executable, '-m', 'mpremote', 'connect', vb.path,
                'exec', "import os\ntry:\n os.mkdir('out')\nexcept OSError:\n pass", '+']
        for n in names:
            args += ['fs', 'cp', os.path.join(outbox_dir, n), ':out/' + n, '+']
        log = os.path.join(outbox_dir, 'log.txt')
        if os.path.exists(log):     # the records not sealed into the outbox yet
            args += ['fs', 'cp', log, ':log.txt', '+']
        p = subprocess.run(args[:-1], capture_output=True, text=True, timeout=3600)
        if p.returncode:
            return {'error': 'mpremote cp: ' + p.stderr[-300:]}
        t = time.monotonic()
        rep = syncer.sync(fleet, vb.path, progress=False)
        return {'results': _month_rows(fleet_dir, ids, hours), 'sync_s': round(time.monotonic() - t, 1),
                'wire_bytes': rep['bytes'], 'heap': (rep['status'] or {}).get('heap')}
    except Exception as e:
        return {'error': str(e)[:300]}
    finally:
        vb.stop()


def measure(board='unix', hours=720, jobs=10):
    tmp = tempfile.mkdtemp(prefix='scale-outbox-')
    try:
        cli, flash, ids, t0 = setup(tmp, jobs)
        until = t0 + (hours - 1) * 3600 + 1800      # instances 0 .. hours-1 are due
        base = os.path.join(tmp, 'flash-baseline')
        shutil.copytree(flash, base, symlinks=True)
        loop_s = run_loop(flash, until, True)
        base_s = run_loop(base, until, False)
        from tests.devutil import outbox_lines
        held = [l for l in outbox_lines(flash) if l[:8] in ids and l.split()[5] != 'run']
        held_base = [l for l in outbox_lines(base) if l[:8] in ids and l.split()[5] != 'run']
        per = _outbox_bytes(flash) / float(len(held))
        per_base = _outbox_bytes(base) / float(len(held_base))
        kept = os.path.join(tmp, 'out-kept')
        shutil.copytree(os.path.join(flash, 'out'), kept)
        if os.path.exists(os.path.join(flash, 'log.txt')):
            shutil.copy(os.path.join(flash, 'log.txt'), os.path.join(kept, 'log.txt'))
        fleet_kept = os.path.join(tmp, 'fleet-kept')
        shutil.copytree(cli.dir, fleet_kept)
        # the 64K attempt on copies first, then the sync at the default heap
        f64, fl64 = os.path.join(tmp, 'fleet-64'), os.path.join(tmp, 'flash-64')
        shutil.copytree(cli.dir, f64)
        shutil.copytree(flash, fl64, symlinks=True)
        rep64, s64, err64 = sync_once(f64, fl64, '64K')
        n64, o64_s, o64_err = outbox_only(f64, fl64, '64K')
        rep, sync_s, err = sync_once(cli.dir, flash, '128K')
        got = _month_rows(cli.dir, ids, hours)
        out = {
            'results_in_one_sync': got,
            'results_in_one_sync_baseline': BASELINE_RESULTS_IN_ONE_SYNC,
            'results_waiting': len(held),
            'results_in_one_sync_64K': _month_rows(f64, ids, hours),
            'sync_64K_error': err64,
            'outbox_handover_64K': n64,
            'outbox_handover_64K_s': round(o64_s, 1),
            'outbox_handover_64K_error': o64_err,
            'sync_s': round(sync_s, 1),
            'sync_wire_bytes': rep['bytes'] if rep else None,
            'sync_error': err,
            'outbox_bytes_per_result': round(per, 1),
            'outbox_bytes_per_result_baseline': round(per_base, 1),
            'month_loop_s': round(loop_s, 1),
            'month_loop_s_baseline': round(base_s, 1),
            'jobs': jobs, 'hours': hours,
            'board': {'results_in_one_sync': 'unix', 'outbox_bytes_per_result': 'unix'},
        }
        if board == 'rp2':
            r = rp2_sync(tmp, fleet_kept, kept, ids, hours)
            out['rp2'] = r
            if 'results' in r:
                out['results_in_one_sync_unix'] = got
                out['results_in_one_sync'] = r['results']
                out['board']['results_in_one_sync'] = 'rp2'
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def show(d):
    print('outbox: %d results waiting after %d board hours of %d hourly jobs, no sync'
          % (d['results_waiting'], d['hours'], d['jobs']))
    print('  results in one sync:      %6d   (before #27: %d, every sync failed at ~120)  [%s]'
          % (d['results_in_one_sync'], d['results_in_one_sync_baseline'], d['board']['results_in_one_sync']))
    print('  ... at -X heapsize=64K:   %6d   %s' % (d['results_in_one_sync_64K'], d['sync_64K_error'] or ''))
    print('  outbox alone at 64K:      %6d   in %s s %s' % (d['outbox_handover_64K'], d['outbox_handover_64K_s'],
                                                          d['outbox_handover_64K_error'] or ''))
    print('  outbox bytes per result:  %6.1f   (baseline, raw log segments: %.1f)'
          % (d['outbox_bytes_per_result'], d['outbox_bytes_per_result_baseline']))
    print('  the sync: %s s, %s bytes on the wire %s' % (d['sync_s'], d['sync_wire_bytes'], d['sync_error'] or ''))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--hours', type=int, default=720)
    ap.add_argument('--jobs', type=int, default=10)
    ap.add_argument('--board', choices=['unix', 'rp2'], default=None)
    a = ap.parse_args(argv)
    from scale import board_of
    d = measure(a.board or board_of(), a.hours, a.jobs)
    show(d)
    print(json.dumps(d))


if __name__ == '__main__':
    main()
