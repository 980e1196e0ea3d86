"""The virtual board and the serial link, on a real interpreter and a real pty.

No mocks and no sleeps to make timing pass: every wait polls with a deadline.
"""

import os
import signal
import subprocess
import sys
import threading
import time

import pytest
import serial

from companion.link.base import LinkClosed, LinkError, LinkExecError, LinkReset, LinkTimeout
from companion.link.serial import SerialLink
from companion.vboard.board import VBoard
from tests.devutil import wait_for

pytestmark = pytest.mark.slow   # every test starts a virtual board

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A stand-in for the device end of sync: echoes, and can misbehave on request.
SYNCSRV = """\
import time
def h(req):
    if req.startswith('sleep '):
        open('in_call.txt', 'w').write('1')
        time.sleep(float(req[6:]))
    if req == 'boom':
        raise ValueError('boom')
    return 'echo:' + req
def w(req):
    import sys
    sys.stdout.write('\x02' + h(req) + '\x03')
"""

SLEEPY_MAIN = """\
import time
n = 0
try:
    n = int(open('boots.txt').read())
except OSError:
    pass
open('boots.txt', 'w').write(str(n + 1))
time.sleep(1000)
"""


def make_flash(path, main=None, files=None):
    os.makedirs(os.path.join(path, "lib", "sporadic", "device"), exist_ok=True)
    for pkg in ("sporadic", "sporadic/device"):
        with open(os.path.join(path, "lib", pkg, "__init__.py"), "w"):
            pass
    with open(os.path.join(path, "lib", "sporadic", "device", "syncsrv.py"), "w") as f:
        f.write(SYNCSRV)
    if main is not None:
        with open(os.path.join(path, "main.py"), "w") as f:
            f.write(main)
    for name, text in (files or {}).items():
        with open(os.path.join(path, name), "w") as f:
            f.write(text)
    return str(path)


