# The store order's two pieces a board's loop needs (docs/jobline.md#the-store-order):
# a result's rank read from its canonical text (result_key: groups.scan
# picks the newest) and the merge of two sorted line streams (merge_sorted:
# jobs.txt and the logs, store.stream). merge.py (the compaction) builds on
# them; a loop's pass loads only this module, the compaction's code stays on
# the flash until a compaction (device/fold.py). Also the few fields of a
# canonical line that a sync's trust checks read without the parser (a job
# id's length, a host record's host and key, a record's signature mark):
# jobline re-exports them; a board signature's check runs without the
# parser's ~10 KB in RAM (docs/mqtt.md#memory).
try:
    from micropython import const
except ImportError:  # CPython
    def const(x):
        return x


# A job id's characters: a line's group (its first ID_LEN characters, the
# key the store sorts by). jobline re-exports it; a compaction, a splice and
# the wake index's carry read it here, and a sync that parses no line (a
# board's month of results handed over) never loads the parser for it
ID_LEN = const(8)


def own_text(line):
    """True for a batch or key record (.b/.k) with nothing to strip: its
    canonical text is itself (jobline.canonical; batch.parse_batch checks
    its fields). A sync takes a seal record so without loading the parser
    (docs/budgets.md#31), and keeps no second copy of ~1 KB."""
    k = line[:3]
    return (k == '.b ' or k == '.k ') and line[3:4] not in ' \t' and line[-1:] not in ' \t\r\n'


def board_keyed(line):
    """A host record '.h HOST ... ed25519:<64 hex>' that gives its board's public
    key (core/hostrec.py pubkey() reads it; docs/security.md#board-signatures)."""
    return line[-72:-64] == 'ed25519:'


def board_signed(mac):
    """A record's MAC field 'HMAC.SIG': its board's signature after the HMAC
    (core/recsig.py checks it)."""
    return mac[16:17] == '.'


def host_of(line):
    """The host a host record '.h HOST [SINCE [LAT LON]]' names."""
    i = line.find(' ', 3)
    return line[3:] if i < 0 else line[3:i]


# A result's rank, read straight from its canonical text:
#   ID r HOST K AT OUTCOME MAC [OUTPUT]
_OUT_RANK = {'run': 0, 'err': 1, 'miss': 2, 'ok': 3}


def result_key(line):
    f = line.split(None, 7)
    tok = f[5]
    i = 0
    while i < len(tok) and not tok[i].isdigit():
        i += 1
    attempt = int(tok[i:]) if i < len(tok) else 1
    return (int(f[3]), attempt, _OUT_RANK.get(tok[:i], 0), line)


def merge_sorted(a, b):
    """Two sorted line iterators -> one sorted iterator without duplicates."""
    a = iter(a)
    b = iter(b)
    x = next(a, None)
    y = next(b, None)
    last = None
    while x is not None or y is not None:
        if y is None or (x is not None and x <= y):
            v = x
            x = next(a, None)
        else:
            v = y
            y = next(b, None)
        if v != last:
            yield v
            last = v
