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


def table_end(name):
    """The last transition (UTC epoch s) the zone's file lists explicitly, or None. Before
    it, tzdb may differ from the POSIX rule (Africa/Casablanca lists Ramadan to 2087)."""
    data = _tzif(name)
    if data[:4] != b'TZif' or data[4:5] < b'2':
        return None
    counts = struct.unpack('>6l', data[20:44])
    isut, isstd, leap, timecnt, typecnt, charcnt = counts
    v2 = 44 + timecnt * 5 + typecnt * 6 + charcnt + leap * 8 + isstd + isut
    timecnt = struct.unpack('>l', data[v2 + 32:v2 + 36])[0]
    if not timecnt:
        return None
    return struct.unpack('>q', data[v2 + 44 + (timecnt - 1) * 8:v2 + 44 + timecnt * 8])[0]


def is_zone_name(s):
    """A zone name (Area/City, or UTC-like names) rather than a POSIX rule?"""
    return '/' in s or s in ('UTC', 'GMT', 'Etc/UTC', 'Zulu', 'UCT', 'Universal')