def read_file(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def read_until(ser, ending, timeout=10.0):
    data = b""
    deadline = time.monotonic() + timeout
    while not data.endswith(ending) and ending not in data:
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for %r; got %r" % (ending, data[-200:]))
        data += ser.read(ser.in_waiting or 1)
    return data


@pytest.fixture
def board(tmp_path):
    boards = []

    def start(main=SLEEPY_MAIN, board_id="vb-1", **kw):
        flash = make_flash(tmp_path / ("flash%d" % len(boards)), main)
        vb = VBoard(flash, board_id=board_id, **kw)
        vb.start()
        boards.append(vb)
        return vb

    yield start
    for vb in boards:
        vb.stop()


def test_main_runs_at_boot_with_flash_at_root(board):
    main = (
        "import os, sys\n"
        "open('/boot_info.txt', 'w').write('%s|%s|%s' % (os.getenv('SPORADIC_ID'), sys.path, os.getcwd()))\n"
    )
    vb = board(main=main, board_id="pump-7")
    assert vb.path.startswith("/dev/pts/")
    info = wait_for(lambda: read_file(os.path.join(vb.flash_dir, "boot_info.txt")), what="main.py")
    assert info == "pump-7|['', '.frozen', '/lib']|/"
    assert vb.alive()
    vb.stop()
    assert not vb.alive()


def test_ctrl_c_interrupts_main_in_sleep(board):
    vb = board()
    wait_for(lambda: read_file(os.path.join(vb.flash_dir, "boots.txt")), what="main.py to start")
    with serial.Serial(vb.path, timeout=0.05) as ser:
        ser.write(b"\x03")
        out = read_until(ser, b">>> ")
    assert out.count(b"KeyboardInterrupt") == 1
    assert b'File "main.py", line 8' in out
    assert b"vboard_boot" not in out  # the shim is invisible, as a board's firmware
    assert b"MicroPython" in out  # the friendly REPL's banner


def test_one_ctrl_c_is_one_keyboard_interrupt(board):
    # The relay sends a SIGINT again when the interpreter stays silent after
    # it; a second one after the first was handled would interrupt what
    # runs next, here a REPL command that outlasts every resend.
    from companion.vboard import sigint as vboard_sigint

    vb = board()
    wait_for(lambda: read_file(os.path.join(vb.flash_dir, "boots.txt")), what="main.py to start")
    nap = vboard_sigint.SIGINT_SILENCE * (vboard_sigint.SIGINT_RESENDS + 1) + 0.5
    with serial.Serial(vb.path, timeout=0.05) as ser:
        ser.write(b"\x03")
        out = read_until(ser, b">>> ")
        ser.write(b"import time; time.sleep(%.1f); print('na' + 'pped')\r" % nap)
        out += read_until(ser, b"napped\r\n>>> ", timeout=nap + 10)
    assert out.count(b"KeyboardInterrupt") == 1
    with SerialLink(vb.path) as link:
        assert link.call("ok") == "echo:ok"


# main.py imports through a Python VFS: the import machinery calls its stat
# inside a handler that takes any exception, KeyboardInterrupt included, for
# "no such file", so the Ctrl-C that lands in that stat is lost.
LOSSY_MAIN = """\
import os, sys, time
class Stall:
    stalled = False
    def mount(self, readonly, mkfs):
        pass
    def umount(self):
        pass
    def stat(self, path):
        if not Stall.stalled:
            Stall.stalled = True
            open('/in_stat.txt', 'w').close()
            try:
                time.sleep(1000)
            finally:
                open('/left_stat.txt', 'w').close()
        raise OSError(2)
os.mount(Stall(), '/stall')
sys.path.insert(0, '/stall')
import sporadic
time.sleep(1000)
"""


def test_ctrl_c_lost_in_native_code_is_sent_again(board):
    from companion.link.rawrepl import RETRY_CTRL_C

    vb = board(main=LOSSY_MAIN)
    wait_for(lambda: os.path.exists(os.path.join(vb.flash_dir, "in_stat.txt")), what="main.py in stat")
    with serial.Serial(vb.path, timeout=0.05) as ser:
        t0 = time.monotonic()
        ser.write(b"\x03")
        out = read_until(ser, b">>> ", timeout=2 * RETRY_CTRL_C)  # the companion's first wait
        took = time.monotonic() - t0
    assert os.path.exists(os.path.join(vb.flash_dir, "left_stat.txt"))  # the first one was lost there
    assert out.count(b"KeyboardInterrupt") == 1 and b"in stat" not in out
    assert took < 2.0, took  # the companion would have sent its next Ctrl-C after 5 s
    with SerialLink(vb.path) as link:
        assert link.call("ok") == "echo:ok"


def test_exception_in_main_falls_to_repl_with_its_globals(board):
    vb = board(main="x = 41\nopen('ran.txt', 'w').close()\nraise ValueError('bad main')\n")
    wait_for(lambda: os.path.exists(os.path.join(vb.flash_dir, "ran.txt")), what="main.py")
    with SerialLink(vb.path) as link:
        assert link.exec("print(x + 1)").strip() == "42"


def test_raw_repl_exec_and_call_through_seriallink(board):
    vb = board()
    boots = os.path.join(vb.flash_dir, "boots.txt")
    wait_for(lambda: read_file(boots) == "1", what="main.py to sleep")
    with SerialLink(vb.path, timeout=10) as link:
        # connected while main.py sleeps: it was interrupted, not rebooted
        assert read_file(boots) == "1"
        req = "line one\nline 'two' \"é\" \\ \x01"
        assert link.call(req) == "echo:" + req
        assert link.exec("print(6 * 7)\nprint('a')") == "42\na\n"
        with pytest.raises(LinkExecError) as exc:
            link.call("boom")
        assert "ValueError: boom" in exc.value.traceback
        assert link.call("still fine") == "echo:still fine"
        with pytest.raises(LinkExecError):
            link.exec("def broken(:\n")  # a compile error mid raw-paste
        big = "".join("%05d é\x03\x04\x01 line\n" % i for i in range(200))  # streamed, not inlined
        assert len(big.encode()) > link.stream_threshold
        assert link.call(big) == "echo:" + big
        with pytest.raises(LinkExecError) as exc:
            link.call("y" * 200000)  # more than the board's heap: refused before streaming
        assert "MemoryError" in exc.value.traceback
        assert link.call("small again") == "echo:small again"
        # framed answers (syncsrv.w): written between STX and ETX as made
        assert link.call("framed", stream=True) == "echo:framed"
        assert link.call("x" * 5000, stream=True) == "echo:" + "x" * 5000


def test_soft_reboot_keeps_the_pty_and_skips_main(board):
    from mpremote.transport_serial import SerialTransport

    vb = board()
    boots = os.path.join(vb.flash_dir, "boots.txt")
    wait_for(lambda: read_file(boots) == "1", what="first boot")
    path = vb.path
    link = SerialLink(path)
    link.exec("import sys; sys.modules['marker'] = 1")
    link.soft_reset()  # Ctrl-D in the raw REPL
    assert link.exec("import sys; print('marker' in sys.modules)").strip() == "False"
    assert link.call("after") == "echo:after"
    assert read_file(boots) == "1"  # main.py did not run
    link.close(resume=False)

    # mpremote's own path: Ctrl-C, Ctrl-A, Ctrl-D, 'soft reboot', raw REPL
    t = SerialTransport(path)
    t.enter_raw_repl(soft_reset=True)
    assert t.exec("print(1 + 1)").strip() == b"2"
    t.exit_raw_repl()
    t.close()
    assert read_file(boots) == "1"
    assert vb.path == path and vb.alive()

    # resume: leave the raw REPL, soft-reset from the friendly one: main.py runs
    link = SerialLink(path)
    link.close()
    wait_for(lambda: read_file(boots) == "2", what="main.py after resume")


def test_reboots_the_line_asks_for_are_never_held_back_a_boot_loop_is(board, tmp_path):
    """A sync soft-reboots a board twice; back-to-back syncs must not look
    like a main.py that ends the interpreter over and over, which the relay
    holds back a second (before: every third sync waited that second)."""
    trace = tmp_path / "trace.txt"
    vb = board(env={"SPORADIC_VBOARD_TRACE": str(trace)})
    wait_for(lambda: read_file(os.path.join(vb.flash_dir, "boots.txt")) == "1", what="first boot")
    link = SerialLink(vb.path)
    for _ in range(8):
        link.soft_reset()
    link.close(resume=False)
    log = read_file(str(trace))
    assert log.count("boot (raw)") == 8, log[-400:]
    assert "keeps exiting" not in log

    looping = tmp_path / "trace-loop.txt"
    board(main="import sys\nsys.exit(0)\n", env={"SPORADIC_VBOARD_TRACE": str(looping)})
    wait_for(lambda: "keeps exiting" in (read_file(str(looping)) or ""), what="the boot loop held back")


def test_files_round_trip_exactly(board):
    vb = board()
    link = SerialLink(vb.path)
    cases = {
        "empty.bin": b"",
        "one.bin": b"\x00",
        "all.bin": bytes(range(256)) * 3,
        "lib/deep/er/random.bin": os.urandom(20000),
        "/abs/text.txt": "".join("abc%05d each 2026-12-01T06:00Z log 'q' \"x\" é\n" % i
                                 for i in range(700)).encode(),
        "crlf.txt": b"a\r\nb\rc\n\x04\x03\x01\x02\x05" * 100,
    }
    for path, data in cases.items():
        link.put_file(path, data)
    for path, data in cases.items():
        assert link.get_file(path) == data, path
        with open(os.path.join(vb.flash_dir, path.lstrip("/")), "rb") as f:
            assert f.read() == data, path
    link.put_file("one.bin", b"replaced")  # over an existing file
    assert link.get_file("one.bin") == b"replaced"
    assert not os.path.exists(os.path.join(vb.flash_dir, "one.bin.part"))
    with pytest.raises(FileNotFoundError):
        link.get_file("nope.txt")
    with pytest.raises(LinkExecError):
        link.put_file("one.bin/under_a_file.bin", os.urandom(10000))  # fails before streaming
    assert link.get_file("one.bin") == b"replaced"  # the link is in step again
    link.close()


def test_killing_the_board_mid_call_raises_at_once(board):
    vb = board()
    link = SerialLink(vb.path, timeout=30)
    marker = os.path.join(vb.flash_dir, "in_call.txt")

    def pull_cable():
        wait_for(lambda: os.path.exists(marker), what="the call to start")
        vb.kill()

    t = threading.Thread(target=pull_cable)
    t.start()
    t0 = time.monotonic()
    with pytest.raises(LinkClosed):
        link.call("sleep 20")
    t.join()
    assert time.monotonic() - t0 < 10  # far less than the call or the timeout
    with pytest.raises(LinkError):
        link.call("again")  # a broken link stays broken, no hang
    link.close()  # closing a dead link is quiet


def test_reset_button_mid_call_raises_and_board_comes_back(board):
    vb = board(main=None)  # no main.py: the board reboots to its banner
    link = SerialLink(vb.path, timeout=30)
    marker = os.path.join(vb.flash_dir, "in_call.txt")

    def press_reset():
        wait_for(lambda: os.path.exists(marker), what="the call to start")
        vb.reset()

    t = threading.Thread(target=press_reset)
    t.start()
    t0 = time.monotonic()
    with pytest.raises(LinkReset):
        link.call("sleep 20")
    t.join()
    assert time.monotonic() - t0 < 10
    link.close()
    with SerialLink(vb.path) as link:
        assert link.call("back") == "echo:back"


class CablePulled(Exception):
    pass


def test_companion_gone_mid_stream_leaves_a_usable_board(board):
    vb = board()
    old = b"old contents\n" * 10
    new = os.urandom(200000)
    with SerialLink(vb.path) as link:
        link.put_file("data.bin", old)
    link = SerialLink(vb.path)

    def pull(sent, received):
        if sent > 50000:
            raise CablePulled()

    link.progress = pull
    with pytest.raises(CablePulled):
        link.put_file("data.bin", new)
    link.close(resume=False)  # the companion vanishes: nothing more is written
    with SerialLink(vb.path) as link:  # the board gave up waiting and answers Ctrl-C
        assert link.get_file("data.bin") == old  # the cut left the old file whole
        assert link.call("hi") == "echo:hi"


def test_silent_board_times_out(board):
    vb = board()
    with SerialLink(vb.path, timeout=1.0) as link:
        t0 = time.monotonic()
        with pytest.raises(LinkTimeout):
            link.call("sleep 5")
        assert time.monotonic() - t0 < 4


def test_byte_counters_and_progress(board):
    vb = board()
    seen = []
    link = SerialLink(vb.path)
    link.progress = lambda s, r: seen.append((s, r))
    assert 0 < link.bytes_sent < 100 and 0 < link.bytes_received < 2000  # Ctrl-C, Ctrl-A, banners
    link.reset_counters()
    assert link.call("hello") == "echo:hello"
    # the request goes out once, the answer comes back once, plus REPL framing
    assert 40 < link.bytes_sent < 200, link.bytes_sent
    assert 15 < link.bytes_received < 60, link.bytes_received
    assert seen and seen[-1] == (link.bytes_sent, link.bytes_received)
    text = b"".join(b"k%07d each 2026-12-01T06:00Z relay on 2 30 ; within=1h\n" % i for i in range(2000))
    link.reset_counters()
    link.put_file("jobs.txt", text)
    assert len(text) < link.bytes_sent < len(text) * 1.02
    link.reset_counters()
    assert link.get_file("jobs.txt") == text
    assert len(text) < link.bytes_received < len(text) * 1.06
    binary = os.urandom(30000)
    link.reset_counters()
    link.put_file("b.bin", binary)
    assert len(binary) < link.bytes_sent < len(binary) * 1.02  # streamed raw
    small = bytes(range(256)) * 4
    link.reset_counters()
    link.put_file("s.bin", small)
    assert len(small) * 4 / 3 < link.bytes_sent < len(small) * 1.4 + 400  # base64, not repr
    link.close()


def test_main_that_swallows_one_ctrl_c_is_interrupted_again(board):
    main = (
        "import time\n"
        "try:\n"
        "    open('sleeping.txt', 'w').close()\n"
        "    time.sleep(1000)\n"
        "except KeyboardInterrupt:\n"
        "    open('swallowed.txt', 'w').write('1')\n"
        "time.sleep(1000)\n"
    )
    vb = board(main=main)
    wait_for(lambda: os.path.exists(os.path.join(vb.flash_dir, "sleeping.txt")), what="main.py to sleep")
    with SerialLink(vb.path) as link:
        assert link.call("ok") == "echo:ok"
    assert read_file(os.path.join(vb.flash_dir, "swallowed.txt")) == "1"


def test_heap_is_bounded(board):
    vb = board(main=None, heap="32K")
    with SerialLink(vb.path) as link:
        with pytest.raises(LinkExecError) as exc:
            link.exec("b = bytearray(48 * 1024)")
        assert "MemoryError" in exc.value.traceback
        link.exec("b = bytearray(8 * 1024)")


def test_mpremote_cli_copies_to_a_virtual_board(board, tmp_path):
    vb = board()
    src = tmp_path / "local.txt"
    src.write_bytes(b"from mpremote\n" * 50)
    r = subprocess.run([sys.executable, "-m", "mpremote", "connect", vb.path, "fs", "cp", str(src), ":copied.txt"],
                       capture_output=True, timeout=30)
    assert r.returncode == 0, r.stderr
    with open(os.path.join(vb.flash_dir, "copied.txt"), "rb") as f:
        assert f.read() == src.read_bytes()
    with SerialLink(vb.path) as link:
        assert link.get_file("copied.txt") == src.read_bytes()


def test_cli_prints_the_path_and_stops_on_sigterm(tmp_path):
    flash = make_flash(tmp_path / "cli", SLEEPY_MAIN)
    env = dict(os.environ, PYTHONPATH=ROOT)
    p = subprocess.Popen([sys.executable, "-m", "companion.commands.vboard", "--id", "cli-1", "--flash", flash,
                          "--heap", "128K", "--clock-scale", "60"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        path = p.stdout.readline().decode().strip()
        assert path.startswith("/dev/pts/")
        with SerialLink(path) as link:
            out = link.exec("import os; print(os.getenv('SPORADIC_ID'), os.getenv('SPORADIC_CLOCK_SCALE'))")
            assert out.split() == ["cli-1", "60"]
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(10) == 0


def test_littlefs_image_as_flash(tmp_path):
    image = str(tmp_path / "flash.img")
    with VBoard(image=image, board_id="lfs-1", flash_size="512K") as vb:
        assert os.path.getsize(image) == 512 * 1024
        with SerialLink(vb.path) as link:  # a blank image: formatted at first boot
            assert link.exec("import os; print(os.statvfs('/')[:3])").strip() == "(4096, 4096, 128)"
            link.put_file("lib/sporadic/__init__.py", b"")
            link.put_file("lib/sporadic/device/__init__.py", b"")
            link.put_file("lib/sporadic/device/syncsrv.py", SYNCSRV.encode())
            # (LittleFS commits a file when it is closed, as on a board)
            link.put_file("main.py", b"with open('ran.txt', 'w') as f:\n    f.write('yes')\n")
            link.put_file("big.bin", bytes(range(256)) * 100)
        with serial.Serial(vb.path, timeout=0.05) as ser:  # close() rebooted the board
            ser.write(b"\r")
            read_until(ser, b">>> ")  # the REPL answers once main.py is done
        with SerialLink(vb.path) as link:
            assert link.get_file("ran.txt") == b"yes"
            assert link.call("lfs") == "echo:lfs"
            assert link.get_file("big.bin") == bytes(range(256)) * 100
    from littlefs import LittleFS  # the desktop reads what the board wrote

    fs = LittleFS(block_size=4096, block_count=128, read_size=32, prog_size=32, lookahead_size=32, mount=False)
    with open(image, "rb") as f:
        fs.context.buffer = bytearray(f.read())
    fs.mount()
    with fs.open("ran.txt", "r") as f:
        assert f.read() == "yes"
