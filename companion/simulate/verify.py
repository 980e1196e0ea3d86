# --verify: the literal line sets, merged by merging.merge, checked against
# the log model at every sync and decision.
from sporadic.core import groups, plan, rollout
from sporadic.desktop import merging


class Verify:
    # -- verify: the literal files, merged by merging.merge --

    def materialize(self, V):
        """The compacted file of a party whose knowledge is V."""
        out = list(self.static)
        for h in range(self.P):
            lg = self.logs[h]
            out.extend(lg.lines[i] for i in range(1, V[h] + 1) if lg.NXT[i] > V[h])
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
        """The decision again, from what the board would read: groups.scan
        over the host's literal file, plan.rank over the hosts it lists."""
        h = self.hosts[x]
        job = self.jobs[j]
        seen = []
        tally = [-1, 0, 0]

        def visit(jid, text, cancelled, mine, done_k, asg, hosts):
            if jid == job.id:
                seen.append((mine, done_k, hosts, tuple(tally)))

        groups.scan(merging.merge(sorted(self.lit[x])), h.name, None, visit, tally)
        mine, done, hosts, heard = seen[0]
        want_rnk = plan.rank(job.id, h.name, hosts) if job.kind == 'one' else None
        if job.roll is not None:
            want_rnk = rollout.wave(job, h.name, hosts)
        if want_rnk != rnk:
            raise AssertionError('rank from the literal file %r, fast %r' % (want_rnk, rnk))
        want = plan.decide(job, h.name, now, mine, done if self.single[j] else -1, want_rnk, h.rnd,
                           None, False, heard if job.roll is not None else None)
        if want != got:
            raise AssertionError('decide from the literal file %r, fast %r' % (want, got))
