# The driving side's memory of a responder (recondrv.reconcile's `lacks`):
# the digests of the lines the other side held when the last sync between
# the two ended equal. What this side holds beyond them is what the other
# side lacks, unless it got it elsewhere since: it is pushed before
# anything is asked. A board left as its last sync left it then costs the
# `P`s and one `S`, and the board folds what it received in together with
# what it wrote itself since (one compaction); the walk that follows finds
# only what changed on the board. A stale or wrong memory costs a line
# pushed twice or the walk: a line the other side already holds is taken
# once, one it lacks beyond the memory is found by the walk as before.
# Desktop-only (the companion keeps one a board, companion/sync/prior.py): a
# board driving a sync never loads it.
from sporadic.core.recon import digest, clean, hexd

MAGIC = b'sporadic-set 1\n'


class Prior:
    """The set of digests one side held (hex, 16 digits each)."""

    def __init__(self, digests):
        self.h = set(digests)

    @classmethod
    def of(cls, source):
        """The digests of a recon source (a callable returning an iterator of lines)."""
        return cls(hexd(digest(line)) for line in map(clean, source()) if line is not None)

    def dump(self):
        return MAGIC + bytes.fromhex(''.join(sorted(self.h)))

    @classmethod
    def load(cls, data):
        """None for anything but what dump() wrote."""
        body = data[len(MAGIC):]
        if data[:len(MAGIC)] != MAGIC or len(body) % 8:
            return None
        return cls(body[i:i + 8].hex() for i in range(0, len(body), 8))

    def lacks(self, line):
        """recondrv's question: the other side did not hold this line."""
        return hexd(digest(line)) not in self.h
