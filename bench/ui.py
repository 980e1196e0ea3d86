"""Server time of the fleet page (`companion ui`, companion/ui/) on a fleet of
1,000 boards and 10,000 results, beside `companion status --json` on the same
folder (the baseline: one of the queries the page runs).

    python bench/ui.py [--boards 1000] [--results 10000] [--runs 3] [--keep DIR]

The fleet: a signed fleet folder (`companion init`'s Fleet.init), each board
provisioned by the library deploy and image use (provision.prepare/commit:
its secret, its signed host record, devices/ID.json), ten jobs added with
add_job (each, who:, any, one, a weekday cron in a zone), then results MAC'd
with each board's own secret and received as a sync receives them
(Fleet.receive: checked and merged into jobs.txt; add_results: the history),
and each board's devices/ID.json as a sync leaves it (last sync, drift,
a month of its sync times: hourly, 6-hourly or daily boards, the board's
status answer). Some instances ran on two
boards (duplicates), some boards missed, some are late.

Measured, each run cold (the fleet's per-process file cache emptied):
- render_ms: GET /state.json of a running page server (companion/ui/server.py):
  the server's own wall time for view.snapshot (its `render_ms`), the CPU time
  of its thread (`render_cpu_ms`: what a loaded machine does not change), and
  the wall time of the whole request (`request_ms`: the JSON and its transfer too);
- status_ms: `companion status --json` (cli.main, output discarded).
The last line is JSON; budget: render_ms < 1000.
"""
import argparse
import contextlib
import http.client
import io
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'firmware'))

import companion  # noqa: E402,F401  (zone rules for tz= jobs)
from sporadic.core import hmac, jobline  # noqa: E402
from companion.fleet import board_keys, folder as fleet_mod, provision  # noqa: E402
from companion.fleet.folder import Fleet  # noqa: E402
from companion.fleet.jobs_file import add_job  # noqa: E402

NOW = 1796083200 + 30 * 86400   # 2026-12-31T00:00Z
JOBS = [
    'each {t} log hourly ; every=1h within=10m',
    'each {t} sensor read ; every=15m within=5m on=pump',
    'who:gate {t} relay on 1 ; every=6h within=1h',
    'any:0.05 {t} upload ; every=1h within=30m tick=1m',
    'one {t} backup ; every=1d grace=10m',
    'each 2026-01-01T00:00Z pump on 30 ; at="0 6 * * 1-5" tz=Europe/Berlin within=1h',
    'each {t} log daily ; every=1d within=2h',
    'one {t} report ; every=12h grace=5m',
    'any:0.2 {t} cloud sync ; every=2h within=1h',
    'each {t} led blink 3 ; every=30m within=10m on=pump',
]


