"""The fleet through an MQTT broker (issue #32, docs/mqtt.md): a real
Mosquitto on loopback, three virtual boards set up with the product's
commands (`companion vboard`, `deploy --mqtt URL`; b1 also `--sync-port`,
so that its TCP sync is measured beside its broker sync in the same run).

    python bench/mqtt.py [--heap 192K] [--keep]

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

from tests.broker import Mosquitto, mosquitto_path  # noqa: E402
from tests.devutil import CLI, PortReservation, actlog, wait_for  # noqa: E402


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
    a = ap.parse_args()
    if mosquitto_path() is None:
        sys.exit('bench/mqtt.py: mosquitto not installed (Debian: apt-get install mosquitto)')
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
    finally:
        c.stop_boards()
        broker.stop()
        ports.release()
        if a.keep:
            print('kept', tmp, file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(out, sort_keys=True))


if __name__ == '__main__':
    main()
