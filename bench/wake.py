"""What a wake with nothing due costs (issue #15), with and without the wake
index (firmware/sporadic/device/wake.py), on the MicroPython unix port
under -X heapsize=64K (a board's heap).

    python bench/wake.py [--reps 5] [--sizes 100,1000,5000] [--rp2]
    python bench/wake.py --battery OUT     # the battery rows again, from a --rp2 run's output

A board's flash laid out as `companion image` writes it (provisioned by
companion.fleet.provision, jobs.txt + jobs.ok from companion.fleet.files.jobs_file)
holds a job file of N lines: N - 1 daily `each` jobs due tomorrow at
06:00, so nothing is due at the measured times. For each N and each mode
(index on; off = store.WAKE_INDEX False, the baseline, same run):

  - a first boot primes the board (open, one full pass: the index is
    written) and is not measured;
  - boot_to_sleep_us: the next power-on, median of REPS boots: from the
    first import to the return of the loop's first step (what precedes
    the sleep call): the store's open, the runtime, one step;
  - idle_wake_us: median of REPS later steps in that boot (a board that
    light-sleeps between wakes).

And on a second flash of N lines where one of the jobs is hourly (at :30,
the rest as above), primed the same way, one boot then steps at REPS + 1
successive :30s, each a wake at which 1 job of N is due:

  - first_due_wake_us: the first of them (its boot opened the store on the
    index's word, so this step hashes jobs.txt before it runs anything);
  - due_wake_us: the median of the REPS others (decide, run and record the
    one job, write the index again; a compaction when the log is full);
  - full_pass_us: then the index is cleared (as a sync, a compaction by a
    sync or a boot of a changed file leaves it) and one step at a time with
    nothing due measured: the full pass and the index it writes, what the
    first wake after a sync costs.


With --rp2, the same sizes on the real rp2 firmware in the emulated Pico
(bench/rp2.py's idle_wake(): instructions and chip ms of an idle step with
the index and without, awake seconds per idle hour; about 2 minutes a size
at 100 and 1,000 lines, more at 5,000 on a busy machine) and, from the
100-line figures, awake seconds a day and battery days (battery(),
docs/device.md); without it, or without the emulator, the rp2 entry says
why it was skipped.

JSON last line: {"sizes": {N: {"index": {...}, "baseline": {...}}}, ...,
"rp2": {N: {...}, "targets": {...}} or {"skipped": why}}.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for p in (os.path.join(ROOT, 'firmware'), ROOT):
    if p not in sys.path:
        sys.path.insert(0, p)

from companion.fleet import files  # noqa: E402
from sporadic.core import jobline  # noqa: E402
from sporadic.desktop import merging  # noqa: E402
from tests.devutil import make_flash, boot, T0  # noqa: E402
from tests.mpy import MPY_CROSS  # noqa: E402

DRIVER = r'''
import time, json
t0 = time.ticks_us()
from sporadic.device import store
store.WAKE_INDEX = %r
store.open_store()
from sporadic.device import runtime
rt = runtime.get()
t1 = time.ticks_us()
w = rt.step(%d)
t2 = time.ticks_us()
idle = []
for i in range(%d):
    a = time.ticks_us()
    rt.step(%d + 60 * (i + 1))
    idle.append(time.ticks_diff(time.ticks_us(), a))
print('RESULT ' + json.dumps({'boot_to_sleep_us': time.ticks_diff(t2, t0), 'open_us': time.ticks_diff(t1, t0),
                              'idle': idle, 'next_wake': w, 'jobs': rt.jobs}))
'''

DUE_DRIVER = r'''
import time, json
from sporadic.device import store
store.WAKE_INDEX = %r
store.open_store()
from sporadic.device import runtime
rt = runtime.get()
due = []
nxt = []
for i in range(%d):
    a = time.ticks_us()
    nxt.append(rt.step(%d + 3600 * i))
    due.append(time.ticks_diff(time.ticks_us(), a))
if store.WAKE_INDEX:
    from sporadic.device import wake
    wake.save(rt.store, None, None, 0, 0)   # cleared, as stamp.verify does
    wake = None
    import sporadic
    sporadic.forget('sporadic.device.wake')
a = time.ticks_us()
rt.step(%d)
full = time.ticks_diff(time.ticks_us(), a)
print('RESULT ' + json.dumps({'due': due, 'next': nxt, 'full_pass_us': full, 'jobs': rt.jobs}))
'''
HOURLY = 'each 2026-12-01T00:30Z log hourly ; every=1h'


def flash(tmp, n, hourly=False):
    jobs = []
    for i in range(n - 1):
        text = HOURLY if hourly and i == n // 2 else 'each 2026-12-02T06:00Z log job%d ; every=1d' % i
        jobs.append(jobline.parse_job(text, salt=str(i)).line())
    d = make_flash(os.path.join(tmp, 'flash' + ('-due' if hourly else '')), 'dev-1')
    for path, data in files.jobs_file('\n'.join(merging.merge(jobs)) + '\n'):
        with open(os.path.join(d, path.lstrip('/')), 'wb') as f:
            f.write(data)
    return d


def run(d, index, now, reps, heap, driver=None):
    src = os.path.join(d, 'benchdrv.py')
    with open(src, 'w') as f:
        f.write(driver or DRIVER % (index, now, reps, now))
    subprocess.run([MPY_CROSS, '-o', os.path.join(d, 'benchdrv.mpy'), src], check=True)
    os.remove(src)
    p = boot(d, 'import benchdrv', start=now, heap=heap, timeout=900, check=False)
    res = [l for l in p.stdout.splitlines() if l.startswith('RESULT ')]
    if p.returncode or not res:
        raise SystemExit('bench/wake.py: the board failed: %s' % (p.stderr.strip().splitlines() or ['?'])[-1])
    return json.loads(res[0][7:])


def aged(src, d):
    shutil.copytree(src, d)
    t = time.time() - 60      # flashed a minute before the first boot (wake.vouches: not "racy")
    for name in os.listdir(d):
        if os.path.isfile(os.path.join(d, name)):
            os.utime(os.path.join(d, name), (t, t))
    return d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--reps', type=int, default=5)
    ap.add_argument('--heap', default='64K')
    ap.add_argument('--sizes', default='100,1000,5000')
    ap.add_argument('--rp2', action='store_true', help='also on the emulated Pico (bench/rp2.py; minutes a size)')
    ap.add_argument('--typical', type=float, default=0, metavar='HOURS',
                    help='with --rp2: the typical file run HOURS emulated hours, index on and off '
                         '(bench/rp2.py typical_day; about 10 and 20 minutes for 24 h)')
    ap.add_argument('--battery', metavar='FILE', help="only the battery rows, from an earlier --rp2 run's output")
    a = ap.parse_args()
    if a.battery:
        with open(a.battery) as f:
            last = json.loads([l for l in f.read().splitlines() if l.startswith('{')][-1])
        print(json.dumps({'battery': battery(last['rp2']['100'], last['rp2'].get('typical'))}))
        return
    now = T0 + 3600          # 01:00: every job is due tomorrow at 06:00
    out = {'heap': a.heap, 'sizes': {}}
    for n in [int(x) for x in a.sizes.split(',')]:
        tmp = tempfile.mkdtemp(prefix='wake-bench-')
        try:
            base = flash(tmp, n)
            base_due = flash(tmp, n, hourly=True)
            row = {}
            for mode, index in (('index', True), ('baseline', False)):
                d = aged(base, os.path.join(tmp, mode))
                run(d, index, now, 1, a.heap)                       # the priming boot
                boots = [run(d, index, now + 600 * (i + 1), a.reps, a.heap) for i in range(a.reps)]
                assert all(b['jobs'] == n - 1 for b in boots), boots[0]
                row[mode] = {
                    'boot_to_sleep_us': int(statistics.median(b['boot_to_sleep_us'] for b in boots)),
                    'open_us': int(statistics.median(b['open_us'] for b in boots)),
                    'idle_wake_us': int(statistics.median(x for b in boots for x in b['idle'])),
                }
                d = aged(base_due, os.path.join(tmp, mode + '-due'))
                run(d, index, now, 1, a.heap)                       # the priming boot (01:00)
                at = now + 30 * 60 + 5                              # 01:30:05, 02:30:05, ...
                r = run(d, index, at, 0, a.heap, DUE_DRIVER % (index, a.reps + 1, at, at + (a.reps + 1) * 3600 - 1800))
                assert r['next'] == [at - 5 + 3600 * (i + 1) for i in range(a.reps + 1)], r['next']
                assert r['jobs'] == n - 1, r
                row[mode].update(first_due_wake_us=r['due'][0], due_wake_us=int(statistics.median(r['due'][1:])),
                                 full_pass_us=r['full_pass_us'])
            out['sizes'][str(n)] = row
            print('%5d lines: idle wake %7d us (baseline %8d), boot to sleep %7d us (baseline %8d), '
                  'due wake %7d us (baseline %8d), first after a boot %7d us, full pass %7d us'
                  % (n, row['index']['idle_wake_us'], row['baseline']['idle_wake_us'],
                     row['index']['boot_to_sleep_us'], row['baseline']['boot_to_sleep_us'],
                     row['index']['due_wake_us'], row['baseline']['due_wake_us'],
                     row['index']['first_due_wake_us'], row['index']['full_pass_us']))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    s = out['sizes']
    if '100' in s and '5000' in s:
        i5, i1 = s['5000']['index']['idle_wake_us'], s['100']['index']['idle_wake_us']
        out['targets'] = {'idle_wake_5000_le_3ms': i5 <= 3000, 'idle_wake_5000_le_1_5x_100': i5 <= 1.5 * i1}
    out['rp2'] = rp2_figures([int(x) for x in a.sizes.split(',')], a.typical) if a.rp2 else {'skipped': 'not asked (--rp2)'}
    print(json.dumps(out))


def rp2_figures(sizes, typical_hours=0):
    """bench/rp2.py's idle_wake() for each size, with #15's targets on the
    Pico, or {'skipped': why} without the emulator."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import rp2
    why = rp2.missing(rp2.UF2, rp2.BOOTROM)
    if why:
        return {'skipped': why}
    out = {}
    for n in sizes:
        try:
            w = rp2.idle_wake(n)
        except Exception as e:   # the board or the emulator failed: said in the entry, the run goes on
            out[str(n)] = {'error': '%s: %s' % (type(e).__name__, e)}
            print('%5d lines, rp2: %s' % (n, e), flush=True)
            continue
        out[str(n)] = {'bytes': w['bytes'], 'sync_to_sleep_instructions': w['sync_to_sleep'],
                       'power_on_to_sleep_indexed_instructions': w['power_on_to_sleep_indexed'],
                       'power_on_to_sleep_indexed_ms': w['power_on_to_sleep_indexed_ms'],
                       'sleeping_awake_s_per_h': w['sleeping']['awake_s_per_h']}
        for mode in ('index', 'baseline'):
            out[str(n)][mode] = {k: w[mode][k] for k in ('step_instructions', 'step_ms', 'first_step_instructions',
                                                         'first_step_ms', 'awake_s_per_idle_hour')}
        print('%5d lines, rp2: idle step %.2f M instructions = %.1f ms at 125 MHz (baseline %.1f M = %.0f ms); '
              'awake %.3f s per idle hour (baseline %.3f s)'
              % (n, w['index']['step_instructions'] / 1e6, w['index']['step_ms'],
                 w['baseline']['step_instructions'] / 1e6, w['baseline']['step_ms'],
                 w['index']['awake_s_per_idle_hour'], w['baseline']['awake_s_per_idle_hour']), flush=True)
    ok = {n: out[n] for n in out if 'error' not in out[n]}
    targets = {}
    big = max((int(n) for n in ok), default=None)
    if '100' in ok and big and big > 100:
        i1, ib = ok['100']['index'], ok[str(big)]['index']
        targets['idle_wake_%d_le_50ms' % big] = ib['step_ms'] <= 50
        targets['idle_wake_%d_le_1_5x_100' % big] = ib['step_ms'] <= 1.5 * i1['step_ms']
    if '100' in ok and '1000' in ok:
        targets['awake_per_idle_hour_1000_le_1_5x_100'] = (ok['1000']['index']['awake_s_per_idle_hour']
                                                           <= 1.5 * ok['100']['index']['awake_s_per_idle_hour'])
    out['targets'] = targets
    if typical_hours:
        out['typical'] = {('index' if index else 'baseline'): rp2.typical_day(typical_hours, index=index)
                          for index in (True, False)}
    if '100' in ok:
        out['battery'] = battery(ok['100'], out.get('typical'))
        for row in out['battery']:
            print('battery, %(board)s, %(file)s: awake %(before_s)s s a day before, %(after_s)s s after; '
                  '%(before_days)s days on 2xAA before, %(after_days)s after' % row, flush=True)
    return out


