"""HMAC-SHA256 (RFC 2104) on hashlib, and a constant-time compare.

Portable core: runs unchanged on MicroPython and CPython (the companion
imports this same module to check what boards sign).

    hmac_sha256(key, msg) -> 32 bytes
    compare(a, b) -> bool        time depends on the length only
    mac_hex(key, msg, n=16)      the first n hex digits of hmac_sha256
    check_hex(key, msg, mac)     compare(mac_hex(key, msg, len(mac)), mac), len >= 16
    mac_result(secret, text) / check_result(secret, text, mac)    a record's MAC
    check_line(secret, line)     the MAC field of a result line checks
    key_id(key)                  8 hex naming a secret key without revealing it
    fleet_ids(cfg)               "KEYID PEERID ID": the fleet a board's /cfg.json names

key and msg: bytes or str (str is UTF-8 encoded).
"""
import binascii
import hashlib

try:
    from micropython import const
except ImportError:  # CPython
    def const(x):
        return x

_BLOCK = const(64)
MAC_HEX = const(16)


def _b(x):
    if isinstance(x, str):
        return x.encode()
    return bytes(x)


def hmac_sha256(key, msg):
    """HMAC-SHA256 of msg (str or bytes; or a tuple or list of them, taken
    one after another: a long message is never joined to be signed)."""
    key = _b(key)
    if len(key) > _BLOCK:
        key = hashlib.sha256(key).digest()
    key = key + bytes(_BLOCK - len(key))
    ki = bytearray(_BLOCK)
    ko = bytearray(_BLOCK)
    for i in range(_BLOCK):
        ki[i] = key[i] ^ 0x36
        ko[i] = key[i] ^ 0x5C
    h = hashlib.sha256(ki)
    for part in msg if isinstance(msg, (tuple, list)) else (msg,):
        h.update(_b(part))
    inner = h.digest()
    h = hashlib.sha256(ko)
    h.update(inner)
    return h.digest()


def compare(a, b):
    """Constant-time equality of two byte strings (or two str)."""
    a = _b(a)
    b = _b(b)
    if len(a) != len(b):
        return False
    acc = 0
    for i in range(len(a)):
        acc |= a[i] ^ b[i]
    return acc == 0


def mac_hex(key, msg, n=MAC_HEX):
    return binascii.hexlify(hmac_sha256(key, msg)).decode()[:n]


def check_hex(key, msg, mac):
    """True when mac (at least 16 hex digits, lower case) is the MAC of msg."""
    if isinstance(mac, (bytes, bytearray)):
        mac = mac.decode()
    if len(mac) < MAC_HEX or len(mac) > 64:
        return False
    return compare(mac_hex(key, msg, len(mac)), mac)


def mac_result(secret, text):
    """The 16-hex MAC a board puts on a record it writes.

    secret: the board's secret as provisioned (hex text, 64 digits for 32
    bytes); text: the record with its mac field written as "-".
    """
    return mac_hex(binascii.unhexlify(secret), text)


def check_result(secret, text, mac):
    try:
        key = binascii.unhexlify(secret)
    except Exception:
        return False
    return check_hex(key, text, mac)


def check_line(secret, line):
    """True when a result line (ID r HOST K AT OUTCOME MAC [OUTPUT]) carries
    the MAC of its own text (with "-" for the MAC) under secret."""
    f = line.split(' ', 7)
    if len(f) < 7:
        return False
    mac = f[6]
    if len(mac) > MAC_HEX and mac[MAC_HEX] == '.':
        mac = mac[:MAC_HEX]   # its HMAC, then the board's signature (core/recsig.py)
    f[6] = '-'
    return check_result(secret, ' '.join(f), mac)


def key_id(key):
    """8 hex digits naming a secret key (a fleet's board-to-board key) without
    revealing it."""
    return mac_hex(key, 'sporadic key id', 8)


def fleet_ids(cfg):
    """Which fleet a board belongs to, from its /cfg.json (a dict): "KEYID
    PEERID ID", the keyid of its public key (rsa.keyid; '?' when it does not
    parse), key_id of its fleet key and its id, '-' for what it lacks. The
    board's answer to `F` (syncsrv) and what `deploy` reads (companion/sync/syncer.py)."""
    kid = '-'
    if cfg.get('pubkey'):
        try:
            from sporadic.core import rsa
            kid = rsa.keyid(cfg['pubkey'])
        except Exception:
            kid = '?'
    peer = key_id(cfg['fleet_key']) if cfg.get('fleet_key') else '-'
    return '%s %s %s' % (kid, peer, cfg.get('id') or '-')
