# The outbox's compact form (docs/sync.md#the-outbox): a board's own records
# as it keeps them on flash between two syncs, and as they travel in the
# answer to `O`. Portable: the board packs, the companion unpacks, one rule.
#
# A pack is a header line, then one line a record:
#
#     @HOST                                 the board's id (every record's host)
#     ID K DT OUTCOME MAC[ OUTPUT]          a result `ID r HOST K AT OUTCOME MAC[ OUTPUT]`,
#                                           DT = AT minus the previous record's AT
#                                           (the first record's: minus 0)
#     =LINE                                 any other line, as it is (a leader's assignment)
#
# A `run` record directly followed by the same instance's outcome (same ID,
# K and attempt) is left out: the outcome says what it said (the same time,
# written by the same pass), and an `each` run is then one short line. A
# `run` with no outcome after it (the board was cut during the action) is
# kept. A header `@` alone starts lines kept as they are (a segment the
# board has not packed yet). Unpacking gives back the lines byte for byte,
# MACs included: the companion checks them as it checks any result.


def _key(line):
    # (ID, K, attempt) of a result line, split as ID r HOST K AT OUTCOME ...
    f = line.split(' ', 7)
    o = f[5]
    i = 0
    while i < len(o) and o[i] > '9':
        i += 1
    return f[0], f[3], o[i:], o[:i]


def pack(lines, host):
    """The packed lines of full lines `lines` (an iterable), header first."""
    yield '@' + host
    mark = ' r ' + host + ' '
    n = len(mark)
    last = 0
    held = None     # a `run` record, until the next line says whether it goes
    for line in lines:
        mine = line[8:8 + n] == mark
        k = _key(line) if mine else None
        if held is not None:
            h = _key(held)
            if not (mine and k[0] == h[0] and k[1] == h[1] and k[2] == h[2] and k[3] != 'run'):
                last, s = _one(held, mark, n, last)
                yield s
            held = None
        if mine and k[3] == 'run':
            held = line
        else:
            last, s = _one(line, mark, n, last)
            yield s
    if held is not None:
        yield _one(held, mark, n, last)[1]


def _one(line, mark, n, last):
    if line[8:8 + n] != mark:
        return last, '=' + line
    f = line.split(' ', 7)      # ID r HOST K AT OUTCOME MAC [OUTPUT]
    at = int(f[4])
    s = '%s %s %d %s %s' % (f[0], f[3], at - last, f[5], f[6])
    if len(f) > 7:
        s += ' ' + f[7]
    return at, s


class Unpacker:
    """Full lines back from packed ones, fed in order (`line(s)` -> the
    full line, or None for a header)."""

    def __init__(self):
        self.host = None    # None: lines as they are (a header `@` alone)
        self.last = 0

    def line(self, s):
        if s[:1] == '@':
            self.host = s[1:] or None
            self.last = 0
            return None
        if self.host is None:
            return s
        if s[:1] == '=':
            return s[1:]
        f = s.split(' ', 5)         # ID K DT OUTCOME MAC [OUTPUT]
        self.last += int(f[2])
        r = '%s r %s %s %d %s %s' % (f[0], self.host, f[1], self.last, f[3], f[4])
        if len(f) > 5:
            r += ' ' + f[5]
        return r


def unpack(lines):
    """Every full line of packed (or raw, under `@`) lines."""
    u = Unpacker()
    for s in lines:
        r = u.line(s)
        if r is not None:
            yield r
