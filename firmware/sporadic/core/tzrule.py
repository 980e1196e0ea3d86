# POSIX TZ rules ("CET-1CEST,M3.5.0,M10.5.0/3"): UTC offset at an instant, and the
# instant a local wall-clock time is due (first instant the local clock shows it or later).
from sporadic.core.timeutil import days_from_civil, civil_from_days

UTC = (0, 0, None, None)   # (std offset, dst offset, start rule, end rule); offsets east of UTC


def _name(s, i):
    # a zone abbreviation at s[i:]: letters, or <...> quoted (may hold + - digits)
    if i < len(s) and s[i] == '<':
        j = s.find('>', i)
        if j < 0:
            raise ValueError('tz: unclosed < in %r' % s)
        if j - i < 4:
            raise ValueError('tz: zone name %r too short' % s[i:j + 1])
        return j + 1
    j = i
    while j < len(s) and s[j].isalpha():
        j += 1
    if j - i < 3:
        raise ValueError('tz: expected a zone name of 3 or more letters in %r' % s)
    return j


def _hms(s, i, lim):
    # [+-]hh[:mm[:ss]] at s[i:] -> (seconds, next index); |hours| <= lim
    sign = 1
    if i < len(s) and s[i] in '+-':
        sign = -1 if s[i] == '-' else 1
        i += 1
    total = 0
    for part in range(3):
        j = i
        while j < len(s) and s[j].isdigit():
            j += 1
        if j == i or j - i > 3:
            raise ValueError('tz: bad time or offset in %r' % s)
        n = int(s[i:j])
        if part == 0 and n > lim or part and n > 59:
            raise ValueError('tz: time or offset out of range in %r' % s)
        total += n * (3600, 60, 1)[part]
        i = j
        if i >= len(s) or s[i] != ':':
            break
        i += 1
    return sign * total, i


def _date(s, i):
    # Jn | n | Mm.w.d, then optional /time -> ((kind, a, b, c, secs), next index)
    if i < len(s) and s[i] == 'M':
        parts = []
        i += 1
        for k in range(3):
            j = i
            while j < len(s) and s[j].isdigit():
                j += 1
            if j == i:
                raise ValueError('tz: bad M rule in %r' % s)
            parts.append(int(s[i:j]))
            i = j
            if k < 2:
                if i >= len(s) or s[i] != '.':
                    raise ValueError('tz: bad M rule in %r' % s)
                i += 1
        m, w, d = parts
        if not (1 <= m <= 12 and 1 <= w <= 5 and 0 <= d <= 6):
            raise ValueError('tz: M rule out of range in %r' % s)
        rule = [2, m, w, d]
    else:
        kind = 0 if i < len(s) and s[i] == 'J' else 1
        i += 1 - kind
        j = i
        while j < len(s) and s[j].isdigit():
            j += 1
        if j == i:
            raise ValueError('tz: bad rule date in %r' % s)
        n = int(s[i:j])
        if n > 365 or kind == 0 and n < 1:
            raise ValueError('tz: rule day out of range in %r' % s)
        i = j
        rule = [kind, n, 0, 0]
    secs = 7200
    if i < len(s) and s[i] == '/':
        secs, i = _hms(s, i + 1, 167)
    rule.append(secs)
    return tuple(rule), i


def parse(s):
    """POSIX TZ string -> (std_off, dst_off, start, end): offsets in seconds east of UTC
    (the negation of POSIX's), start/end rules or None for a zone without DST."""
    i = _name(s, 0)
    off, i = _hms(s, i, 24)
    std = -off
    if i == len(s):
        return (std, std, None, None)
    i = _name(s, i)
    dst = std + 3600
    if i < len(s) and s[i] != ',':
        off, i = _hms(s, i, 24)
        dst = -off
    if i >= len(s) or s[i] != ',':
        raise ValueError('tz: %r has daylight time but no ,start,end rule' % s)
    start, i = _date(s, i + 1)
    if i >= len(s) or s[i] != ',':
        raise ValueError('tz: expected ,end rule in %r' % s)
    end, i = _date(s, i + 1)
    if i != len(s):
        raise ValueError('tz: unexpected %r at the end of %r' % (s[i:], s))
    return (std, dst, start, end)


def _rule_day(rule, y):
    # day number (days since 1970-01-01) of the rule's date in year y
    kind, a, b, c = rule[0], rule[1], rule[2], rule[3]
    jan1 = days_from_civil(y, 1, 1)
    if kind == 1:
        return jan1 + a
    leap = y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)
    if kind == 0:
        return jan1 + a - 1 + (1 if leap and a >= 60 else 0)
    first = days_from_civil(y, a, 1)
    day = first + (c - (first + 4)) % 7 + 7 * (b - 1)
    nxt = days_from_civil(y + (a == 12), a % 12 + 1, 1)
    while day >= nxt:
        day -= 7
    return day


_last = None   # (zone, year, transitions) computed last: a wake asks for them often


def transitions(z, y):
    # [(utc instant, kind, offset from then on)] for years y-1..y+1, sorted; a start
    # that coincides with the previous end wins (permanent daylight time)
    global _last
    c = _last
    if c is not None and c[0] is z and c[1] == y:
        return c[2]
    out = []
    for yy in (y - 1, y, y + 1):
        out.append((_rule_day(z[2], yy) * 86400 + z[2][4] - z[0], 1, z[1]))
        out.append((_rule_day(z[3], yy) * 86400 + z[3][4] - z[1], 0, z[0]))
    out.sort()
    _last = (z, y, out)   # one assignment: a thread sees the old entry or the new
    return out


def _year(t):
    return civil_from_days(t // 86400)[0]


def _at(z, t):
    # (transitions around t, index of the latest at or before t or -1, offset before it)
    tr = transitions(z, _year(t + z[0]))
    last = -1
    for i in range(len(tr)):
        if tr[i][0] <= t:
            last = i
    i = last if last >= 0 else 0
    before = tr[i - 1][2] if i else (z[0] if tr[0][1] else z[1])
    return tr, last, before


def offset(z, t):
    """Seconds east of UTC in effect at UTC instant t."""
    if z[2] is None:
        return z[0]
    tr, last, before = _at(z, t)
    return tr[last][2] if last >= 0 else before


def local(z, t):
    """The local clock (local seconds) at UTC instant t."""
    return t + offset(z, t)


def shown_by(z, t):
    """The latest local clock reading shown at any instant up to t (the clock repeats
    after a jump back; until it catches up, this is the reading just before the jump)."""
    if z[2] is None:
        return t + z[0]
    tr, last, before = _at(z, t)
    if last < 0:
        return t + before
    return max(t + tr[last][2], tr[last][0] - 1 + before)


def due(z, ls):
    """The first UTC instant at which the local clock shows ls or later: a skipped
    time is due at the jump forward, a repeated one at its first occurrence."""
    if z[2] is None:
        return ls - z[0]
    best = None
    for o in (z[0], z[1]):
        if offset(z, ls - o) == o and (best is None or ls - o < best):
            best = ls - o
    lo, hi = min(z[0], z[1]), max(z[0], z[1])
    tr = transitions(z, _year(ls))
    for i in range(len(tr)):
        t, o = tr[i][0], tr[i][2]
        before = tr[i - 1][2] if i else (z[0] if tr[i][1] else z[1])
        if o > before and ls - hi <= t <= ls - lo and t + o >= ls and (best is None or t < best):
            best = t
    return best
