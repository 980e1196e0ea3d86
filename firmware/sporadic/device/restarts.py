# Restarts after running out of memory (boot.main's last resort), counted in
# /restarts.txt so that a board whose loop cannot get through (a job file
# grown past its heap) backs off instead of booting again at once for ever
# (a battery's worth of boots in a day, each one reading the whole store),
# and says so in its status. The file is written only at such a restart,
# and once when a pass completes after one (docs/device.md#crash-safety):
#   IN_A_ROW TOTAL LAST WHAT     LAST: Unix time or '-' (clock unknown)
from micropython import const

PATH = '/restarts.txt'
_FIRST_MS = const(60000)      # the second restart in a row waits a minute,
_MOST_MS = const(3600000)     # each one after twice as long, an hour at most


def read(text=None):
    """(in_a_row, total, last, what) from the file (or its text), None when
    there is none or it does not parse."""
    try:
        if text is None:
            with open(PATH) as f:
                text = f.read()
        a = text.split(' ', 3)
        return int(a[0]), int(a[1]), None if a[2] == '-' else int(a[2]), a[3].strip()
    except (OSError, ValueError, IndexError):
        return None


def backoff_ms(in_a_row):
    """How long a board waits before its restart number `in_a_row` (1: the
    first of a run, at once: a heap cut up by a recovery boots clean)."""
    if in_a_row < 2:
        return 0
    if in_a_row > 8:
        return _MOST_MS
    return min(_FIRST_MS << (in_a_row - 2), _MOST_MS)


def _write(in_a_row, total, last, what):
    with open(PATH, 'w') as f:
        f.write('%d %d %s %s\n' % (in_a_row, total, '-' if last is None else last, what))


def count(now, what):
    """One more restart at `now` (None: clock unknown) for `what` (a line);
    returns how many in a row, counting this one. A file that cannot be
    written (a full flash) counts as the first."""
    r = read()
    n, total = (r[0], r[1]) if r else (0, 0)
    try:
        _write(n + 1, total + 1, now, what[:80].replace('\n', ' '))
    except OSError:
        return 1
    return n + 1


def settled(text):
    """A pass completed after restarts (`text` as rtinit read the file): the
    run is over, the next restart is a first one again; the total and the
    last are kept for the status."""
    r = read(text)
    if r is not None and r[0]:
        try:
            _write(0, r[1], r[2], r[3])
        except OSError:
            pass
