"""IANA zone names -> the POSIX TZ rule boards evaluate: the footer of the zone's TZif file."""
import importlib.resources
import os
import struct
import zoneinfo


def _tzif(name):
    # the zone's TZif bytes from the system database, else the tzdata package
    if not name or name.startswith('/') or '..' in name.split('/') or '\\' in name:
        raise ValueError('unknown time zone %r' % name)
    for base in zoneinfo.TZPATH:
        path = os.path.join(base, name)
        if os.path.isfile(path):
            with open(path, 'rb') as f:
                return f.read()
    try:
        parts = name.split('/')
        res = importlib.resources.files('tzdata.zoneinfo')
        for p in parts:
            res = res.joinpath(p)
        return res.read_bytes()
    except (ImportError, OSError, ValueError):
        raise ValueError('unknown time zone %r' % name) from None


def posix_rule(name):
    """'Europe/Berlin' -> 'CET-1CEST,M3.5.0,M10.5.0/3'. ValueError for an unknown zone
    or one whose file has no footer (TZif version 1)."""
    data = _tzif(name)
    if data[:4] != b'TZif':
        raise ValueError('unknown time zone %r' % name)
    if data[4:5] < b'2' or not data.endswith(b'\n'):
        raise ValueError('time zone %r has no POSIX rule (TZif version 1 file)' % name)
    start = data.rfind(b'\n', 0, len(data) - 1)
    rule = data[start + 1:-1].decode('ascii')
    if not rule:
        raise ValueError('time zone %r has no POSIX rule for times after its table' % name)
    return rule


def _table(name):
    """The transitions (UTC epoch s) the zone's TZif file lists explicitly (its 64-bit
    table), oldest first; [] for a version 1 file or none."""
    data = _tzif(name)
    if data[:4] != b'TZif' or data[4:5] < b'2':
        return []
    counts = struct.unpack('>6l', data[20:44])
    isut, isstd, leap, timecnt, typecnt, charcnt = counts
    v2 = 44 + timecnt * 5 + typecnt * 6 + charcnt + leap * 8 + isstd + isut
    timecnt = struct.unpack('>l', data[v2 + 32:v2 + 36])[0]
    return list(struct.unpack('>%dq' % timecnt, data[v2 + 44:v2 + 44 + timecnt * 8]))


def table_end(name):
    """The last transition (UTC epoch s) the zone's file lists explicitly, or None. Before
    it, tzdb may differ from the POSIX rule (Africa/Casablanca lists Ramadan to 2087)."""
    t = _table(name)
    return t[-1] if t else None


YEARS_CHECKED = 30


def rule_differs(name, rule, start, end):
    """The first UTC instant in [start, end) at which zone `name` (tzdb, as zoneinfo reads
    it) and the POSIX `rule` a board evaluates give different offsets, as (t, tzdb's,
    the rule's) in seconds east, or None. Both are constant between their transitions, so
    comparing at start and at each transition of either is exact."""
    import datetime
    from sporadic.core import tzrule
    from sporadic.core.timeutil import civil_from_days
    zi = zoneinfo.ZoneInfo(name)
    z = tzrule.parse(rule)
    points = {start} | {t for t in _table(name) if start < t < end}
    if z[2] is not None:   # a rule with daylight time: its changes, year by year
        for y in range(civil_from_days(start // 86400)[0], civil_from_days(end // 86400)[0] + 1):
            points |= {t for t, _, _ in tzrule._transitions(z, y) if start < t < end}
    for t in sorted(points):
        a = int(datetime.datetime.fromtimestamp(t, zi).utcoffset().total_seconds())
        b = tzrule.offset(z, t)
        if a != b:
            return t, a, b
    return None


def _utc_offset(s):
    sign = '-' if s < 0 else '+'
    s = abs(s)
    return 'UTC%s%02d:%02d' % (sign, s // 3600, s % 3600 // 60)


def job_warning(job, now):
    """One line when a calendar job names a zone whose tzdb offsets, in the next
    YEARS_CHECKED years the job can run, differ from the POSIX rule (tzr=) the board
    follows; None otherwise (no zone name, or they agree)."""
    cal = job.cal
    if cal is None or not cal.tz or not cal.tzr or cal.tzr == cal.tz:
        return None
    start = max(job.t0, now)
    try:
        d = rule_differs(cal.tz, cal.tzr, start, start + YEARS_CHECKED * 31556952)
    except (ValueError, OSError):
        return None
    if d is None:
        return None
    from sporadic.core.timefmt import format_time
    t, a, b = d
    return ('tz=%s: from %s tzdb says %s but the POSIX rule boards follow (tzr=%s) says %s: '
            'a board runs this job by the rule' % (cal.tz, format_time(t), _utc_offset(a), cal.tzr, _utc_offset(b)))


def is_zone_name(s):
    """A zone name (Area/City, or UTC-like names) rather than a POSIX rule?"""
    return '/' in s or s in ('UTC', 'GMT', 'Etc/UTC', 'Zulu', 'UCT', 'Universal')
