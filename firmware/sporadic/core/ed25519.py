"""Ed25519 signatures (RFC 8032, 5.1): a board's own key pair.

Portable core: runs unchanged on MicroPython and CPython (big ints; SHA-512
from core/sha512.py, hashlib's where the port has it; the curve and the
check in core/edcurve.py, which a board's check of a record loads alone:
recsig.verify). Each board
holds its own private seed (cfg.json "sign"); its public key is in its
signed host record (`.h ... ed25519:HEX`), so any peer checks what that
board signed and no other board can sign in its name (docs/security.md
#board-signatures).

    public(seed) -> 32 bytes            seed: the 32-byte private key
    sign(seed, msg) -> 64 bytes         msg: bytes or str
    verify(pub, msg, sig) -> bool       False for any malformed input
    sha512(data) -> 64 bytes
    PREFIX, pub_text(pub), parse_pub(text)   the text form "ed25519:<64 hex>"

Not constant-time: a board signs its own records on its own clock; what a
timing channel could leak needs a listener on the board's power lines, and
whoever holds the board reads its seed in cfg.json anyway.
"""
import binascii
from sporadic.core import edcurve

PREFIX = 'ed25519:'


def sha512(data):
    if isinstance(data, str):
        data = data.encode()
    from sporadic.core import sha512 as h
    return h.digest(data)


def _expand(seed):
    h = sha512(seed)
    a = int.from_bytes(h[:32], 'little')
    a &= (1 << 254) - 8
    a |= 1 << 254
    return a, h[32:]


def _b(m):
    return m.encode() if isinstance(m, str) else bytes(m)


def public(seed):
    """The 32-byte public key of a 32-byte seed."""
    a, _ = _expand(_b(seed))
    return edcurve.encode(edcurve.mul(a, edcurve.G))


def sign(seed, msg, pub=None):
    """The 64-byte signature of msg (bytes or str) under seed (pub: its
    public key when the caller has it: one scalar multiplication saved)."""
    seed = _b(seed)
    msg = _b(msg)
    a, prefix = _expand(seed)
    if pub is None:
        pub = edcurve.encode(edcurve.mul(a, edcurve.G))
    r = int.from_bytes(sha512(prefix + msg), 'little') % edcurve.L
    rb = edcurve.encode(edcurve.mul(r, edcurve.G))
    k = int.from_bytes(sha512(rb + pub + msg), 'little') % edcurve.L
    s = (r + k * a) % edcurve.L
    return rb + s.to_bytes(32, 'little')


def verify(pub, msg, sig):
    """True when sig (64 bytes) is pub's (32 bytes) signature of msg: the
    RFC's check [S]B = R + [k]A, with S < L and A, R points of the curve."""
    try:
        pub = _b(pub)
        sig = _b(sig)
        return edcurve.check(pub, sha512(sig[:32] + pub + _b(msg)), sig)
    except (ValueError, TypeError):
        return False


def pub_text(pub):
    return PREFIX + binascii.hexlify(pub).decode()


def parse_pub(text):
    """The 32 bytes of "ed25519:<64 hex>", or None."""
    if not text.startswith(PREFIX) or len(text) != len(PREFIX) + 64:
        return None
    h = text[len(PREFIX):]
    if h != h.lower():
        return None
    try:
        return binascii.unhexlify(h)
    except ValueError:
        return None
