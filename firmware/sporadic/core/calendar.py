# Calendar schedules (at="cron" in a zone, at=sunrise/sunset+-D at a position): the
# instance ids, due times and newest/next instances the planner uses for `every=` jobs.
# Instance ids are integers every board computes alike: for cron the scheduled local
# wall-clock minute (local seconds // 60), for the sun the civil day (days since 1970).
try:
    from micropython import const
except ImportError:
    def const(x):
        return x

from sporadic.core import cron, tzrule
# sun and plan (plan.position: where the planning host is) are imported where
# a due time is computed: checking a line (a board taking a delivery) needs
# neither, and a 128K unix board's sync has no room for them then
from sporadic.core.timeutil import parse_duration

CRON = const(0)
SUNRISE = const(1)
SUNSET = const(2)
MAX_SHIFT = const(43200)   # sunrise/sunset offsets up to 12 h keep day k's instance on day k


def parse_at(at):
    """'sunset+20m' -> (SUNSET, 1200); 'sunrise' -> (SUNRISE, 0); a cron expression ->
    (CRON, parsed). ValueError with a one-line reason."""
    for kind, word in ((SUNRISE, 'sunrise'), (SUNSET, 'sunset')):
        if at.startswith(word):
            rest = at[len(word):]
            if not rest:
                return kind, 0
            if rest[0] not in '+-':
                raise ValueError('at=%s: expected %s, %s+D or %s-D' % (at, word, word, word))
            try:
                shift = parse_duration(rest[1:])
            except ValueError:
                raise ValueError('at=%s: bad offset %r (e.g. 20m, 1h)' % (at, rest[1:]))
            if shift > MAX_SHIFT:
                raise ValueError('at=%s: offset more than 12h' % at)
            return kind, -shift if rest[0] == '-' else shift
    return CRON, cron.parse(at)


def make(at, tz, t0, lat=None, lon=None):
    """A schedule from an `at=` value, a POSIX TZ rule ('' for UTC), the series start
    t0 (UTC epoch s) and the board's position (sunrise/sunset: see placed())."""
    kind, spec = parse_at(at)
    zone = tzrule.parse(tz) if tz else tzrule.UTC
    if kind == CRON and cron.never(spec):
        raise ValueError('at="%s" never matches a date' % at)
    return (kind, spec, zone, t0, lat, lon)


class Series:
    """A job's calendar (job.cal): at=, tz= and tzr= as the line gives them, and the
    schedule, placed at the planning host's position (sporadic.core.plan.position)."""

    def __init__(self, j, opts, zone_rule=None):
        # opts: {'at': .., 'tz': .., 'tzr': ..} from the line; zone_rule: the companion's
        # zone name -> POSIX rule (boards have no zone database)
        at = ' '.join(opts.get('at', '').split())
        tz = opts.get('tz', '')
        tzr = opts.get('tzr', '')
        if not at:
            raise ValueError('%s needs at= (tz= and tzr= are for calendar jobs)' % ('tz=' if tz else 'tzr='))
        if j.every:
            raise ValueError('at= and every= together: at= gives the times, drop every=')
        if tzr and not tz:
            raise ValueError('tzr= without tz=')
        if tz and not tzr and ',' not in tz and ('/' in tz or not any(c.isdigit() for c in tz)):
            # a zone name (Area/City, UTC)
            if zone_rule is None:
                raise ValueError('tz=%s: a zone name needs its rule (tzr=); add the line through the companion' % tz)
            try:
                tzr = zone_rule(tz)
            except ValueError as e:
                raise ValueError('tz=%s: %s' % (tz, e))
        self.at, self.tz, self.tzr = at, tz, tzr
        self.s = make(at, tzr or tz, j.t0)

    def sun(self):
        return self.s[0] != CRON

    def _placed(self):
        from sporadic.core import plan
        s = placed(self.s, plan.position)
        if s is not None:
            self.s = s
        return s

    def due(self, k):
        s = self._placed()
        return None if s is None else due(s, k)

    def when(self, k):
        return when(self._placed(), k)

    def newest(self, t):
        s = self._placed()
        return -1 if s is None else newest(s, t)

    def first(self, t):
        s = self._placed()
        return -1 if s is None else next_after(s, t)[0]

    def prev(self, k):
        return prev_id(self._placed(), k)

    def next(self, k):
        return next_id(self._placed(), k)

    def options(self):
        """The canonical option words: at=, tz=, tzr=."""
        s = self.s
        if s[0] == CRON:
            o = ['at="%s"' % self.at if ' ' in self.at else 'at=' + self.at]
        else:
            from sporadic.core.timefmt import format_duration
            o = [('at=sunrise' if s[0] == SUNRISE else 'at=sunset') +
                 (('-' if s[1] < 0 else '+') + format_duration(abs(s[1])) if s[1] else '')]
        if self.tz:
            o.append('tz=' + self.tz)
        if self.tzr and self.tzr != self.tz:
            o.append('tzr=' + self.tzr)
        return o

    def missing(self):
        """Why a day of a sun job has no instance."""
        return 'no sunrise' if self.s[0] == SUNRISE else 'no sunset'


