"""The times a user writes on the command line, in one place: 'now', '+10m'
(from now), an absolute UTC time, and '2d' ago (--since). `companion add`'s
job line ('each +10m ...'), `plan --from/--until`, `results --since` and the
views all resolve them here, against a `now` their caller passes in."""
from sporadic.core.timeutil import parse_duration, parse_time
from companion.errors import UserError


def relative(word, now):
    """'now' or '+DURATION' as a UTC instant; None for any other word."""
    if word == 'now':
        return now
    if word.startswith('+'):
        try:
            return now + parse_duration(word[1:])
        except ValueError as e:
            raise UserError(str(e))
    return None


def parse_when(text, now):
    """An absolute UTC time, 'now', or '+10m' relative to now."""
    t = relative(text, now)
    if t is not None:
        return t
    try:
        return parse_time(text)
    except ValueError as e:
        raise UserError(str(e))


def since_time(text, now):
    """--since: a UTC time (2026-12-01T06:00Z) or a duration ago (2d, 90m)."""
    try:
        return now - parse_duration(text)
    except ValueError:
        pass
    try:
        return parse_time(text)
    except ValueError:
        raise UserError('--since %s: give a UTC time (2026-12-01T06:00Z) or a duration ago (2d, 90m)' % text)
