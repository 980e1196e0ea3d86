# Board signatures on arrival (docs/security.md#board-signatures): the
# records of other hosts that settle a single-run decision, checked under
# the board key their host record gives. Loaded by trust.py only when a
# delivery brings such a record (device records of a host with a key, or
# one that carries a signature), and dropped after it. Reads a line's
# fields without the parser (core/order.py): the check's curve code
# finds the parser's room (docs/mqtt.md#memory).
from sporadic.core import recsig
from sporadic.core.order import ID_LEN


def check(tr, st, recs, keys, out, src, refused):
    # A record of another host that settles a single-run decision (a
    # result of a `one`/`any` job, a leader's assignment) counts only
    # under that host's board signature, when its host record gives it a
    # key (docs/security.md#board-signatures): a board holding the fleet
    # key cannot write one in another board's name. A signature present
    # is checked (one Ed25519 verify: its hash, then its curve, each code
    # alone in RAM; such records are rare); a result
    # without one is refused when its job is single-run (the job line of
    # this delivery or the store's: _single). Moves the good ones to out.
    n = 0
    want = [c[:ID_LEN] for c in recs if c[ID_LEN + 1] == 'r'
            and not recsig.signed(recsig.mac_field(c))]
    single = _single(st, want, out) if want else ()
    for c in recs:
        who = recsig.who(c)
        key = keys.get(who)
        why = None
        if recsig.signed(recsig.mac_field(c)):
            if key is None:
                why = 'signed, but %s has no board key in the host list' % who
            elif not recsig.verify(key, c):
                why = 'bad board signature: not written by %s' % who
        elif key is not None and (c[ID_LEN + 1] == 'a' or c[:ID_LEN] in single):
            why = 'not signed: a single-run record needs the board signature of %s' % who
        if why is None:
            out.append(c)
        else:
            tr._refuse(st, c, why, src, refused)
            n += 1
    import sporadic     # (recsig.verify let its hash's and its curve's code go)
    sporadic.forget('sporadic.core.recsig')
    sporadic.forget('sporadic.device.boardsig')   # (this module: loaded for these records only)
    return n


def _single(st, ids, out):
    """The ids among `ids` of single-run jobs: their job lines looked up in
    this delivery (out), the store's pending lines, then jobs.txt by
    bisection (it is sorted: a few reads a job, no pass over the store)."""
    found = []
    left = []
    for j in ids:
        if j in found or j in left:
            continue
        left.append(j)
    for src in (out, st.pending()):
        for c in src:
            j = c[:ID_LEN]
            if j in left and c[ID_LEN:ID_LEN + 1] == ' ' and recsig.single(c):
                found.append(j)
    for j in left:
        if j not in found:
            c = _job_line(st.jobs, j)
            if c is not None and recsig.single(c):
                found.append(j)
    return found


def _job_line(path, jid):
    # the job line of jid in a sorted file (bisection on byte offsets), or None
    try:
        f = open(path, 'rb')
    except OSError:
        return None
    try:
        key = jid.encode()
        lo = 0
        hi = f.seek(0, 2)
        while hi - lo > 1024:
            mid = (lo + hi) // 2
            f.seek(mid)
            f.readline()
            line = f.readline()
            if not line or line[:ID_LEN] >= key:
                hi = mid
            else:
                lo = mid
        f.seek(lo)
        if lo:
            f.readline()
        while True:
            line = f.readline()
            if not line:
                return None
            p = line[:ID_LEN]
            if p > key:
                return None
            if p == key and line[ID_LEN:ID_LEN + 3] not in (b' r ', b' a ') \
                    and line[ID_LEN:ID_LEN + 7] != b' cancel':
                return line.decode().rstrip('\n')
    finally:
        f.close()