def placed(s, pos):
    """s for a host at pos = (lat, lon) (a cron schedule is the same everywhere); None
    for a sunrise/sunset schedule without a position."""
    if s[0] == CRON:
        return s
    if pos is None:
        return None
    if s[4] == pos[0] and s[5] == pos[1]:
        return s
    return (s[0], s[1], s[2], s[3], pos[0], pos[1])


_sun_last = None   # ((day, lat, lon, rising), event) computed last: a decision asks again


def _event(k, lat, lon, rising):
    global _sun_last
    key = (k, lat, lon, rising)
    c = _sun_last
    if c is not None and c[0] == key:
        return c[1]
    from sporadic.core import sun
    e = sun.event(k, lat, lon, rising)
    _sun_last = (key, e)
    return e


def _sun_at(s, k):
    # (time, exists): day k's event plus the offset, or local solar noon if the sun
    # neither rises nor sets that day (the instance exists as a miss)
    e = _event(k, s[4], s[5], s[0] == SUNRISE)
    if e is None:
        from sporadic.core import sun
        return sun.noon(k, s[5]) + s[1], False
    return e + s[1], True


def due(s, k):
    """UTC epoch s at which instance k is due; None if there is no such instance (k not a
    matching minute, a polar day, or before the series start)."""
    if s[0] == CRON:
        ls = k * 60
        if not cron.matches(s[1], ls):
            return None
        t = tzrule.due(s[2], ls)
    else:
        t, ok = _sun_at(s, k)
        if not ok:
            return None
    return t if t >= s[3] else None


def _sun_newest(s, t):
    k = (t - s[1] + int(s[5] * 240)) // 86400 + 1
    for k in range(k, k - 4, -1):
        at, _ = _sun_at(s, k)
        if at <= t:
            return k, at
    return -1, None


def newest(s, t):
    """Instance id of the newest instance due at or before t; -1 if none since the series
    start. For the sun, a day without the event counts (due() says None: a miss)."""
    if s[0] == CRON:
        ls = cron.prev_minute(s[1], tzrule.shown_by(s[2], t))
        if ls is None or tzrule.due(s[2], ls) < s[3]:
            return -1
        return ls // 60
    k, at = _sun_newest(s, t)
    return k if k >= 0 and at >= s[3] else -1


def next_after(s, t):
    """(k, at) of the first instance due after t (and not before the series start); at
    is due(k), or for a day without the event its placeholder time. (-1, None) if never."""
    t = max(t, s[3] - 1)
    if s[0] == CRON:
        ls = cron.next_minute(s[1], tzrule.shown_by(s[2], t) + 1)
        if ls is None:
            return -1, None
        return ls // 60, tzrule.due(s[2], ls)
    k, _ = _sun_newest(s, t)
    if k < 0:
        k = (t - s[1] + int(s[5] * 240)) // 86400 - 3
    while True:
        k += 1
        at, _ = _sun_at(s, k)
        if at > t:
            return k, at


def when(s, k):
    """The time instance k is due, or for a day without the event its placeholder: when
    the planner looks at instance k (k a valid id)."""
    if s[0] == CRON:
        return tzrule.due(s[2], k * 60)
    return _sun_at(s, k)[0]


def prev_id(s, k):
    """The instance before k in the series, or -1 (none since the series start)."""
    if s[0] == CRON:
        ls = cron.prev_minute(s[1], k * 60 - 60)
        if ls is None or tzrule.due(s[2], ls) < s[3]:
            return -1
        return ls // 60
    return k - 1 if _sun_at(s, k - 1)[0] >= s[3] else -1


def next_id(s, k):
    """The instance after k, or -1 if there is none."""
    if s[0] == CRON:
        ls = cron.next_minute(s[1], k * 60 + 60)
        return -1 if ls is None else ls // 60
    return k + 1


def local_time(s, t):
    """The zone's local clock (local seconds) at UTC instant t, for display."""
    return tzrule.local(s[2], t)
