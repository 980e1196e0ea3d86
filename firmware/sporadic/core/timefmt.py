# The other way from timeutil.py (import it where needed): formatting times
# and durations. A board's loop only parses; timeutil's error messages are
# timemsg.py's.
from sporadic.core.timeutil import civil_from_days, unit_seconds


def format_time(t):
    """Unix epoch seconds -> canonical ISO text (seconds only when non-zero)."""
    t = int(t)
    days = t // 86400
    rem = t - days * 86400
    y, mo, d = civil_from_days(days)
    s = '%04d-%02d-%02dT%02d:%02d' % (y, mo, d, rem // 3600, (rem // 60) % 60)
    if rem % 60:
        s += ':%02d' % (rem % 60)
    return s + 'Z'


def format_duration(n):
    """Seconds -> the largest unit that divides them exactly."""
    for u in 'wdhms':
        q = unit_seconds(u)
        if n % q == 0:
            return str(n // q) + u
    return str(n) + 's'
