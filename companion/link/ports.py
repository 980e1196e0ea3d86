"""Which serial port is the board's, and why one does not open.

choose_port() picks the one USB serial port that looks like a MicroPython
board (BOARD_VIDS) or says, in one line, that there are none or several and
which ports this machine has; open_failure() turns the error opening a port
into a PortUnavailable that says why (no such port, busy, no permission);
open_port()/close_port() open it exclusively and let it go without
resetting an ESP board through its modem lines. The raw REPL on the line is
link/rawrepl.py's; the project's requests and files, link/serial.py's."""

import errno
import os

import serial

from .base import PortUnavailable

__all__ = ["ports_seen", "describe_ports", "board_ports", "choose_port", "open_failure", "at_open",
           "open_port", "close_port"]

# USB vendor ids of the boards sporadic runs on and of the USB-serial bridges
# on their development boards (the USB ID repository, http://www.linux-usb.org/usb.ids):
# MicroPython's own USB CDC on the RP2040 enumerates as 2E8A (Raspberry Pi),
# an ESP32-S3/S2/C3's native USB as 303A (Espressif); other ESP boards sit
# behind a CP210x (10C4), a CH340/CH9102 (1A86) or an FTDI chip (0403).
BOARD_VIDS = {0x2E8A: "Raspberry Pi", 0x303A: "Espressif", 0x10C4: "Silicon Labs CP210x",
              0x1A86: "QinHeng CH340/CH9102", 0x0403: "FTDI"}


def ports_seen():
    """The serial ports this machine has (pyserial's list_ports), by name."""
    try:
        from serial.tools import list_ports
        return sorted(list_ports.comports(), key=lambda p: p.device)
    except Exception:  # a platform pyserial cannot list on: no names to offer
        return []


def describe_ports(ports, limit=6):
    """'/dev/ttyACM0 "Board in FS mode", /dev/ttyS0' (or 'none')."""
    if not ports:
        return "none"
    out = []
    for p in ports[:limit]:
        d = p.description if p.description and p.description not in ("n/a", p.device, p.name) else ""
        out.append('%s "%s"' % (p.device, d) if d else p.device)
    if len(ports) > limit:
        out.append("%d more" % (len(ports) - limit))
    return ", ".join(out)


def board_ports(ports=None):
    """The ports that look like a MicroPython board: a USB vendor id of BOARD_VIDS."""
    ports = ports_seen() if ports is None else ports
    return [p for p in ports if p.vid in BOARD_VIDS]


def choose_port(ports=None):
    """The one port that looks like a board; PortUnavailable when there are
    none or several (the message lists them)."""
    ports = ports_seen() if ports is None else ports
    boards = board_ports(ports)
    if len(boards) == 1:
        return boards[0].device
    if not boards:
        raise PortUnavailable("no port given, and no USB serial port looks like a MicroPython board "
                              "(ports seen: %s): plug the board in, or give its port" % describe_ports(ports),
                              "no board")
    raise PortUnavailable("no port given, and %d USB serial ports look like boards (%s): give one"
                          % (len(boards), describe_ports(boards)), "several boards")


def open_failure(port, exc=None):
    """A PortUnavailable saying why ``port`` does not open: no such port (with
    the ports this machine has), busy (another program holds it: pyserial's
    exclusive lock), no permission. ``exc``: the error opening it raised, if
    known; otherwise the port is opened once more (exclusively) to learn it."""
    if exc is None:
        try:
            probe = serial.serial_for_url(port, do_not_open=True, exclusive=True)
            probe.open()
            probe.close()
            exc = OSError("it did not open, then it did (unplugged and plugged back?): try again")
        except (serial.SerialException, OSError, ValueError) as e:
            exc = e
    code = getattr(exc, "errno", None)
    text = str(exc)
    if code in (errno.ENOENT, errno.ENODEV, errno.ENXIO) or "FileNotFoundError" in text:
        return PortUnavailable("cannot open %s: no such port (ports seen: %s)" % (port, describe_ports(ports_seen())),
                               "no such port")
    if code in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EBUSY) or "Access is denied" in text:
        return PortUnavailable("cannot open %s: busy: another program holds it (a serial monitor, "
                               "mpremote, Thonny, another companion): close it and try again" % port, "busy")
    if code in (errno.EACCES, errno.EPERM) or "PermissionError" in text:
        return PortUnavailable("cannot open %s: permission denied (on Linux join the dialout group: "
                               "sudo usermod -aG dialout $USER, then log in again)" % port, "permission denied")
    why = getattr(exc, "strerror", None) or text
    return PortUnavailable("cannot open %s: %s" % (port, why), why)


def at_open(e):
    """e, marked as a failure opening the board (commands say so)."""
    e.at_open = True
    return e


def open_port(url, baud, poll):
    """The port, opened exclusively (pyserial's lock: a second program gets
    'busy'). A CP210x on Windows toggles DTR and RTS apart when opened after
    a power-on, which resets an ESP board: open with both low, then raise
    them together (as mpremote's SerialTransport does)."""
    ser = serial.serial_for_url(url, do_not_open=True, baudrate=baud, exclusive=True,
                                timeout=poll, inter_byte_timeout=None)
    if os.name == "nt" and _port_vid(url) == 0x10C4:
        ser.dtr = False
        ser.rts = False
        ser.open()
        ser.dtr = True
        ser.rts = True
    if not ser.is_open:
        ser.open()
    return ser


def _port_vid(url):
    for p in ports_seen():
        if p.device == url:
            return p.vid
    return None


def close_port(ser):
    """Let go of the port; DTR and RTS go low first in that order, so that
    the driver's own drop of them on close does not reset an ESP board."""
    try:
        ser.rts = False
        ser.dtr = False
    except (serial.SerialException, OSError, ValueError):
        pass  # a pty or socket:// has no modem lines
    try:
        ser.close()
    except (serial.SerialException, OSError):
        pass
