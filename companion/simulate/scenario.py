# The fleet a scenario describes: parsing the TOML (durations, rates, host
# patterns), the uptime models, the hosts, jobs, sync links and partitions,
# and each host's drifting clock.
import bisect
import math
import random
import re
from fnmatch import fnmatchcase

from sporadic.core import jobline, plan, rollout
from sporadic.desktop import merging
from companion.fleet.zonerule import zone_rule
from sporadic.core.timeutil import parse_time, parse_duration
from companion.errors import UserError

INF = 2 ** 31 - 1
SYNC_OVERHEAD = 256     # bytes a sync costs beyond the lines moved (hello, summaries)


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


class _Uptime:
    """An uptime model: outage(t) -> (from, until) of the outage that holds
    t or, when the host is up at t, the next one (a walk forward in time
    reads it once an outage); up(t) follows from it."""
    def up(self, t):
        return t < self.outage(t)[0]


class _Always(_Uptime):
    kind = 'always'

    def outage(self, t):
        return math.inf, math.inf


class _Duty(_Uptime):
    kind = 'duty'

    def __init__(self, period, on, phase):
        self.period = period
        self.on = int(round(on * period))
        self.phase = phase

    def outage(self, t):
        r = (t - self.phase) % self.period
        return t - r + self.on, t - r + self.period


class _Outages(_Uptime):
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

    def outage(self, t):
        self._cover(t)
        i = bisect.bisect_right(self.iv, (t, INF))
        return self.iv[i - 1] if i and self.iv[i - 1][1] > t else self.iv[i]


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


def dumps(scn):
    """A scenario (load's dict: strings, numbers, booleans, lists and lists
    of tables) as TOML text that load reads back equal."""
    import json

    def val(v):
        if isinstance(v, str):
            return json.dumps(v)     # a JSON string is a TOML basic string
        if isinstance(v, bool):
            return 'true' if v else 'false'
        if isinstance(v, list):
            return '[' + ', '.join(val(x) for x in v) + ']'
        return repr(v)

    def tables(v):
        return isinstance(v, list) and v and isinstance(v[0], dict)
    out = ['%s = %s' % (k, val(v)) for k, v in scn.items() if not tables(v)]
    for k, v in scn.items():
        if tables(v):
            for row in v:
                out.append('[[%s]]' % k)
                out.extend('%s = %s' % (kk, val(vv)) for kk, vv in row.items())
    return '\n'.join(out) + '\n'



# A host's clock: it reads true time t as local_time(drift, ts, t), ts being
# when it was last set (drift 0: exact). math's floor and ceil give ints.
def local_time(d, ts, t):
    return t + math.floor(d * (t - ts) + 0.5) if d else t


def true_time(d, ts, lt):
    """The first true time at which the clock reads >= lt."""
    if not d:
        return lt
    t = math.ceil(ts + (lt - ts) / (1.0 + d))
    while local_time(d, ts, t) < lt:
        t += 1
    while local_time(d, ts, t - 1) >= lt:
        t -= 1
    return t


class _Host:
    __slots__ = ('name', 'up', 'drift', 'ts', 'mine', 'hq', 'floor', 'wake', 'rnd', 'known', 'learnt', 'jumps', 'pos')


class Fleet:
    """A scenario, loaded: what does not change while it runs."""
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
        gi_of = []
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
                gi_of.append(gi)
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
            h.jumps = []
            h.pos = self._position(g, gi_of[i])
            self.hosts.append(h)

    def _position(self, g, gi):
        """A host group's (lat, lon), as `companion deploy --lat --lon` gives a
        board (sunrise/sunset jobs), or None."""
        from companion.fleet.provision import position_config
        try:
            pos = position_config(g.get('lat'), g.get('lon'))
        except UserError as e:
            raise UserError('hosts[%d]: %s' % (gi, str(e).replace('--lat', 'lat').replace('--lon', 'lon')))
        except TypeError:
            raise UserError('hosts[%d]: lat and lon are numbers (degrees)' % gi)
        return (float(pos['lat']), float(pos['lon'])) if pos else None

    def _load_jobs(self):
        text = self.scn.get('jobs', '')
        jobs = []
        lines = []
        texts = []      # each job's line as the scenario gives it (parallel.py)
        for n, raw in enumerate(str(text).splitlines(), 1):
            try:
                r = jobline.parse(raw, zone_rule=zone_rule)
            except jobline.ParseError as e:
                raise UserError('jobs:%d: %s' % (n, e))
            if r is None:
                continue
            if not isinstance(r, jobline.Job):
                raise UserError('jobs:%d: only job lines belong in a scenario' % n)
            if r.cal is not None and r.cal.sun():
                lost = [h.name for h in self.hosts if h.pos is None and plan.eligible(r, h.name)]
                if lost:
                    # a board without its position never runs it (plan.decide: IDLE)
                    raise UserError('jobs:%d: at=%s needs the position of %s%s: give lat and lon in its [[hosts]]'
                                    % (n, r.cal.at, lost[0], ' and %d more' % (len(lost) - 1) if len(lost) > 1 else ''))
            if any(j.id == r.id for j in jobs):
                raise UserError('jobs:%d: the same job twice (id %s)' % (n, r.id))
            jobs.append(r)
            lines.append(r.line())
            texts.append(raw)
        if not jobs:
            raise UserError('scenario has no jobs')
        self.jobs = jobs
        self.job_texts = texts
        self.J = len(jobs)
        self.single = [j.kind in ('any', 'one') for j in jobs]
        self.sun = any(j.cal is not None and j.cal.sun() for j in jobs)   # job.cal placed per host
        self.static = merging.merge(lines + ['.h ' + h.name for h in self.hosts])
        self.static_bytes = sum(len(s) + 1 for s in self.static)
        self.ranks = {}     # job -> rank of each host (plan.rank over the fleet)
        # a staged rollout's wave of each host (rollout.waves over the fleet's hosts), and
        # the jobs whose action fails on every board (scenario key failing_actions)
        names = self.names[:self.H]
        self.wave = [None if j.roll is None else [rollout.waves(j, names).get(n) for n in names] for j in jobs]
        bad = self.scn.get('failing_actions', [])
        if not isinstance(bad, list):
            raise UserError('failing_actions: a list of action names, e.g. ["fwupdate"]')
        self.failing = [j.action() in bad for j in jobs]

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
        return local_time(h.drift, h.ts, t)

    def _grid(self, t):
        """Round a time up to the resolution grid."""
        r = self.res
        t = int(math.ceil(t))
        if r > 1:
            t = self.start + -(-(t - self.start) // r) * r
        return t

