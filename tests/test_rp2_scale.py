"""A Pico holding a fleet-sized job file (issue 27), on the real MicroPython
rp2 firmware in the emulated Pico (`companion vboard --board rp2-pico`):
5,000 jobs go onto it with the product's commands (`companion add -f` where
the companion has it, else one `add` each into an insecure fleet, whose
lines carry no batch records: 5,000 signed single adds do not fit a Pico),
`image` and `sync`; 30 more arrive in one sync, and one of them runs and
its result comes back.

Needs SPORADIC_RP2_UF2 / SPORADIC_RP2_BOOTROM (tests/test_rp2.py says how).
"""
import subprocess
import sys

import pytest

from tests.test_rp2 import WHY, actlog, flash_files, flash_snapshot, outcomes_on_flash, world  # noqa: F401 (the fixture)
from tests.devutil import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group('rp2-long'),
              pytest.mark.skipif(WHY is not None, reason='emulated Pico: %s' % WHY)]

HELD = 5000


def has_add_file():
    p = subprocess.run([sys.executable, '-m', 'companion.cli', 'add', '--help'], capture_output=True, text=True)
    return '-f' in p.stdout


def test_a_pico_holding_5000_jobs_takes_30_more_and_runs_one(world):
    c = world.companion
    lines = ['each 2027-01-%02dT%02d:%02dZ log big%d ; every=1d within=1h' % (1 + i % 28, i // 60 % 24, i % 60, i)
             for i in range(HELD)]
    if has_add_file():
        c('init')
        path = world.tmp / 'jobs-in.txt'
        path.write_text(''.join(l + '\n' for l in lines))
        c('add', '-f', str(path))
    else:
        c('init', '--insecure')
        for l in lines:
            c('add', l)
    fs_bin = str(world.tmp / 'fs.bin')
    c('image', '--board', 'rp2-pico', '--id', 'pico-big', '-o', fs_bin)
    vb = world.pico('pico-big', image_file=fs_bin)
    assert flash_files(vb.flash)['/jobs.txt'].count(b'\n') >= HELD
    out = c.sync(vb.path)
    assert 'synced pico-big' in out, out       # the clock; the jobs came with the image
    # its clock set, the board makes its first pass over the 5,000 jobs (~26 s
    # of chip time), which ends with its wake index; a fleet's next sync comes
    # hours later, not in the middle of it (a sync then starts the pass again)
    wait_for(lambda: flash_snapshot(vb.flash).get('/wake.idx'), timeout=900, every=2.0,
             what='the first pass over the job file (its wake index)')
    more = world.tmp / 'jobs-more.txt'
    more.write_text(''.join('each 2027-02-01T00:%02dZ log new%d ; every=1d within=1h\n' % (i, i) for i in range(29)))
    new = c('add', '-f', str(more)).split()      # one add (each add of a 5,000-job fleet is ~1 s)
    assert len(new) == 29, new
    ran = c('add', 'each +60s log ran-one ; within=30m').strip()
    out = c.sync(vb.path)
    assert 'synced pico-big' in out and 'received 0 line(s)' in out, out
    held = flash_files(vb.flash)['/jobs.txt']
    assert all(j.encode() in held for j in new + [ran])
    assert b' log big%d ' % (HELD - 1) in held and b' log big0 ' in held
    wait_for(lambda: actlog(vb.flash)['%s.0' % ran] == 1, timeout=900, every=2.0, what='the new job to run')
    # its outcome on the board before a sync asks for it (a sync between the
    # run's start record and its outcome brings back 'started' alone)
    wait_for(lambda: '%s.0' % ran in outcomes_on_flash(vb.flash, 'pico-big'), timeout=120, every=1.0,
             what='its outcome on the board')

    def back():
        c.sync(vb.path)
        return [r for r in c.results() if r['job'] == ran and r['outcome'] != 'started']
    got = wait_for(back, timeout=300, every=5.0, what='its result synced back')
    assert got[0]['outcome'] == 'ok' and got[0]['output'] == 'ran-one', got
