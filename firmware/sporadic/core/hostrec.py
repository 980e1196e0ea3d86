# A host record with a position, `.h HOST SINCE [LAT LON]` (docs/jobline.md): checked
# here, loaded only when such a record is parsed (a board's loop and most syncs never
# see one). jobline.host_of reads the host. A host moved by a later deploy has several
# records, all kept by merge (compaction is not taught them: its code is loaded in one
# block in a sync's fragmented heap); key() says which one holds. jobline.parse
# checks the host id and raises its ParseError with bad()'s reason: this module
# imports nothing of jobline (jobline loads it).


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


KEY = 'ed25519:'


def parse(rest):
    """What follows '.h ' -> (host, since, lat, lon): a board's id (as written: jobline
    checks it), the time (UTC epoch s) the companion wrote the record, and the position
    it was deployed at (decimal text, or None); None for a record of another form. A
    record without SINCE is -1 (written before positions were). A record may end with
    the board's public key, `ed25519:<64 hex>` (after SINCE: pubkey())."""
    f = rest.split(' ')
    if len(f) > 2 and f[-1][:8] == KEY:
        k = f.pop()[8:]
        if len(k) != 64 or k.lower() != k or not all(c in '0123456789abcdef' for c in k):
            return None
    host = f[0]
    if len(f) == 1:
        return host, -1, None, None
    if len(f) not in (2, 4) or not f[1].isdigit() or str(int(f[1])) != f[1] or (
            len(f) == 4 and not (_degrees(f[2], 90) and _degrees(f[3], 180))):
        return None
    if len(f) == 2:
        return host, int(f[1]), None, None
    return host, int(f[1]), f[2], f[3]


def key(line):
    """Of one host's records the newest holds: the greatest (SINCE, text); -1 without."""
    f = line.split(' ', 3)
    return (int(f[2]) if len(f) > 2 else -1, line)


def pubkey(line):
    """The public key (32 bytes) a host record '.h HOST SINCE [LAT LON] ed25519:HEX'
    gives its board, or None (a record from before board keys)."""
    i = line.rfind(' ')
    if i < 0 or line[i + 1:i + 9] != KEY or len(line) - i - 9 != 64:
        return None
    import binascii
    try:
        return binascii.unhexlify(line[i + 9:])
    except ValueError:
        return None


def bad(rest):
    """Why parse() refused the record '.h ' + rest."""
    return ('bad host record %r (.h HOST [SINCE [LAT LON]] [ed25519:KEY]: epoch seconds, '
            'degrees with at most 5 decimals, 64 hex)' % ('.h ' + rest))
