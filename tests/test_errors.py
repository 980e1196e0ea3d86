"""Every error a user can cause ends in one line (issue #12, "Errors a user
meets are one line"): `companion: <what happened>` on stderr, exit status 2,
no traceback; `--debug` shows the traceback instead; a bug is one line that
names it and points at --debug.

The companion runs as a user runs it, in its own process, against real
things: a port path that does not exist, a pty held open exclusively by
another process, a pty with nothing behind it, a virtual board running
plain MicroPython, a TCP port that is bound but not listening, a `companion
serve` of another fleet. esptool has no emulator: the flash cases that need
a chip talk to tests/espstub.py, esptool's serial protocol (an ESP32 with
its flasher stub running) on a pty, which can pull its cable mid-write.
"""
import os
import socket
import subprocess
import sys
import threading

import pytest
import serial
from serial.tools.list_ports_common import ListPortInfo

from companion import cli
from companion.link.base import PortUnavailable
from companion.link.ports import choose_port
from companion.vboard.board import VBoard
from tests.espstub import EspStub
from tests.test_boards_image import crafted_image
from esptool.bin_image import ESP32FirmwareImage, ESP32S3FirmwareImage

ESP8266_MAGIC = 0xFFF0C101   # esptool.targets.esp8266.ESP8266ROM.MAGIC_VALUE

NO_PORT = '/dev/ttyUSB-sporadic-none'   # no such device on any machine


def companion(*argv, timeout=120):
    return subprocess.run([sys.executable, '-m', 'companion.cli'] + [str(a) for a in argv],
                          capture_output=True, text=True, timeout=timeout)


def one_line(p, *words, status=2):
    """The companion failed with one line on stderr holding every word."""
    assert 'Traceback' not in p.stderr + p.stdout, p.stderr
    lines = p.stderr.splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith('companion: '), lines[0]
    for w in words:
        assert w in lines[0], lines[0]
    assert p.returncode == status, (p.returncode, lines[0])
    return lines[0]


@pytest.fixture
def fleet(fleet_cli):
    fleet_cli('init')
    return fleet_cli.dir


@pytest.fixture
def pty_port():
    """A pseudo-terminal with nothing behind it: a port where no board answers."""
    master, slave = os.openpty()
    try:
        yield os.ttyname(slave)
    finally:
        os.close(slave)
        os.close(master)


# -- ports -------------------------------------------------------------------------

@pytest.mark.parametrize('verb', ['sync', 'deploy'])
def test_no_such_port(fleet, verb):
    line = one_line(companion('--fleet', fleet, verb, NO_PORT), 'cannot open %s: no such port' % NO_PORT)
    assert '(ports seen: ' in line


def test_no_such_port_flash(fleet):
    one_line(companion('--fleet', fleet, 'flash', NO_PORT, '--board', 'esp32', '--id', 'x'),
             'cannot open %s: no such port (ports seen: ' % NO_PORT)


@pytest.mark.parametrize('verb', ['sync', 'deploy', 'flash'])
def test_port_busy(fleet, pty_port, verb):
    holder = serial.Serial(pty_port, exclusive=True)    # another program has the port
    try:
        extra = ['--board', 'esp32', '--id', 'x'] if verb == 'flash' else []
        one_line(companion('--fleet', fleet, verb, pty_port, *extra), 'cannot open %s: busy' % pty_port)
    finally:
        holder.close()


@pytest.mark.slow
def test_board_silent(fleet, pty_port):
    one_line(companion('--fleet', fleet, 'sync', pty_port), 'nothing answers on %s' % pty_port)


@pytest.mark.slow
def test_no_chip_answers_flash(fleet, pty_port):
    p = companion('--fleet', fleet, 'flash', pty_port, '--board', 'esp32', '--id', 'x')
    one_line(p, 'no Espressif chip answers on %s' % pty_port, 'nothing was written')