# docs/device.md ("Awake time and battery"): the assumptions, estimates not measured here
MAH = 2500                       # 2xAA alkaline, usable
ESP32_AWAKE_MA, ESP32_SLEEP_MA = 40.0, 0.010    # a bare module: CPU on, radio off; deep sleep, RTC timer on
PICO_AWAKE_MA, PICO_SLEEP_MA = 25.0, 1.5        # RP2040 at 125 MHz; machine.lightsleep(ms)


def battery(f, typical=None):
    """Awake seconds a day and days on 2xAA for an ESP32 and a Pico holding
    100 jobs, before (every wake a full pass) and after (the index), from
    the Pico's 100-line figures `f` (rp2_figures). Two files: 'idle' (all
    daily at 06:00: 22 idle wakes a day, the due one and the pass after its
    runs full passes) and 'typical' (daily each at the whole hours, hourly
    any, a one: something is due at every hourly wake, 24 full passes either
    way). A Pico light-sleeps between wakes (its watchdog's chunk wakes
    counted: sleeping_awake_s_per_h) and steps once an hour; an ESP32
    deep-sleeps, every wake a boot, costed as the Pico's chip time of the
    same boot (an estimate: not measured on an ESP32). typical: bench/rp2.py's
    typical_day() figures {'index': ..., 'baseline': ...}: the Pico's typical
    row is then measured (a day of the loop, index on and off), not costed."""
    idle_ms, full_ms = f['index']['step_ms'], f['baseline']['step_ms']
    boot_ms = f['power_on_to_sleep_indexed_ms']
    # a boot without a matching index hashes jobs.txt: the baseline's first step does that
    boot_full_ms = boot_ms + f['baseline']['first_step_ms']
    rows = []
    for name, full_after in (('idle', 2), ('typical', 24)):
        for board in ('ESP32', 'Pico'):
            measured = board == 'Pico' and name == 'typical' and typical
            if measured:
                before = typical['baseline']['awake_s_per_day']
                after = typical['index']['awake_s_per_day']
                awake_ma, sleep_ma = PICO_AWAKE_MA, PICO_SLEEP_MA
            elif board == 'Pico':
                base = 24 * f['sleeping_awake_s_per_h']
                before = base + 24 * full_ms / 1e3
                after = base + (full_after * full_ms + (24 - full_after) * idle_ms) / 1e3
                awake_ma, sleep_ma = PICO_AWAKE_MA, PICO_SLEEP_MA
            else:
                before = 24 * boot_full_ms / 1e3
                after = (full_after * boot_full_ms + (24 - full_after) * (boot_ms + idle_ms)) / 1e3
                awake_ma, sleep_ma = ESP32_AWAKE_MA, ESP32_SLEEP_MA
            row = {'board': board, 'file': name, 'measured_day': bool(measured)}
            for k, s in (('before', before), ('after', after)):
                mah = (s * awake_ma + (86400 - s) * sleep_ma) / 3600
                row[k + '_s'] = round(s, 1)
                row[k + '_mah_day'] = round(mah, 3)
                row[k + '_days'] = int(MAH / mah)
            rows.append(row)
    return rows


if __name__ == '__main__':
    main()
