"""`companion flash`'s UF2 path on the real rp2 firmware: the UF2 it writes
for a Pico (MicroPython and the board's provisioned filesystem in one file,
what a user copies onto the RPI-RP2 drive) boots in the emulated Pico as
the board it was made for, syncs signed, runs the fleet's job and its result
comes back verified. Skips as tests/test_rp2.py does."""
import json
import os

import pytest

from companion.vboard.rp2 import RP2VBoard
from tests.devutil import InProcessCompanion, wait_for
from tests.test_rp2 import BOOTROM, UF2, WHY, actlog, flash_files, outcomes_on_flash

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group('rp2'), pytest.mark.skipif(WHY is not None, reason='emulated Pico: %s' % WHY)]


def test_a_uf2_from_companion_flash_boots_as_its_board_and_syncs(tmp_path, capsys):
    c = InProcessCompanion(str(tmp_path / 'fleet'), capsys)
    c('init')
    # due about when the first sync is over (~3 s here): without a clock till
    # then, it runs after that sync, on the board's own clock
    j = c('add', 'each +6s log from-uf2 ; within=10m').strip()
    out_uf2 = str(tmp_path / 'pico-3.uf2')
    out = c('flash', '-', '--board', 'rp2-pico', '--id', 'pico-3', '--firmware', UF2, '-o', out_uf2, '--erase')
    assert 'wrote %s' % out_uf2 in out or os.path.getsize(out_uf2) > 0, out
    # the fleet knows the board once the UF2 is written (committed after the write)
    assert os.path.isfile(os.path.join(c.dir, 'devices', 'pico-3.json'))
    vb = RP2VBoard(str(tmp_path / 'pico-3.flash'), firmware=out_uf2, bootrom=BOOTROM)
    vb.start()
    try:
        files = flash_files(vb.flash)
        assert json.loads(files['/cfg.json'])['id'] == 'pico-3'
        out = c.sync(vb.path)
        assert 'synced pico-3' in out and 'sent 0 line(s)' in out, out    # its jobs came in the UF2
        wait_for(lambda: actlog(vb.flash)['%s.0' % j], timeout=90, what='the job from the UF2 to run')
        wait_for(lambda: '%s.0' % j in outcomes_on_flash(vb.flash, 'pico-3'), timeout=30, every=0.5,
                 what='its outcome on the board')

        def back():
            c.sync(vb.path)
            return [r for r in c.results() if r['job'] == j and r['outcome'] == 'ok']
        got = wait_for(back, timeout=60, every=1.0, what='its result')
        assert got[0]['host'] == 'pico-3' and got[0]['verified'] is True, got
    finally:
        vb.stop()
