# The rarely used part of jobline.py, loaded on first use: error messages,
# canonical job text, ids, result and assignment records parsed and, on
# CPython only, the fast_canonical accelerator.
# A board running its loop never loads this module unless a line is bad, a
# job's text must be written or a result is parsed (a sync, a re-import):
# callers import it where they need it.
import hashlib

from sporadic.core.jobline import (ParseError, ID_LEN, DEFAULT_TICK, DEFAULT_GRACE, B32, OUTCOMES,
                              Result, check_host, default_within, parse_int)
from sporadic.core.timefmt import format_time, format_duration

# jobline's error messages, one a line, in the order of jobline's _E_ names
_MSG = (
    'bad host id %s (1..32 characters)\n'
    'bad host id %s (letters, digits, _ . : -)\n'
    'unterminated quote in command\n'
    'text right after a closing quote\n'
    'quote inside a word: %s\n'
    'bad probability %s (0<P<=1, e.g. 0.01)\n'
    'P out of range: %s (0<P<=1)\n'
    'bad outcome %s (run err miss ok)\n'
    'bad %s %s\n'
    'result needs: host k at outcome mac [output]\n'
    'bad mac %s\n'
    'type %s takes no argument\n'
    'who: needs a substring, e.g. who:pump\n'
    'any: needs a probability, e.g. any:0.01\n'
    'unknown type %s (each who:S any:P one)\n'
    'missing time\n'
    'missing command\n'
    'bad option %s (key=value)\n'
    'unknown option %s\n'
    'option %s given twice\n'
    'option %s is only for %s jobs\n'
    'unknown fleet record %s\n'
    'cancel takes no arguments\n'
    'id without a record\n'
    'assignment needs: host k at leader mac\n'
    'within=%s is longer than every=%s: two instances would be open at once (the newest wins); use within <= every\n'
    'job line of %d characters: longer than a board takes (at most %d)')


def is_hex(s):
    for c in s:
        if c not in '0123456789abcdef':
            return False
    return True


def msg(n, a=()):
    if n == 8:   # jobline._E_NUMBER (jobline.parse_int): what was not a number
        a = (('instance number', 'time', 'retry count')[a[0]], a[1])
    return _MSG.split('\n')[n] % a


def make_id(text):
    """8 characters of base32hex (40 bits) of sha256(text)."""
    h = hashlib.sha256(text.encode()).digest()
    n = int.from_bytes(h[:5], 'big')
    out = ''
    for _ in range(ID_LEN):
        out = B32[n & 31] + out
        n >>= 5
    return out


def job_text(j):
    """Canonical job text without the id: type time command [; options]."""
    t = j.kind
    if j.kind in ('who', 'any'):
        t += ':' + j.arg
    s = t + ' ' + format_time(j.t0) + ' ' + ' '.join(j.words)
    o = []
    if j.every:
        o.append('every=' + format_duration(j.every))
    if j.cal is not None:
        o += j.cal.options()
    if j.within != default_within(j.every):
        o.append('within=' + format_duration(j.within))
    if j.on:
        o.append('on=' + j.on)
    if j.kind == 'any' and j.tick != DEFAULT_TICK:
        o.append('tick=' + format_duration(j.tick))
    if j.kind == 'one' and j.grace != DEFAULT_GRACE:
        o.append('grace=' + format_duration(j.grace))
    if j.retry:
        o.append('retry=' + str(j.retry))
    if j.roll is not None:
        o += j.roll.options()
    if o:
        s += ' ; ' + ' '.join(o)
    return s


class Assign:
    """ID a HOST K AT BY MAC: the section leader BY assigned instance K of a
    single-run (any/one) job to HOST at epoch second AT (docs/wifi.md)."""
    __slots__ = ('id', 'host', 'k', 'at', 'by', 'mac')

    def __init__(self, jid, host, k, at, by, mac='-'):
        self.id = jid
        self.host = host
        self.k = k
        self.at = at
        self.by = by
        self.mac = mac

    def body(self):
        return '%s a %s %d %d %s' % (self.id, self.host, self.k, self.at, self.by)

    def line(self):
        return self.body() + ' ' + self.mac


def _parse_outcome(tok):
    for o in OUTCOMES:
        if tok.startswith(o):
            rest = tok[len(o):]
            if not rest:
                return o, 1
            if rest.isdigit() and int(rest) > 1:
                return o, int(rest)
    raise ParseError(msg(7, repr(tok)))


_B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'


def _mac_ok(mac):
    # 16 hex (the board's HMAC), or 16 hex '.' and the base64 of an Ed25519
    # signature (core/recsig.py: 88 characters, canonical, padded)
    if len(mac) == 16:
        return is_hex(mac)
    return (len(mac) == 105 and mac[16] == '.' and is_hex(mac[:16]) and mac[-2:] == '=='
            and mac[-3] in 'AQgw' and all(c in _B64 for c in mac[17:-2]))


def parse_result(jid, rest):
    # jobline.parse's result record (ID r HOST K AT OUTCOME MAC [OUTPUT]):
    # here, as a board's loop writes results and never parses one
    f = rest.split(None, 5)
    if len(f) < 5:
        raise ParseError(msg(9))
    host = check_host(f[0])
    k = parse_int(f[1], 0)
    at = parse_int(f[2], 1)
    outcome, attempt = _parse_outcome(f[3])
    mac = f[4]
    if mac != '-' and not _mac_ok(mac):
        raise ParseError(msg(10, repr(mac)))
    return Result(jid, host, k, at, outcome, attempt, mac, f[5] if len(f) > 5 else '')


def parse_assign(jid, rest):
    f = rest.split()
    if len(f) != 5:
        raise ParseError(msg(24))
    host = check_host(f[0])
    k = parse_int(f[1], 0)
    at = parse_int(f[2], 1)
    by = check_host(f[3])
    mac = f[4]
    if mac != '-' and not _mac_ok(mac):
        raise ParseError(msg(10, repr(mac)))
    return Assign(jid, host, k, at, by, mac)


# An accelerator, not a second parser: on CPython a result, cancel or host
# line already in canonical form is recognised by one regular expression
# (tests check it accepts exactly what parse() writes back unchanged); all
# other lines go through parse(). Boards (no full `re`) always parse.
fast_canonical = None
fast_match = None   # CPython: the compiled pattern's fullmatch (a line without its newline)
try:
    import sys
    if sys.implementation.name == 'cpython':
        import re
        # (?:X|) rather than (?:X)? and the id matched once: the same language,
        # but sre runs an optional group through its general repeat, and
        # `companion merge` runs this on every distinct line (~20% faster)
        _CANON = re.compile(
            r'[0-9a-v]{8} (?:r [A-Za-z0-9_.:-]{1,32} (?:[1-9][0-9]*|0) (?:[1-9][0-9]*|0)'
            r' (?:run|err|miss|ok)(?:[2-9]|[1-9][0-9]+|) (?:-|[0-9a-f]{16}(?:\.[A-Za-z0-9+/]{85}[AQgw]==|))(?: [!-~](?:[ -~]{0,58}[!-~]|)|)'
            r'|cancel)|\.h [A-Za-z0-9_.:-]{1,32}')
        fast_match = _CANON.fullmatch

        def fast_canonical(line, _m=fast_match):
            if line[-1:] == '\n':
                line = line[:-1]
            if _m(line) is not None:
                return line
            return None
except ImportError:
    pass

