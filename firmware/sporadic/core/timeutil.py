# UTC calendar arithmetic on Unix epoch seconds: pure integer maths, no
# `time` module, so every port (epoch 1970 or 2000) and CPython agree.
# The port's own epoch is converted once, in device/clock.py.
try:
    from micropython import const
except ImportError:  # CPython
    def const(x):
        return x


def unit_seconds(s):
    # seconds in the duration unit s ends with (s m h d w), 0 for anything
    # else; endswith, not s[-1]: no new string (jobline.parse says why)
    i = 0
    for c in ('s', 'm', 'h', 'd', 'w'):
        if s.endswith(c):
            return (1, 60, 3600, 86400, 604800)[i]
        i += 1
    return 0


# timeutil's error messages: each names its line of timemsg._MSG
_E_TIME = const(0)
_E_TIME_RANGE = const(1)
_E_TIME_FORM = const(2)
_E_TIME_DATE = const(3)
_E_DURATION = const(4)
_E_DURATION_SIGN = const(5)


def _err(n, a=()):
    from sporadic.core import timemsg
    return ValueError(timemsg.msg(n, a))


def days_from_civil(y, m, d):
    # Howard Hinnant's algorithm, proleptic Gregorian.
    if m <= 2:
        y -= 1
    era = y // 400
    yoe = y - era * 400
    mp = m + 9 if m <= 2 else m - 3
    doy = (153 * mp + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def civil_from_days(z):
    z += 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + 3 if mp < 10 else mp - 9
    y = yoe + era * 400
    if m <= 2:
        y += 1
    return y, m, d


def _num(s, lo, hi, what):
    if not s.isdigit():
        raise _err(_E_TIME, what)
    n = int(s)
    if n < lo or n > hi:
        raise _err(_E_TIME_RANGE, what)
    return n


def parse_time(s):
    """'2026-12-01T06:00Z' or '...T06:00:30Z' -> Unix epoch seconds (UTC)."""
    # (startswith, not s[4]: no new string a test, each of which a board
    # looks up in its qstr pools, as jobline.parse says)
    n = len(s)
    if n < 17 or not s.endswith('Z') or not s.startswith('-', 4) or not s.startswith('-', 7) \
            or not s.startswith('T', 10) or not s.startswith(':', 13):
        raise _err(_E_TIME_FORM, repr(s))
    y = _num(s[0:4], 1970, 9999, 'year')
    mo = _num(s[5:7], 1, 12, 'month')
    d = _num(s[8:10], 1, 31, 'day')
    h = _num(s[11:13], 0, 23, 'hour')
    mi = _num(s[14:16], 0, 59, 'minute')
    sec = 0
    if n == 20 and s.startswith(':', 16):
        sec = _num(s[17:19], 0, 59, 'second')
    elif n != 17:
        raise _err(_E_TIME_FORM, repr(s))
    if d > 28 and d > month_days(y, mo):
        raise _err(_E_TIME_DATE, s[:10])
    return days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec


def month_days(y, m):
    """Days in month m of year y (proleptic Gregorian)."""
    if m == 2:
        return 29 if y % 4 == 0 and (y % 100 != 0 or y % 400 == 0) else 28
    return 30 if m in (4, 6, 9, 11) else 31


def parse_duration(s):
    """'30s 10m 2h 1d 1w' -> seconds (> 0)."""
    u = unit_seconds(s) if len(s) >= 2 else 0
    num = s[:-1]
    if not u or not num.isdigit():
        raise _err(_E_DURATION, repr(s))
    n = int(num) * u
    if n <= 0:
        raise _err(_E_DURATION_SIGN, repr(s))
    return n
