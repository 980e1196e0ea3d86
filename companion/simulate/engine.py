# The event loop: visits, contacts and mesh rounds in time order, each
# host's wakes (decisions by plan.decide, records by jobline.Result) taken
# up to a sync before it.
import gc
import heapq
from array import array
from bisect import bisect_right, insort
from itertools import compress
from operator import gt

from sporadic.core import jobline, plan
from companion.simulate.scenario import Fleet, local_time, true_time
from companion.simulate.logs import LogModel, Raises, MISS_C, OK_C
from companion.simulate.verify import Verify
from companion.simulate.report import Report
from companion.simulate.meetings import Meetings, VISIT as _VISIT, CONTACT as _CONTACT, MESH as _MESH

WAIT, IDLE, RUN, MISS, ABORT, DECIDE_MAX = plan.WAIT, plan.IDLE, plan.RUN, plan.MISS, plan.ABORT, plan.DECIDE_MAX
ERR_C = 1   # the outcome code of an `err` (logs.py's rank order)
NEVER = float('inf')     # a host's next wake when it has no job left


class Sim(Fleet, LogModel, Verify, Report, Meetings):
    progress = None     # called with the share of the simulated time done (0..1), now and then
    # -- events --

    def _push(self, t, kind, a=0, b=0):
        if t < self.end:
            self.seq += 1
            heapq.heappush(self.ev, (t, self.seq, kind, a, b))

    def _apart(self, x, y, t):
        for split, heal, sec in self.parts:
            if split <= t < heal and sec[x] != sec[y]:
                return True
        return False

    # -- the run --

    def run(self):
        return self.assemble([self.run_part()])

    def run_part(self):
        """Run the scenario -> the part of a report (Report.part)."""
        # the run makes no reference cycles (what it drops, reference
        # counting frees): the cyclic collector would only walk its growing
        # record logs and vectors again and again, about 10 % of a run
        collect = gc.isenabled()
        gc.disable()
        try:
            self._run()
            return self.part()
        finally:
            if collect:
                gc.enable()

    def _run(self):
        P, H, J = self.P, self.H, self.J
        self.ev = []
        self.seq = 0
        self.init_logs()
        # a host's heap holds its jobs' next local times as ints, time << jshift | job
        # (the order of (time, job) pairs; ints compare faster than tuples)
        self.jshift = max(J, 1).bit_length()
        self.inst = {}          # (j, k) -> [[t, x], ...] runs, in order
        self.ran = [[] for _ in self.jobs]   # per job: the instances someone ran, sorted
        self.why = [{} for _ in self.jobs]   # per job: miss records by their reason
        self.outs = [{} for _ in self.jobs]  # rollouts: per job, k -> [(host, record, outcome code)]
        self.aborts = [{} for _ in self.jobs]   # rollouts: per job, k -> [(t, host)] that recorded an abort
        self.sizes = {}                      # _write_result's line sizes
        self.jrow = [(job, self.single[j], job.kind == 'one', self.runners[j] if self.single[j] else None)
                     for j, job in enumerate(self.jobs)]
        self._vrng = {}
        self._crng = {}
        self._mrng = {}
        # the world's figures (sync_events, syncs and their failures,
        # overhead_bytes) do not depend on the jobs; the others add up over
        # runs of disjoint sets of the jobs (Report.assemble)
        self.stats = {'decisions': 0, 'job_wakes': 0, 'sync_events': 0, 'miss_records': 0,
                      'syncs': 0, 'sync_failed_down': 0, 'sync_failed_split': 0,
                      'sync_failed_random': 0, 'line_bytes': 0, 'overhead_bytes': 0, 'verified_syncs': 0}
        if self.verify:
            self.lit = [set(self.static) for _ in range(P)]
        for x, h in enumerate(self.hosts):
            h.mine = [None] * J
            h.known = [-1] * J
            h.learnt = [array('q') if single else None for single in self.single]
            h.hq = [(-1 << self.jshift) + j for j in range(J)]   # a sorted list is a heap
            h.floor = self.start
            h.wake = -1     # not yet looked at
        for li, v in enumerate(self.visits):
            for x in v['hosts']:
                rng = self._rng('visit', li, self.names[x])
                t = self.start + (rng.random() * v['interval'] if v['phase'] == 'random' else 0)
                self._push(self._grid(t), _VISIT, li, x)
        for li, c in enumerate(self.contacts):
            if c['rate'] > 0:
                for x in c['a']:
                    rng = self._rng('contact', li, self.names[x])
                    self._push(self._grid(self.start + rng.expovariate(c['rate'])), _CONTACT, li, x)
        for li, m in enumerate(self.meshes):
            self._push(self._grid(self.start + m['offset']), _MESH, li, 0)
        self.n_decisions = self.n_jobwakes = self.n_miss = 0
        progress = self.progress
        span = float(self.end - self.start)
        ev = self.ev
        pop = heapq.heappop
        events = 0
        while ev:
            t, _, kind, a, b = pop(ev)
            events += 1
            if progress is not None and not events & 255:
                progress((t - self.start) / span)
            if kind == _VISIT:
                self._visit(a, b, t)
            elif kind == _CONTACT:
                self._contact(a, b, t)
            else:
                self._mesh(a, t)
        for x in range(H):
            if self.hosts[x].wake < self.end:
                self._advance(x, self.end)
        self._all_knew()     # (j, k) -> [hosts that know it done, time all knew]
        st = self.stats
        st['sync_events'] = events
        st['decisions'] = self.n_decisions
        st['job_wakes'] = self.n_jobwakes
        st['miss_records'] = self.n_miss

    # -- hosts --

    def _advance(self, x, s):
        """Host x's wakes before true time s: its decisions about every job
        due at them, in order. What a host decides depends on its clock and
        its file, and both change only at its syncs (a visit sets the clock
        after the sync), so its decisions between two syncs need nothing of
        the rest of the fleet and are taken here, job after job, before each
        of its syncs (at s: the sync comes first, as on a board that syncs
        before it wakes) and at the end. A job is due at the first true time
        on the grid at which the clock reads its next local time, no earlier
        than the host's last wake or clock setting, and if the host is down
        then, when it is next up. The host's first wake from s on is kept
        (h.wake) until its clock is set: a sync before it finds nothing to do."""
        h = self.hosts[x]
        hq = h.hq
        sh = self.jshift
        jmask = (1 << sh) - 1
        d = h.drift
        ts = h.ts
        lo = h.floor
        outage = h.up.outage
        down = until = -1     # the outage at or after the last wake looked at
        grid = self._grid if self.res > 1 else None
        decide = self._decide
        replace = heapq.heapreplace
        if self.sun:   # sunrise/sunset jobs planned at the waking host's position, as its board does
            for job in self.jobs:
                if job.cal is not None:
                    job.cal.place(h.pos)
        n = 0
        while hq:
            e = hq[0]
            w = true_time(d, ts, e >> sh)
            if grid is not None:
                w = grid(w)
            if w < lo:
                w = lo
            while True:     # down at w: when it is next up
                if w >= until:
                    down, until = outage(w)
                if w < down:
                    break
                w = self._grid(until)
            if w >= s:
                h.wake = w
                break
            n += 1
            nxt = decide(x, e & jmask, local_time(d, ts, w), w)
            if nxt is None:
                heapq.heappop(hq)
            else:
                replace(hq, nxt)
            lo = w
        else:
            h.wake = NEVER
        h.floor = lo
        self.n_jobwakes += n

    def _rank(self, j, x):
        """plan.rank of host x for job j among the fleet's hosts, from one
        sorting of plan.score per job (rank = hosts scoring above)."""
        ranks = self.ranks.get(j)
        if ranks is None:
            jid = self.jobs[j].id
            order = sorted(range(self.H), key=lambda y: plan.score(jid, self.hosts[y].name), reverse=True)
            ranks = self.ranks[j] = [0] * self.H
            for r, y in enumerate(order):
                ranks[y] = r
        return ranks[x]

    def _decide(self, x, j, now, t):
        """Host x's decisions about job j at its clock's `now` -> its entry in
        the host's heap, (time << jshift) + j, or None: nothing ever again."""
        h = self.hosts[x]
        job, single, one, runs = self.jrow[j]
        rnk = self._rank(j, x) if one else None
        wv = self.wave[j]
        if wv is not None:   # a staged rollout: the host's wave, what it heard (_heard)
            rnk = wv[x]
        fails = self.failing[j]
        mine = h.mine[j]
        name = h.name
        rnd = h.rnd
        decide = plan.decide
        verify = self.verify
        rtop = self.rtop
        n = 0
        while n < DECIDE_MAX:
            n += 1
            if runs:
                # _done is -1 below newest - 1: skip the call when nobody ran that far
                kn = plan.newest(job, now)
                dk = self._done(x, j, kn) if rtop[j] >= kn - 1 or job.cal is not None else -1
            else:
                dk = -1
            heard = self._heard(x, j, plan.newest(job, now)) if wv is not None and rnk else None
            act, k, at, att = decide(job, name, now, mine, dk, rnk, rnd, None, False, heard)
            if verify:
                self._check_decide(x, j, now, rnk, (act, k, at, att))
            if act == WAIT:
                nxt = (at << self.jshift) + j
                break
            if act == IDLE:
                nxt = None
                break
            if act == RUN:
                out = 'err' if fails else 'ok'
                i = self._write_result(x, j, k, now, ERR_C if fails else OK_C, out, att, '')
                mine = (k, out, att)
                if wv is not None:
                    o = self.outs[j].get(k)
                    if o is None:
                        o = self.outs[j][k] = []
                    o.append((x, i, ERR_C if fails else OK_C))
                r = self.inst.get((j, k))
                if r is None:
                    self.inst[(j, k)] = [(t, x)]
                    ks = self.ran[j]
                    if ks and ks[-1] > k:
                        insort(ks, k)
                    else:
                        ks.append(k)
                else:
                    r.append((t, x))
                if single:
                    r = runs.get(k)
                    if r is None:
                        runs[k] = [(x, i)]
                    else:
                        r.append((x, i))
                    if k > self.rtop[j]:
                        self.rtop[j] = k
                    self._learn(x, j, k, 2 * t + 1)
            elif act == ABORT:   # a miss saying what it heard (device/runtime.py)
                self._write_result(x, j, k, now, MISS_C, 'miss', 1, job.roll.abort_text(heard[1], heard[2]))
                self.aborts[j].setdefault(k, []).append((t, x))
                mine = (k, 'miss', 1)
                self.n_miss += 1
            elif act == MISS:
                why = plan.miss_reason(job, k, None, False, h.jumps, rnk, heard)
                self._write_result(x, j, k, now, MISS_C, 'miss', 1, why)
                wj = self.why[j]
                wj[why] = wj.get(why, 0) + 1
                mine = (k, 'miss', 1)
                self.n_miss += 1
            else:  # FAIL: never in the simulator (actions do not crash)
                self._write_result(x, j, k, now, 1, 'err', att, 'interrupted')
                mine = (k, 'err', att)
        else:
            # DECIDE_MAX decisions without a wait: the board takes the job up
            # again at its next pass, which is no later than this
            nxt = ((now + 1) << self.jshift) + j
        self.n_decisions += n
        h.mine[j] = mine
        return nxt

    def _heard(self, x, j, k):
        """A rollout's (k, ok, err) as host x's file shows it (groups.scan's
        tally): the other hosts whose outcome of instance k it holds (a
        host's records are a prefix of its log: known when index <= V)."""
        o = self.outs[j].get(k)
        if not o:
            return None
        V = self.V[x]
        ok = err = 0
        for y, i, c in o:
            if y != x and V[y] >= i:
                if c == OK_C:
                    ok += 1
                else:
                    err += 1
        return (k, ok, err)

    def _write_result(self, x, j, k, now, code, outcome, att, why):
        """Write host x's result line (jobline.Result) of job j, instance k.
        Only its size counts on the fast path: the line's fields but k and
        now are the same for a host, job, outcome, attempt and reason, and
        those two are written as decimal integers, so jobline.Result formats
        one line per such key and a size is that line's less its digits of
        k and now, plus this one's; --verify formats every line and checks
        the size."""
        key = (x, j, code, att, why)
        digits = len(str(k)) + len(str(now))
        base = self.sizes.get(key)
        if base is None or self.verify:
            line = jobline.Result(self.jobs[j].id, self.hosts[x].name, k, now, outcome, att, '-', why).line()
            if base is not None and base + digits != len(line) + 1:
                raise AssertionError('line size of %r: %d, memo %d' % (line, len(line) + 1, base + digits))
            self.sizes[key] = len(line) + 1 - digits
            return self._write(x, j, k, code, line)
        return self._write(x, j, k, code, None, base + digits)

    def _learn(self, x, j, k, code):
        """Host x knows instance k of single job j done, and so every one
        before it: at code = 2t + 1 when it ran k itself at t, 2t when a
        sync at t showed it (a run at t comes after the syncs at t)."""
        kn = self.hosts[x].known
        if k > kn[j]:
            kn[j] = k
            ev = self.hosts[x].learnt[j]
            ev.append(k)
            ev.append(code)

    def _all_knew(self):
        """(j, k) -> [hosts that knew instance k of single job j done after
        it first ran, the time the last of them learnt it or None while
        some did not], from each host's learning steps (_learn). A host that
        learnt a later instance before k first ran (a lagging clock ran k
        late) does not count for k."""
        know = {}
        H = self.H
        for j in range(self.J):
            ks = self.ran[j]
            if not self.single[j] or not ks:
                continue
            n = len(ks)
            first = [min(self.inst[(j, k)])[0] * 2 for k in ks]
            cnt = [0] * n
            last = [0] * n
            for h in self.hosts:
                ev = h.learnt[j]
                i = 0
                for e in range(0, len(ev), 2):
                    hi = bisect_right(ks, ev[e], i)
                    c = ev[e + 1]
                    for m in range(i, hi):
                        if c > first[m]:
                            cnt[m] += 1
                            if c > last[m]:
                                last[m] = c
                    i = hi
            for m in range(n):
                know[(j, ks[m])] = [cnt[m], last[m] // 2 if cnt[m] == H else None]
        self.know = know

    # -- syncs --

    def _sync(self, x, y, t):
        hosts = self.hosts
        if x < self.H and hosts[x].wake < t:
            self._advance(x, t)
        if y < self.H and hosts[y].wake < t:
            self._advance(y, t)
        V = self.V
        P = self.P
        # p: the party that lacks records of few origins (D), q the other;
        # a visit's companion lacks only the host's own records. q's markers
        # at U are p's (kept per party) but for D
        # a party whose last sync was with the other has since changed only
        # its own entry (its records), and the other's vector only grew
        partner = self.partner
        p, q = x, y
        if partner[y] == x:
            D = [y] if V[y][y] > V[x][y] else []
        elif partner[x] == y:
            p, q = y, x
            D = [x] if V[x][x] > V[y][x] else []
        else:
            D = list(compress(self.prange, map(gt, V[y], V[x])))
            if len(D) * 4 > P:
                D2 = list(compress(self.prange, map(gt, V[x], V[y])))
                if len(D2) < len(D):
                    p, q, D = y, x, D2
        # q, whose last sync was with p alone, may hold p's vector at a mark
        mk = self.mark[q]
        since = (p, mk[1]) if mk is not None and partner[q] == p and mk[0] is self.raises[p] else None
        partner[x] = y
        partner[y] = x
        Vp = V[p]
        Vq = V[q]
        U = Vp[:]       # max(Vp, Vq)
        pmu = self.PMc[p][:]
        B_all = self.B_all
        PM_all = self.PM_all
        bnew = self.Bsum[p]
        for h in D:
            U[h] = b = Vq[h]
            bnew += B_all[h][b] - B_all[h][Vp[h]]
            pmu[h] = PM_all[h][b]
        n = self._recv(q, Vq, U, (bnew, pmu), t, since)
        n += self._recv_few(p, Vp, U, D, bnew, t)
        if self.verify:
            self._check_sync([x, y], U, n)
        # p is raised at D, q anywhere: who holds q's vector at a mark no
        # longer can tell what it lacks from q's raises
        rp = self.raises[p]
        logs = self.logs
        for h in D:
            rp.raise_(h, Vp[h], U[h], logs[h])
        self.raises[q] = Raises()
        self.mark[q] = (rp, rp.ver)
        self.mark[p] = None
        V[p] = U
        V[q] = U[:]
        self.vgen[p] += 1
        self.vgen[q] += 1
        self.stats['syncs'] += 1
        self.stats['line_bytes'] += n
        self.stats['overhead_bytes'] += self.overhead
