"""Issue #27's bench: fleet-sized job files on the real board. Runs every
bench/scale_*.py module it finds and prints their figures, the union of
their dicts as the JSON last line.

    python bench/scale.py [--only outbox,sync] [--skip awake]

Each module exposes `measure(board) -> dict`: its keys, each figure beside
its baseline (KEY_baseline or as the module names it), and a "board"
sub-dict naming the board each key came from. `board` is "rp2" when
SPORADIC_RP2_UF2 and SPORADIC_RP2_BOOTROM name files that exist (the real
MicroPython rp2 firmware on the emulated Pico, companion vboard --board
rp2-pico), else "unix" (the MicroPython unix port). A module that fails is
reported (its "error" under its name in "errors") and the others still run.
The modules, one per part of the issue (a module plugs in by its file
name): scale_jobfile (bytes_per_job_ratio), scale_sync (pico_jobs_synced,
sync_30_onto_1000_s, first_sync_300_vs_mpremote, unchanged_sync_wire_bytes,
unchanged_sync_payload_bytes), scale_awake (awake_ms_per_idle_hour),
scale_outbox (results_in_one_sync, outbox_bytes_per_result).
"""
import argparse
import glob
import importlib
import json
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'firmware'))
sys.path.insert(0, HERE)

# the targets, for the table (a script holds the JSON to them)
TARGETS = {
    'bytes_per_job_ratio': '<= 1.3',
    'pico_jobs_synced': '>= 5000',
    'sync_30_onto_1000_s': '<= 10',
    'first_sync_300_vs_mpremote': '<= 2',
    'unchanged_sync_wire_bytes': '<= 1024',
    'unchanged_sync_payload_bytes': '<= 128',
    'awake_ms_per_idle_hour': '1000: <= 300, <= 1.2x 100',
    'results_in_one_sync': '>= 7200',
    'outbox_bytes_per_result': '-',
}


def board_of(env=None):
    """'rp2' when the Pico firmware and boot ROM are there, else 'unix'."""
    env = os.environ if env is None else env
    uf2, rom = env.get('SPORADIC_RP2_UF2'), env.get('SPORADIC_RP2_BOOTROM')
    return 'rp2' if uf2 and rom and os.path.isfile(uf2) and os.path.isfile(rom) else 'unix'


def modules(only=None, skip=()):
    """The scale_* module names found beside this file, sorted."""
    names = sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(HERE, 'scale_*.py')))
    return [n for n in names if (not only or n[6:] in only) and n[6:] not in skip]


def run(names, board, log=print):
    """measure(board) of each module: (union dict, {module: seconds})."""
    union = {'board': {}, 'errors': {}, 'modules': {}}
    for name in names:
        t = time.monotonic()
        try:
            d = importlib.import_module(name).measure(board)
        except Exception as e:    # one module's failure is reported, the others still run
            union['errors'][name] = '%s: %s' % (type(e).__name__, e)
            log(traceback.format_exc())
            d = {}
        union['modules'][name] = round(time.monotonic() - t, 1)
        for k, v in d.items():
            if k == 'board':
                union['board'].update(v if isinstance(v, dict) else {})
            elif k in union and k != 'board':
                union['errors'][name + ':' + k] = 'key also given by an earlier module'
            else:
                union[k] = v
    return union


def _fmt(v):
    if isinstance(v, float):
        return '%.3g' % v if abs(v) < 100 else '%.0f' % v
    if isinstance(v, dict):
        v = ', '.join('%s: %s' % (k, _fmt(x)) for k, x in v.items())
    v = str(v)
    return v if len(v) <= 60 else v[:57] + '...'   # (the JSON line has it whole)


def table(d):
    """The human table: each issue key with its baseline, target and board."""
    rows = [('figure', 'measured', 'baseline', 'target', 'board')]
    for k in TARGETS:
        if k in d:
            base = d.get(k + '_baseline', '-')
            rows.append((k, _fmt(d[k]), _fmt(base), TARGETS[k], d['board'].get(k, '?')))
    for k in sorted(d):
        if k not in TARGETS and not k.endswith('_baseline') and k not in ('board', 'errors', 'modules'):
            rows.append((k, _fmt(d[k]), _fmt(d.get(k + '_baseline', '-')), '', d['board'].get(k, '')))
    w = [max(len(str(r[i])) for r in rows) for i in range(5)]
    out = []
    for r in rows:
        out.append('  '.join(str(c).ljust(w[i]) for i, c in enumerate(r)).rstrip())
    for name, e in sorted(d['errors'].items()):
        out.append('ERROR %s: %s' % (name, e))
    return '\n'.join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--only', default='', help='comma-separated module names without scale_ (outbox,sync...)')
    ap.add_argument('--skip', default='', help='comma-separated module names to leave out')
    ap.add_argument('--board', choices=['unix', 'rp2'], help='default: rp2 when the Pico firmware is there')
    a = ap.parse_args(argv)
    board = a.board or board_of()
    names = modules([s for s in a.only.split(',') if s], [s for s in a.skip.split(',') if s])
    print('bench/scale.py: %s on the %s board' % (', '.join(names) or 'no scale_*.py module', board))
    d = run(names, board, log=lambda s: sys.stderr.write(s + '\n'))
    d['run_board'] = board
    print(table(d))
    print(json.dumps(d))
    return 1 if d['errors'] else 0


if __name__ == '__main__':
    sys.exit(main())
