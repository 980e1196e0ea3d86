"""The fleet through an MQTT broker (issue #32, docs/mqtt.md): a real
Mosquitto on loopback, three virtual boards set up with the product's
commands (`companion vboard`, `deploy --mqtt URL`; b1 also `--sync-port`,
so that its TCP sync is measured beside its broker sync in the same run).

    python bench/mqtt.py [--heap 192K] [--heap-step 4] [--no-min-heap] [--keep]
    python bench/mqtt.py --min-heap-only --interpreter PATH   # the heaps alone, another micropython
                                                              # (e.g. a 32-bit build of the unix port)

Figures (b1's, from its `net?` status: the broker step's own counters,
MQTT packets in and out of its socket, as the TCP sync's figure is the
frames' bytes; neither counts TCP/IP headers):

- wake_to_sleep_ms: a broker step with nothing new, connect to disconnect
  (the board's loop is away from its jobs that long);
- unchanged_sync_bytes: the bytes of that step; beside it the TCP sync of
  the same board with nothing new (`companion sync HOST:PORT`);
- new10_sync_bytes: the step that takes b1's 10 new records up (5 jobs run:
  a run and an outcome record each), beside the TCP sync that takes the same
  10 records (companion sync over TCP right after);
- propagation_ms: a `one` job's done record, from the run (the runner's
  action log) to the job files of the two other boards (the slower of the
  two), through the broker alone; median of 3 (and the max).
- broker_sync_min_heap_kib: the smallest `-X heapsize` (KiB, bisected
  --heap-step apart) at which a board deployed with `--mqtt` alone wakes
  and syncs through the broker: connect, take the whole retained snapshot
  (its subscription marker removed: a new subscription) and 10 records
  another board published while it slept (5 `one` jobs it then does not
  run), merge, run its own due job, publish its records, disconnect; beside
  it tcp_sync_min_heap_kib: the same fleet's board deployed with
  `--sync-port` alone, synced twice over TCP by the companion (the same
  lines and 10 records down, its result up). The 64-bit unix port with the
  firmware as deployed (an upper bound for a 32-bit board).

The last line is JSON.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from tests.broker import Mosquitto, mosquitto_path, ones_run_while_asleep  # noqa: E402
from tests.devutil import CLI, PortReservation, actlog, wait_for  # noqa: E402

TRIAL_S = 30        # a heap trial's time for its outcome (a board whose heap is too small never gets there)


def in_files(folder, needle):
    for name in ('jobs.txt', 'in.txt'):
        try:
            with open(os.path.join(folder, name)) as f:
                if needle in f.read():
                    return True
        except OSError:
            pass
    return False


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--heap', default='192K')
    ap.add_argument('--keep', action='store_true')
    ap.add_argument('--heap-step', type=int, default=4, help='KiB between two heap trials (default 4)')
    ap.add_argument('--no-min-heap', action='store_true', help='skip the smallest-heap figures')
    ap.add_argument('--min-heap-only', action='store_true', help='only the smallest-heap figures')
    ap.add_argument('--interpreter', help='the micropython the boards run (SPORADIC_MICROPYTHON)')
    a = ap.parse_args()
    if mosquitto_path() is None:
        sys.exit('bench/mqtt.py: mosquitto not installed (Debian: apt-get install mosquitto)')
    if a.interpreter:
        os.environ['SPORADIC_MICROPYTHON'] = os.path.abspath(a.interpreter)
    if a.min_heap_only:
        tmp = tempfile.mkdtemp(prefix='bench-mqtt-')
        try:
            bm, tm = min_heaps(os.path.join(tmp, 'heap'), a.heap_step)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        print('the smallest heap (%s, %d KiB steps): through the broker %s KiB, over TCP %s KiB'
              % (a.interpreter or 'micropython', a.heap_step, bm, tm))
        print(json.dumps({'broker_sync_min_heap_kib': bm, 'tcp_sync_min_heap_kib': tm}, sort_keys=True))
        return
    tmp = tempfile.mkdtemp(prefix='bench-mqtt-')
    ports = PortReservation()
    bport, sport = ports.take(2)
    broker = Mosquitto(os.path.join(tmp, 'broker'), bport).start()
    c = CLI(os.path.join(tmp, 'fleet'))
    ids = ['b1', 'b2', 'b3']
    out = {}
    try:
        c('init')
        boards = {}
        for b in ids:
            vb = c.vboard('--id', b, '--flash', os.path.join(tmp, b), '--heap', a.heap)
            vb.flash = os.path.join(tmp, b)
            boards[b] = vb
        for b in ids:
            extra = ['--sync-port', sport] if b == 'b1' else []
            c('deploy', boards[b].path, '--id', b, '--mqtt', broker.url, *extra, '-q')
        ports.release()
        for b in ids:
            c('sync', boards[b].path, '-q')
        net = lambda: c.json('net', '127.0.0.1:%d' % sport)['mqtt']
        tcp = lambda: int(c('sync', '127.0.0.1:%d' % sport, '-q').split(' bytes on the wire')[0].rsplit(' ', 1)[1])
        c('sync', broker.url)

        # a propagation: a `one` job's done record, from the board that ran it to the
        # other two boards' files (records of single-run jobs go to every board; 3 times)
        prop = []
        for i in range(3):
            j = c('add', 'one +8s log prop%d ; within=10m grace=1m' % i).strip()
            c('sync', broker.url)

            def ran():
                for b in ids:
                    if actlog(boards[b].flash).get(j + '.0'):
                        return b, time.time()
            runner, t_run = wait_for(ran, 60, 'the one job run', every=0.02)
            seen = {}

            def everywhere():
                for b in ids:
                    if b != runner and b not in seen and in_files(boards[b].flash, '%s r %s 0 ' % (j, runner)):
                        seen[b] = time.time()
                return len(seen) == 2
            wait_for(everywhere, 60, 'the done record on the two other boards', every=0.02)
            prop.append(round(1000 * (max(seen.values()) - t_run)))
        out['propagation_ms'] = sorted(prop)[1]
        out['propagation_ms_max'] = max(prop)

        # unchanged: wait for a step that moved nothing, read it
        tcp()           # the companion holds everything b1 has
        def quiet():
            s = net()
            return s if s['syncs'] > quiet.n and s['bytes_last'] and s['lines_in'] == quiet.lin \
                and s['lines_out'] == quiet.lout else None
        s0 = net()
        quiet.n, quiet.lin, quiet.lout = s0['syncs'] + 1, s0['lines_in'], s0['lines_out']
        s = wait_for(quiet, 60, 'an unchanged broker step', every=0.2)
        samples = []
        for _ in range(5):
            quiet.n = s['syncs']
            s = wait_for(quiet, 60, 'an unchanged broker step', every=0.2)
            samples.append((s['ms_last'], s['bytes_last']))
        out['wake_to_sleep_ms'] = sorted(m for m, _ in samples)[len(samples) // 2]
        out['unchanged_sync_bytes'] = sorted(b for _, b in samples)[len(samples) // 2]
        out['tcp_unchanged_sync_bytes'] = tcp()

        # 10 new records on b1: 5 jobs only b1 runs, due at once
        s0 = net()
        at = time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(time.time() + 15))    # all five due at once
        js = [c('add', 'who:b1 %s log n%d ; within=10m' % (at, i)).strip() for i in range(5)]
        c('sync', broker.url)

        def ten_up():
            s = net()
            return s if s['lines_out'] >= s0['lines_out'] + 10 else None
        s = wait_for(ten_up, 90, 'b1\'s 10 records up', every=0.1)
        # the step that took them up (the board keeps its last few: ms, bytes, lines in, lines out)
        step = [st for st in s['steps'] if st[3] >= 10][-1]
        out['new10_sync_bytes'] = step[1]
        out['new10_lines_out'] = step[3]
        out['tcp_new10_sync_bytes'] = tcp()
        print('b1 through the broker: wake to sleep %d ms (unchanged), %d bytes unchanged, %d bytes with 10 new '
              'records; TCP sync of the same board: %d bytes unchanged, %d bytes with the same 10 records; '
              'a done record from its run to the two other boards: %d ms (median of 3, max %d)'
              % (out['wake_to_sleep_ms'], out['unchanged_sync_bytes'], out['new10_sync_bytes'],
                 out['tcp_unchanged_sync_bytes'], out['tcp_new10_sync_bytes'], out['propagation_ms'],
                 out['propagation_ms_max']))
        c.stop_boards()
        broker.stop()
        if not a.no_min_heap:
            bm, tm = min_heaps(os.path.join(tmp, 'heap'), a.heap_step)
            out['broker_sync_min_heap_kib'] = bm
            out['tcp_sync_min_heap_kib'] = tm
            print('the smallest heap (64-bit unix port, %d KiB steps) of a wake that takes the snapshot and 10 records '
                  'and puts its own up: through the broker %s KiB, over TCP (the same fleet, board and records) %s KiB'
                  % (a.heap_step, bm, tm))
    finally:
        c.stop_boards()
        broker.stop()
        ports.release()
        if a.keep:
            print('kept', tmp, file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(out, sort_keys=True))


def min_heaps(base, step):
    """(broker, tcp): the smallest heap (KiB) of each wake, by bisection;
    None when even 512 KiB does not do."""
    from companion.vboard.board import VBoard
    os.makedirs(base)
    ports = PortReservation()
    bport, sport = ports.take(2)
    broker = Mosquitto(os.path.join(base, 'broker'), bport).start()
    c = CLI(os.path.join(base, 'fleet'))
    fl = lambda b: os.path.join(base, b)
    url = broker.url
    try:
        c('init')
        vbs = {b: VBoard(fl(b), board_id=b, heap='512K') for b in ('hm', 'ht', 'h2')}
        paths = {b: v.start() for b, v in vbs.items()}
        c('deploy', paths['hm'], '--id', 'hm', '--mqtt', url, '-q')
        c('deploy', paths['h2'], '--id', 'h2', '--mqtt', url, '-q')
        c('deploy', paths['ht'], '--id', 'ht', '--sync-port', sport, '-q')
        ports.release()
        for b in vbs:
            c('sync', paths[b], '-q')
        c('add', 'each +1h log a fleet job ; every=1h within=10m')
        c('sync', url)
        # hm subscribed (its session is kept), then asleep; ht asleep; h2 runs five `one` jobs
        ones, mine = ones_run_while_asleep(c, url, fl, vbs, ('hm', 'ht'))
        broker.stop()
        os.remove(os.path.join(fl('hm'), 'mq.sub'))     # a new subscription: the whole retained snapshot
        saved = os.path.join(base, 'saved')
        for d in ('broker', 'fleet', 'hm', 'ht'):
            shutil.copytree(fl(d), os.path.join(saved, d))

        def restore(*names):
            for d in names:
                shutil.rmtree(fl(d))
                shutil.copytree(os.path.join(saved, d), fl(d))
        records = ['%s r h2 0 ' % j for j in ones]

        def broker_wake(k):
            restore('broker', 'fleet', 'hm')
            broker.start()
            vb = VBoard(fl('hm'), board_id='hm', heap='%dK' % k)
            try:
                vb.start()

                def done():
                    if not actlog(fl('hm')).get(mine['hm'] + '.0') or not vb.alive():
                        return False
                    c('sync', url)
                    return any(r['host'] == 'hm' and r['instance'] == mine['hm'] + '.0' for r in c.json('results'))
                wait_for(done, TRIAL_S, 'hm\'s wake', every=0.5)
                ok = all(in_files(fl('hm'), r) for r in records) and not any(actlog(fl('hm')).get(j + '.0')
                                                                            for j in ones)
            except Exception:
                ok = False
            finally:
                vb.stop()
                broker.stop()
            return ok

        def tcp_wake(k):
            restore('fleet', 'ht')
            vb = VBoard(fl('ht'), board_id='ht', heap='%dK' % k)
            where = '127.0.0.1:%d' % sport
            try:
                vb.start()
                wait_for(lambda: c.run('sync', where, '-q', ok=False).returncode == 0 or not vb.alive(), TRIAL_S,
                         'ht listening', every=0.5)
                if not (all(in_files(fl('ht'), r) for r in records) and vb.alive()):
                    return False
                wait_for(lambda: actlog(fl('ht')).get(mine['ht'] + '.0'), TRIAL_S, 'ht\'s job', every=0.5)
                c('sync', where, '-q')
                return any(r['host'] == 'ht' and r['instance'] == mine['ht'] + '.0' for r in c.json('results'))
            except Exception:
                return False
            finally:
                vb.stop()
        return smallest(broker_wake, step), smallest(tcp_wake, step)
    finally:
        broker.stop()
        ports.release()


def smallest(works, step, lo=8, hi=512):
    if not works(hi):
        return None
    while hi - lo > step:
        mid = (lo + hi) // 2
        if works(mid):
            hi = mid
        else:
            lo = mid
    return hi


if __name__ == '__main__':
    main()