@pytest.mark.slow
def test_something_not_micropython_answers(fleet):
    """A device that prints its own lines (another program on the board)."""
    master, slave = os.openpty()
    stop = threading.Event()

    def chatter():
        while not stop.wait(0.2):
            try:
                os.write(master, b'temp=21.5\r\n')
            except OSError:
                return
    t = threading.Thread(target=chatter, daemon=True)
    t.start()
    try:
        port = os.ttyname(slave)
        one_line(companion('--fleet', fleet, 'sync', port), '%s answers, but not as MicroPython' % port)
    finally:
        stop.set()
        t.join()
        os.close(slave)
        os.close(master)


@pytest.mark.slow
def test_board_without_sporadic(fleet, tmp_path):
    """A board running MicroPython that nobody deployed sporadic to."""
    with VBoard(str(tmp_path / 'plain')) as vb:
        one_line(companion('--fleet', fleet, 'sync', vb.path),
                 '%s runs MicroPython, but not sporadic' % vb.path, 'companion deploy %s' % vb.path)


@pytest.mark.slow
def test_a_board_whose_start_runs_out_of_memory_says_so(fleet, tmp_path):
    """A deployed board started with a heap too small for its loop: its
    main.py runs out of memory and resets it (device/boot.py), again and
    again, so that no Ctrl-C finds a prompt. The companion says what it saw
    (it was taken for something that does not run MicroPython)."""
    flash_dir = str(tmp_path / 'b')
    with VBoard(flash_dir, heap='128K') as vb:
        p = companion('--fleet', fleet, 'deploy', vb.path, '--id', 'b1', '-q')
        assert p.returncode == 0, p.stderr
    with VBoard(flash_dir, heap='24K') as vb:
        line = one_line(companion('--fleet', fleet, 'sync', vb.path),
                        '%s runs MicroPython, but what it runs as it starts failed' % vb.path,
                        'MemoryError: memory allocation failed', 'restarts before it takes Ctrl-C',
                        'heap is too small')
        assert 'not as MicroPython does' not in line