def build(folder, n_boards, n_results, seed=1):
    rnd = random.Random(seed)
    t = time.perf_counter()
    f = Fleet(folder)
    f.init('bench')
    with open(f.path('actions.py'), 'w') as fh:    # the user's actions, deployed onto every board
        fh.write(''.join('def %s(*a):\n    return 1\n\n' % n for n in ('sensor', 'upload', 'backup', 'pump',
                                                                         'report', 'relay', 'cloud')))
    hosts = ['%s-%d' % ('pump' if i % 3 else 'gate', i) for i in range(n_boards)]
    for h in hosts:
        provision.prepare(f, h, 'unix').commit()
    t0 = NOW - 7 * 86400
    from sporadic.core.timefmt import format_time
    jobs = [add_job(f, line.format(t=format_time(t0)), now=NOW - 8 * 86400 + i) for i, line in enumerate(JOBS)]
    jobs = [j for j in jobs if j.cal is None]
    secrets = {h: board_keys.device_secret(f, h) for h in hosts}
    lines = []
    for i in range(n_results):
        j = jobs[i % len(jobs)]
        h = hosts[rnd.randrange(n_boards)]
        k = rnd.randrange(max(1, (NOW - 3600 - t0) // j.every))
        at = j.t0 + k * j.every + rnd.randint(0, j.within - 1)
        out = rnd.choices(['ok', 'err', 'miss'], [90, 5, 5])[0]
        r = jobline.Result(j.id, h, k, at, out, output='asleep' if out == 'miss' else 'v=%d' % i)
        r.mac = hmac.mac_result(secrets[h], r.line())
        lines.append(r.line())
        if j.kind in ('any', 'one') and i % 50 == 0:      # a second board ran it too
            h2 = hosts[(hosts.index(h) + 1) % n_boards]
            r = jobline.Result(j.id, h2, k, at + 30, 'ok', output='v')
            r.mac = hmac.mac_result(secrets[h2], r.line())
            lines.append(r.line())
    for a in range(0, len(lines), 2000):     # as syncs receive them
        f.receive(lines[a:a + 2000], 'bench')
        f.add_results(lines[a:a + 2000])
    for i, h in enumerate(hosts):
        every = rnd.choice([3600, 6 * 3600, 86400])
        last = NOW - rnd.randint(60, every * (4 if i % 40 == 0 else 1))
        info = f.device(h)
        info.update({'last_sync': last, 'drift': rnd.randint(-3, 3), 'complete': True, 'port': '/dev/ttyUSB0',
                     # a month of its syncs (a devices/ID.json keeps up to 1,000)
                     'syncs': [last - every * n for n in range(30 * 86400 // every, -1, -1)][-1000:],
                     'status': {'clock': 'set', 'pending': rnd.randint(0, 5), 'quarantined': 0,
                                'trust': {'mode': 'signed', 'refusals': []}, 'store': {'recovered': []}}})
        f.save_device(info)
    return time.perf_counter() - t, len(lines)


def cold():
    fleet_mod._checked.clear()


def status_ms(folder):
    from companion import cli
    cold()
    t = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()) as out:
        rc = cli.main(['--fleet', folder, 'status', '--json'])
    ms = (time.perf_counter() - t) * 1000
    assert rc == 0
    return ms, json.loads(out.getvalue())


def page_ms(port):
    cold()
    t = time.perf_counter()
    c = http.client.HTTPConnection('127.0.0.1', port, timeout=120)
    c.request('GET', '/state.json?span=7d')
    r = c.getresponse()
    body = r.read()
    wall = (time.perf_counter() - t) * 1000
    assert r.status == 200, body[:200]
    st = json.loads(body)
    return (st['render_ms'], st['render_cpu_ms']), wall, st, len(body)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--boards', type=int, default=1000)
    ap.add_argument('--results', type=int, default=10000)
    ap.add_argument('--runs', type=int, default=3)
    ap.add_argument('--keep', help='build (or reuse) the fleet in this folder')
    a = ap.parse_args()
    base = a.keep or tempfile.mkdtemp(prefix='sporadic-bench-ui-')
    folder = os.path.join(base, 'fleet')
    try:
        if not os.path.isfile(os.path.join(folder, 'fleet.json')):
            took, n = build(folder, a.boards, a.results)
            print('built %d boards, %d result lines in %.1f s (%s)' % (a.boards, n, took, folder))
        from companion.ui.server import make_server
        clock = [NOW]
        srv = make_server(folder, port=0, now=lambda: clock[0])
        th = threading.Thread(target=srv.serve_forever, kwargs={'poll_interval': 0.05}, daemon=True)
        th.start()
        renders, cpus, walls, stats = [], [], [], []
        for i in range(a.runs):
            clock[0] = NOW + 60 * i          # a new minute: no cached answer
            (ms, cpu), wall, st, size = page_ms(srv.server_address[1])
            renders.append(ms)
            cpus.append(cpu)
            walls.append(wall)
            stats.append(status_ms(folder)[0])
        srv.shutdown()
        srv.server_close()
        assert not st['problems'], st['problems'][:3]
        assert len(st['boards']) == a.boards
        n_res = sum(b['ok'] + b['failed'] + b['missed'] for b in st['boards'])
        out = {'boards': len(st['boards']), 'results': n_res, 'duplicates': len(st['duplicates']),
               'timeline_rows': len(st['timeline']), 'state_bytes': size,
               'render_ms': round(statistics.median(renders), 1), 'render_cpu_ms': round(statistics.median(cpus), 1),
               'request_ms': round(statistics.median(walls), 1),
               'status_json_ms': round(statistics.median(stats), 1), 'runs': a.runs,
               'render_budget_ms': 1000, 'met': statistics.median(renders) < 1000}
        print('page: %.0f ms server time, %.0f ms of it on the CPU (%.0f ms the request, %d KB); '
              '`status --json`: %.0f ms (median of %d, cold; load average %.1f)'
              % (out['render_ms'], out['render_cpu_ms'], out['request_ms'], size // 1024, out['status_json_ms'],
                 a.runs, os.getloadavg()[0]))
        out['load_average'] = round(os.getloadavg()[0], 2)
        print(json.dumps(out))
    finally:
        if not a.keep:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == '__main__':
    main()
