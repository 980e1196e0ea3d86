# Staged rollouts (docs/jobline.md#staged-rollouts): an `each`/`who:` job
# reaches the fleet in waves, and a board of a later wave that has heard of
# too many failures records an abort instead of running. Loaded only for a
# job whose line has `waves=` (jobline.parse_job); pure, portable.
#
#   waves=10%,30%,100%   cumulative shares of the eligible hosts, by rank
#   wave=6h              wave w may start at due + w x wave
#   abort=fail>20%/5     abort when more than 20% of at least 5 outcomes heard failed
#   need=N               a later wave runs only once N successes are heard
from sporadic.core.timeutil import parse_duration

DEFAULT_GAP = 3600   # wave=1h


class Rollout:
    __slots__ = ('waves', 'gap', 'fail', 'least', 'need')

    def options(self):
        """The canonical option words."""
        from sporadic.core.timefmt import format_duration
        o = ['waves=' + ','.join(['%d%%' % p for p in self.waves])]
        if self.gap != DEFAULT_GAP:
            o.append('wave=' + format_duration(self.gap))
        if self.fail is not None:
            o.append('abort=fail>%d%%/%d' % (self.fail, self.least))
        if self.need:
            o.append('need=%d' % self.need)
        return o

    def starts(self, w):
        """Seconds after an instance's due time that wave w may start."""
        return w * self.gap

    def wave_of(self, rnk, n):
        """The wave of the host ranked rnk (0 = first) among n eligible hosts:
        wave i holds the ranks below ceil(waves[i]% of n)."""
        i = 0
        last = len(self.waves) - 1
        while i < last and rnk * 100 >= self.waves[i] * n:
            i += 1
        return i

    def aborts(self, ok, err):
        """Whether ok successes and err failures heard stop a later wave."""
        known = ok + err
        return self.fail is not None and known >= self.least and err * 100 > self.fail * known

    def abort_text(self, ok, err):
        """An abort's output (its miss record says why, with the figures seen)."""
        return 'abort: %d failed of %d heard (fail>%d%%/%d)' % (err, ok + err, self.fail, self.least)

    def short_text(self, ok):
        """A later wave's miss when too few successes were heard."""
        return 'rollout: %d ok heard, %d needed' % (ok, self.need)


def wave(job, host, hosts):
    """The rollout wave of host for job (0 = first), or None when host is not
    among hosts (any iterable of host ids; a host repeated next to itself
    counts once): its rank among the eligible hosts, one pass, nothing held."""
    from sporadic.core import plan
    mine = plan.score(job.id, host)
    r = 0
    n = 0
    found = False
    last = None
    for h in hosts:
        if h == last or not plan.eligible(job, h):
            continue
        last = h
        n += 1
        if h == host:
            found = True
        elif plan.score(job.id, h) > mine:
            r += 1
    return job.roll.wave_of(r, n) if found else None


def waves(job, hosts):
    """{host: wave} for every eligible host of a list at once (the companion
    and the simulator: the ranks of wave() from one sort)."""
    from sporadic.core import plan
    hs = []
    for h in hosts:
        if plan.eligible(job, h) and (not hs or hs[-1] != h):
            hs.append(h)
    hs = sorted(set(hs), key=lambda h: plan.score(job.id, h), reverse=True)
    n = len(hs)
    return {h: job.roll.wave_of(r, n) for r, h in enumerate(hs)}


def _int(s, what):
    if not s.isdigit():
        raise ValueError('%s: %r is not a whole number' % (what, s))
    return int(s)


def parse(opts):
    """{'waves': .., 'wave': .., 'abort': .., 'need': ..} (the line's words)
    -> Rollout. ValueError with a one-line reason."""
    r = Rollout()
    ws = opts.get('waves')
    if ws is None:
        raise ValueError('wave=, abort= and need= need waves= (e.g. waves=10%,30%,100%)')
    waves = []
    for p in ws.split(','):
        if not p.endswith('%'):
            raise ValueError('waves=%s: each wave is a share of the hosts, e.g. 10%%' % ws)
        v = _int(p[:-1], 'waves=' + ws)
        if v < 1 or v > 100 or (waves and v <= waves[-1]):
            raise ValueError('waves=%s: shares rise from 1%% to 100%%' % ws)
        waves.append(v)
    if waves[-1] != 100:
        raise ValueError('waves=%s: the last wave is 100%% (every host)' % ws)
    r.waves = tuple(waves)
    r.gap = parse_duration(opts['wave']) if 'wave' in opts else DEFAULT_GAP
    if r.gap <= 0:
        raise ValueError('wave= must be longer than 0s')
    r.fail = None
    r.least = 0
    a = opts.get('abort')
    if a is not None:
        pct, slash, least = a[5:].partition('/')
        if not a.startswith('fail>') or not pct.endswith('%'):
            raise ValueError('abort=%s: expected fail>P%%/N, e.g. abort=fail>20%%/5' % a)
        r.fail = _int(pct[:-1], 'abort=' + a)
        r.least = _int(least, 'abort=' + a) if slash else 1
        if r.fail > 99 or r.least < 1:
            raise ValueError('abort=%s: P is 0..99 and N at least 1' % a)
    r.need = _int(opts['need'], 'need') if 'need' in opts else 0
    return r
