# A host record with a position, `.h HOST SINCE [LAT LON]` (docs/jobline.md): checked
# here, loaded only when such a record is parsed (a board's loop and most syncs never
# see one). jobline.host_of reads the host. A host moved by a later deploy has several
# records, all kept by merge (compaction is not taught them: its code is loaded in one
# block in a sync's fragmented heap); newest() says which one holds.
from sporadic.core.jobline import ParseError, check_host


def _degrees(s, limit):
    # canonical decimal degrees within +-limit (what companion/fleet/folder.py degrees_text
    # writes): no float, so a board with 32-bit floats checks it alike
    body = s[1:] if s[:1] == '-' else s
    whole, dot, frac = body.partition('.')
    if not whole.isdigit() or (len(whole) > 1 and whole[0] == '0'):
        return False
    if dot and (not frac.isdigit() or len(frac) > 5 or frac[-1] == '0'):
        return False
    v = int(whole) * 100000 + (int((frac + '0000')[:5]) if dot else 0)
    return v <= limit * 100000 and not (v == 0 and body != s)


def parse(rest):
    """What follows '.h ' -> (host, since, lat, lon): a board's id, the time (UTC epoch
    s) the companion wrote the record, and the position it was deployed at (decimal
    text, or None). A record without SINCE is -1 (written before positions were)."""
    f = rest.split(' ')
    host = check_host(f[0])
    if len(f) == 1:
        return host, -1, None, None
    if len(f) not in (2, 4) or not f[1].isdigit() or str(int(f[1])) != f[1] or (
            len(f) == 4 and not (_degrees(f[2], 90) and _degrees(f[3], 180))):
        raise ParseError('bad host record %r (.h HOST [SINCE [LAT LON]]: epoch seconds, '
                         'degrees with at most 5 decimals)' % ('.h ' + rest))
    if len(f) == 2:
        return host, int(f[1]), None, None
    return host, int(f[1]), f[2], f[3]


def key(line):
    """Of one host's records the newest holds: the greatest (SINCE, text); -1 without."""
    f = line.split(' ', 3)
    return (int(f[2]) if len(f) > 2 else -1, line)
