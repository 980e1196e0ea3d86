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

# SHA-512's 80 round constants (FIPS 180-4 4.2.3), 640 bytes: read 8 at a
# time (80 big ints held would be ~5 KB of a board's heap)
_KHEX = (
    '428a2f98d728ae227137449123ef65cdb5c0fbcfec4d3b2fe9b5dba58189dbbc3956c25b'
    'f348b53859f111f1b605d019923f82a4af194f9bab1c5ed5da6d8118d807aa98a3030242'
    '12835b0145706fbe243185be4ee4b28c550c7dc3d5ffb4e272be5d74f27b896f80deb1fe'
    '3b1696b19bdc06a725c71235c19bf174cf692694e49b69c19ef14ad2efbe4786384f25e3'
    '0fc19dc68b8cd5b5240ca1cc77ac9c652de92c6f592b02754a7484aa6ea6e4835cb0a9dc'
    'bd41fbd476f988da831153b5983e5152ee66dfaba831c66d2db43210b00327c898fb213f'
    'bf597fc7beef0ee4c6e00bf33da88fc2d5a79147930aa72506ca6351e003826f14292967'
    '0a0e6e7027b70a8546d22ffc2e1b21385c26c9264d2c6dfc5ac42aed53380d139d95b3df'
    '650a73548baf63de766a0abb3c77b2a881c2c92e47edaee692722c851482353ba2bfe8a1'
    '4cf10364a81a664bbc423001c24b8b70d0f89791c76c51a30654be30d192e819d6ef5218'
    'd69906245565a910f40e35855771202a106aa07032bbd1b819a4c116b8d2d0c81e376c08'
    '5141ab532748774cdf8eeb9934b0bcb5e19b48a8391c0cb3c5c95a634ed8aa4ae3418acb'
    '5b9cca4f7763e373682e6ff3d6b2b8a3748f82ee5defb2fc78a5636f43172f6084c87814'
    'a1f0ab728cc702081a6439ec90befffa23631e28a4506cebde82bde9bef9a3f7b2c67915'
    'c67178f2e372532bca273eceea26619cd186b8c721c0c207eada7dd6cde0eb1ef57d4f7f'
    'ee6ed17806f067aa72176fba0a637dc5a2c898a6113f9804bef90dae1b710b35131c471b'
    '28db77f523047d8432caab7b40c724933c9ebe0a15c9bebc431d67c49c100d4c4cc5d4be'
    'cb3e42b6597f299cfc657e2a5fcb6fab3ad6faec6c44198c4a475817'
)
_K = None
_M64 = 0xFFFFFFFFFFFFFFFF


def _sha512_py(data):
    global _K
    if _K is None:
        _K = binascii.unhexlify(_KHEX)
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
    b = 0
    while x >> (b + 64):
        b += 64
    while x >> b:
        b += 1
    return b


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
