"""#31, the smallest boards: a virtual board (`companion vboard`, the unix
port on a pseudo-terminal) with a small heap, set up with the product's own
commands (init, deploy, add -f, sync), syncs a signed batch of 30 jobs,
runs the one that is due, and syncs its result back.

The rows (interpreter, heap):

- 32-bit frozen at 38K, an ESP8266's whole heap (boards/esp8266/board.json
  heap_bytes): the unix port built 32-bit with firmware/manifest.py frozen
  in (bench/build_micropython32.sh: bench/.mp32/micropython-frozen, or
  $SPORADIC_MICROPYTHON32_FROZEN), the code run from flash as on an ESP8266
  built with boards/esp8266/manifest.py. The frozen code is the firmware as
  it was when that build was made: rebuild it after changing firmware/.
- 32-bit ROMFS at 64K: the same port, the package as .mpy in a ROMFS image
  (`companion image --romfs`) mounted at /rom as the stock ESP8266
  FLASH_2M_ROMFS firmware mounts its partition (`companion vboard --romfs`),
  so `deploy` finds it there and writes no /lib/sporadic. The unix port has
  no ROM: the image's bytes are in the heap, and the heap given is 64K plus
  their size. It passes at 54-56K and fails at 52K, not always at 56K
  (the job ids and times are the hour's): the first signed sync
  runs out of memory on the P request of the fleet's seal record (`.b`,
  #27), which is more than an ESP8266's 38K; the run alone needs 29K
  (bench/heap_romfs.py).
- 32-bit ROM at 38K, an ESP8266's whole heap: the unix port built 32-bit
  with a ROM segment (bench/build_micropython32.sh:
  bench/.mp32/micropython-romfs, or $SPORADIC_MICROPYTHON32_ROMFS): the
  ROMFS image file is mapped outside the heap and mounted at /rom at
  start-up, as the board's flash partition, so the heap given is the
  board's own. This batch of 30 needs 36K since a serial session on a tight
  heap compacts after each P, its signature check let go first (39K
  before: out of memory compacting in the middle of a P); the demo's jobs
  (bench/heap_romfs.py --sync) need 34-35 (docs/budgets.md#31). Without
  that build the row skips, saying why (CI builds no 32-bit port).
- 32-bit .mpy at 96K: the same port, the firmware as .mpy files on the
  flash, as `deploy --board esp8266` puts them on a stock ESP8266; #31's
  target is 32K, not met (bench/esp8266.py measures 83K on the commit #31
  started from: docs/budgets.md).
- 64-bit .mpy at 128K: the PyPI `micropython`, present wherever the suite
  runs, so the cycle is always covered (it passes at 120K, fails at 112K).

The 32-bit frozen row fails at 34K, the 32-bit .mpy row at 80K: each heap
has a few KiB of margin over the figure of the day (docs/budgets.md#31).

The board is the unix board (its clock, pins and watchdog are the
virtual board's); what it shares with an ESP8266 is the word size, the heap
and the code. The 32-bit rows skip, saying why, without the 32-bit build.
"""
import contextlib
import io
import os
import shutil

import pytest

from companion import cli
from companion.errors import UserError
from companion.fleet.folder import Fleet
from companion.sync import syncer
from companion.vboard.board import VBoard
from tests.devutil import small_board_batch, small_board_cycle
from tests.mpy import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.needs('micropython', 'mpy-cross')]

MP32 = os.environ.get('SPORADIC_MICROPYTHON32') or os.path.join(ROOT, 'bench', '.mp32', 'micropython')
MP32_FROZEN = (os.environ.get('SPORADIC_MICROPYTHON32_FROZEN')
               or os.path.join(ROOT, 'bench', '.mp32', 'micropython-frozen'))
MP32_ROMFS = (os.environ.get('SPORADIC_MICROPYTHON32_ROMFS')
              or os.path.join(ROOT, 'bench', '.mp32', 'micropython-romfs'))
SCALE = 600    # board seconds a real second


