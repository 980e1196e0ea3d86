"""Where the time of a sync goes on the real rp2 firmware: each request of
one `companion sync`, timed and counted (wall seconds, the emulator's
instructions, flash sectors erased), summed per request type.

    SPORADIC_RP2_UF2=RPI_PICO.uf2 SPORADIC_RP2_BOOTROM=rp2040-bootrom-b1.bin \\
        python bench/rp2_requests.py [--held 2000] [--new 300]

A fleet of --held jobs goes onto the board in an image built on the desktop
(`companion image --board rp2-pico`, booted with `vboard --image`), the
first sync sets its clock; then --new jobs are added on the desktop and the
measured sync carries them. The emulator runs unpaced (idle time skipped:
the figures are the firmware's work). The last line is JSON.
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
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, 'firmware'))

from companion.vboard.rp2 import RP2VBoard, missing  # noqa: E402

SHARED = os.path.join(os.path.dirname(ROOT), 'shared', 'rp2')
UF2 = os.environ.get('SPORADIC_RP2_UF2') or os.path.join(SHARED, 'RPI_PICO-v1.28.0.uf2')
BOOTROM = os.environ.get('SPORADIC_RP2_BOOTROM') or os.path.join(SHARED, 'rp2040-bootrom-b1.bin')


def add_jobs(fleet, n, tag):
    from companion import cli
    with contextlib.redirect_stdout(io.StringIO()):
        for i in range(n):
            cli.main(['--fleet', fleet, 'add', 'each 2026-12-%02dT%02d:%02dZ log %s%d ; every=1d within=1h'
                      % (2 + i % 20, i // 60 % 24, i % 60, tag, i)])


def profiled_sync(fleet_dir, vb):
    """One sync through the product's syncer, each request measured."""
    from companion.sync import syncer
    from companion.fleet.folder import Fleet
    from companion.link.serial import SerialLink
    rows = []
    link = SerialLink(vb.path)
    inner = link._call

    def timed(request, stream):
        s0 = vb.stats(60)
        t = time.monotonic()
        answer = inner(request, stream)
        dt = time.monotonic() - t
        s1 = vb.stats(60)
        rows.append({'verb': request[:1], 'req': len(request), 'ans': len(answer), 's': dt,
                     'instr': s1['instructions'] - s0['instructions'],
                     'erased': s1.get('erased_sectors', 0) - s0.get('erased_sectors', 0)})
        return answer
    link._call = timed
    t = time.monotonic()
    s0 = vb.stats(60)
    try:
        rep = syncer.sync(Fleet(fleet_dir), vb.path, progress=False, link=link)
    finally:
        link.close()
    s1 = vb.stats(60)
    total = {'s': round(time.monotonic() - t, 1), 'instr': s1['instructions'] - s0['instructions'],
             'erased': s1.get('erased_sectors', 0) - s0.get('erased_sectors', 0),
             'lines_sent': rep['lines_sent'], 'bytes': rep['bytes'], 'rounds': rep['rounds']}
    return rows, total


def per_verb(rows):
    out = {}
    for r in rows:
        v = out.setdefault(r['verb'], {'n': 0, 's': 0.0, 'instr': 0, 'erased': 0, 'req_chars': 0, 'ans_chars': 0})
        v['n'] += 1
        v['s'] += r['s']
        v['instr'] += r['instr']
        v['erased'] += r['erased']
        v['req_chars'] += r['req']
        v['ans_chars'] += r['ans']
    for v in out.values():
        v['s'] = round(v['s'], 2)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument('--held', type=int, default=2000, help='jobs on the board (from an image) before the sync')
    ap.add_argument('--new', type=int, default=300, help='jobs the measured sync carries')
    ap.add_argument('--keep', action='store_true')
    a = ap.parse_args(argv)
    why = missing(UF2, BOOTROM)
    if why:
        raise SystemExit('bench/rp2_requests.py: ' + why)
    from companion import cli
    tmp = tempfile.mkdtemp(prefix='rp2req-')
    fleet = os.path.join(tmp, 'fleet')
    vb = None
    fig = {'held': a.held, 'new': a.new}
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            cli.main(['--fleet', fleet, 'init'])
        add_jobs(fleet, a.held, 'h')
        img = os.path.join(tmp, 'fs.bin')
        with contextlib.redirect_stdout(io.StringIO()):
            cli.main(['--fleet', fleet, 'image', '--board', 'rp2-pico', '--id', 'pico-1', '-o', img])
        vb = RP2VBoard(os.path.join(tmp, 'pico.flash'), firmware=UF2, bootrom=BOOTROM, image=img,
                       unpaced=os.environ.get("UNPACED") == "1", stats=os.path.join(tmp, 'pico.stats'))
        vb.start()
        rows, total = profiled_sync(fleet, vb)
        fig['first'] = {'total': total, 'per_verb': per_verb(rows)}
        print('first sync (%d held): %s' % (a.held, json.dumps(fig['first'])))
        add_jobs(fleet, a.new, 'n')
        rows, total = profiled_sync(fleet, vb)
        fig['sync'] = {'total': total, 'per_verb': per_verb(rows)}
        print('sync of %d new (%d held): %s' % (a.new, a.held, json.dumps(fig['sync'])))
        for r in rows:
            print('  %s req %5d ans %6d  %6.2f s  %6.1f M instr  %3d erased' % (
                r['verb'], r['req'], r['ans'], r['s'], r['instr'] / 1e6, r['erased']))
    except Exception as e:
        fig['error'] = '%s: %s' % (type(e).__name__, e)
        print('failed: %s' % fig['error'])
    finally:
        if vb is not None:
            vb.stop()
        if a.keep:
            print('kept', tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps({'rp2_requests': fig}))


if __name__ == '__main__':
    main()
