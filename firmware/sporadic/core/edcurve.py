# Ed25519's curve (RFC 8032 5.1) and the check a board runs on a record's
# signature (core/ed25519.py is the scheme whole: keys, sign, verify).
# Portable core. A module of its own: a board checks a signature with this
# code alone in RAM, its hash made before with core/sha512.py alone
# (recsig.verify; docs/mqtt.md#memory).
#
#     check(pub, h, sig) -> bool     sig (64 bytes) is pub's (32 bytes) signature of
#                                    the message whose h = SHA-512(sig[:32] + pub + msg)
#     mul(s, p), encode(p), G, L     for core/ed25519.py's keys and signatures
#
# Points in extended coordinates (X, Y, Z, T), x = X/Z, y = Y/Z, x*y = T/Z.

_P = 2 ** 255 - 19
L = 2 ** 252 + 27742317777372353535851937790883648493
# -121665/121666, sqrt(-1) and the base point B (RFC 8032 5.1), as numbers: no
# modular inverse or root at import (each ~400 multiplications on a board)
_D = 37095705934669439343138083508754565189542113879843219016388785533085940283555
_D2 = (2 * _D) % _P
_I = 19681161376707505956807079304988542015446066515923890162744021073123829784752
_GX = 15112221349535400772501151409588531511454012693041857206046113283949847762202
_GY = 46316835694926478169428394003475163141307993866256225615783033603165251855960
G = (_GX, _GY, 1, _GX * _GY % _P)


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


def _bits(s):
    # a scalar (< 2**255: every one this module multiplies by) as 32 bytes,
    # little-endian: its bits read as small ints, with no big int shifted
    # a bit (nor a string of 255 of them made) for each
    return s.to_bytes(32, 'little')


def mul(s, p):
    q = _ZERO
    s = _bits(s)
    for i in range(254, -1, -1):
        q = _double(q)
        if (s[i >> 3] >> (i & 7)) & 1:
            q = _add(q, p)
    return q


def _mul2(s, p, t, q):
    # s*p + t*q in one pass of doublings (Straus/Shamir); s, t < 2**253
    pq = _add(p, q)
    r = _ZERO
    s = _bits(s)
    t = _bits(t)
    for i in range(252, -1, -1):
        r = _double(r)
        j = i >> 3
        m = i & 7
        a = (s[j] >> m) & 1
        b = (t[j] >> m) & 1
        if a and b:
            r = _add(r, pq)
        elif a:
            r = _add(r, p)
        elif b:
            r = _add(r, q)
    return r


def encode(p):
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


def _b(m):
    return m.encode() if isinstance(m, str) else bytes(m)


def check(pub, h, sig):
    """True when sig (64 bytes) is pub's (32 bytes) signature of the message
    whose hash h (64 bytes) is SHA-512(sig[:32] + pub + msg): the RFC's check
    [S]B = R + [k]A, with S < L and A, R points of the curve. False for any
    malformed input."""
    try:
        pub = _b(pub)
        sig = _b(sig)
        if len(pub) != 32 or len(sig) != 64 or len(h) != 64:
            return False
        s = int.from_bytes(sig[32:], 'little')
        if s >= L:
            return False
        a = _decode(pub)
        if a is None:
            return False
        k = int.from_bytes(h, 'little') % L
        # [S]B - [k]A == R, compared encoded: R need not be decoded (an
        # encoding this code makes is canonical, y < p, and of a point)
        na = (_P - a[0], a[1], 1, (_P - a[3]) % _P)
        return encode(_mul2(s, G, k, na)) == sig[:32]
    except (ValueError, TypeError):
        return False
