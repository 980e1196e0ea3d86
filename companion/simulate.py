# companion simulate: a discrete-event fleet simulator on the real core
# (docs/simulate.md). Every decision is plan.decide, every record is
# jobline.Result(...).line(), every rank is plan.score, every `any` draw is
# plan.hash_rnd; what a host knows is its copy of the job-line file under
# merge (held as a version vector over the parties' append-only record
# logs, which is exactly the compacted file: --verify keeps the literal line
# sets too and checks every sync against merging.merge).
import bisect
import copy
import heapq
import json
import math
import random
import re
import sys
from array import array
from fnmatch import fnmatchcase
from itertools import compress, repeat
from operator import getitem, gt

from sporadic.core import jobline, merge, plan
from sporadic.desktop import merging
from sporadic.core.timeutil import parse_time, parse_duration
from sporadic.core.timefmt import format_time, format_duration

try:
    from companion.errors import UserError
except ImportError:  # pragma: no cover
    class UserError(Exception):
        pass

SYNC_OVERHEAD = 256     # bytes a sync costs beyond the lines moved (hello, summaries)
INF = 2 ** 31 - 1
MISS_C, OK_C, RUN_C = 2, 3, 0   # outcome codes (rank order of jobline outcomes)
_SYNC, _WAKE = 0, 1     # event priorities at one instant: syncs before wakes
_VISIT, _CONTACT, _MESH, _HOSTWAKE = 'v', 'c', 'm', 'w'


# ---------------------------------------------------------------- scenario --

def _dur(v, what, zero=False):
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if v < 0 or (v == 0 and not zero):
            raise UserError('%s: duration must be positive' % what)
        return int(v)
    s = str(v).strip()
    if zero and s in ('0', '0s', '0m', '0h', '0d'):
        return 0
    try:
        return parse_duration(s)
    except ValueError as e:
        raise UserError('%s: %s' % (what, e))


def _time(v, what):
    if hasattr(v, 'year'):  # a TOML date-time
        v = '%04d-%02d-%02dT%02d:%02d:%02dZ' % (v.year, v.month, v.day, getattr(v, 'hour', 0),
                                                getattr(v, 'minute', 0), getattr(v, 'second', 0))
    try:
        return parse_time(str(v))
    except ValueError as e:
        raise UserError('%s: %s' % (what, e))