def companion(fleet, *argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = cli.main(['--fleet', fleet] + [str(a) for a in argv])
    assert not rc, out.getvalue()
    return out.getvalue()


@pytest.mark.parametrize('exe,heap,romfs', [
    pytest.param(MP32_FROZEN, 38, False, id='32bit-frozen-38K'),
    pytest.param(MP32, 64, True, id='32bit-romfs-64K'),
    pytest.param(MP32_ROMFS, 38, 'rom', id='32bit-rom-38K'),
    pytest.param(MP32, 96, False, id='32bit-mpy-96K'),
    pytest.param(None, 128, False, id='64bit-mpy-128K'),
])
def test_a_small_board_syncs_a_signed_batch_of_30_runs_one_and_reports_it(exe, heap, romfs, tmp_path, monkeypatch):
    if exe is not None:
        if not os.path.isfile(exe):
            pytest.skip('no 32-bit build%s at %s: run bench/build_micropython32.sh'
                        % (' with a ROM segment' if romfs == 'rom' else '', exe))
        monkeypatch.setenv('SPORADIC_MICROPYTHON', exe)
    fleet = str(tmp_path / 'fleet')
    companion(fleet, 'init')
    env = {}
    if romfs:
        from companion.make.romfs import romfs_image
        rom = romfs_image('unix', {})
        (tmp_path / 'rom.img').write_bytes(rom)
        env['SPORADIC_VBOARD_ROMFS'] = str(tmp_path / 'rom.img')
        if romfs != 'rom':   # a port without ROM holds the image's bytes in its heap
            heap += -(-len(rom) // 1024)
        else:                # the image is more than the whole heap: it is not in it
            assert len(rom) > heap * 1024
    vb = VBoard(str(tmp_path / 'b'), board_id='e-1', heap='%dK' % heap, clock_scale=SCALE, env=env)
    path = vb.start()
    try:
        out = companion(fleet, 'deploy', path, '--id', 'e-1', '--board', 'unix')
        on_flash = os.path.isdir(str(tmp_path / 'b' / 'lib' / 'sporadic'))
        assert on_flash != (bool(romfs) or exe == MP32_FROZEN), out
        # what deploy found, kept for the advice on a sync that runs out of memory
        assert Fleet(fleet).device('e-1')['in_firmware'] is (not on_flash)
        due, lines = small_board_cycle(companion, fleet, vb, 'e-1', 30, str(tmp_path))
        assert sum(1 for l in lines if ' log later ' in l) == 29
        ran = [l for l in lines if l.startswith(due + ' r e-1 ') and ' ok ' in l]
        assert ran and ran[0].endswith(' due now'), lines
        assert vb.alive()
    finally:
        vb.stop()
        shutil.rmtree(str(tmp_path / 'b'), ignore_errors=True)


def test_a_rom_board_out_of_heap_is_not_told_to_put_sporadic_in_its_firmware(tmp_path, monkeypatch):
    """A board below what a signed sync needs with the package in ROMFS
    (30K on the ROM build: 34-35 KiB needed, docs/budgets.md#31): the sync
    breaks off with the heap it saw, and its advice says sporadic is in the
    firmware already, instead of telling the user to put it there."""
    if not os.path.isfile(MP32_ROMFS):
        pytest.skip('no 32-bit build with a ROM segment at %s: run bench/build_micropython32.sh' % MP32_ROMFS)
    monkeypatch.setenv('SPORADIC_MICROPYTHON', MP32_ROMFS)
    from companion.make.romfs import romfs_image
    (tmp_path / 'rom.img').write_bytes(romfs_image('unix', {}))
    env = {'SPORADIC_VBOARD_ROMFS': str(tmp_path / 'rom.img')}
    fleet = str(tmp_path / 'fleet')
    companion(fleet, 'init')
    vb = VBoard(str(tmp_path / 'b'), board_id='e-1', heap='64K', clock_scale=SCALE, env=env)
    try:
        companion(fleet, 'deploy', vb.start(), '--id', 'e-1', '--board', 'unix')
    finally:
        vb.stop()
    with open(str(tmp_path / 'batch.txt'), 'w') as f:
        f.write(small_board_batch(30))
    companion(fleet, 'add', '-f', str(tmp_path / 'batch.txt'))
    vb = VBoard(str(tmp_path / 'b'), board_id='e-1', heap='30K', clock_scale=SCALE, env=env)
    path = vb.start()
    try:
        with pytest.raises(UserError) as e:
            syncer.sync(Fleet(fleet), path, progress=False)
        msg = str(e.value)
        assert 'out of memory' in msg and 'sporadic is in its firmware already' in msg, msg
        assert 'frozen' not in msg, msg
    finally:
        vb.stop()
