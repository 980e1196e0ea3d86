# The sync protocol on the wire (docs/wifi.md): hellos, frames, MACs, addresses, and the clock of its timeouts.
#
# One TCP connection:
#   server -> "SPS1 SID SNONCE\n"                  (hello: id, 16 hex nonce)
#   client -> "SPC1 CID CNONCE MAC\n"              MAC = mac(K, "c SNONCE CNONCE CID SID")
#   server -> "OK MAC\n" | "ERR reason\n"          MAC = mac(K, "s SNONCE CNONCE CID SID")
#   then frames both ways, one response per request:
#             "LEN MAC\n" + LEN bytes (UTF-8 text)   MAC = mac(S, DIR SEQ " " payload)
#   K the fleet key (cfg "fleet_key", hex), S = HMAC(K, SNONCE CNONCE), DIR
#   "q" (request) or "r" (response), SEQ counts frames of the connection.
#   Without a fleet key (insecure fleet) every MAC is "-".
# A request is a syncsrv.h request (recon S N G P, I, ...), or "net?" (the
# node's status, JSON). server.py answers, peer.py asks, node.py runs both.
try:
    from micropython import const
except ImportError:  # CPython
    def const(x):
        return x
import os

from sporadic.core import hmac
from sporadic.net.ticks import ticks_ms, ticks_diff, TIMED_OUT  # noqa: F401 (wire.ticks_ms, wire.TIMED_OUT)

try:
    import binascii
except ImportError:
    import ubinascii as binascii

PORT = const(7370)
HELLO_MAX = const(160)     # bytes of a hello line
HEADER_MAX = const(40)     # bytes of a frame header line
PART_BYTES = const(1024)   # a framed answer's pieces are sent in blocks of about this
COMPANION = 'companion'   # the id the companion speaks as (per-device secret)


def nonce():
    return binascii.hexlify(os.urandom(8)).decode()


def mac(key, text):
    return hmac.mac_hex(key, text) if key else '-'


def check(key, text, m):
    if not key:
        return True
    return hmac.check_hex(key, text, m)


def hello_text(side, sn, cn, cid, sid):
    # what a hello's MAC covers: side "c" (client proves) or "s" (server proves)
    return '%s %s %s %s %s' % (side, sn, cn, cid, sid)


def session_key(key, sn, cn):
    if not key:
        return None
    return hmac.hmac_sha256(key, sn + cn)


def frame(skey, d, seq, payload):
    """One frame as bytes: header + payload."""
    return b''.join(frame_parts(skey, d, seq, (payload,)))


def frame_parts(skey, d, seq, pieces):
    """One frame as a list of bytes, [header, piece, ...], from an answer
    in pieces (str): the MAC and the length are taken piece by piece, so a
    long answer is never held in one block (a board's heap fragments)."""
    out = [b'']
    run = []      # pieces joined into blocks of about PART_BYTES: few sends, no long block
    k = 0
    n = 0
    for p in pieces:
        b = p.encode() if isinstance(p, str) else p
        n += len(b)
        run.append(b)
        k += len(b)
        if k >= PART_BYTES:
            out.append(b''.join(run))
            run = []
            k = 0
    if run:
        out.append(b''.join(run))
    m = mac(skey, [d + str(seq) + ' '] + out[1:])
    out[0] = ('%d %s\n' % (n, m)).encode()
    return out


def frame_ok(skey, d, seq, payload, m):
    """A received frame's MAC verifies (always, without a session key)."""
    return skey is None or hmac.check_hex(skey, (d + str(seq) + ' ', payload), m)


def fleet_key(cfg):
    k = cfg.get('fleet_key')
    if not k:
        return None
    return binascii.unhexlify(k)


def parse_addr(s, port=PORT):
    h, _, p = s.rpartition(':')
    if not h:
        return s, port
    return h, int(p)


def ip(addr):
    """The IP text of a socket address."""
    if isinstance(addr, tuple):
        return addr[0]
    # MicroPython: a sockaddr bytes object (family, port, 4 address bytes)
    try:
        b = bytes(addr)
        return '%d.%d.%d.%d' % (b[4], b[5], b[6], b[7])
    except Exception:
        return '127.0.0.1'