def _rate(v, what):
    """'4/d', '1/w', '3/12h', or a number per day -> events per second."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        n, per = float(v), 86400
    else:
        s = str(v).strip()
        n, _, unit = s.partition('/')
        if not unit:
            raise UserError('%s: rate like 4/d or 1/w, got %r' % (what, s))
        try:
            n = float(n)
        except ValueError:
            raise UserError('%s: bad rate %r' % (what, s))
        per = _dur(unit if unit[0].isdigit() else '1' + unit, what)
    if n < 0:
        raise UserError('%s: negative rate' % what)
    return n / per


def _prob(v, what):
    try:
        p = float(v)
    except (TypeError, ValueError):
        raise UserError('%s: probability expected, got %r' % (what, v))
    if not 0 <= p <= 1:
        raise UserError('%s: probability out of [0, 1]' % what)
    return p


_RANGE = re.compile(r'\{(\d+)\.\.(\d+)\}')


def expand(pattern):
    """'pump-{1..3}' -> ['pump-1', 'pump-2', 'pump-3']; '{01..10}' pads."""
    m = _RANGE.search(pattern)
    if not m:
        return [pattern]
    a, b = m.group(1), m.group(2)
    width = len(a) if a.startswith('0') and len(a) > 1 else 0
    lo, hi = int(a), int(b)
    step = 1 if hi >= lo else -1
    out = []
    for n in range(lo, hi + step, step):
        out.extend(expand(pattern[:m.start()] + str(n).zfill(width) + pattern[m.end():]))
    return out


def _patterns(v):
    if v is None:
        return ['*']
    if isinstance(v, str):
        v = [v]
    out = []
    for p in v:
        out.extend(expand(str(p)))
    return out


def select(v, names):
    """Names matching a selector (a glob, a {a..b} pattern, or a list), in fleet order."""
    pats = _patterns(v)
    exact = set(p for p in pats if not any(c in p for c in '*?['))
    globs = [p for p in pats if any(c in p for c in '*?[')]
    return [n for n in names if n in exact or any(fnmatchcase(n, g) for g in globs)]


class _Always:
    kind = 'always'

    def up(self, t):
        return True

    def next_up(self, t):
        return t


class _Duty:
    kind = 'duty'

    def __init__(self, period, on, phase):
        self.period = period
        self.on = int(round(on * period))
        self.phase = phase

    def up(self, t):
        return (t - self.phase) % self.period < self.on

    def next_up(self, t):
        r = (t - self.phase) % self.period
        return t if r < self.on else t + self.period - r


class _Outages:
    kind = 'outages'

    def __init__(self, rate, mean, rng, start):
        self.rate = rate
        self.mean = mean
        self.rng = rng
        self.iv = []              # (down_from, down_until), generated lazily
        self.t = start

    def _cover(self, t):
        while self.t <= t:
            s = self.t + (self.rng.expovariate(self.rate) if self.rate > 0 else 10 ** 12)
            e = s + max(1.0, self.rng.expovariate(1.0 / self.mean))
            s, e = int(s), int(math.ceil(e))
            self.iv.append((s, e))
            self.t = e

    def _find(self, t):
        self._cover(t)
        i = bisect.bisect_right(self.iv, (t, INF)) - 1
        if i >= 0 and self.iv[i][0] <= t < self.iv[i][1]:
            return self.iv[i]
        return None

    def up(self, t):
        return self._find(t) is None

    def next_up(self, t):
        iv = self._find(t)
        return t if iv is None else iv[1]


def _uptime(spec, rng, start, what):
    f = str(spec or 'always').split()
    if f[0] == 'always' and len(f) == 1:
        return lambda: _Always()
    if f[0] == 'duty' and len(f) == 3:
        period = _dur(f[1], what)
        on = _prob(f[2], what)
        return lambda: _Duty(period, on, start + int(rng.random() * period))
    if f[0] == 'outages' and len(f) == 3:
        rate = _rate(f[1], what)
        mean = _dur(f[2], what)
        return lambda: _Outages(rate, mean, rng, start)
    raise UserError('%s: uptime is "always", "duty PERIOD FRACTION" or "outages RATE MEAN", got %r'
                    % (what, spec))


def load(path):
    import tomllib
    try:
        with open(path, 'rb') as f:
            return tomllib.load(f)
    except OSError as e:
        raise UserError('%s: %s' % (path, e.strerror or e))
    except tomllib.TOMLDecodeError as e:
        raise UserError('%s: %s' % (path, e))


# --------------------------------------------------------------- the world --

class _Host:
    __slots__ = ('name', 'up', 'drift', 'ts', 'mine', 'hq', 'ver', 'rnd', 'known')


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


class Sim:
    def __init__(self, scn, seed=None, verify=False):
        self.scn = scn
        if seed is None:
            seed = scn.get('seed', 1)
        self.seed = seed
        self.verify = verify
        self.start = _time(scn.get('start', ''), 'start')
        self.end = _time(scn.get('end', ''), 'end')
        if self.end <= self.start:
            raise UserError('end must be after start')
        self.res = _dur(scn.get('resolution', '1s'), 'resolution')
        self.overhead = int(scn.get('sync_overhead', SYNC_OVERHEAD))
        self._load_hosts()
        self._load_jobs()
        self._load_links()
        self._load_partitions()

    # -- loading --

    def _rng(self, *key):
        return random.Random('%s/%s' % (self.seed, '/'.join(str(k) for k in key)))

    def _load_hosts(self):
        groups = self.scn.get('hosts')
        if not groups:
            raise UserError('scenario has no [[hosts]]')
        names = []
        specs = []
        for gi, g in enumerate(groups):
            ids = _patterns(g.get('ids'))
            for n in ids:
                try:
                    jobline.check_host(n)
                except jobline.ParseError as e:
                    raise UserError('hosts[%d]: %s' % (gi, e))
                if n in names:
                    raise UserError('hosts[%d]: host %s given twice' % (gi, n))
                names.append(n)
                specs.append(g)
        self.H = len(names)
        comps = []
        for c in self.scn.get('companions', []):
            comps.append(str(c))
        for v in self.scn.get('visit', []):
            c = str(v.get('companion', 'companion'))
            if c not in comps:
                comps.append(c)
        for c in comps:
            if c in names:
                raise UserError('companion %s is also a host' % c)
        self.names = names + comps
        self.P = len(self.names)
        self.idx = {n: i for i, n in enumerate(self.names)}
        self.hosts = []
        for i, n in enumerate(names):
            g = specs[i]
            h = _Host()
            h.name = n
            h.up = _uptime(g.get('uptime'), self._rng('up', n), self.start, 'hosts ' + n)()
            d = g.get('drift_ppm', 0)
            if isinstance(d, list):
                lo, hi = float(d[0]), float(d[1])
            else:
                lo, hi = -float(d), float(d)
            h.drift = 0.0 if lo == hi == 0 else self._rng('drift', n).uniform(lo, hi) * 1e-6
            h.ts = self.start
            h.rnd = plan.hash_rnd(str(self.seed) + n)
            h.ver = 0
            self.hosts.append(h)

    def _load_jobs(self):
        text = self.scn.get('jobs', '')
        jobs = []
        lines = []
        for n, raw in enumerate(str(text).splitlines(), 1):
            try:
                r = jobline.parse(raw)
            except jobline.ParseError as e:
                raise UserError('jobs:%d: %s' % (n, e))
            if r is None:
                continue
            if not isinstance(r, jobline.Job):
                raise UserError('jobs:%d: only job lines belong in a scenario' % n)
            if r.cal is not None:
                # its report counts instances as a consecutive range of ids
                raise UserError('jobs:%d: calendar jobs (at=) are not simulated yet' % n)
            if any(j.id == r.id for j in jobs):
                raise UserError('jobs:%d: the same job twice (id %s)' % (n, r.id))
            jobs.append(r)
            lines.append(r.line())
        if not jobs:
            raise UserError('scenario has no jobs')
        self.jobs = jobs
        self.J = len(jobs)
        self.single = [j.kind in ('any', 'one') for j in jobs]
        self.static = merging.merge(lines + ['.h ' + h.name for h in self.hosts])
        self.static_bytes = sum(len(s) + 1 for s in self.static)
        self.scores = {}
        self.ranks = {}

    def _load_links(self):
        self.visits = []
        for i, v in enumerate(self.scn.get('visit', [])):
            w = 'visit[%d]' % i
            self.visits.append({
                'companion': self.idx[str(v.get('companion', 'companion'))],
                'hosts': [self.idx[n] for n in select(v.get('hosts'), self.names[:self.H])],
                'interval': _dur(v.get('interval'), w + '.interval'),
                'jitter': _dur(v.get('jitter', 0), w + '.jitter', zero=True),
                'fail': _prob(v.get('fail', 0), w + '.fail'),
                'clock': bool(v.get('clock', True)),
                'phase': str(v.get('phase', 'random')),
            })
        self.contacts = []
        for i, c in enumerate(self.scn.get('contact', [])):
            w = 'contact[%d]' % i
            self.contacts.append({
                'a': [self.idx[n] for n in select(c.get('a'), self.names)],
                'b': [self.idx[n] for n in select(c.get('b', c.get('a')), self.names)],
                'rate': _rate(c.get('rate'), w + '.rate'),
                'fail': _prob(c.get('fail', 0), w + '.fail'),
            })
        self.meshes = []
        for i, m in enumerate(self.scn.get('mesh', [])):
            w = 'mesh[%d]' % i
            self.meshes.append({
                'parties': [self.idx[n] for n in select(m.get('parties'), self.names)],
                'interval': _dur(m.get('interval'), w + '.interval'),
                'offset': _dur(m.get('offset', 0), w + '.offset', zero=True),
                'jitter': _dur(m.get('jitter', 0), w + '.jitter', zero=True),
                'fail': _prob(m.get('fail', 0), w + '.fail'),
            })

    def _load_partitions(self):
        self.parts = []
        for i, p in enumerate(self.scn.get('partition', [])):
            w = 'partition[%d]' % i
            secs = p.get('sections')
            if not secs or len(secs) < 2:
                raise UserError(w + ': needs at least two sections')
            sec = [len(secs)] * self.P      # unlisted parties: a section of their own
            for si, s in enumerate(secs):
                for n in select(s, self.names):
                    sec[self.idx[n]] = si
            split = _time(p.get('split_at'), w + '.split_at')
            heal = _time(p['heal_at'], w + '.heal_at') if 'heal_at' in p else INF * 4
            self.parts.append((split, heal, sec))

    # -- clocks --

    def local(self, x, t):
        h = self.hosts[x]
        if not h.drift:
            return t
        return t + int(math.floor(h.drift * (t - h.ts) + 0.5))

    def true(self, x, lt):
        """The first true time at which host x's clock reads >= lt."""
        h = self.hosts[x]
        if not h.drift:
            return lt
        t = int(math.ceil(h.ts + (lt - h.ts) / (1.0 + h.drift)))
        while self.local(x, t) < lt:
            t += 1
        while self.local(x, t - 1) >= lt:
            t -= 1
        return t

    def _grid(self, t):
        """Round a time up to the resolution grid."""
        r = self.res
        t = int(math.ceil(t))
        if r > 1:
            t = self.start + -(-(t - self.start) // r) * r
        return t

    # -- events --

    def _push(self, t, prio, kind, a=0, b=0):
        if t < self.end:
            self.seq += 1
            heapq.heappush(self.ev, (t, prio, self.seq, kind, a, b))

    def _schedule_host(self, x, now_t):
        h = self.hosts[x]
        h.ver += 1
        if h.hq:
            t = max(self._grid(self.true(x, h.hq[0][0])), now_t)
            self._push(t, _WAKE, _HOSTWAKE, x, h.ver)

    def _apart(self, x, y, t):
        for split, heal, sec in self.parts:
            if split <= t < heal and sec[x] != sec[y]:
                return True
        return False

    # -- the run --

    def run(self):
        P, H, J = self.P, self.H, self.J
        self.ev = []
        self.seq = 0
        self.logs = [_Log(self.verify) for _ in range(P)]
        self.B_all = [lg.B for lg in self.logs]
        self.PM_all = [lg.PM for lg in self.logs]
        self.SR_all = [lg.SR for lg in self.logs]
        self.prange = range(P)
        self.V = [[0] * P for _ in range(P)]
        self.supmemo = [[-1, None] for _ in range(P)]   # origin -> [b, {a: bytes superseded in (a, b]}]
        self.SRc = [[0] * P for _ in range(self.H)]   # per host: SR of each origin at its V
        self.Bsum = [0] * P     # bytes of records each party knows (sum over origins of B[V])
        self.inst = {}          # (j, k) -> [[t, x], ...] runs, in order
        self.know = {}          # (j, k) -> [hosts that know it done, time all knew]
        self.kfirst = [max(0, plan.newest(j, self.start)) for j in self.jobs]
        self.runners = [{} for _ in range(J)]   # single jobs: k -> [(host, record), ...]
        self.rtop = [-1] * J
        self._vrng = {}
        self._crng = {}
        self._mrng = {}
        self.stats = {'decisions': 0, 'wakes': 0, 'events': 0, 'miss_records': 0,
                      'syncs': 0, 'sync_failed_down': 0, 'sync_failed_split': 0,
                      'sync_failed_random': 0, 'bytes': 0, 'verified_syncs': 0}
        if self.verify:
            self.lit = [set(self.static) for _ in range(P)]
        for x, h in enumerate(self.hosts):
            h.mine = [None] * J
            h.known = [-1] * J
            h.hq = [(-1, j) for j in range(J)]
            self._schedule_host(x, self.start)
        for li, v in enumerate(self.visits):
            for x in v['hosts']:
                rng = self._rng('visit', li, self.names[x])
                t = self.start + (rng.random() * v['interval'] if v['phase'] == 'random' else 0)
                self._push(self._grid(t), _SYNC, _VISIT, li, x)
        for li, c in enumerate(self.contacts):
            if c['rate'] > 0:
                for x in c['a']:
                    rng = self._rng('contact', li, self.names[x])
                    self._push(self._grid(self.start + rng.expovariate(c['rate'])), _SYNC, _CONTACT, li, x)
        for li, m in enumerate(self.meshes):
            self._push(self._grid(self.start + m['offset']), _SYNC, _MESH, li, 0)
        st = self.stats
        ev = self.ev
        pop = heapq.heappop
        while ev:
            t, _, _, kind, a, b = pop(ev)
            st['events'] += 1
            if kind == _HOSTWAKE:
                if self.hosts[a].ver == b:
                    self._wake(a, t)
            elif kind == _VISIT:
                self._visit(a, b, t)
            elif kind == _CONTACT:
                self._contact(a, b, t)
            else:
                self._mesh(a, t)
        return self.report()

    # -- hosts --

    def _wake(self, x, t):
        h = self.hosts[x]
        if not h.up.up(t):
            h.ver += 1
            self._push(self._grid(h.up.next_up(t)), _WAKE, _HOSTWAKE, x, h.ver)
            return
        self.stats['wakes'] += 1
        now = self.local(x, t) if h.drift else t
        hq = h.hq
        while hq and hq[0][0] <= now:
            j = heapq.heappop(hq)[1]
            self._decide(x, j, now, t)
        self._schedule_host(x, t + 1)

    def _rank(self, j, x):
        key = (j, x)
        r = self.ranks.get(key)
        if r is None:
            sc = self.scores.get(j)
            jid = self.jobs[j].id
            if sc is None:
                # plan.rank counts the known hosts scoring above this one;
                # one sorted list of plan.score answers that for every host
                sc = self.scores[j] = sorted(plan.score(jid, h.name) for h in self.hosts)
            r = self.ranks[key] = len(sc) - bisect.bisect_right(sc, plan.score(jid, self.hosts[x].name))
        return r

    def _done(self, x, j, k):
        """done_k as the host's file shows it (the highest instance another
        host's newest result started or ran), exact for the comparisons
        plan.decide makes (>= k, >= k-1); -1 when below k-1."""
        runs = self.runners[j]
        if not runs:
            return -1
        V = self.V[x]
        top = self.rtop[j]
        kk = top
        while kk >= k - 1:
            for h, s in runs.get(kk, ()):
                if h != x and V[h] >= s:
                    lg = self.logs[h]
                    i = s
                    lim = V[h]
                    while lg.NXT[i] <= lim:
                        i = lg.NXT[i]
                    if lg.RO[i] != MISS_C:
                        return lg.RK[i]
            kk -= 1
        return -1

    def _decide(self, x, j, now, t):
        h = self.hosts[x]
        job = self.jobs[j]
        single = self.single[j]
        rnk = self._rank(j, x) if job.kind == 'one' else None
        mine = h.mine[j]
        st = self.stats
        for _ in range(8):
            dk = self._done(x, j, plan.newest(job, now)) if single else -1
            st['decisions'] += 1
            act, k, at, att = plan.decide(job, h.name, now, mine, dk, rnk, h.rnd)
            if self.verify:
                self._check_decide(x, j, now, rnk, (act, k, at, att))
            if act == plan.WAIT:
                heapq.heappush(h.hq, (at, j))
                break
            if act == plan.IDLE:
                break
            if act == plan.RUN:
                if self.verify:
                    self.lit[x].add(jobline.Result(job.id, h.name, k, now, 'run', att).line())
                line = jobline.Result(job.id, h.name, k, now, 'ok', att).line()
                self._write(x, j, k, OK_C, line)
                mine = (k, 'ok', att)
                self.inst.setdefault((j, k), []).append((t, x))
                if single:
                    self.runners[j].setdefault(k, []).append((x, len(self.logs[x].RJ) - 1))
                    if k > self.rtop[j]:
                        self.rtop[j] = k
                    self._learn(x, j, k, t)
            elif act == plan.MISS:
                line = jobline.Result(job.id, h.name, k, now, 'miss', 1, '-', 'asleep').line()
                self._write(x, j, k, MISS_C, line)
                mine = (k, 'miss', 1)
                st['miss_records'] += 1
            else:  # FAIL: never in the simulator (actions do not crash)
                line = jobline.Result(job.id, h.name, k, now, 'err', att, '-', 'interrupted').line()
                self._write(x, j, k, 1, line)
                mine = (k, 'err', att)
        h.mine[j] = mine

    def _write(self, x, j, k, code, line):
        lg = self.logs[x]
        i = len(lg.RJ)
        size = len(line) + 1
        p = lg.last.get(j, 0)
        lg.RJ.append(j)
        lg.RK.append(k)
        lg.RO.append(code)
        lg.RZ.append(size)
        lg.NXT.append(INF)
        lg.B.append(lg.B[-1] + size)
        pm = lg.PM[-1]
        lg.PM.append(p if p > pm else pm)
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

    def _learn(self, x, j, k, t):
        kn = self.hosts[x].known
        old = kn[j]
        if k <= old:
            return
        kn[j] = k
        know = self.know
        for kk in range(max(old + 1, self.kfirst[j]), k + 1):
            if (j, kk) in self.inst:
                e = know.get((j, kk))
                if e is None:
                    e = know[(j, kk)] = [0, None]
                e[0] += 1
                if e[0] == self.H:
                    e[1] = t

    # -- syncs --

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
        # an origin with a record superseded inside the range sends only the newest
        memo = self.supmemo
        for h in compress(self.prange, map(gt, pmu, old)):
            a = old[h]
            b = new[h]
            m = memo[h]
            if m[0] != b:
                m = memo[h] = [b, {}]
            sup = m[1].get(a)
            if sup is None:
                lg = logs[h]
                sup = m[1][a] = sum(compress(lg.RZ[a + 1:b + 1], map(gt, repeat(b + 1), lg.NXT[a + 1:b + 1])))
            tot -= sup
        if x < self.H:
            src = self.SRc[x]
            self.SRc[x] = sru[:]
            kn = self.hosts[x].known
            for h in compress(self.prange, map(gt, sru, src)):
                b = new[h]
                lg = logs[h]
                SR = lg.SR
                RJ = lg.RJ
                RK = lg.RK
                NXT = lg.NXT
                for i in lg.SRpos[SR[old[h]]:SR[b]]:
                    k = RK[i]
                    if k > kn[RJ[i]] and NXT[i] > b:
                        self._learn(x, RJ[i], k, t)
        return tot

    def _sync(self, x, y, t):
        Vx = self.V[x]
        Vy = self.V[y]
        U = list(map(max, Vx, Vy))
        agg = self._union(U)
        n = self._recv(x, Vx, U, agg, t) + self._recv(y, Vy, U, agg, t)
        if self.verify:
            self._check_sync([x, y], U, n)
        self.V[x] = U
        self.V[y] = U[:]
        self.stats['syncs'] += 1
        self.stats['bytes'] += n + self.overhead

    def _can(self, x, y, t, fail, rng):
        for p in (x, y):
            if p < self.H and not self.hosts[p].up.up(t):
                self.stats['sync_failed_down'] += 1
                return False
        if self._apart(x, y, t):
            self.stats['sync_failed_split'] += 1
            return False
        if fail and rng.random() < fail:
            self.stats['sync_failed_random'] += 1
            return False
        return True

    def _visit(self, li, x, t):
        v = self.visits[li]
        rng = self._vrng.get((li, x))
        if rng is None:
            rng = self._vrng[(li, x)] = self._rng('visit', li, self.names[x])
            rng.random()  # the phase draw
        c = v['companion']
        if self._can(c, x, t, v['fail'], rng):
            self._sync(c, x, t)
            if v['clock'] and self.hosts[x].drift:
                h = self.hosts[x]
                h.ts = t          # the companion sets the board's clock
                self._schedule_host(x, t)
        nt = t + v['interval']
        if v['jitter']:
            nt += rng.uniform(-v['jitter'], v['jitter'])
        self._push(max(self._grid(nt), t + self.res), _SYNC, _VISIT, li, x)

    def _contact(self, li, x, t):
        c = self.contacts[li]
        rng = self._crng.get((li, x))
        if rng is None:
            rng = self._crng[(li, x)] = self._rng('contact', li, self.names[x])
            rng.expovariate(c['rate'])  # the first gap
        b = c['b']
        y = None
        for _ in range(8):
            y = b[int(rng.random() * len(b))]
            if y != x:
                break
        if y is not None and y != x and self._can(x, y, t, c['fail'], rng):
            self._sync(x, y, t)
        self._push(max(self._grid(t + rng.expovariate(c['rate'])), t + self.res), _SYNC, _CONTACT, li, x)

    def _mesh(self, li, t):
        m = self.meshes[li]
        rng = self._mrng.get(li)
        if rng is None:
            rng = self._mrng[li] = self._rng('mesh', li)
        groups = {}
        for x in m['parties']:
            if x < self.H and not self.hosts[x].up.up(t):
                self.stats['sync_failed_down'] += 1
                continue
            if m['fail'] and rng.random() < m['fail']:
                self.stats['sync_failed_random'] += 1
                continue
            key = tuple(sec[x] for split, heal, sec in self.parts if split <= t < heal)
            groups.setdefault(key, []).append(x)
        if len(groups) > 1:
            self.stats['sync_failed_split'] += len(groups) - 1   # rounds cut by a partition
        for key, g in groups.items():
            if len(g) < 2:
                continue
            U = list(map(max, *[self.V[x] for x in g]))
            agg = self._union(U)
            n = 0
            for x in g:
                n += self._recv(x, self.V[x], U, agg, t)
            if self.verify:
                self._check_sync(g, U, n)
            for x in g:
                self.V[x] = U[:]
            self.stats['syncs'] += 1
            self.stats['bytes'] += n + self.overhead * len(g)
        nt = t + m['interval']
        if m['jitter']:
            nt += rng.uniform(-m['jitter'], m['jitter'])
        self._push(max(self._grid(nt), t + self.res), _SYNC, _MESH, li, 0)

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

    # -- report --

    def _window(self, job):
        """Instances whose validity window closed inside [start, end)."""
        if job.every:
            lo = max(0, -(-(self.start - job.within - job.t0 + 1) // job.every))
            hi = (self.end - job.within - job.t0) // job.every
        else:
            lo = 0 if job.t0 + job.within > self.start else 1
            hi = 0 if job.t0 + job.within <= self.end else -1
        return lo, hi

    def _cross(self, x, t1, y, t2):
        for split, heal, sec in self.parts:
            if split <= t2 and heal > t1 and sec[x] != sec[y]:
                return True
        return False

    def report(self):
        jobs_out = []
        kinds = {}
        dup_list = []
        for j, job in enumerate(self.jobs):
            lo, hi = self._window(job)
            n_inst = max(0, hi - lo + 1)
            single = self.single[j]
            delays = []
            runs = dup_runs = dup_inst = cross = missed = ran_inst = 0
            spread = []
            unknown = 0
            if single:
                eligible = self.H
                for k in range(lo, hi + 1):
                    rs = self.inst.get((j, k))
                    if not rs:
                        missed += 1
                        continue
                    ran_inst += 1
                    runs += len(rs)
                    d = plan.due(job, k)
                    delays.append(rs[0][0] - d)
                    if len(rs) > 1:
                        dup_inst += 1
                        dup_runs += len(rs) - 1
                        t1, x1 = rs[0]
                        cr = [self._cross(x1, t1, x2, t2) for t2, x2 in rs[1:]]
                        cross += sum(cr)
                        if len(dup_list) < 1000:
                            dup_list.append({'job': job.id, 'instance': '%s.%d' % (job.id, k),
                                             'due': format_time(d),
                                             'runs': [{'host': self.names[xx], 'at': format_time(tt)} for tt, xx in rs],
                                             'cross_section': any(cr)})
                    e = self.know.get((j, k))
                    if e is not None and e[1] is not None:
                        spread.append(e[1] - rs[0][0])
                    else:
                        unknown += 1
            else:
                elig = [x for x in range(self.H) if plan.eligible(job, self.names[x])]
                eligible = len(elig)
                for k in range(lo, hi + 1):
                    rs = self.inst.get((j, k), ())
                    d = plan.due(job, k)
                    who = set()
                    for tt, xx in rs:
                        if xx in who:
                            dup_runs += 1
                        else:
                            who.add(xx)
                        delays.append(tt - d)
                    runs += len(rs)
                    missed += eligible - len(who)
                    if len(who) < eligible:
                        pass
                    else:
                        ran_inst += 1
            row = {'id': job.id, 'type': job.kind, 'line': job.text(), 'eligible_hosts': eligible,
                   'instances': n_inst, 'runs': runs, 'duplicate_runs': dup_runs,
                   'duplicate_instances': dup_inst, 'cross_section_duplicates': cross,
                   'missed': missed, 'expected_runs': n_inst * (1 if single else eligible),
                   'delay': _dist(delays)}
            if single:
                row['instances_run'] = ran_inst
                row['all_knew'] = _dist(spread)
                row['all_knew']['never'] = unknown
            jobs_out.append(row)
            agg = kinds.setdefault(job.kind, {'jobs': 0, 'instances': 0, 'expected_runs': 0, 'runs': 0,
                                              'duplicate_runs': 0, 'duplicate_instances': 0,
                                              'cross_section_duplicates': 0, 'missed': 0, '_d': [], '_s': []})
            agg['jobs'] += 1
            for key in ('instances', 'expected_runs', 'runs', 'duplicate_runs', 'duplicate_instances',
                        'cross_section_duplicates', 'missed'):
                agg[key] += row[key]
            agg['_d'].extend(delays)
            agg['_s'].extend(spread)
        for agg in kinds.values():
            agg['delay'] = _dist(agg.pop('_d'))
            s = agg.pop('_s')
            if s:
                agg['all_knew'] = _dist(s)
        st = dict(self.stats)
        files = []
        for x in range(self.P):
            V = self.V[x]
            lines = len(self.static) + sum(map(getitem, [lg.D for lg in self.logs], V))
            by = self.static_bytes + sum(map(getitem, [lg.LB for lg in self.logs], V))
            files.append((lines, by))
        hf = files[:self.H]
        out = {
            'scenario': self.scn.get('name', ''),
            'seed': self.seed,
            'start': format_time(self.start), 'end': format_time(self.end),
            'hosts': self.H, 'companions': self.P - self.H,
            'jobs': jobs_out,
            'by_type': {k: kinds[k] for k in sorted(kinds)},
            'duplicates': dup_list,
            'sync': {'ok': st['syncs'], 'failed_down': st['sync_failed_down'],
                     'failed_split': st['sync_failed_split'], 'failed_random': st['sync_failed_random'],
                     'bytes': st['bytes'], 'overhead_per_party': self.overhead,
                     'bytes_per_sync': round(st['bytes'] / st['syncs'], 1) if st['syncs'] else 0},
            'file_at_end': {'host_lines_mean': round(sum(f[0] for f in hf) / len(hf), 1),
                            'host_lines_max': max(f[0] for f in hf),
                            'host_bytes_mean': round(sum(f[1] for f in hf) / len(hf), 1),
                            'host_bytes_max': max(f[1] for f in hf)},
            'counts': {'events': st['events'], 'wakes': st['wakes'], 'decisions': st['decisions'],
                       'miss_records': st['miss_records']},
            'analytic': self.analytic(jobs_out),
        }
        if self.P > self.H:
            out['file_at_end']['companion_lines'] = files[self.H][0]
            out['file_at_end']['companion_bytes'] = files[self.H][1]
        if self.verify:
            out['counts']['verified_syncs'] = st['verified_syncs']
        return out

    # -- the analytic check for `any` --

    def _analytic_ok(self):
        """Why the closed form does not apply, or None: N always-up hosts
        without drift, one mesh over all of them (no jitter, no failures),
        nothing else syncing, no partitions."""
        if self.visits or self.contacts or self.parts:
            return 'other sync links or partitions'
        if len(self.meshes) != 1:
            return 'needs exactly one [[mesh]]'
        m = self.meshes[0]
        if m['jitter'] or m['fail']:
            return 'mesh has jitter or failures'
        if sorted(x for x in m['parties'] if x < self.H) != list(range(self.H)):
            return 'mesh does not cover every host'
        for h in self.hosts:
            if h.up.kind != 'always' or h.drift:
                return 'hosts not always up or clocks drift'
        return None

    def _rounds(self):
        m = self.meshes[0]
        return m['interval'], self._grid(self.start + m['offset'])

    def analytic(self, rows):
        out = []
        for j, job in enumerate(self.jobs):
            if job.kind != 'any':
                continue
            why = self._analytic_ok()
            row = {'job': job.id}
            if why:
                row['applies'] = False
                row['why_not'] = why
                out.append(row)
                continue
            S, s0 = self._rounds()
            lo, hi = self._window(job)
            p_run = p_dup = e_runs = 0.0
            for k in range(lo, hi + 1):
                a, b, c = predict_any(self.H, job.threshold / jobline.P_ONE, job.tick, job.within,
                                      plan.due(job, k), S, s0)
                p_run += a
                p_dup += b
                e_runs += c
            r = rows[j]
            n = r['instances_run']
            pred = p_dup / p_run if p_run else 0.0
            meas = r['duplicate_instances'] / n if n else 0.0
            sigma = math.sqrt(pred * (1 - pred) / n) if n else 0.0
            row.update({'applies': True, 'hosts': self.H, 'p': job.arg, 'tick_s': job.tick,
                        'sync_s': S, 'instances': r['instances'], 'instances_run': n,
                        'predicted_p_run': _r(p_run / max(1, r['instances'])),
                        'measured_p_run': _r(n / max(1, r['instances'])),
                        'predicted_p_dup': _r(pred), 'measured_p_dup': _r(meas), 'sigma': _r(sigma),
                        'z': _r((meas - pred) / sigma) if sigma else 0.0,
                        'predicted_runs_per_run_instance': _r(e_runs / p_run if p_run else 0.0),
                        'measured_runs_per_run_instance': _r(r['runs'] / n if n else 0.0)})
            out.append(row)
        return out


def predict_any(n, p, tick, within, due, S, s0):
    """An `any` instance due at `due` with n always-up hosts drawing with
    probability p per tick, all hosts merging at s0 + m*S (before the draws
    of that instant): -> (P(at least one run), P(two or more runs),
    E[runs]). Between two rounds hosts cannot learn of each other's runs, so
    each host that has not fired fires in the block with a = 1 - q^L (L
    ticks in the block), independently; the first block with a run ends the
    instance (docs/simulate.md)."""
    q = 1.0 - p
    end = due + within
    nt = -(-within // tick)           # ticks at due + i*tick < end
    # first round strictly after due; rounds split the ticks into blocks
    if due < s0:
        m = 0
    else:
        m = (due - s0) // S + 1
    blocks = []
    i = 0
    s = s0 + m * S
    while i < nt:
        # ticks with time < s belong to this block
        if s >= end:
            j = nt
        else:
            j = min(nt, -(-(s - due) // tick))
        if j > i:
            blocks.append(j - i)
        i = max(i, j)
        s += S
    reach = 1.0
    p_run = p_dup = e_runs = 0.0
    for L in blocks:
        a = 1.0 - q ** L
        none = (1.0 - a) ** n
        one = n * a * (1.0 - a) ** (n - 1)
        p_run += reach * (1.0 - none)
        p_dup += reach * (1.0 - none - one)
        e_runs += reach * n * a
        reach *= none
    return p_run, p_dup, e_runs


def _r(x):
    return float('%.6g' % x)


def _dist(xs):
    if not xs:
        return {'n': 0}
    s = sorted(xs)
    n = len(s)
    return {'n': n, 'mean_s': _r(sum(s) / n), 'p95_s': s[max(0, -(-95 * n // 100) - 1)], 'max_s': s[-1]}


def simulate(scn, seed=None, verify=False):
    return Sim(scn, seed, verify).run()


# -------------------------------------------------------------- the sweep --

def _setkey(scn, key, value):
    parts = key.split('.')
    obj = scn
    for i, p in enumerate(parts[:-1]):
        if isinstance(obj, list):
            if p.isdigit():
                obj = obj[int(p)]
                continue
            for o in obj:
                _setkey(o, '.'.join(parts[i:]), value)
            return
        if p not in obj:
            raise UserError('--sweep: no %r in the scenario' % '.'.join(parts[:i + 1]))
        obj = obj[p]
    last = parts[-1]
    if isinstance(obj, list):
        for o in obj:
            o[last] = value
    else:
        obj[last] = value


def sweep_values(spec, steps):
    if ',' in spec:
        return [_num_or(s.strip()) for s in spec.split(',')]
    a, sep, b = spec.partition('..')
    if not sep:
        return [_num_or(spec)]
    if a and a[-1] in 'smhdw':
        lo, hi = parse_duration(a), parse_duration(b)
        out = []
        for i in range(steps):
            v = lo * (hi / lo) ** (i / (steps - 1)) if steps > 1 else lo
            v = _nice(int(round(v)))
            if v not in out:
                out.append(v)
        return [format_duration(v) for v in out]
    lo, hi = float(a), float(b)
    return [_r(lo + (hi - lo) * i / (steps - 1)) if steps > 1 else lo for i in range(steps)]


def _nice(v):
    for unit in (86400, 3600, 60):
        if v >= 2 * unit:
            return int(round(v / unit)) * unit
    return max(1, v)


def _num_or(s):
    try:
        return float(s) if '.' in s else int(s)
    except ValueError:
        return s


# ------------------------------------------------------------------- text --

def human(s):
    if s is None:
        return '-'
    neg = s < 0
    s = abs(int(round(s)))
    if s < 60:
        t = '%ds' % s
    elif s < 3600:
        t = '%dm%02ds' % (s // 60, s % 60) if s % 60 else '%dm' % (s // 60)
    elif s < 86400:
        t = '%dh%02dm' % (s // 3600, s % 3600 // 60)
    else:
        t = '%dd%02dh' % (s // 86400, s % 86400 // 3600)
    return ('-' if neg else '') + t


def _size(n):
    for unit, div in (('GB', 1e9), ('MB', 1e6), ('kB', 1e3)):
        if n >= div:
            return '%.1f %s' % (n / div, unit)
    return '%d B' % n


def _dd(d):
    if not d.get('n'):
        return '-'
    return '%s/%s' % (human(d['mean_s']), human(d['p95_s']))


def text(rep):
    out = []
    w = out.append
    w('scenario %s (seed %s): %d hosts, %d companions, %s .. %s'
      % (rep['scenario'] or '-', rep['seed'], rep['hosts'], rep['companions'], rep['start'], rep['end']))
    w('')
    w('%-8s %-4s %5s %7s %8s %6s %6s %7s %6s  %-15s %-15s' % (
        'job', 'type', 'inst', 'expect', 'runs', 'dups', 'd-inst', 'cross', 'missed', 'delay mean/p95',
        'all knew m/p95'))
    for r in rep['jobs']:
        w('%-8s %-4s %5d %7d %8d %6d %6d %7d %6d  %-15s %-15s' % (
            r['id'], r['type'], r['instances'], r['expected_runs'], r['runs'], r['duplicate_runs'],
            r['duplicate_instances'], r['cross_section_duplicates'], r['missed'], _dd(r['delay']),
            _dd(r['all_knew']) if 'all_knew' in r else '-'))
    w('')
    w('by type:')
    for k, a in rep['by_type'].items():
        w('  %-4s %3d jobs: %d runs of %d expected, %d duplicate runs (%d instances, %d across sections), '
          '%d missed, delay %s%s' % (
              k, a['jobs'], a['runs'], a['expected_runs'], a['duplicate_runs'], a['duplicate_instances'],
              a['cross_section_duplicates'], a['missed'], _dd(a['delay']),
              (', all hosts knew after %s' % _dd(a['all_knew'])) if 'all_knew' in a else ''))
    s = rep['sync']
    w('')
    w('syncs: %d ok, failed %d (host down %d, split %d, link %d); %s moved, %s a sync (%d B overhead a party)' % (
        s['ok'], s['failed_down'] + s['failed_split'] + s['failed_random'], s['failed_down'],
        s['failed_split'], s['failed_random'], _size(s['bytes']), _size(s['bytes_per_sync']),
        s['overhead_per_party']))
    f = rep['file_at_end']
    w('file at end: hosts %.0f lines / %s mean, %d lines / %s max%s' % (
        f['host_lines_mean'], _size(f['host_bytes_mean']), f['host_lines_max'], _size(f['host_bytes_max']),
        ('; companion %d lines / %s' % (f['companion_lines'], _size(f['companion_bytes'])))
        if 'companion_lines' in f else ''))
    c = rep['counts']
    w('work: %d events, %d wakes, %d decisions' % (c['events'], c['wakes'], c['decisions']))
    for a in rep['analytic']:
        if not a['applies']:
            w('analytic (any %s): does not apply: %s' % (a['job'], a['why_not']))
        else:
            w('analytic (any %s, %d hosts, p=%s a %s tick, mesh every %s): P(dup | run) predicted %.4f, '
              'measured %.4f +- %.4f (%d instances run, z=%.2f); runs per instance predicted %.3f, measured %.3f'
              % (a['job'], a['hosts'], a['p'], human(a['tick_s']), human(a['sync_s']), a['predicted_p_dup'],
                 a['measured_p_dup'], a['sigma'], a['instances_run'], a['z'],
                 a['predicted_runs_per_run_instance'], a['measured_runs_per_run_instance']))
    if rep['duplicates']:
        w('')
        n = sum(a['duplicate_instances'] for a in rep['by_type'].values())
        w('duplicates (%d instances%s):' % (n, ', first 20 shown' if n > 20 else ''))
        for d in rep['duplicates'][:20]:
            w('  %s due %s: %s%s' % (d['instance'], d['due'],
                                     ', '.join('%s at %s' % (r['host'], r['at']) for r in d['runs']),
                                     '  [across sections]' if d['cross_section'] else ''))
    return '\n'.join(out) + '\n'


def sweep_text(key, rows):
    out = ['sweep %s' % key, '']
    out.append('%-10s %-4s %8s %8s %8s %8s %8s %10s' % (
        'value', 'type', 'inst', 'runs', 'dups', 'dup-inst', 'missed', 'bytes'))
    for v, rep in rows:
        for k, a in rep['by_type'].items():
            out.append('%-10s %-4s %8d %8d %8d %8d %8d %10s' % (
                v, k, a['instances'], a['runs'], a['duplicate_runs'], a['duplicate_instances'],
                a['missed'], _size(rep['sync']['bytes'])))
    an = [(v, a) for v, rep in rows for a in rep['analytic'] if a['applies']]
    if an:
        out.append('')
        out.append('analytic (any): P(dup | run) predicted vs measured')
        for v, a in an:
            out.append('%-10s %s  predicted %.4f  measured %.4f +- %.4f  (n=%d, z=%.2f)' % (
                v, a['job'], a['predicted_p_dup'], a['measured_p_dup'], a['sigma'], a['instances_run'], a['z']))
    return '\n'.join(out) + '\n'


def plot(key, rows, path):
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        raise UserError("--plot needs matplotlib: pip install 'sporadic[plot]' (or pip install matplotlib)")
    xs = []
    for v, _ in rows:
        try:
            xs.append(parse_duration(v) / 3600.0 if isinstance(v, str) else float(v))
        except ValueError:
            xs.append(float(len(xs)))
    dur = all(isinstance(v, str) for v, _ in rows)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    kinds = sorted(set(k for _, rep in rows for k in rep['by_type']))
    for k in kinds:
        d = [rep['by_type'].get(k, {}).get('duplicate_runs', 0) / max(1, rep['by_type'].get(k, {}).get('instances', 0))
             for _, rep in rows]
        m = [rep['by_type'].get(k, {}).get('missed', 0) / max(1, rep['by_type'].get(k, {}).get('expected_runs', 0))
             for _, rep in rows]
        a1.plot(xs, d, marker='o', label=k)
        a2.plot(xs, m, marker='o', label=k)
    for ax, title in ((a1, 'duplicate runs per instance'), (a2, 'missed / expected runs')):
        ax.set_xlabel(key + (' (hours)' if dur else ''))
        if dur:
            ax.set_xscale('log')
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# -------------------------------------------------------------------- cli --

def add_parser(subparsers):
    s = subparsers.add_parser('simulate', help='how a fleet behaves under a sync schedule (discrete-event, real core)')
    s.add_argument('scenario', help='scenario file (TOML; see examples/)')
    s.add_argument('--seed', type=int, default=None, help='world seed (default: the scenario\'s, else 1)')
    s.add_argument('--json', action='store_true', help='the report as JSON')
    s.add_argument('--sweep', metavar='KEY=A..B', help='vary one scenario key, e.g. visit.interval=1h..30d '
                   'or mesh.0.interval=5m,10m,1h')
    s.add_argument('--steps', type=int, default=6, help='points of an A..B sweep (default 6)')
    s.add_argument('--plot', metavar='OUT.png', help='with --sweep: plot duplicates and misses (needs matplotlib)')
    s.add_argument('--verify', action='store_true', help='also keep literal line sets and check every sync '
                   'against merging.merge (slow; small scenarios)')
    s.set_defaults(func=command)
    return s


def command(args):
    scn = load(args.scenario)
    if args.plot and not args.sweep:
        raise UserError('--plot needs --sweep')
    if not args.sweep:
        rep = simulate(scn, args.seed, args.verify)
        if args.json:
            sys.stdout.write(json.dumps(rep, sort_keys=True, indent=1) + '\n')
        else:
            sys.stdout.write(text(rep))
        return 0
    key, eq, spec = args.sweep.partition('=')
    if not eq or not spec:
        raise UserError('--sweep KEY=A..B (or KEY=v1,v2,...)')
    rows = []
    for v in sweep_values(spec, args.steps):
        s = copy.deepcopy(scn)   # TOML date-times are not JSON: copy the objects
        _setkey(s, key, v)
        rows.append((v, simulate(s, args.seed, args.verify)))
    if args.json:
        sys.stdout.write(json.dumps({'sweep': key, 'points': [{'value': v, 'report': r} for v, r in rows]},
                                    sort_keys=True, indent=1) + '\n')
    else:
        sys.stdout.write(sweep_text(key, rows))
    if args.plot:
        plot(key, rows, args.plot)
        if not args.json:
            sys.stdout.write('plot: %s\n' % args.plot)
    return 0


def main(argv=None):
    import argparse
    p = argparse.ArgumentParser(prog='companion simulate')
    sub = p.add_subparsers(dest='verb')
    add_parser(sub)
    args = p.parse_args(['simulate'] + list(sys.argv[1:] if argv is None else argv))
    try:
        return command(args)
    except UserError as e:
        print('companion: ' + str(e), file=sys.stderr)
        return 2


if __name__ == '__main__':
    sys.exit(main())
