# Five-field cron expressions: parse into bitmasks, find the next or previous
# matching local wall-clock minute by jumping month, day, hour and minute.
# Times here are "local seconds": epoch seconds as if the local clock were UTC.
try:
    from micropython import const
except ImportError:
    def const(x):
        return x

from sporadic.core.timeutil import days_from_civil, civil_from_days, month_days

SPAN_YEARS = const(13)  # a matchable expression matches within 12 years (see never())

_MONTHS = 'janfebmaraprmayjunjulaugsepoctnovdec'
_DAYS = 'sunmontuewedthufrisat'
_FIELDS = ('minute', 'hour', 'day of month', 'month', 'day of week')
_LO = (0, 0, 1, 1, 0)
_HI = (59, 23, 31, 12, 7)
_MACROS = {'@yearly': '0 0 1 1 *', '@annually': '0 0 1 1 *', '@monthly': '0 0 1 * *',
           '@weekly': '0 0 * * 0', '@daily': '0 0 * * *', '@midnight': '0 0 * * *',
           '@hourly': '0 * * * *'}
_MDAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _value(s, f):
    # one number or name of field f
    if f == 3 or f == 4:
        names = _MONTHS if f == 3 else _DAYS
        i = names.find(s.lower()) if len(s) == 3 and s.isalpha() else -1
        if i >= 0 and i % 3 == 0:
            return i // 3 + (1 if f == 3 else 0)
    if not s.isdigit():
        raise ValueError('cron %s: %r is not a number%s' % (_FIELDS[f], s, ' or name' if f >= 3 else ''))
    n = int(s)
    if n < _LO[f] or n > _HI[f]:
        raise ValueError('cron %s: %d out of range %d-%d' % (_FIELDS[f], n, _LO[f], _HI[f]))
    return n


def _field(text, f):
    # "1-5,10,*/15" -> bitmask of field f (bit n = value n)
    mask = 0
    for item in text.split(','):
        step = 1
        slash = item.find('/')
        if slash >= 0:
            st = item[slash + 1:]
            if not st.isdigit() or int(st) == 0:
                raise ValueError('cron %s: bad step %r' % (_FIELDS[f], st))
            step = int(st)
            item = item[:slash]
        if item == '*':
            lo, hi = _LO[f], _HI[f]
            if f == 4:
                hi = 6
        else:
            dash = item.find('-')
            if dash >= 0:
                lo, hi = _value(item[:dash], f), _value(item[dash + 1:], f)
                if lo > hi:
                    raise ValueError('cron %s: range %r runs backwards' % (_FIELDS[f], item))
            else:
                lo = _value(item, f)
                hi = _HI[f] if slash >= 0 else lo   # "5/10" = from 5 to the end, step 10
        while lo <= hi:
            mask |= 1 << lo
            lo += step
    if f == 4 and mask & 0x80:
        mask = (mask | 1) & 0x7f   # 7 is Sunday too
    return mask


def parse(expr):
    """'MIN HOUR DOM MON DOW' -> (mins, hours, doms, mons, dows, either) bitmasks;
    either = 1 when both DOM and DOW are restricted (Vixie: a day matches if either does)."""
    expr = _MACROS.get(expr.strip().lower(), expr)
    parts = expr.split()
    if len(parts) != 5:
        raise ValueError('cron: expected 5 fields (MIN HOUR DOM MON DOW), got %d' % len(parts))
    m = [_field(parts[f], f) for f in range(5)]
    # Vixie cron: a field "restricts" unless it starts with '*'
    either = 1 if parts[2][0] != '*' and parts[4][0] != '*' else 0
    return (m[0], m[1], m[2], m[3], m[4], either)


def never(c):
    """True when no date ever matches (e.g. '0 0 30 2 *'). Only DOM restricted with DOW
    '*' can fail; every other form matches day 1 or a weekday of each allowed month, and a
    given date falls on each weekday within 12 years, Feb 29 on any day within 8."""
    if c[5] or c[4] != 0x7f:
        return False
    for mo in range(1, 13):
        if c[3] >> mo & 1 and c[2] & ((1 << (_MDAYS[mo - 1] + (mo == 2) + 1)) - 2):
            return False
    return True


def _day_ok(c, d, wd):
    if c[5]:
        return (c[2] >> d & 1) or (c[4] >> wd & 1)
    return (c[2] >> d & 1) and (c[4] >> wd & 1)


def _next_bit(mask, i, hi):
    while i <= hi:
        if mask >> i & 1:
            return i
        i += 1
    return -1


def _prev_bit(mask, i):
    while i >= 0:
        if mask >> i & 1:
            return i
        i -= 1
    return -1


def matches(c, ls):
    """Does the local minute holding local seconds `ls` match?"""
    day = ls // 86400
    r = ls - day * 86400
    y, mo, d = civil_from_days(day)
    return bool(c[0] >> (r // 60 % 60) & 1 and c[1] >> (r // 3600) & 1 and c[3] >> mo & 1
                and _day_ok(c, d, (day + 4) % 7))


def next_minute(c, ls):
    """The first matching local minute (local seconds, a multiple of 60) at or after ls;
    None if there is none (never())."""
    if never(c):
        return None
    t = -(-ls // 60)
    day = t // 1440
    r = t - day * 1440
    h, mi = r // 60, r % 60
    y, mo, d = civil_from_days(day)
    end = y + SPAN_YEARS
    while y <= end:
        if not c[3] >> mo & 1 or d > month_days(y, mo):
            mo += 1
            if mo > 12:
                mo, y = 1, y + 1
            d, h, mi = 1, 0, 0
            continue
        day = days_from_civil(y, mo, d)
        if not _day_ok(c, d, (day + 4) % 7):
            d, h, mi = d + 1, 0, 0
            continue
        h2 = _next_bit(c[1], h, 23)
        if h2 < 0:
            d, h, mi = d + 1, 0, 0
            continue
        if h2 != h:
            h, mi = h2, 0
        m2 = _next_bit(c[0], mi, 59)
        if m2 < 0:
            h, mi = h + 1, 0
            continue
        return (day * 1440 + h * 60 + m2) * 60
    return None


def prev_minute(c, ls):
    """The last matching local minute (local seconds) at or before ls; None if none."""
    if never(c):
        return None
    t = ls // 60
    day = t // 1440
    r = t - day * 1440
    h, mi = r // 60, r % 60
    y, mo, d = civil_from_days(day)
    end = y - SPAN_YEARS
    while y >= end:
        if d < 1 or not c[3] >> mo & 1:
            mo -= 1
            if mo < 1:
                mo, y = 12, y - 1
            d, h, mi = 31, 23, 59
            continue
        md = month_days(y, mo)
        if d > md:
            d, h, mi = md, 23, 59
        day = days_from_civil(y, mo, d)
        if not _day_ok(c, d, (day + 4) % 7):
            d, h, mi = d - 1, 23, 59
            continue
        h2 = _prev_bit(c[1], h)
        if h2 < 0:
            d, h, mi = d - 1, 23, 59
            continue
        if h2 != h:
            h, mi = h2, 59
        m2 = _prev_bit(c[0], mi)
        if m2 < 0:
            h, mi = h - 1, 59
            continue
        return (day * 1440 + h * 60 + m2) * 60
    return None
