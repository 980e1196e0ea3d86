# The rarely used part of timeutil.py (import it where needed): formatting
# times and durations, and the error messages. A board's loop only parses.
from sporadic.core.timeutil import civil_from_days, _unit

# timeutil's error messages, one a line, in the order of timeutil's _E_ names
_MSG = ('bad time: %s\n'
        'bad time: %s out of range\n'
        'bad time: expected YYYY-MM-DDTHH:MM[:SS]Z (UTC), got %s\n'
        'bad time: no such date %s\n'
        'bad duration: %s (use 30s 10m 2h 1d 1w)\n'
        'bad duration: %s must be positive')


def msg(n, a=()):
    return _MSG.split('\n')[n] % a


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
        q = _unit(u)
        if n % q == 0:
            return str(n // q) + u
    return str(n) + 's'
