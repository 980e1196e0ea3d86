"""RSA signature check: PKCS#1 v1.5 with SHA-256 (RFC 8017, 8.2.2).

Portable core: runs unchanged on MicroPython and CPython. Public key only:
a board can check a signature and can never make one.

    verify(n, e, digest, sig) -> bool   digest = sha256(message).digest(); False for a weak key
    parse_pubkey(text) -> (n, e)        "rsa2048:<hex n>" or "rsa2048:<hex n>:<hex e>"
    format_pubkey(n, e) -> text         the canonical text form (one line)
    keyid(text_or_ne) -> 8 hex          first 8 hex of sha256(canonical text)

The check never parses the decoded block: it builds the one encoding that is
valid for the digest (00 01 FF..FF 00 DigestInfo H) and compares the whole
block, so no padding or ASN.1 parsing path exists to get wrong.
"""
import binascii
import hashlib

try:
    from micropython import const
except ImportError:  # CPython
    def const(x):
        return x

E_DEFAULT = const(65537)
MIN_BITS = const(2048)

# DER of DigestInfo{ sha256, NULL } followed by the 32-byte hash (RFC 8017 9.2 note 1).
_DI = b"\x30\x31\x30\x0d\x06\x09\x60\x86\x48\x01\x65\x03\x04\x02\x01\x05\x00\x04\x20"


def _eq(a, b):
    # constant structure: always walks the whole buffer
    if len(a) != len(b):
        return False
    acc = 0
    for i in range(len(a)):
        acc |= a[i] ^ b[i]
    return acc == 0


def _bits(n):
    # a bound by doubling, then bisection: ~18 shifts of a 2048-bit number
    # (one bit at a time was ~100: ~15 ms of a Pico's time a call)
    hi = 64
    while n >> hi:
        hi += hi
    lo = 0
    while lo < hi:
        m = (lo + hi) // 2
        if n >> m:
            lo = m + 1
        else:
            hi = m
    return lo


def _modexp(b, e, n):
    # square-and-multiply, for ports built without 3-argument pow
    r = 1
    b %= n
    while e:
        if e & 1:
            r = (r * b) % n
        e >>= 1
        if e:
            b = (b * b) % n
    return r


def _pow(b, e, n):
    try:
        return pow(b, e, n)
    except (TypeError, NotImplementedError):
        return _modexp(b, e, n)


_key = None    # (n, e, bytes of n) of the last key that passed key_problem


def verify(n, e, digest, sig):
    """True when sig is a valid PKCS#1 v1.5 SHA-256 signature of digest under (n, e)."""
    global _key
    try:
        c = _key
        if c is not None and c[0] is n and c[1] == e:
            k = c[2]      # the same key object as the last check: checked then
        else:
            # (key_problem and the size: ~200 shifts of a 2048-bit number,
            # ~20 ms of a Pico's time a signature before this was kept)
            if key_problem(n, e):
                return False
            k = (_bits(n) + 7) // 8
            _key = (n, e, k)
        if len(digest) != 32 or len(sig) != k:
            return False
        s = int.from_bytes(sig, "big")
        if s <= 1 or s >= n:
            return False
        em = _pow(s, e, n).to_bytes(k, "big")
        pad = k - 3 - len(_DI) - 32
        if pad < 8:
            return False
        want = b"\x00\x01" + b"\xff" * pad + b"\x00" + _DI + bytes(digest)
        return _eq(em, want)
    except MemoryError:
        raise       # not the signature's fault: the caller keeps the line to check again
    except Exception:
        return False


def key_problem(n, e):
    """Why (n, e) is no key to trust a signature under, or None: fewer than
    MIN_BITS bits, an even modulus, or an exponent that is even or under 3
    (e = 1 makes every message its own signature). verify() refuses such a
    key itself, whoever parsed it."""
    if _bits(n) < MIN_BITS:
        return "fewer than %d bits" % MIN_BITS
    if n & 1 == 0 or e < 3 or e & 1 == 0:
        return "bad modulus or exponent"
    return None


def format_pubkey(n, e=E_DEFAULT):
    bits = _bits(n)
    # the bytes' hex: "%x" of a 2048-bit number was ~18 ms of a Pico's time
    h = binascii.hexlify(n.to_bytes((bits + 7) // 8, "big")).decode()
    if h[:1] == "0":
        h = h[1:]
    if e == E_DEFAULT:
        return "rsa%d:%s" % (bits, h)
    return "rsa%d:%s:%x" % (bits, h, e)


def parse_pubkey(text):
    """(n, e) from the text form; ValueError with a reason otherwise."""
    if isinstance(text, (bytes, bytearray)):
        text = text.decode()
    text = text.strip()
    parts = text.split(":")
    if len(parts) not in (2, 3) or parts[0][:3] != "rsa":
        raise ValueError("public key: expected rsaBITS:HEXN[:HEXE]")
    try:
        bits = int(parts[0][3:])
        n = int(parts[1], 16)
        e = int(parts[2], 16) if len(parts) == 3 else E_DEFAULT
    except ValueError:
        raise ValueError("public key: bad number")
    if bits < MIN_BITS:
        raise ValueError("public key: fewer than %d bits" % MIN_BITS)
    if _bits(n) != bits:
        raise ValueError("public key: modulus is not %d bits" % bits)
    why = key_problem(n, e)
    if why:
        raise ValueError("public key: " + why)
    return n, e


def keyid(key):
    """8 hex digits naming a public key: sha256 of its canonical text form."""
    if isinstance(key, tuple):
        text = format_pubkey(key[0], key[1])
    else:
        n, e = parse_pubkey(key)
        text = format_pubkey(n, e)
    return binascii.hexlify(hashlib.sha256(text.encode()).digest()[:4]).decode()
