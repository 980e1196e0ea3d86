# The driving side's memory of a responder (recondrv.reconcile's `known`):
# the digests the other side held when the last sync between the two ended
# equal. Where the other side still gives a node the summary it had then,
# the node is settled from those digests (push what they lack, fetch what
# this side lacks) instead of being walked level by level: a board left as
# its last sync left it costs `S`, the `P`s and the verifying `S`, however
# many lines it holds and however many came for it; a board that ran jobs
# since is walked only where its own records landed. A stale or wrong
# memory costs nothing but the walk: it is used only where the summaries
# agree, and the sync's last `S` checks the whole. Desktop-only (the
# companion keeps one a board, companion/sync/prior.py): a board driving a
# sync never loads it.
from bisect import bisect_left

from sporadic.core.recon import DIGLEN, REC, Nodes, clean, digest, hexd

SPLIT = 64      # a known node of more digests is handed over as its 256 grandchildren
MAGIC = b'sporadic-set 1\n'


class Prior:
    """The set of digests one side held, sorted (hex, 16 digits each)."""

    def __init__(self, digests):
        self.h = sorted(set(digests))
        self._last = None

    @classmethod
    def of(cls, source):
        """The digests of a recon source (a callable returning an iterator of lines)."""
        return cls(hexd(digest(line)) for line in map(clean, source()) if line is not None)

    def dump(self):
        return MAGIC + bytes.fromhex(''.join(self.h))

    @classmethod
    def load(cls, data):
        """None for anything but what dump() wrote."""
        body = data[len(MAGIC):]
        if data[:len(MAGIC)] != MAGIC or len(body) % 8:
            return None
        return cls(body[i:i + 8].hex() for i in range(0, len(body), 8))

    def _range(self, prefix):
        return bisect_left(self.h, prefix), bisect_left(self.h, prefix + 'g') if prefix else len(self.h)

    def _pass(self, prefix, mode):
        # recon.Nodes over this node's digests alone (fed as an index's
        # records), so that its summary is the responder's rule, not a copy
        a = self._last
        if a is not None and a[0] == (prefix, mode):
            return a[1]
        lo, hi = self._range(prefix)
        recs = b''.join([bytes.fromhex(self.h[i]) + bytes(REC - 8) for i in range(lo, hi)])
        a = Nodes([(len(prefix), int(prefix, 16) if prefix else 0)], mode, leaf=False).run_index(_Recs(recs))
        self._last = ((prefix, mode), a)     # the children of one node are asked one after another
        return a

    def known(self, prefix, count, xor):
        """recondrv's question: the other side gives node `prefix` this count
        and XOR (16 hex digits, or the low 8 of an N answer's child). Where
        that is what it held here: {node: ',d,d,...,'} covering the node, its
        digests after each node's prefix up to DIGLEN, as a D answer gives
        them; else None (walk it)."""
        if len(xor) == 16:      # the node's own summary (S)
            same = self._pass(prefix, 'S').summary(0) == '%x.%s' % (count, xor)
        else:                   # a child in its parent's N answer
            same = self._pass(prefix[:-1], 'N').child(0, int(prefix[-1], 16)) == (count, xor)
        if not same:
            return None
        lo, hi = self._range(prefix)
        L = len(prefix)
        if hi - lo <= SPLIT or L + 2 > DIGLEN:
            return {prefix: ',' + ''.join([self.h[i][L:DIGLEN] + ',' for i in range(lo, hi)])}
        out = {}
        for k in range(256):
            p = prefix + '%02x' % k
            out[p] = ','
        for i in range(lo, hi):
            p = self.h[i][:L + 2]
            out[p] += self.h[i][L + 2:DIGLEN] + ','
        return out


class _Recs:
    # digests as a digest index's records (recon.Responder's `index`: chunks)
    def __init__(self, recs):
        self.recs = recs

    def chunks(self):
        yield self.recs, len(self.recs)
