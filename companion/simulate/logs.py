# What each party knows, as a version vector over the parties' append-only
# record logs (exactly the compacted file under merge): writing a record,
# what a sync moves in bytes, and what a host's file says others did.
from array import array
from bisect import bisect_left
from itertools import accumulate, compress, repeat
from operator import getitem, gt, lt, not_, sub

INF = 2 ** 31 - 1
MISS_C, OK_C, RUN_C = 2, 3, 0   # outcome codes (rank order of jobline outcomes)


class _Log:
    """One party's append-only record log (its own result lines, in order).
    Index 0 is a sentinel; a party that knows n records of origin h knows
    exactly records 1..n (knowledge of an origin is always a prefix: merge is
    a union of full states, and each record has one author)."""
    __slots__ = ('RK', 'RO', 'RZ', 'NXT', 'PRV', 'B', 'PM', 'last', 'lines')

    def __init__(self, verify):
        self.RK = array('i', [0])     # instance
        self.RO = array('b', [0])     # outcome code
        self.RZ = array('i', [0])     # line size in bytes (with newline)
        self.NXT = array('i', [INF])  # next record of the same job (supersedes this one)
        self.PRV = array('i', [0])    # previous record of the same job (this one supersedes it), 0: none
        self.B = array('q', [0])      # bytes of records 1..i
        self.PM = array('i', [0])     # max over 1..i of the previous record of the same job
        self.last = {}
        self.lines = [None] if verify else None



class Raises:
    """The entries of one party's vector raised by its syncs, one version a
    raise. A party whose last sync was with this one alone holds this vector
    as it was at a version (its mark), but for its own entry. What it lacks
    counts the newest record of each job only: a record superseded by one
    the holder also lacks is not sent. Such a pair (a record and the one
    that supersedes it) reaches this party by raises, the superseding one
    last; at that raise the superseded record's bytes are added at the
    version that brought it (0: before this Raises). The bytes a holder at
    a mark is spared are then the sum over the versions after its mark (a
    Fenwick tree over versions), O(log raises) whatever the fleet's size."""
    __slots__ = ('ver', 'hist', 'tree', 'total')

    def __init__(self):
        self.ver = 0
        self.hist = {}      # origin -> (values raised from and to, the version after each raise)
        self.tree = [0, 0]  # Fenwick tree over versions 1..n, doubled as needed (most stay small)
        self.total = 0

    def raise_(self, h, a, b, lg):
        """Entry h goes from a to b; lg is origin h's log."""
        self.ver = v = self.ver + 1
        tree = self.tree
        n = len(tree) - 1
        if v > n:       # double: nodes above n cover only empty versions, but the last covers all
            tree.extend([0] * n)
            n += n
            tree[n] = self.total
        e = self.hist.get(h)
        if e is None:
            e = self.hist[h] = (array('i', [a]), array('i', [0]))
        vals, vers = e
        lo = vals[-2] if len(vals) > 1 else a     # the last raise brought (lo, a]
        RZ = lg.RZ
        here = last = 0
        older = None
        for p in lg.PRV[a + 1:b + 1]:
            if p > a:
                here += RZ[p]
            elif p > lo:
                last += RZ[p]
            elif p and p > vals[0]:     # brought by an earlier raise of this Raises
                if older is None:
                    older = {}
                w = vers[bisect_left(vals, p)]
                older[w] = older.get(w, 0) + RZ[p]
        vals.append(b)
        vers.append(v)
        if here:
            self._add(v, here)
        if last:
            self._add(vers[-2], last)
        if older:
            for w, z in older.items():
                self._add(w, z)

    def _add(self, i, z):
        self.total += z
        tree = self.tree
        n = len(tree) - 1
        while i <= n:
            tree[i] += z
            i += i & -i

    def spared(self, mark):
        """Bytes of the records superseded inside what a holder at `mark` lacks."""
        s = self.total
        tree = self.tree
        i = mark
        while i:
            s -= tree[i]
            i &= i - 1
        return s


