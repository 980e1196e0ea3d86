"""Fixtures and markers the test files share. Helpers that are not fixtures
(flash layouts, boots, the CLI runners, waits) live in tests/devutil.py and
tests/mpy.py.

    @pytest.mark.needs('micropython', 'mpy-cross')   skip unless on PATH
    @pytest.mark.slow                                 end-to-end, deselect with -m "not slow"
"""
import os
import shutil
import types

import pytest

from tests.devutil import CLI, E2E_HEAP, E2E_SCALE, InProcessCompanion, PortReservation


def pytest_configure(config):
    config.addinivalue_line('markers', 'needs(*programs): skip unless every program is on PATH '
                                       '(micropython: the unix port; mpy-cross; git)')


def pytest_runtest_setup(item):
    for mark in item.iter_markers('needs'):
        missing = [p for p in mark.args if shutil.which(p) is None]
        if missing:
            pytest.skip('%s not installed' % ', '.join(missing))


@pytest.fixture
def reserve_ports():
    """take(n) -> n loopback ports held for the boards a test deploys
    (devutil.PortReservation), released when the test ends."""
    r = PortReservation()
    try:
        yield r.take
    finally:
        r.release()


@pytest.fixture
def fleet_cli(tmp_path):
    """`companion --fleet TMP/fleet ...` as a user types it (devutil.CLI; the
    folder is not initialised); the vboards it started are stopped at the end."""
    cli = CLI(str(tmp_path / 'fleet'))
    try:
        yield cli
    finally:
        cli.stop_boards()


@pytest.fixture(scope='session')
def mpy_lib():
    """The firmware compiled with mpy-cross, as it is deployed (compiling the
    source on the board itself would not fit a 64 KB heap)."""
    if shutil.which('micropython') is None or shutil.which('mpy-cross') is None:
        pytest.skip('micropython, mpy-cross not installed')
    from tests.mpy import mpy_lib as compiled
    return compiled()


@pytest.fixture
def world(tmp_path, capsys):
    """A fleet folder, a fast clock, the companion run in this process on
    it, and a factory of virtual boards (tests/test_e2e.py, test_integrity.py)."""
    boards = []
    from companion.demo import DemoClock
    from companion.vboard.board import VBoard
    clock = DemoClock(E2E_SCALE)
    comp = InProcessCompanion(str(tmp_path / 'fleet'), capsys, clock)

    def board(name, actions=None):
        flash = str(tmp_path / name)
        if actions:   # the user's /actions.py, already on the board
            os.makedirs(flash, exist_ok=True)
            with open(os.path.join(flash, 'actions.py'), 'w') as f:
                f.write(actions)
        vb = VBoard(flash, board_id=name, heap=E2E_HEAP, clock_scale=E2E_SCALE)
        vb.start()
        boards.append(vb)
        return vb

    w = types.SimpleNamespace(companion=comp, clock=clock, board=board, tmp=tmp_path)
    try:
        yield w
    finally:
        for vb in boards:
            vb.stop()
        if os.environ.get('SPORADIC_KEEP'):
            print('kept', tmp_path)
        else:
            shutil.rmtree(str(tmp_path), ignore_errors=True)