@pytest.mark.slow
def test_board_gone_mid_deploy(fleet, tmp_path):
    """The board's process dies (its cable pulled) while deploy writes files."""
    from tests.devutil import wait_for
    flash_dir = str(tmp_path / 'b')
    with VBoard(flash_dir) as vb:
        deploy = subprocess.Popen([sys.executable, '-m', 'companion.cli', '--fleet', fleet, 'deploy', vb.path,
                                   '--id', 'b1', '-q'], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lib = os.path.join(flash_dir, 'lib', 'sporadic')
        wait_for(lambda: sum(len(fs) for _, _, fs in os.walk(lib)) >= 3, 60, 'deploy under way')   # 3 files of 41
        vb.kill()
        out, err = deploy.communicate(timeout=60)
        one_line(subprocess.CompletedProcess(deploy.args, deploy.returncode, out, err),
                 'deploy to %s broke off' % vb.path, 'run it again')


def test_no_port_given_and_no_board_plugged_in(fleet):
    # this machine's USB ports (none of a board's vendor ids on a test machine)
    p = companion('--fleet', fleet, 'sync')
    if p.returncode == 0 or 'look like boards' in p.stderr:
        pytest.skip('a board is plugged into this machine')
    one_line(p, 'no port given, and no USB serial port looks like a MicroPython board (ports seen: ')


def usb_port(device, vid, description):
    p = ListPortInfo(device, skip_link_detection=True)
    p.vid, p.pid, p.description = vid, 0x0005, description
    return p


def test_the_one_board_looking_port_is_chosen():
    pico = usb_port('/dev/ttyACM0', 0x2E8A, 'Board in FS mode')
    uart = usb_port('/dev/ttyS0', None, 'n/a')
    mouse = usb_port('/dev/ttyACM1', 0x046D, 'a receiver')
    assert choose_port([uart, pico, mouse]) == '/dev/ttyACM0'
    cp210x = usb_port('/dev/ttyUSB0', 0x10C4, 'CP2102 USB to UART Bridge Controller')
    with pytest.raises(PortUnavailable, match=r'2 USB serial ports look like boards '
                                              r'\(/dev/ttyACM0 "Board in FS mode", /dev/ttyUSB0 "CP2102'):
        choose_port([pico, cp210x])
    with pytest.raises(PortUnavailable, match=r'ports seen: /dev/ttyS0, /dev/ttyACM1 "a receiver"'):
        choose_port([uart, mouse])


# -- the fleet folder and job lines ------------------------------------------------

def test_not_a_fleet_folder(tmp_path):
    one_line(companion('--fleet', tmp_path, 'sync', NO_PORT), '%s is not a fleet folder' % tmp_path)


def test_bad_job_line(fleet):
    one_line(companion('--fleet', fleet, 'add', 'each soon log hello'), 'bad job line')


def test_usage_error(fleet):
    one_line(companion('--fleet', fleet, 'sync', 'a', 'b'), 'unrecognized arguments: b')


# -- TCP -----------------------------------------------------------------------------

def test_tcp_address_with_nothing_listening(fleet):
    # bound, never listening: connecting is refused, and no one else can take the port
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    try:
        where = '127.0.0.1:%d' % s.getsockname()[1]
        one_line(companion('--fleet', fleet, 'sync', where), 'nothing listens at %s (connection refused)' % where)
    finally:
        s.close()


def test_tcp_authentication_refused(fleet, tmp_path):
    """The companion of another fleet at the address: the hello is refused
    (net.Server, the code a board's sync server runs)."""
    other = str(tmp_path / 'other')
    assert companion('--fleet', other, 'init', '--insecure').returncode == 0
    server = subprocess.Popen([sys.executable, '-m', 'companion.cli', '--fleet', fleet, 'serve', '--port', '0',
                               '--bind', '127.0.0.1', '--for', '60'], stdout=subprocess.PIPE, text=True)
    try:
        first = server.stdout.readline()    # 'serving fleet DIR on 127.0.0.1:PORT (Ctrl-C to stop)'
        where = first.split(' on ')[1].split()[0]
        one_line(companion('--fleet', other, 'sync', where), '%s (board companion) refused this companion' % where,
                 'holds no secret')
    finally:
        server.kill()
        server.wait()


def test_serve_on_a_port_in_use(fleet):
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    s.listen()
    try:
        port = s.getsockname()[1]
        one_line(companion('--fleet', fleet, 'serve', '--bind', '127.0.0.1', '--port', port, '--for', '1'),
                 'cannot listen on 127.0.0.1:%d' % port)
    finally:
        s.close()


def test_deploy_to_a_network_address(fleet):
    one_line(companion('--fleet', fleet, 'deploy', '192.0.2.1:7370'), "give the board's serial port")


# -- firmware files ------------------------------------------------------------------

def test_firmware_file_missing(fleet, tmp_path):
    missing = str(tmp_path / 'ESP32_GENERIC.bin')
    one_line(companion('--fleet', fleet, 'flash', NO_PORT, '--board', 'esp32', '--firmware', missing),
             'cannot read the firmware file %s: No such file or directory' % missing)


def test_firmware_for_another_chip(fleet, tmp_path):
    path = tmp_path / 's3.bin'
    path.write_bytes(crafted_image(ESP32S3FirmwareImage, tmp_path))
    one_line(companion('--fleet', fleet, 'flash', NO_PORT, '--board', 'esp32', '--firmware', path),
             's3.bin is built for esp32s3, but board esp32 is esp32')


# -- the chip (tests/espstub.py: esptool's protocol on a pty) ----------------------------

def run_cli(capsys, *argv):
    """The CLI in this process."""
    capsys.readouterr()
    rc = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(argv, rc, out, err)


@pytest.fixture
def firmware(tmp_path):
    path = tmp_path / 'ESP32_GENERIC.bin'
    path.write_bytes(crafted_image(ESP32FirmwareImage, tmp_path))
    return path


RESET = 'Hard resetting via RTS pin'    # what esptool prints when asked for a hard reset


def test_another_chip_is_refused_and_reset(fleet):
    """An ESP8266 where --board says esp32: one line, the chip reset into
    the firmware it had (not left in the flasher stub), nothing written."""
    chip = EspStub(magic=ESP8266_MAGIC)
    try:
        p = companion('--fleet', fleet, 'flash', chip.path, '--board', 'esp32', '--id', 'a')
        one_line(p, 'the chip on %s is ESP8266, but board esp32 is esp32' % chip.path)
        assert RESET in p.stdout.split('Detecting chip type')[-1]
        assert chip.written == [] and 0x10 not in chip.commands
    finally:
        chip.close()


@pytest.mark.slow
def test_a_filesystem_with_jobs_is_refused_and_reset(fleet, firmware):
    chip = EspStub()
    try:
        assert companion('--fleet', fleet, 'flash', chip.path, '--board', 'esp32', '--firmware', firmware,
                         '--id', 'pump-1').returncode == 0
        assert companion('--fleet', fleet, 'add', 'each +1h log hello').returncode == 0
        assert companion('--fleet', fleet, 'flash', chip.path, '--board', 'esp32', '--id', 'pump-1',
                         '--erase', '--firmware', firmware).returncode == 0
        before = bytes(chip.flash)
        written = list(chip.written)
        p = companion('--fleet', fleet, 'flash', chip.path, '--board', 'esp32', '--id', 'pump-1')
        one_line(p, 'the filesystem at %s 0x200000 holds /jobs.txt' % chip.path, 'not overwritten', '--erase')
        assert RESET in p.stdout.split('Read ')[-1]
        assert chip.written == written and bytes(chip.flash) == before
    finally:
        chip.close()


@pytest.mark.slow     # esptool waits for the chip to come back (5-12 s)
def test_cable_cut_mid_write_says_what_was_written(fleet, firmware):
    """The cable goes while the filesystem is written, MicroPython already
    written and verified: one line naming both regions."""
    chip = EspStub(cut_after=(0x200000, 2))
    try:
        p = companion('--fleet', fleet, 'flash', chip.path, '--board', 'esp32', '--firmware', firmware,
                      '--id', 'pump-1')
        one_line(p, 'flashing %s failed while writing the filesystem at 0x200000' % chip.path,
                 'written and verified: MicroPython at 0x1000 (%d bytes)' % firmware.stat().st_size,
                 'not written: the filesystem at 0x200000 (2097152 bytes) (0x200000 may be partly written)',
                 'the board may not boot until a flash completes')
        assert chip.written == [(0x1000, firmware.stat().st_size)]
    finally:
        chip.close()


@pytest.mark.slow
def test_cable_cut_before_anything_is_written(fleet, firmware):
    chip = EspStub(cut_after=(0x1000, 1))
    try:
        p = companion('--fleet', fleet, 'flash', chip.path, '--board', 'esp32', '--firmware', firmware,
                      '--id', 'pump-1')
        one_line(p, 'failed while writing MicroPython at 0x1000', 'written and verified: nothing',
                 'not written: MicroPython at 0x1000 (%d bytes); the filesystem at 0x200000' % firmware.stat().st_size)
    finally:
        chip.close()


# -- --debug, and bugs ------------------------------------------------------------------

def test_debug_shows_the_traceback(fleet):
    p = companion('--fleet', fleet, 'sync', NO_PORT, '--debug')
    assert p.returncode != 0
    assert 'Traceback (most recent call last)' in p.stderr and 'PortUnavailable' in p.stderr
    assert p.stderr.strip().splitlines()[-1].endswith('cannot open %s: no such port (ports seen: %s'
                                                      % (NO_PORT, p.stderr.split('(ports seen: ')[-1].strip()))


def test_a_bug_is_one_line_that_names_it(fleet, capsys, monkeypatch):
    from companion.fleet import queries as fleetcmd
    from companion.fleet.folder import Fleet

    def broken(*args):
        raise KeyError('status')     # a bug in the companion, not the user's doing
    monkeypatch.setattr(fleetcmd, 'pending_for', broken)
    monkeypatch.setattr(Fleet, 'devices', lambda self: [{'id': 'x'}])
    one_line(run_cli(capsys, '--fleet', fleet, 'status', '--json'),
             "internal error (a bug, please report it): KeyError: 'status'", 'run with --debug', status=70)
    with pytest.raises(KeyError):
        cli.main(['--fleet', fleet, '--debug', 'status', '--json'])
