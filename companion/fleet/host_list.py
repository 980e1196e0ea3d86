"""The fleet's host list: host records (`.h HOST [SINCE [LAT LON]] [ed25519:KEY]`,
docs/jobline.md), the newest of each host, its position and board key, and adding a
host (signed as the fleet's mode asks)."""
import time

from sporadic.core import jobline


def degrees_text(x):
    """A latitude or longitude as a host record holds it: at most 5 decimals (about 1 m)."""
    s = ('%.5f' % x).rstrip('0').rstrip('.')
    return '0' if s in ('-0', '') else s


def host_records(lines):
    """{host: (since, lat, lon)} of the host records (`.h HOST [SINCE [LAT LON]]`) among
    lines: for each host its newest (hostrec.key); lat/lon floats or None."""
    from sporadic.core import hostrec
    out = {}
    for h, l in _newest(lines).items():
        _, since, lat, lon = hostrec.parse(l[3:])
        out[h] = (since, None if lat is None else float(lat), None if lon is None else float(lon))
    return out


def host_positions(lines):
    """{host: (lat, lon)} of the hosts the host list among lines places."""
    return {h: (la, lo) for h, (_, la, lo) in host_records(lines).items() if la is not None}


def host_keys(lines):
    """{host: its board key text (ed25519:HEX)} of the newest host records among lines
    that carry one."""
    from sporadic.core import hostrec
    return {h: l[l.rfind(' ') + 1:] for h, l in _newest(lines).items() if hostrec.pubkey(l) is not None}


def _newest(lines):
    # {host: its newest host record among lines} (hostrec.key: the greatest SINCE)
    from sporadic.core import hostrec
    best = {}
    for l in lines:
        if l.startswith('.h '):
            h = jobline.host_of(l)
            if h not in best or hostrec.key(l) > hostrec.key(best[h]):
                best[h] = l
    return best


def host_line(fleet, host, position=None, now=None, key=None):
    """The host record that says `host` is at `position` ((lat, lon) or None) with the
    board key `key` (ed25519:HEX, or None), or None when the fleet's host list already
    says so. A new position or key (or none where there was one) is a record with a
    later SINCE, which then holds over the old one."""
    jobline.check_host(host)
    now = int(time.time()) if now is None else now
    pos = None if position is None else (degrees_text(position[0]), degrees_text(position[1]))
    lines = fleet.lines()
    cur = host_records(lines).get(host)
    if cur is not None:
        have = None if cur[1] is None else (degrees_text(cur[1]), degrees_text(cur[2]))
        if have == pos and host_keys(lines).get(host) == key:
            return None
    if pos is None and cur is None and key is None:
        return '.h ' + host          # no position: the record every firmware reads
    since = max(now, cur[0] + 1) if cur is not None else now
    return '.h %s %d' % (host, since) + ('' if pos is None else ' %s %s' % pos) + (
        '' if key is None else ' ' + key)


def add_host(fleet, host, position=None, now=None, key=None):
    """Put host (at position, with its board key) into the fleet's host list, signed;
    nothing when it is there."""
    line = host_line(fleet, host, position, now, key)
    if line is not None:
        fleet.merge_in([line] + fleet.sign([line]), 'host')
