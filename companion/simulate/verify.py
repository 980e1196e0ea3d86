# --verify: the literal line sets, merged by merging.merge, checked against
# the log model at every sync and decision.
from sporadic.core import jobline, plan
from sporadic.desktop import merging


class Verify:
    # -- verify: the literal files, merged by merging.merge --

    def materialize(self, V):
        """The compacted file of a party whose knowledge is V."""
        out = list(self.static)
        for h in range(self.P):
            lg = self.logs[h]
            last = {}
            for i in range(1, V[h] + 1):
                last[lg.RJ[i]] = lg.lines[i]
            out.extend(last.values())
        return sorted(out)

    def _check_sync(self, parties, U, n):
        files = [merging.merge(sorted(self.lit[x])) for x in parties]
        m = merging.merge(*files)
        ms = set(m)
        lit = 0
        for f in files:
            fs = set(f)
            lit += sum(len(s) + 1 for s in ms if s not in fs)
        if lit != n:
            raise AssertionError('bytes: literal %d, fast %d' % (lit, n))
        if m != self.materialize(U):
            raise AssertionError('file after sync differs from merging.merge')
        for x in parties:
            self.lit[x] = set(ms)
        self.stats['verified_syncs'] += 1

    def _check_decide(self, x, j, now, rnk, got):
        h = self.hosts[x]
        job = self.jobs[j]
        if job.kind == 'one':
            names = [hh.name for hh in self.hosts]
            if plan.rank(job.id, h.name, names) != rnk:
                raise AssertionError('rank differs from plan.rank')
        mine = None
        mkey = None
        done = -1
        pre = job.id + ' r '
        for line in merging.merge(sorted(self.lit[x])):
            if not line.startswith(pre):
                continue
            r = jobline.parse(line)
            if r.host == h.name:
                key = r.rank()
                if mkey is None or key > mkey:
                    mkey = key
                    mine = (r.k, r.outcome, r.attempt)
            elif r.outcome != 'miss' and r.k > done:
                done = r.k
        want = plan.decide(job, h.name, now, mine, done if self.single[j] else -1, rnk, h.rnd)
        if want != got:
            raise AssertionError('decide from the literal file %r, fast %r' % (want, got))

