# What each party knows, as a version vector over the parties' append-only
# record logs (exactly the compacted file under merge): writing a record,
# what a sync moves in bytes, and what a host's file says others did.
from array import array
from itertools import compress, repeat
from operator import getitem, gt

INF = 2 ** 31 - 1
MISS_C, OK_C, RUN_C = 2, 3, 0   # outcome codes (rank order of jobline outcomes)


class _Log:
    """One party's append-only record log (its own result lines, in order).
    Index 0 is a sentinel; a party that knows n records of origin h knows
    exactly records 1..n (knowledge of an origin is always a prefix: merge is
    a union of full states, and each record has one author)."""
    __slots__ = ('RJ', 'RK', 'RO', 'RZ', 'NXT', 'B', 'PM', 'SR', 'SRpos', 'LB', 'D', 'last', 'lines')

    def __init__(self, verify):
        self.RJ = array('i', [0])     # job index
        self.RK = array('i', [0])     # instance
        self.RO = array('b', [0])     # outcome code
        self.RZ = array('i', [0])     # line size in bytes (with newline)
        self.NXT = array('i', [INF])  # next record of the same job (supersedes this one)
        self.B = array('q', [0])      # bytes of records 1..i
        self.PM = array('i', [0])     # max over 1..i of the previous record of the same job
        self.SR = array('i', [0])     # count of ok records of single (any/one) jobs in 1..i
        self.SRpos = array('i')       # where those records are
        self.LB = array('q', [0])     # bytes of this origin's lines live in the file after 1..i
        self.D = array('i', [0])      # this origin's lines live in the file after 1..i
        self.last = {}
        self.lines = [None] if verify else None



class LogModel:
    """The record-log half of Sim (mixed in): state set up by init_logs."""

    def init_logs(self):
        P = self.P
        self.logs = [_Log(self.verify) for _ in range(P)]
        self.B_all = [lg.B for lg in self.logs]
        self.PM_all = [lg.PM for lg in self.logs]
        self.SR_all = [lg.SR for lg in self.logs]
        self.prange = range(P)
        self.V = [[0] * P for _ in range(P)]
        self.sup_b = [-1] * P     # origin -> the b of its sup_d
        self.sup_d = [None] * P   # origin -> {a: bytes superseded in (a, b]}
        self.SRc = [[0] * P for _ in range(P)]   # per party: SR of each origin at its V
        self.PMc = [[0] * P for _ in range(P)]   # per party: PM of each origin at its V
        self.Bsum = [0] * P     # bytes of records each party knows (sum over origins of B[V])
        self.runners = [{} for _ in range(self.J)]   # single jobs: k -> [(host, record), ...]
        self.rtop = [-1] * self.J

    def _done(self, x, j, k):
        """done_k as the host's file shows it (the highest instance another
        host's newest result started or ran), exact for the comparisons
        plan.decide makes (>= k, >= the instance before k: k - 1, or for a
        calendar job its cal.prev(k)); -1 when below that."""
        runs = self.runners[j]
        if not runs:
            return -1
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
        i = len(lg.RJ)
        if size is None:
            size = len(line) + 1
        p = lg.last.get(j, 0)
        lg.RJ.append(j)
        lg.RK.append(k)
        lg.RO.append(code)
        lg.RZ.append(size)
        lg.NXT.append(INF)
        lg.B.append(lg.B[-1] + size)
        pm = lg.PM[-1]
        if p > pm:
            pm = p
        lg.PM.append(pm)
        self.PMc[x][x] = pm
        if code == OK_C and self.single[j]:
            lg.SR.append(lg.SR[-1] + 1)
            lg.SRpos.append(i)
            self.SRc[x][x] += 1
        else:
            lg.SR.append(lg.SR[-1])
        self.Bsum[x] += size
        if p:
            lg.NXT[p] = i
            lg.LB.append(lg.LB[-1] + size - lg.RZ[p])
            lg.D.append(lg.D[-1])
        else:
            lg.LB.append(lg.LB[-1] + size)
            lg.D.append(lg.D[-1] + 1)
        lg.last[j] = i
        self.V[x][x] = i
        if self.verify:
            lg.lines.append(line)
            self.lit[x].add(line)
        return i

    def _union(self, U):
        """What every receiver of U needs, computed once: the bytes known,
        and per origin the supersession and single-run markers at U."""
        return (sum(map(getitem, self.B_all, U)), list(map(getitem, self.PM_all, U)),
                list(map(getitem, self.SR_all, U)))

    def _recv(self, x, old, new, agg, t):
        """Bytes of the lines party x lacked (set difference of the compacted
        files: only the newest record of a job and origin counts); records
        what x learned about single-job runs."""
        bnew, pmu, sru = agg
        tot = bnew - self.Bsum[x]
        if not tot:
            return 0
        self.Bsum[x] = bnew
        logs = self.logs
        # an origin with a record superseded inside the range sends only the
        # newest: the bytes superseded in (a, b], memoized per origin for its
        # latest b (receivers of one party's file share b and few a's); the
        # per-origin work stays in list comprehensions and map
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
        self.PMc[x] = pmu[:]
        src = self.SRc[x]
        self.SRc[x] = sru[:]
        if x < self.H:
            kn = self.hosts[x].known
            learn = self._learn
            for h in compress(self.prange, map(gt, sru, src)):
                # _learn_between, written out: a visit reaches most origins
                lg = logs[h]
                b = new[h]
                SR = lg.SR
                RJ = lg.RJ
                RK = lg.RK
                NXT = lg.NXT
                for i in lg.SRpos[SR[old[h]]:SR[b]]:
                    k = RK[i]
                    if k > kn[RJ[i]] and NXT[i] > b:
                        learn(x, RJ[i], k, t)
        return tot

    def _learn_between(self, x, lg, a, b, kn, t):
        # host x learns the instances that origin lg's results in (a, b] started or ran
        RJ = lg.RJ
        RK = lg.RK
        NXT = lg.NXT
        for i in lg.SRpos[lg.SR[a]:lg.SR[b]]:
            k = RK[i]
            if k > kn[RJ[i]] and NXT[i] > b:
                self._learn(x, RJ[i], k, t)

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
        src = self.SRc[x]
        learn = x < self.H
        kn = self.hosts[x].known if learn else None
        for h in few:
            b = new[h]
            lg = logs[h]
            PMc[h] = lg.PM[b]
            SR = lg.SR
            if SR[b] <= src[h]:
                continue
            src[h] = SR[b]
            if learn:
                self._learn_between(x, lg, old[h], b, kn, t)
        return tot