class LogModel:
    """The record-log half of Sim (mixed in): state set up by init_logs."""

    def init_logs(self):
        P = self.P
        self.logs = [_Log(self.verify) for _ in range(P)]
        self.B_all = [lg.B for lg in self.logs]
        self.PM_all = [lg.PM for lg in self.logs]
        self.prange = range(P)
        self.jrange = range(self.J)
        # vectors as arrays: a copy is a memcpy, not a reference count touched
        # on each of P int objects spread over the heap
        self.V = [array('i', [0]) * P for _ in range(P)]
        self.partner = [-1] * P   # the party each last synced with alone (-1: none, or a mesh round)
        self.sup_b = [-1] * P     # origin -> the b of its sup_d
        self.sup_d = [None] * P   # origin -> {a: bytes superseded in (a, b]}
        self.PMc = [array('i', [0]) * P for _ in range(P)]   # per party: PM of each origin at its V
        self.Bsum = [0] * P     # bytes of records each party knows (sum over origins of B[V])
        self.raises = [Raises() for _ in range(P)]   # per party (a new one when a sync raises it anywhere)
        self.mark = [None] * P    # per party: (the Raises of its last lone partner, its version then)
        self.runners = [{} for _ in range(self.J)]   # single jobs: k -> [(host, record), ...]
        self.vgen = [0] * P     # per party: bumped when a sync changes its vector (_done's memo)
        self.done_memo = [[None] * self.J for _ in range(self.H)]
        self.rtop = [-1] * self.J

    def _done(self, x, j, k):
        """done_k as the host's file shows it (the highest instance another
        host's newest result started or ran), exact for the comparisons
        plan.decide makes (>= k, >= the instance before k: k - 1, or for a
        calendar job its cal.prev(k)); -1 when below that. It changes only
        when the host's file does (a record another host writes is not in it
        before a sync), so the last answer per host and job is kept for the
        host's vector version (vgen)."""
        runs = self.runners[j]
        if not runs:
            return -1
        memo = self.done_memo[x]
        m = memo[j]
        if m is not None and m[0] == self.vgen[x] and m[1] == k:
            return m[2]
        v = memo[j] = (self.vgen[x], k, self._done_scan(x, j, k, runs))
        return v[2]

    def _done_scan(self, x, j, k, runs):
        job = self.jobs[j]
        lo = k - 1 if job.cal is None or k < 0 else job.cal.prev(k)
        V = self.V[x]
        ks = self.ran[j]    # the instances that ran, sorted: ids need not be consecutive
        n = len(ks) - 1
        while n >= 0 and ks[n] >= lo:
            for h, s in runs[ks[n]]:
                if h != x and V[h] >= s:
                    lg = self.logs[h]
                    i = s
                    lim = V[h]
                    while lg.NXT[i] <= lim:
                        i = lg.NXT[i]
                    if lg.RO[i] != MISS_C:
                        return lg.RK[i]
            n -= 1
        return -1

    def _write(self, x, j, k, code, line, size=None):
        """Append a record of job j, instance k to party x's log -> its index
        (the line, or on the fast path its size only)."""
        lg = self.logs[x]
        i = len(lg.RK)
        if size is None:
            size = len(line) + 1
        p = lg.last.get(j, 0)
        lg.RK.append(k)
        lg.RO.append(code)
        lg.RZ.append(size)
        lg.NXT.append(INF)
        lg.PRV.append(p)
        lg.B.append(lg.B[-1] + size)
        pm = lg.PM[-1]
        if p > pm:
            pm = p
        lg.PM.append(pm)
        self.PMc[x][x] = pm
        self.Bsum[x] += size
        if p:
            lg.NXT[p] = i
        lg.last[j] = i
        self.V[x][x] = i
        if self.verify:
            lg.lines.append(line)
            self.lit[x].add(line)
        return i

    def live(self, h):
        """Origin h's lines live in a file that knows its records 1..i, and
        their bytes, for every i (its records less those superseded)."""
        lg = self.logs[h]
        prv = lg.PRV[1:]
        lines = array('i', accumulate(map(not_, prv), initial=0))
        size = array('q', accumulate(map(sub, lg.RZ[1:], map(lg.RZ.__getitem__, prv)), initial=0))
        return lines, size

    def _union(self, U):
        """What every receiver of U needs, computed once: the bytes known,
        and per origin the supersession marker at U."""
        return sum(map(getitem, self.B_all, U)), array('i', map(getitem, self.PM_all, U))

    def _recv(self, x, old, new, agg, t, since=None):
        """Bytes of the lines party x lacked (set difference of the compacted
        files: only the newest record of a job and origin counts); records
        what x learned about single-job runs. since: (r, mark) when x holds
        party r's vector at that version of its Raises but for x's own
        entry, and new is r's vector but for x's entry."""
        bnew, pmu = agg
        tot = bnew - self.Bsum[x]
        if not tot:
            return 0
        self.Bsum[x] = bnew
        # an origin with a record superseded inside the range sends only the
        # newest: less the bytes superseded in (a, b]
        if since is None:
            # per origin, memoized for its latest b (receivers of one party's
            # file share b and few a's), in list comprehensions and map
            sel = list(compress(self.prange, map(gt, pmu, old)))
            if sel:
                sup_b = self.sup_b
                sup_d = self.sup_d
                olds = [old[h] for h in sel]
                for h in [h for h in sel if sup_b[h] != new[h]]:
                    sup_b[h] = new[h]
                    sup_d[h] = {}
                vals = list(map(dict.get, [sup_d[h] for h in sel], olds))
                if None in vals:
                    for i in [i for i, v in enumerate(vals) if v is None]:
                        vals[i] = self._sup(sel[i], olds[i], new[sel[i]])
                tot -= sum(vals)
        else:
            # all origins at once from r's raises since the mark (Raises);
            # none of them raised x's own entry: x's records newer than the
            # mark are nowhere else, since x has not synced since
            r, mark = since
            tot -= self.raises[r].spared(mark)
            if pmu[r] > old[r]:     # r's own entry is raised by its writes
                tot -= self._sup(r, old[r], new[r])
        self.PMc[x] = pmu[:]
        if x < self.H:
            self._learn_union(x, new, t)
        return tot

    def _learn_union(self, x, U, t):
        """Host x, whose file is now the one U describes, learns the newest
        instance of each single (any/one) job that a record in the file shows
        run. Records it had before were learned when it got them (a record in
        the file at U was in every file before it that held it), so only the
        jobs where it lags the fleet's newest run are looked at, each from
        the newest instance that ran down to the first with a runner whose
        record is in the file (known: index <= U[runner]; still its newest
        result of the job: the next one is after U[runner])."""
        kn = self.hosts[x].known
        logs = self.logs
        learn = self._learn
        ran = self.ran
        runners = self.runners
        for j in compress(self.jrange, map(lt, kn, self.rtop)):
            ks = ran[j]
            runs = runners[j]
            kj = kn[j]
            n = len(ks) - 1
            while n >= 0 and ks[n] > kj:
                for h, i in runs[ks[n]]:
                    u = U[h]
                    if i <= u and logs[h].NXT[i] > u:
                        learn(x, j, ks[n], 2 * t)
                        n = 0
                        break
                n -= 1

    def _sup(self, h, a, b):
        """Bytes of origin h's records in (a, b] superseded by a record <= b."""
        if self.sup_b[h] != b:
            self.sup_b[h] = b
            self.sup_d[h] = {}
        d = self.sup_d[h]
        v = d.get(a)
        if v is None:
            lg = self.logs[h]
            v = d[a] = sum(compress(lg.RZ[a + 1:b + 1], map(gt, repeat(b + 1), lg.NXT[a + 1:b + 1])))
        return v

    def _recv_few(self, x, old, new, few, bnew, t):
        """_recv for a party that lacks records of the origins `few` only
        (new == old elsewhere): the same figures, work in len(few)."""
        tot = bnew - self.Bsum[x]
        if not tot:
            return 0
        self.Bsum[x] = bnew
        logs = self.logs
        for h in few:
            if logs[h].PM[new[h]] > old[h]:
                tot -= self._sup(h, old[h], new[h])
        PMc = self.PMc[x]
        for h in few:
            PMc[h] = logs[h].PM[new[h]]
        if x < self.H:
            self._learn_union(x, new, t)
        return tot
