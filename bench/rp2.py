"""Figures from the real MicroPython rp2 firmware (RPI_PICO) on an emulated
Raspberry Pi Pico (companion vboard --board rp2-pico, rp2040js).

    SPORADIC_RP2_UF2=RPI_PICO.uf2 SPORADIC_RP2_BOOTROM=rp2040-bootrom-b1.bin \\
        python bench/rp2.py [--lines 1000,5000] [--syncs 300] [--sync-heap N,..] [--wake N,..]
    python bench/rp2.py --lines '' --syncs 300     # the sync figure alone (a deployed board)
    python bench/rp2.py --lines '' --syncs 0 --sync-heap 1000,5000   # 5. alone
    python bench/rp2.py --lines '' --syncs 0 --wake 100,1000,5000    # 6. alone
    python bench/rp2.py --lines '' --syncs 0 --idle 100,1000,5000    # 7. alone
    python bench/rp2.py --lines '' --syncs 0 --typical 24            # 8. alone (about 30 minutes)

Every board is driven through its USB-CDC line only (mpremote and the
companion; 5. also runs a heap sampler on the board over the raw REPL,
HEAP_SAMPLER):

1. free heap after boot (bare firmware, gc.collect(); gc.mem_free()), and
   with sporadic's store and runtime imported after `companion deploy`;
2. for each N of --lines: a job file of N lines (bench/device_heap.py's)
   copied onto the board with `mpremote cp` (throughput up, bytes/s), then
   opened by the store (a file without its stamp is imported again), two
   loop passes and a compaction with the heap sampled every 25 lines
   (device_heap's driver: "peak" is the highest gc.mem_alloc(), code
   included); the emulator's instruction count of it; watchdog resets seen
   (the RP2040's holds 8.3 s at most: every long pass must feed it);
3. instructions of one idle loop step (a pass that runs nothing) with the
   N-line file: the emulator counts the firmware's instructions (a Cortex-M0+
   at 125 MHz runs about one per cycle: the energy of a wake);
4. a signed sync carrying --syncs new job lines (bytes on the wire / s)
   beside `mpremote cp` up on the same line;
5. with --sync-heap N,...: the peak heap of a signed sync on a board holding
   N signed jobs (`companion image` of a fleet of N `companion add`s, booted
   with `vboard --image`), on this emulated Pico and on the 64-bit unix port
   virtual board, the same fleet and the same two syncs (the first sets the
   clock, the second carries --sync-new new jobs): see sync_heap();
6. with --wake N,...: instructions of a wake with an N-line job file, from
   power-on to the board's first sleep, and from the end of a sync to the
   next sleep (one full pass with the clock known): wake_instructions(),
   which other benchmarks import;
7. with --idle N,...: a wake with nothing due with an N-line job file, the
   wake index on and off: instructions and chip ms of the loop's idle
   step, the loop asleep between steps (the watchdog's chunk wakes), awake
   seconds per idle hour, a reset's boot with the index matching:
   idle_wake(), which bench/wake.py --rp2 calls.
8. with --typical HOURS: the typical 100-job file (typical_job_file) left to
   run its loop HOURS emulated hours after a sync set its clock, the wake
   index on and off: awake seconds a day from the cycles the core executed,
   and the results synced back: typical_day(), which bench/wake.py --rp2
   --typical calls.

The emulator runs at 0.3-0.45x a real RP2040 on a busy 2-core machine, so
seconds here are emulated-speed seconds; instruction counts and heap bytes
are the firmware's own. The last line is JSON.
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
import device_heap  # noqa: E402
from rp2_requests import add_jobs  # noqa: E402

SHARED = os.path.join(os.path.dirname(ROOT), 'shared', 'rp2')
UF2 = os.environ.get('SPORADIC_RP2_UF2') or os.path.join(SHARED, 'RPI_PICO-v1.28.0.uf2')
BOOTROM = os.environ.get('SPORADIC_RP2_BOOTROM') or os.path.join(SHARED, 'rp2040-bootrom-b1.bin')

STEP = '''
from sporadic.device import store
store.open_store()
from sporadic.device import runtime
rt = runtime.get()
rt.step(%d)
%s
print('RESULT', rt.jobs)
'''


def mpremote(port, *args, timeout=900):
    t = time.monotonic()
    p = subprocess.run([sys.executable, '-m', 'mpremote', 'connect', port] + list(args),
                       capture_output=True, text=True, timeout=timeout)
    if p.returncode:
        raise SystemExit('mpremote %s failed: %s' % (' '.join(args[:2]), (p.stderr.strip().splitlines() or ['?'])[-1]))
    return p.stdout, time.monotonic() - t


def companion(fleet, *args):
    t = time.monotonic()
    p = subprocess.run([sys.executable, '-m', 'companion.cli', '--fleet', fleet] + list(args),
                       capture_output=True, text=True, timeout=900)
    if p.returncode:
        raise SystemExit('companion %s failed: %s' % (args[0], p.stderr.strip()))
    return p.stdout, time.monotonic() - t


def result(out):
    for line in out.splitlines():
        if line.startswith('RESULT '):
            return line[7:]
    raise SystemExit('no RESULT in %r' % out[-500:])


class _Done(Exception):
    pass


# Installed by the bench over the raw REPL, after the sync's soft reset and
# before its first request (nothing of it is on the board's flash): the heap
# is sampled (gc.collect(), then gc.mem_alloc(), code included, as
# bench/device_heap.py does) at the start and end of every request and at
# every watchdog feed inside one (store.feed: every 64 lines read, in
# passes, compactions and deliveries). A peak between two samples is not
# seen: this is a high-water of samples, taken on the board.
HEAP_SAMPLER = '''
import gc
from sporadic import syncsrv as _S
def _sp_sample():
    gc.collect()
    a = gc.mem_alloc()
    if a > _S.sp_peak:
        _S.sp_peak = a
def _sp_fed(fed=_S._fed):
    _sp_sample()
    fed()
def _sp_wrap(f):
    def g(req):
        _sp_sample()
        try:
            return f(req)
        finally:
            _sp_sample()
    return g
gc.collect()
_S.sp_base = _S.sp_peak = gc.mem_alloc()
_S._fed = _sp_fed
_S.h = _sp_wrap(_S.h)
_S.w = _sp_wrap(_S.w)
'''


def sampled_sync(fleet_dir, port):
    """One `companion sync` (the product's syncer and serial link) with
    HEAP_SAMPLER on the board: returns (report, base, peak), bytes of the
    board's heap in use after the soft reset and at the highest sample."""
    from companion.sync import syncer
    from companion.fleet.folder import Fleet
    from companion.link.serial import SerialLink
    link = SerialLink(port)
    reset = link.soft_reset

    def reset_then_sample():
        reset()
        link.exec(HEAP_SAMPLER)
    link.soft_reset = reset_then_sample
    try:
        rep = syncer.sync(Fleet(fleet_dir), port, progress=False, link=link)
        base, peak = map(int, link.exec('from sporadic import syncsrv as _S\nprint(_S.sp_base, _S.sp_peak)').split())
    finally:
        link.close()
    return rep, base, peak


def sync_heap(held, new, tmp, unix_heap='512K'):
    """The peak heap of a signed sync on a board holding `held` signed jobs,
    on the emulated Pico (real rp2 firmware, paced) and on the 64-bit unix
    port (VBoard, heap `unix_heap`, its image as large as the jobs need).
    Both boot an image of the same fleet; a first sync sets their clocks;
    then `new` jobs are added and a second sync carries them. Returns
    {'rp2': {'first': {...}, 'new': {...}}, 'unix64': ...}, each sync with
    'peak', 'base' (bytes) and 's', or 'error': the one line that failed."""
    from companion import cli
    from companion.vboard.board import VBoard
    fleet = os.path.join(tmp, 'fleet%d' % held)
    with contextlib.redirect_stdout(io.StringIO()):
        cli.main(['--fleet', fleet, 'init'])
    add_jobs(fleet, held, 'h')
    jobs_bytes = os.path.getsize(os.path.join(fleet, 'jobs.txt'))
    out = {'held': held, 'new': new, 'jobs_txt_bytes': jobs_bytes}
    ports = {}
    boards = []
    try:
        flash_mb = max(2, -(-4 * jobs_bytes // (1 << 20)))
        images = {}
        # twice: each image adds its board's host line to the fleet, and both
        # boards are to hold the same fleet (the first sync then sends nothing)
        for _ in range(2):
            for name in ('rp2', 'unix64'):
                out[name] = {}
                img = images[name] = os.path.join(tmp, '%s-%d.bin' % (name, held))
                argv = ['--fleet', fleet, 'image', '--board', 'rp2-pico' if name == 'rp2' else 'unix',
                        '--id', '%s-%d' % (name, held), '-o', img]
                if name == 'unix64':
                    argv += ['--flash-size', '%dMB' % flash_mb]
                p = subprocess.run([sys.executable, '-m', 'companion.cli'] + argv, capture_output=True, text=True)
                if p.returncode:
                    out[name]['error'] = 'companion image: ' + (p.stderr.strip().splitlines() or ['?'])[-1]
                    images.pop(name)
        for name, img in images.items():
            if name == 'rp2':
                # paced: unpaced, idle time is skipped and the watchdog the loop
                # started (8 s) expires while the board waits for the host's bytes
                vb = RP2VBoard(os.path.join(tmp, 'sh%d.flash' % held), firmware=UF2, bootrom=BOOTROM, image=img)
            else:
                vb = VBoard(image=img, heap=unix_heap, flash_size='%dM' % flash_mb)
            boards.append(vb)
            ports[name] = vb.start()
        for name in ('rp2', 'unix64'):
            if name not in images:
                print('%s, %d held: %s' % (name, held, out[name]['error']), flush=True)
        for step in ('first', 'new'):
            if step == 'new':
                add_jobs(fleet, new, 'n')
            for name, port in ports.items():
                row = out[name]
                if 'error' in row.get('first', {}):
                    continue
                t = time.monotonic()
                try:
                    rep, base, peak = sampled_sync(fleet, port)
                except Exception as e:
                    row[step] = {'error': '%s: %s' % (type(e).__name__, e)}
                    print('%s, %d held, %s sync: %s' % (name, held, step, row[step]['error']), flush=True)
                    continue
                row[step] = {'base': base, 'peak': peak, 's': round(time.monotonic() - t, 1),
                             'lines_sent': rep['lines_sent'], 'bytes': rep['bytes']}
                print('%s, %d held (%d B jobs.txt), %s: peak heap %d B (%d B after the soft reset), %.1f s'
                      % (name, held, jobs_bytes, 'first sync' if step == 'first' else 'sync of %d new' % new,
                         peak, base, row[step]['s']), flush=True)
    finally:
        for vb in boards:
            vb.stop()
    return out


def _first_sleep_after(vb, since, timeout):
    """The instruction count at the board's first sleep (a WFI: run.mjs's
    sleep_marks) after instruction `since`, waiting up to timeout wall s."""
    deadline = time.monotonic() + timeout
    while True:
        st = vb.stats(60)
        marks = [m for m in st['sleep_marks'] if m > since]
        if marks:
            return marks[0], st
        if time.monotonic() > deadline:
            raise RuntimeError('the board did not sleep within %.0f s (%d boots)' % (timeout, st['boots']))
        time.sleep(0.5)   # polling the emulator's counters, not a timing assumption


def _sync_at(fleet, vb, now):
    """One `companion sync` of the emulated board vb at time now (its clock
    set) -> the emulator's stats once it is done; the board goes back to
    main.py."""
    from companion.sync import syncer
    from companion.fleet.folder import Fleet
    from companion.link.serial import SerialLink
    link = SerialLink(vb.path)
    try:
        syncer.sync(Fleet(fleet), vb.path, progress=False, link=link, now=now)
        return vb.stats(60)
    finally:
        link.close()


def imaged_fleet(tmp, name, job_lines):
    """(fleet folder, image file): an insecure fleet whose jobs.txt is
    job_lines, and `companion image --board rp2-pico` of it."""
    from companion import cli
    fleet = os.path.join(tmp, name + '.fleet')
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        cli.main(['--fleet', fleet, 'init', '--insecure'])
    with open(os.path.join(fleet, 'jobs.txt'), 'w') as f:
        f.write(''.join(l + '\n' for l in job_lines))
    img = os.path.join(tmp, name + '.bin')
    p = subprocess.run([sys.executable, '-m', 'companion.cli', '--fleet', fleet, 'image', '--board', 'rp2-pico',
                        '--id', 'pico-' + name.rstrip('0123456789'), '-o', img], capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError('companion image: ' + (p.stderr.strip().splitlines() or ['?'])[-1])
    return fleet, img


def wake_instructions(lines, tmp=None, timeout=900):
    """Instructions the real rp2 firmware executes in one wake of a board
    holding a `lines`-line job file (bench/device_heap.py's lines, an
    insecure fleet whose jobs.txt they are; `companion image --board
    rp2-pico`, booted with `vboard --image`), until it calls its sleep
    (machine.lightsleep: the first WFI, see run.mjs):

    power_on_to_sleep: from power-on (boot2 in flash; the boot ROM's few
      thousand instructions before it are not emulated) to the first sleep.
      A Pico has no battery-backed clock: its clock is unknown after a
      power-on or a reset, so nothing dated is due and the loop's step
      returns at once; this is boot + opening the store (stamp checked) +
      the imports.
    sync_to_sleep: a sync sets the clock (at T0 + 3 h: nothing due), the
      companion lets the board go (a soft reset into main.py) and it opens
      the store, runs one full pass of the loop with the clock known, and
      sleeps; counted from the end of the sync. The wake of a board that
      keeps its clock (an ESP32 from deep sleep) does this.

    Returns {'lines', 'bytes', 'power_on_to_sleep', 'sync_to_sleep',
    'boots'} (instructions; boots > 1: a watchdog reset on the way)."""
    own = tmp is None
    tmp = tmp or tempfile.mkdtemp(prefix='rp2wake-')
    vb = None
    try:
        fleet, img = imaged_fleet(tmp, 'wake%d' % lines, device_heap.job_file(lines))
        vb = RP2VBoard(os.path.join(tmp, 'wake%d.flash' % lines), firmware=UF2, bootrom=BOOTROM, image=img,
                       stats=os.path.join(tmp, 'wake%d.stats' % lines))
        vb.start()
        mark, st = _first_sleep_after(vb, -1, timeout)
        fig = {'lines': lines, 'bytes': os.path.getsize(os.path.join(fleet, 'jobs.txt')),
               'power_on_to_sleep': mark - st['boot_instructions']}
        since = _sync_at(fleet, vb, device_heap.T0 + 3 * 3600)['instructions']
        mark, st = _first_sleep_after(vb, since, timeout)
        fig['sync_to_sleep'] = mark - since
        fig['boots'] = st['boots']
        return fig
    finally:
        if vb is not None:
            vb.stop()
        if own:
            shutil.rmtree(tmp, ignore_errors=True)


# Over the raw REPL after the loop ran (bench only: nothing of it is written
# on the board): the loop's own step at the board's clock, first with the
# wake index as main.py runs it, then with store.WAKE_INDEX False (the
# baseline: every wake a full pass). Each step is followed by a
# machine.lightsleep(2), a WFI the emulator marks (sleep_marks), so the
# instructions between two marks are one step (less a mark alone, 'mark').
# Between the index's steps and the baseline's, the parts of an index step:
# a gc.collect() (a step makes two), the import of wake.py and its unload
# (every step), the index's read (five stats and its MAC).
IDLE_STEPS = '''
import time, machine, json, gc
import board, sporadic
from sporadic.device import store
store.feed = board.wdt_feed
board.wdt_feed()
store.open_store()
from sporadic.device import clock, runtime
rt = runtime.get()
labels = []
def mark(label):
    board.wdt_feed()
    machine.lightsleep(2)   # 1 or less: a time.sleep_ms, no WFI (ports/rp2/modmachine.c)
    labels.append(label)
def steps(mode, n):
    store.WAKE_INDEX = mode == 'index'
    us = []
    for i in range(n):
        now = clock.now()
        t = time.ticks_us()
        rt.step(now)
        us.append(time.ticks_diff(time.ticks_us(), t))
        mark(mode)
    print('RESULT', json.dumps({'mode': mode, 'now': now, 'us': us, 'jobs': rt.jobs, 'next_wake': rt.next_wake}))
mark('start')
mark('mark')
steps('index', %d)
gc.collect()
mark('gc_collect')
from sporadic.device import wake
sporadic.forget('sporadic.device.wake')
wake = None
mark('wake_import')
from sporadic.device import wake
mark('-')
f = wake.read(rt.store, rt.cfg.get('secret'))
mark('wake_read')
from sporadic.device import agenda
mark('-')
agenda.plan(rt, f, clock.now(), False, runtime.MAX_SLEEP)
mark('agenda_plan')
jobline_unload = runtime.jobline.unload
mark('-')
jobline_unload()
mark('jobline_unload')
wake = None
sporadic.forget('sporadic.device.wake')
steps('baseline', 2)
print('LABELS', json.dumps(labels))
'''
IDLE_REPS = 6      # index steps: all marks (IDLE_REPS + 12) within run.mjs's SLEEP_MARKS (32)


def idle_job_file(lines):
    """bench/wake.py's job file: lines - 1 daily `each` jobs, all due
    tomorrow at 06:00 (the image adds the board's .h line: `lines` in all)."""
    from sporadic.core import jobline
    from sporadic.desktop import merging
    return merging.merge(jobline.parse_job('each 2026-12-02T06:00Z log job%d ; every=1d' % i, salt=str(i)).line()
                         for i in range(lines - 1))


def _wait_emulated(vb, since, seconds, timeout):
    """The emulator's stats once its clock has run `seconds` past stats `since`."""
    deadline = time.monotonic() + timeout
    while True:
        st = vb.stats(60)
        if st['emulated_s'] - since['emulated_s'] >= seconds:
            return st
        if time.monotonic() > deadline:
            raise RuntimeError('the emulated clock did not advance %.0f s in %.0f s' % (seconds, timeout))
        time.sleep(0.5)   # polling the emulator's counters, not a timing assumption


def idle_wake(lines, tmp=None, window=60.0, timeout=900):
    """A Pico holding a `lines`-line job file with nothing due for a day
    (idle_job_file; an insecure fleet, `companion image --board rp2-pico`,
    booted with `vboard --image`, paced), its clock set by a sync at T0 +
    3 h; the loop's first pass then writes the wake index. Measured:

    sync_to_sleep: instructions from the end of the sync to the next sleep
      (main.py: the store's open, one full pass, the index written);
    sleeping: `window` emulated s of the loop asleep until its next wake
      (light sleep in chunks of WDT_MS / 2, each a wake that feeds the
      watchdog): the cycles the core executed (run.mjs's count: the core
      awake, seen from outside) as seconds per hour at 125 MHz, WFIs seen;
    index / baseline: one step of the loop with nothing due, the index on
      (the firmware as it is) and off (store.WAKE_INDEX False: a full
      pass), over the raw REPL (IDLE_STEPS): instructions between the
      emulator's sleep marks, and chip time (time.ticks_us on the board:
      the emulated clock, which advances by the executed cycles at 125 MHz
      while the core runs);
    awake_s_per_idle_hour: sleeping's seconds per hour + one step (a board
      with nothing due steps once an hour: MAX_SLEEP);
    power_on_to_sleep_indexed: instructions from a reset (the button) to
      the first sleep, the index matching the store: boot, the open (the
      stamp taken on the index's word), imports; the clock is unknown after
      a reset, so no step (what a deep-sleep wake adds to an idle step).

    Returns a dict; raises RuntimeError when the board fails."""
    own = tmp is None
    tmp = tmp or tempfile.mkdtemp(prefix='rp2idle-')
    vb = None
    try:
        fleet, img = imaged_fleet(tmp, 'idle%d' % lines, idle_job_file(lines))
        vb = RP2VBoard(os.path.join(tmp, 'idle%d.flash' % lines), firmware=UF2, bootrom=BOOTROM, image=img,
                       stats=os.path.join(tmp, 'idle%d.stats' % lines))
        vb.start()
        _first_sleep_after(vb, -1, timeout)
        fig = {'lines': lines, 'bytes': os.path.getsize(os.path.join(fleet, 'jobs.txt'))}
        since = _sync_at(fleet, vb, device_heap.T0 + 3 * 3600)['instructions']
        mark, st = _first_sleep_after(vb, since, timeout)
        fig['sync_to_sleep'] = mark - since
        a = vb.stats(60)
        b = _wait_emulated(vb, a, window, window * 4 + 60)
        span = b['emulated_s'] - a['emulated_s']
        fig['sleeping'] = {'emulated_s': round(span, 1), 'wfis': b['wfis'] - a['wfis'],
                           'instructions': b['instructions'] - a['instructions'],
                           'awake_s_per_h': round((b['cycles'] - a['cycles']) / 125e6 * 3600 / span, 4)}
        drv = os.path.join(tmp, 'idle_steps.py')
        with open(drv, 'w') as f:
            f.write(IDLE_STEPS % IDLE_REPS)
        before = vb.stats(60)
        out, _ = mpremote(vb.path, 'run', drv, timeout=timeout)
        st = vb.stats(60)
        if st['boots'] != before['boots']:
            raise RuntimeError('the board reset during the steps (watchdog?)')
        res = {}
        labels = None
        for line in out.splitlines():
            if line.startswith('RESULT '):
                r = json.loads(line[7:])
                res[r['mode']] = r
            elif line.startswith('LABELS '):
                labels = json.loads(line[7:])
        if set(res) != {'index', 'baseline'} or not labels:
            raise RuntimeError('no result from the steps: %r' % out[-300:])
        marks = [m for m in st['sleep_marks'] if m > before['instructions']]
        if len(marks) != len(labels):
            raise RuntimeError('%d sleep marks, %d expected: %r' % (len(marks), len(labels), marks))
        # what ran before each mark, less a mark alone
        mk = marks[labels.index('mark')] - marks[labels.index('mark') - 1]
        ran = {}
        for k in range(1, len(marks)):
            ran.setdefault(labels[k], []).append(marks[k] - marks[k - 1] - mk)
        fig['mark_instructions'] = mk
        fig['parts'] = {k: ran[k][0] for k in ('gc_collect', 'wake_import', 'wake_read', 'agenda_plan', 'jobline_unload')}
        for mode in ('index', 'baseline'):
            r = res[mode]
            if r['jobs'] != lines - 1:
                raise RuntimeError('%s: the step counted %d jobs, not %d' % (mode, r['jobs'], lines - 1))
            if r['next_wake'] - r['now'] != 3600:
                raise RuntimeError('%s: something is due (next wake %+d s)' % (mode, r['next_wake'] - r['now']))
            # the first step of each: the index's follows the open; the baseline's
            # hashes jobs.txt (the open took its stamp on the index's word); the
            # next ones are the loop's
            loop = sorted(ran[mode][1:])
            us = sorted(r['us'][1:])
            fig[mode] = {'first_step_instructions': ran[mode][0], 'first_step_ms': round(r['us'][0] / 1e3, 2),
                         'step_instructions': loop[len(loop) // 2], 'step_ms': round(us[len(us) // 2] / 1e3, 2)}
            fig[mode]['awake_s_per_idle_hour'] = round(fig['sleeping']['awake_s_per_h'] + fig[mode]['step_ms'] / 1e3, 3)
        # the reset button: a boot that finds the index matching (the open takes
        # jobs.txt's stamp on its word); the clock is unknown after it, so the
        # loop's step returns at once: boot, open, imports
        boots = st['boots']
        vb.reset()    # (the watchdog may reset it first: either boot is measured)
        deadline = time.monotonic() + timeout
        while True:
            st = vb.stats(60)
            marks = [m for m in st['sleep_marks'] if m > st['boot_instructions']]
            if st['boots'] > boots and marks:
                break
            if time.monotonic() > deadline:
                raise RuntimeError('no sleep after a reset within %.0f s' % timeout)
            time.sleep(0.5)   # polling the emulator's counters, not a timing assumption
        fig['power_on_to_sleep_indexed'] = marks[0] - st['boot_instructions']
        # this chip's cycles since its power-on, read just after: the boot and
        # at most a few of the sleep's chunk wakes (~25 k cycles each)
        fig['power_on_to_sleep_indexed_ms'] = round(st['cycles'] / 125e3, 1)
        return fig
    finally:
        if vb is not None:
            vb.stop()
        if own:
            shutil.rmtree(tmp, ignore_errors=True)


TYPICAL_EACH = 96    # daily `each` jobs, 4 at each whole hour
TYPICAL_ANY = 3      # hourly `any` jobs


def typical_job_file():
    """bench/wake.py's typical file of 100 jobs: TYPICAL_EACH daily `each`
    at the whole hours (4 an hour), TYPICAL_ANY hourly `any` (p 0.5 a draw,
    three draws at :20, :30, :40), a daily `one` at 12:00; from
    2026-12-01 (device_heap.T0)."""
    from sporadic.core import jobline
    from sporadic.desktop import merging
    texts = ['each 2026-12-01T%02d:00Z log job%d ; every=1d' % (i % 24, i) for i in range(TYPICAL_EACH)]
    texts += ['any:0.5 2026-12-01T00:20Z log any%d ; every=1h within=30m tick=10m' % i for i in range(TYPICAL_ANY)]
    texts.append('one 2026-12-01T12:00Z log one ; every=1d grace=10m')
    return merging.merge(jobline.parse_job(t, salt=str(i)).line() for i, t in enumerate(texts))


# the baseline's loop: main.py's boot path with the wake index off (every wake a
# full pass), started over the raw REPL (bench only: nothing is written on the board)
LOOP_WITHOUT_INDEX = 'from sporadic.device import store, boot; store.WAKE_INDEX = False; boot.main()'


def typical_day(hours=24.0, tmp=None, timeout=3600, index=True):
    """A Pico holding the typical file (typical_job_file; an insecure fleet,
    `companion image --board rp2-pico`, booted with `vboard --image`), its
    clock set by a sync at T0 + 30 min, then left to run its loop for
    `hours` emulated hours, unpaced (the emulated clock skips the time the
    core sleeps; the syncs run paced: unpaced, the watchdog expires while
    the board waits for the host's bytes): the jobs run, their results are written, the index is
    used where it holds. Measured from outside the chip: the cycles the core
    executed in that span (awake seconds at 125 MHz, scaled to a day), the
    WFIs (sleeps: the loop's and the watchdog's chunk wakes) and boots; then
    a sync brings the results back, counted by kind from results.txt (the
    companion keeps every result). What the `log` actions cost is counted
    (they print a line). Returns a dict; raises RuntimeError when the board
    fails. index False: the baseline, the same loop with the wake index off
    (LOOP_WITHOUT_INDEX, started after the sync)."""
    from companion.fleet.folder import Fleet
    own = tmp is None
    tmp = tmp or tempfile.mkdtemp(prefix='rp2typical-')
    vb = None
    try:
        fleet, img = imaged_fleet(tmp, 'typical', typical_job_file())
        vb = RP2VBoard(os.path.join(tmp, 'typical.flash'), firmware=UF2, bootrom=BOOTROM, image=img,
                       stats=os.path.join(tmp, 'typical.stats'))
        vb.start()
        _first_sleep_after(vb, -1, timeout)
        t_set = device_heap.T0 + 1800
        since = _sync_at(fleet, vb, t_set)
        _first_sleep_after(vb, since['instructions'], timeout)
        if not index:
            mpremote(vb.path, 'exec', '--no-follow', LOOP_WITHOUT_INDEX)
            _first_sleep_after(vb, vb.stats(60)['instructions'], timeout)
        since = vb.set_unpaced(True)
        b = _wait_emulated(vb, since, hours * 3600, timeout)
        vb.set_unpaced(False)
        span = b['emulated_s'] - since['emulated_s']
        awake = (b['cycles'] - since['cycles']) / 125e6
        fig = {'index': index, 'hours': round(span / 3600, 2), 'jobs': TYPICAL_EACH + TYPICAL_ANY + 1,
               'awake_s': round(awake, 2), 'awake_s_per_day': round(awake * 86400 / span, 2),
               'instructions': b['instructions'] - since['instructions'], 'wfis': b['wfis'] - since['wfis'],
               'boots': b['boots'] - since['boots']}
        _sync_at(fleet, vb, int(t_set + span))
        f = Fleet(fleet)
        kinds = {j.id: j.kind for j in f.jobs()}
        runs = {}
        for r in f.results():
            key = '%s_%s' % (kinds.get(r.id, '?'), r.outcome)
            runs[key] = runs.get(key, 0) + 1
        fig['results'] = runs
        return fig
    finally:
        if vb is not None:
            vb.stop()
        if own:
            shutil.rmtree(tmp, ignore_errors=True)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument('--lines', default='1000,5000')
    ap.add_argument('--syncs', type=int, default=300, help='job lines carried by the measured first sync')
    ap.add_argument('--sync-heap', default='', metavar='N,N',
                    help='peak heap of a signed sync on boards holding N signed jobs (rp2 and unix 64-bit)')
    ap.add_argument('--sync-new', type=int, default=30, help='new jobs the measured sync of --sync-heap carries')
    ap.add_argument('--wake', default='', metavar='N,N',
                    help='instructions of a wake, power-on to sleep and sync to sleep, with N-line job files')
    ap.add_argument('--idle', default='', metavar='N,N',
                    help='a wake with nothing due, index on and off, and awake time per idle hour, N-line job files')
    ap.add_argument('--typical', type=float, default=0, metavar='HOURS',
                    help='the typical 100-job file left to run HOURS emulated hours, index on and off: '
                         'awake s a day (typical_day)')
    ap.add_argument('--keep', action='store_true')
    a = ap.parse_args(argv)
    why = missing(UF2, BOOTROM)
    if why:
        raise SystemExit('bench/rp2.py: ' + why)
    tmp = tempfile.mkdtemp(prefix='rp2bench-')
    fig = {}
    boards = []

    def power_on(name):
        vb = RP2VBoard(os.path.join(tmp, name + '.flash'), firmware=UF2, bootrom=BOOTROM,
                       stats=os.path.join(tmp, name + '.stats'))
        boards.append(vb)
        vb.start()
        return vb

    try:
        for n in [int(x) for x in a.sync_heap.split(',') if x]:
            fig.setdefault('sync_heap', {})[str(n)] = sync_heap(n, a.sync_new, tmp)
        for n in [int(x) for x in a.wake.split(',') if x]:
            w = fig.setdefault('wake', {})[str(n)] = wake_instructions(n, tmp)
            print('%5d lines (%d B): power-on to sleep %.1f M instructions; end of a sync to sleep (clock known, '
                  'one full pass) %.1f M instructions; %d boot(s)' % (
                      n, w['bytes'], w['power_on_to_sleep'] / 1e6, w['sync_to_sleep'] / 1e6, w['boots']), flush=True)
        for n in [int(x) for x in a.idle.split(',') if x]:
            w = fig.setdefault('idle', {})[str(n)] = idle_wake(n, tmp)
            print('%5d lines (%d B): idle step %.2f M instructions, %.2f ms (baseline %.1f M, %.0f ms); '
                  'awake per idle hour %.3f s (baseline %.3f s)' % (
                      n, w['bytes'], w['index']['step_instructions'] / 1e6, w['index']['step_ms'],
                      w['baseline']['step_instructions'] / 1e6, w['baseline']['step_ms'],
                      w['index']['awake_s_per_idle_hour'], w['baseline']['awake_s_per_idle_hour']), flush=True)
        for index in (True, False) if a.typical else ():
            w = fig.setdefault('typical', {})['index' if index else 'baseline'] = typical_day(a.typical, tmp, index=index)
            print('typical file, %s, %.1f h: awake %.2f s (%.2f s a day), %d sleeps, %d boots; results %s' % (
                'index' if index else 'baseline', w['hours'], w['awake_s'], w['awake_s_per_day'], w['wfis'], w['boots'], w['results']), flush=True)
        if not (a.lines or a.syncs):
            raise _Done
        vb = power_on('bare')
        out, _ = mpremote(vb.path, 'exec', 'import gc; gc.collect(); print("RESULT", gc.mem_free(), gc.mem_alloc())')
        free, alloc = map(int, result(out).split())
        fig['free_heap_after_boot'] = free
        fig['heap_total'] = free + alloc
        print('free heap after boot: %d B of %d' % (free, free + alloc))
        fleet = os.path.join(tmp, 'fleet')
        companion(fleet, 'init')

        T0 = device_heap.T0
        fig['loop'] = {}
        for n in [int(x) for x in a.lines.split(',') if x]:
            vb.stop()
            vb = power_on('pico%d' % n)
            # the job file goes on first, by hand (mpremote cp), before deploy:
            # once sporadic's loop has started the watchdog, a REPL session
            # longer than 8 s is cut by a reset (MicroPython never stops it)
            jobs = os.path.join(tmp, 'jobs%d.txt' % n)
            with open(jobs, 'w') as f:
                f.write(''.join(l + '\n' for l in device_heap.job_file(n)))
            size = os.path.getsize(jobs)
            _, dt = mpremote(vb.path, 'cp', jobs, ':jobs.txt')
            up = size / dt
            _, dt = companion(fleet, 'deploy', vb.path, '--id', 'pico-1', '--board', 'rp2-pico', '-q')
            fig.setdefault('deploy_s', round(dt, 1))
            if 'free_heap_runtime_imported' not in fig:
                out, _ = mpremote(vb.path, 'exec', 'import gc; gc.collect(); from sporadic.device import store, runtime; '
                                  'gc.collect(); print("RESULT", gc.mem_free())')
                fig['free_heap_runtime_imported'] = int(result(out))
            s0 = vb.stats()
            drv = os.path.join(tmp, 'drv.py')
            with open(drv, 'w') as f:
                f.write('from sporadic.device import store\nstore.open_store()\n'
                        + device_heap.DRIVER % (T0 + 60, T0 + 120))
            out, dt_pass = mpremote(vb.path, 'run', drv)
            s1 = vb.stats()
            r = json.loads(result(out))
            # one idle step (nothing due) with the same file, minus the same exec without it
            base = os.path.join(tmp, 'base.py')
            with open(base, 'w') as f:
                f.write(STEP % (T0 + 3 * 3600, ''))
            mpremote(vb.path, 'run', base)          # the first, which may still import
            s2 = vb.stats()
            mpremote(vb.path, 'run', base)
            s3 = vb.stats()
            with open(base, 'w') as f:
                f.write(STEP % (T0 + 3 * 3600, 'rt.step(%d)' % (T0 + 3 * 3600 + 1)))
            mpremote(vb.path, 'run', base)
            s4 = vb.stats()
            step_instr = (s4['instructions'] - s3['instructions']) - (s3['instructions'] - s2['instructions'])
            fig['loop'][str(n)] = {
                'bytes': size, 'mpremote_cp_up_Bps': round(up), 'peak_heap': r['peak'], 'code_heap': r['code'],
                'pass_instructions': s1['instructions'] - s0['instructions'], 'pass_s': round(dt_pass, 1),
                'idle_step_instructions': step_instr,
                'watchdog_resets': s4['boots'] - s0['boots'],
                # the boot after deploy opens the store (a job file without its stamp is imported again)
                'watchdog_resets_at_deploy_boot': s0['boots'] - 1,
            }
            print('%5d lines (%d B): cp up %.0f B/s; open+2 passes+compaction: peak heap %d B (code %d), '
                  '%.1f M instructions, %.1f s; one idle step %.1f M instructions; watchdog resets %d (%d at the boot after deploy)' % (
                      n, size, up, r['peak'], r['code'], (s1['instructions'] - s0['instructions']) / 1e6,
                      dt_pass, step_instr / 1e6, s4['boots'] - s0['boots'], s0['boots'] - 1))

        # a signed sync carrying new job lines, beside mpremote cp
        import contextlib
        import io
        from companion import cli
        if not fig['loop']:
            companion(fleet, 'deploy', vb.path, '--id', 'pico-1', '--board', 'rp2-pico', '-q')
        # the board may still be in the REPL mpremote left, its watchdog running:
        # a first sync may meet the reset (the companion says so), the next completes
        for _ in range(3):
            p = subprocess.run([sys.executable, '-m', 'companion.cli', '--fleet', fleet, 'sync', vb.path, '-q'],
                               capture_output=True, text=True, timeout=900)
            if p.returncode == 0:
                break
            print('warm-up sync: %s' % p.stderr.strip())
        with contextlib.redirect_stdout(io.StringIO()):
            for i in range(a.syncs):
                cli.main(['--fleet', fleet, 'add', 'each 2026-12-%02dT%02d:%02dZ log t%d ; every=1d within=1h'
                          % (2 + i % 20, i // 60 % 24, i % 60, i)])
        t = time.monotonic()
        p = subprocess.run([sys.executable, '-m', 'companion.cli', '--fleet', fleet, 'sync', vb.path],
                           capture_output=True, text=True, timeout=1800)
        out, dt = p.stdout, time.monotonic() - t
        if p.returncode:
            fig['sync'] = {'lines': a.syncs, 'error': p.stderr.strip()}
            print('signed sync of %d new job lines failed: %s' % (a.syncs, p.stderr.strip()))
            raise _Done
        m = re.search(r'(\d+) bytes on the wire', out)
        wire = int(m.group(1)) if m else 0
        # mpremote cp of as many bytes, up the same line (the loop has run: keep it under 8 s)
        blob = os.path.join(tmp, 'blob.txt')
        with open(blob, 'w') as f:
            f.write(('x' * 63 + '\n') * max(1, wire // 64))
        _, dt_cp = mpremote(vb.path, 'cp', blob, ':blob.txt')
        fig['sync'] = {'lines': a.syncs, 'wire_bytes': wire, 's': round(dt, 1),
                       'Bps': round(wire / dt) if dt else None,
                       'mpremote_cp_same_bytes_s': round(dt_cp, 1),
                       'mpremote_cp_Bps': round(os.path.getsize(blob) / dt_cp)}
        print('signed sync of %d new job lines: %d B on the wire in %.1f s = %.0f B/s (%s); '
              'mpremote cp of %d B up: %.1f s = %.0f B/s'
              % (a.syncs, wire, dt, wire / dt, out.strip().splitlines()[-1], os.path.getsize(blob), dt_cp,
                 os.path.getsize(blob) / dt_cp))
    except _Done:
        pass
    finally:
        for b in boards:
            b.stop()
        if a.keep:
            print('kept', tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps({'rp2': fig}))


if __name__ == '__main__':
    main()
