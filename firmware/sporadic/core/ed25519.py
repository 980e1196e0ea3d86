"""Ed25519 signatures (RFC 8032, 5.1): a board's own key pair.

Portable core: runs unchanged on MicroPython and CPython (big ints; SHA-512
from hashlib where the port has it, else the small one below). Each board
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

try:
    from hashlib import sha512 as _h512
except ImportError:   # MicroPython: no sha512 in its hashlib
    _h512 = None

PREFIX = 'ed25519:'

_P = 2 ** 255 - 19
_L = 2 ** 252 + 27742317777372353535851937790883648493
# -121665/121666, sqrt(-1) and the base point B (RFC 8032 5.1), as numbers: no
# modular inverse or root at import (each ~400 multiplications on a board)
_D = 37095705934669439343138083508754565189542113879843219016388785533085940283555
_D2 = (2 * _D) % _P
_I = 19681161376707505956807079304988542015446066515923890162744021073123829784752
_GX = 15112221349535400772501151409588531511454012693041857206046113283949847762202
_GY = 46316835694926478169428394003475163141307993866256225615783033603165251855960
_G = (_GX, _GY, 1, _GX * _GY % _P)


# ---- SHA-512 (FIPS 180-4), for ports without it ----

# SHA-512's 80 round constants (FIPS 180-4 4.2.3), 640 bytes, read 8 at a
# time (80 big ints held would be ~5 KB of a board's heap)
_K = (
    b'\x42\x8a\x2f\x98\xd7\x28\xae\x22\x71\x37\x44\x91\x23\xef\x65\xcd'
    b'\xb5\xc0\xfb\xcf\xec\x4d\x3b\x2f\xe9\xb5\xdb\xa5\x81\x89\xdb\xbc'
    b'\x39\x56\xc2\x5b\xf3\x48\xb5\x38\x59\xf1\x11\xf1\xb6\x05\xd0\x19'
    b'\x92\x3f\x82\xa4\xaf\x19\x4f\x9b\xab\x1c\x5e\xd5\xda\x6d\x81\x18'
    b'\xd8\x07\xaa\x98\xa3\x03\x02\x42\x12\x83\x5b\x01\x45\x70\x6f\xbe'
    b'\x24\x31\x85\xbe\x4e\xe4\xb2\x8c\x55\x0c\x7d\xc3\xd5\xff\xb4\xe2'
    b'\x72\xbe\x5d\x74\xf2\x7b\x89\x6f\x80\xde\xb1\xfe\x3b\x16\x96\xb1'
    b'\x9b\xdc\x06\xa7\x25\xc7\x12\x35\xc1\x9b\xf1\x74\xcf\x69\x26\x94'
    b'\xe4\x9b\x69\xc1\x9e\xf1\x4a\xd2\xef\xbe\x47\x86\x38\x4f\x25\xe3'
    b'\x0f\xc1\x9d\xc6\x8b\x8c\xd5\xb5\x24\x0c\xa1\xcc\x77\xac\x9c\x65'
    b'\x2d\xe9\x2c\x6f\x59\x2b\x02\x75\x4a\x74\x84\xaa\x6e\xa6\xe4\x83'
    b'\x5c\xb0\xa9\xdc\xbd\x41\xfb\xd4\x76\xf9\x88\xda\x83\x11\x53\xb5'
    b'\x98\x3e\x51\x52\xee\x66\xdf\xab\xa8\x31\xc6\x6d\x2d\xb4\x32\x10'
    b'\xb0\x03\x27\xc8\x98\xfb\x21\x3f\xbf\x59\x7f\xc7\xbe\xef\x0e\xe4'
    b'\xc6\xe0\x0b\xf3\x3d\xa8\x8f\xc2\xd5\xa7\x91\x47\x93\x0a\xa7\x25'
    b'\x06\xca\x63\x51\xe0\x03\x82\x6f\x14\x29\x29\x67\x0a\x0e\x6e\x70'
    b'\x27\xb7\x0a\x85\x46\xd2\x2f\xfc\x2e\x1b\x21\x38\x5c\x26\xc9\x26'
    b'\x4d\x2c\x6d\xfc\x5a\xc4\x2a\xed\x53\x38\x0d\x13\x9d\x95\xb3\xdf'
    b'\x65\x0a\x73\x54\x8b\xaf\x63\xde\x76\x6a\x0a\xbb\x3c\x77\xb2\xa8'
    b'\x81\xc2\xc9\x2e\x47\xed\xae\xe6\x92\x72\x2c\x85\x14\x82\x35\x3b'
    b'\xa2\xbf\xe8\xa1\x4c\xf1\x03\x64\xa8\x1a\x66\x4b\xbc\x42\x30\x01'
    b'\xc2\x4b\x8b\x70\xd0\xf8\x97\x91\xc7\x6c\x51\xa3\x06\x54\xbe\x30'
    b'\xd1\x92\xe8\x19\xd6\xef\x52\x18\xd6\x99\x06\x24\x55\x65\xa9\x10'
    b'\xf4\x0e\x35\x85\x57\x71\x20\x2a\x10\x6a\xa0\x70\x32\xbb\xd1\xb8'
    b'\x19\xa4\xc1\x16\xb8\xd2\xd0\xc8\x1e\x37\x6c\x08\x51\x41\xab\x53'
    b'\x27\x48\x77\x4c\xdf\x8e\xeb\x99\x34\xb0\xbc\xb5\xe1\x9b\x48\xa8'
    b'\x39\x1c\x0c\xb3\xc5\xc9\x5a\x63\x4e\xd8\xaa\x4a\xe3\x41\x8a\xcb'
    b'\x5b\x9c\xca\x4f\x77\x63\xe3\x73\x68\x2e\x6f\xf3\xd6\xb2\xb8\xa3'
    b'\x74\x8f\x82\xee\x5d\xef\xb2\xfc\x78\xa5\x63\x6f\x43\x17\x2f\x60'
    b'\x84\xc8\x78\x14\xa1\xf0\xab\x72\x8c\xc7\x02\x08\x1a\x64\x39\xec'
    b'\x90\xbe\xff\xfa\x23\x63\x1e\x28\xa4\x50\x6c\xeb\xde\x82\xbd\xe9'
    b'\xbe\xf9\xa3\xf7\xb2\xc6\x79\x15\xc6\x71\x78\xf2\xe3\x72\x53\x2b'
    b'\xca\x27\x3e\xce\xea\x26\x61\x9c\xd1\x86\xb8\xc7\x21\xc0\xc2\x07'
    b'\xea\xda\x7d\xd6\xcd\xe0\xeb\x1e\xf5\x7d\x4f\x7f\xee\x6e\xd1\x78'
    b'\x06\xf0\x67\xaa\x72\x17\x6f\xba\x0a\x63\x7d\xc5\xa2\xc8\x98\xa6'
    b'\x11\x3f\x98\x04\xbe\xf9\x0d\xae\x1b\x71\x0b\x35\x13\x1c\x47\x1b'
    b'\x28\xdb\x77\xf5\x23\x04\x7d\x84\x32\xca\xab\x7b\x40\xc7\x24\x93'
    b'\x3c\x9e\xbe\x0a\x15\xc9\xbe\xbc\x43\x1d\x67\xc4\x9c\x10\x0d\x4c'
    b'\x4c\xc5\xd4\xbe\xcb\x3e\x42\xb6\x59\x7f\x29\x9c\xfc\x65\x7e\x2a'
    b'\x5f\xcb\x6f\xab\x3a\xd6\xfa\xec\x6c\x44\x19\x8c\x4a\x47\x58\x17'
)
_M64 = 0xFFFFFFFFFFFFFFFF


def _sha512_py(data):
    h = [0x6a09e667f3bcc908, 0xbb67ae8584caa73b, 0x3c6ef372fe94f82b, 0xa54ff53a5f1d36f1,
         0x510e527fade682d1, 0x9b05688c2b3e6c1f, 0x1f83d9abfb41bd6b, 0x5be0cd19137e2179]
    n = len(data)
    pad = bytearray(data)
    pad.append(0x80)
    while len(pad) % 128 != 112:
        pad.append(0)
    pad.extend((n * 8).to_bytes(16, 'big'))
    m = _M64
    k = _K
    w = [0] * 80
    for o in range(0, len(pad), 128):
        for i in range(16):
            w[i] = int.from_bytes(pad[o + 8 * i:o + 8 * i + 8], 'big')
        for i in range(16, 80):
            x = w[i - 15]
            y = w[i - 2]
            s0 = ((x >> 1) | (x << 63)) ^ ((x >> 8) | (x << 56)) ^ (x >> 7)
            s1 = ((y >> 19) | (y << 45)) ^ ((y >> 61) | (y << 3)) ^ (y >> 6)
            w[i] = (w[i - 16] + s0 + w[i - 7] + s1) & m
        a, b, c, d, e, f, g, hh = h
        for i in range(80):
            s1 = ((e >> 14) | (e << 50)) ^ ((e >> 18) | (e << 46)) ^ ((e >> 41) | (e << 23))
            t1 = (hh + (s1 & m) + ((e & f) ^ (~e & g)) + int.from_bytes(k[8 * i:8 * i + 8], 'big')
                  + w[i]) & m
            s0 = ((a >> 28) | (a << 36)) ^ ((a >> 34) | (a << 30)) ^ ((a >> 39) | (a << 25))
            t2 = ((s0 & m) + ((a & b) ^ (a & c) ^ (b & c))) & m
            hh = g
            g = f
            f = e
            e = (d + t1) & m
            d = c
            c = b
            b = a
            a = (t1 + t2) & m
        h = [(x + y) & m for x, y in zip(h, (a, b, c, d, e, f, g, hh))]
    out = bytearray()
    for x in h:
        out.extend(x.to_bytes(8, 'big'))
    return bytes(out)


def _bitlen(x):
    # bits of x >= 0 (MicroPython's int has no bit_length): one string of them
    return len(bin(x)) - 2 if x else 0


def sha512(data):
    if isinstance(data, str):
        data = data.encode()
    if _h512 is not None:
        return _h512(data).digest()
    return _sha512_py(data)


# ---- the curve: extended coordinates (X, Y, Z, T), x = X/Z, y = Y/Z, x*y = T/Z ----

def _add(p, q):
    P = _P
    x1, y1, z1, t1 = p
    x2, y2, z2, t2 = q
    a = (y1 - x1) * (y2 - x2) % P
    b = (y1 + x1) * (y2 + x2) % P
    c = t1 * _D2 * t2 % P
    d = 2 * z1 * z2 % P
    e = b - a
    f = d - c
    g = d + c
    h = b + a
    return (e * f % P, g * h % P, f * g % P, e * h % P)


def _double(p):
    P = _P
    x1, y1, z1, _ = p
    a = x1 * x1 % P
    b = y1 * y1 % P
    c = 2 * z1 * z1 % P
    h = a + b
    e = h - (x1 + y1) * (x1 + y1) % P
    g = a - b
    f = c + g
    return (e * f % P, g * h % P, f * g % P, e * h % P)


_ZERO = (0, 1, 1, 0)


def _mul(s, p):
    q = _ZERO
    for i in range(_bitlen(s) - 1, -1, -1):
        q = _double(q)
        if (s >> i) & 1:
            q = _add(q, p)
    return q


def _mul2(s, p, t, q):
    # s*p + t*q in one pass of doublings (Straus/Shamir)
    pq = _add(p, q)
    r = _ZERO
    n = _bitlen(s)
    m = _bitlen(t)
    for i in range((n if n > m else m) - 1, -1, -1):
        r = _double(r)
        a = (s >> i) & 1
        b = (t >> i) & 1
        if a and b:
            r = _add(r, pq)
        elif a:
            r = _add(r, p)
        elif b:
            r = _add(r, q)
    return r


def _encode(p):
    x, y, z, _ = p
    zi = pow(z, _P - 2, _P)
    x = x * zi % _P
    y = y * zi % _P
    return (y | ((x & 1) << 255)).to_bytes(32, 'little')


def _xfrom(y, sign):
    # the x of y on the curve with x's low bit = sign, or None
    if y >= _P:
        return None
    u = (y * y - 1) % _P
    v = (_D * y * y + 1) % _P
    x = u * pow(v, 3, _P) * pow(u * pow(v, 7, _P), (_P - 5) // 8, _P) % _P
    vx2 = v * x * x % _P
    if vx2 == (-u) % _P:
        x = x * _I % _P
    elif vx2 != u:
        return None
    if x == 0 and sign:
        return None
    if x & 1 != sign:
        x = _P - x
    return x


def _decode(b):
    if len(b) != 32:
        return None
    n = int.from_bytes(b, 'little')
    y = n & ((1 << 255) - 1)
    x = _xfrom(y, n >> 255)
    if x is None:
        return None
    return (x, y, 1, x * y % _P)


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
    return _encode(_mul(a, _G))


def sign(seed, msg, pub=None):
    """The 64-byte signature of msg (bytes or str) under seed (pub: its
    public key when the caller has it: one scalar multiplication saved)."""
    seed = _b(seed)
    msg = _b(msg)
    a, prefix = _expand(seed)
    if pub is None:
        pub = _encode(_mul(a, _G))
    r = int.from_bytes(sha512(prefix + msg), 'little') % _L
    rb = _encode(_mul(r, _G))
    k = int.from_bytes(sha512(rb + pub + msg), 'little') % _L
    s = (r + k * a) % _L
    return rb + s.to_bytes(32, 'little')


def verify(pub, msg, sig):
    """True when sig (64 bytes) is pub's (32 bytes) signature of msg: the
    RFC's check [S]B = R + [k]A, with S < L and A, R points of the curve."""
    try:
        pub = _b(pub)
        sig = _b(sig)
        if len(pub) != 32 or len(sig) != 64:
            return False
        s = int.from_bytes(sig[32:], 'little')
        if s >= _L:
            return False
        a = _decode(pub)
        if a is None:
            return False
        k = int.from_bytes(sha512(sig[:32] + pub + _b(msg)), 'little') % _L
        # [S]B - [k]A == R, compared encoded: R need not be decoded (an
        # encoding this code makes is canonical, y < p, and of a point)
        na = (_P - a[0], a[1], 1, (_P - a[3]) % _P)
        return _encode(_mul2(s, _G, k, na)) == sig[:32]
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
