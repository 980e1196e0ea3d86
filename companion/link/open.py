"""Which link reaches a board: a serial line or a TCP socket, picked from the
port string. Links move requests and answers; they know no verb and no
fleet folder (the secret a TCP link proves itself with comes in as a
function).

    open_link(port, secret_for=None, timeout=None) -> Link (companion/link/base.py)
        port         /dev/ttyUSB0, COM3, a pyserial URL (socket://, rfc2217://,
                     loop://), an existing path: serial (link/serial.py, a
                     ReplLink); else HOST[:PORT], the port 7370 by default:
                     TCP (link/tcp.py, which also holds the server boards
                     sync to: make_server, serve)
        secret_for   board_id -> its hex secret, or None: TCP only
        timeout      seconds of silence before a request fails (None: the link's default)
"""
import os


def is_serial(port):
    """A serial device or pyserial URL (else HOST[:PORT], TCP)."""
    return port.startswith(('/dev/', 'COM', 'socket://', 'rfc2217://', 'loop://')) or os.path.exists(port)


def open_link(port, secret_for=None, timeout=None):
    """A link for PORT: a serial device or pyserial URL, or HOST[:PORT] (TCP,
    where the board asks the companion to prove it holds the board's secret:
    secret_for(board_id))."""
    kw = {} if timeout is None else {'timeout': timeout}
    if is_serial(port):
        from companion.link.serial import SerialLink
        return SerialLink(port, **kw)
    from companion.link import tcp as transport_tcp
    host, _, p = port.rpartition(':') if ':' in port else (port, '', '')
    return transport_tcp.TcpLink(host or port, int(p) if p else transport_tcp.PORT, secret=secret_for, **kw)
