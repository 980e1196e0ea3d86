"""Figures from the real MicroPython rp2 firmware (RPI_PICO) on an emulated
Raspberry Pi Pico (companion vboard --board rp2-pico, rp2040js).

    SPORADIC_RP2_UF2=RPI_PICO.uf2 SPORADIC_RP2_BOOTROM=rp2040-bootrom-b1.bin \\
        python bench/rp2.py [--lines 1000,5000] [--syncs 300]
    python bench/rp2.py --lines '' --syncs 300     # the sync figure alone (a deployed board)

One board, one run, driven through its USB-CDC line only (mpremote and the
companion):

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
   beside `mpremote cp` up on the same line.

The emulator runs at 0.3-0.45x a real RP2040 on a busy 2-core machine, so
seconds here are emulated-speed seconds; instruction counts and heap bytes
are the firmware's own. The last line is JSON.
"""
import argparse
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

from companion.vboard_rp2 import RP2VBoard, missing  # noqa: E402
import device_heap  # noqa: E402

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


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument('--lines', default='1000,5000')
    ap.add_argument('--syncs', type=int, default=300, help='job lines carried by the measured first sync')
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
