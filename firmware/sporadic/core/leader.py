# Leader of a synchronisation section (docs/wifi.md). Portable core: pure
# logic, the caller passes the clock (milliseconds, any origin) and carries
# the messages (net/node.py sends them over UDP).
#
# Election: every host heartbeats (host, term, leader claim) each PERIOD.
# A host hears the others; those heard within TIMEOUT are "alive" (with
# itself, its section). With no leader alive, once a host has listened for a
# full TIMEOUT (so it has heard its section), the lowest id alive claims
# leadership with term = highest term heard + 1. A leader's lease lasts while
# its heartbeats keep arriving: TIMEOUT after the last one it is gone. Two
# leaders that meet (a healed split): the higher id steps down.
#
# While it leads, the leader assigns each unsettled `any`/`one` instance of
# its section's jobs to one alive host: a line `ID a HOST K AT BY MAC`
# (jobtext.Assign; merge keeps the greatest (K, AT) per job). Boards under a
# lease run only what is assigned to them (plan.decide(..., assigned, led)).
from sporadic.core import groups, jobline, plan, hmac

try:
    from micropython import const
except ImportError:  # CPython
    def const(x):
        return x

PERIOD = const(1000)     # ms between heartbeats
TIMEOUT = const(4000)    # ms without a heartbeat: the host (or the lease) is gone
MAGIC = 'SPH1'
MSG_MAX = const(200)


class Elector:
    def __init__(self, me, now, timeout=TIMEOUT, period=PERIOD):
        self.me = me
        self.timeout = timeout
        self.period = period
        self.started = now
        self.term = 0
        self.leading = False
        self.peers = {}          # host -> [last heard, term, claims]
        self.events = []         # newest last, a few kept
        self.leader = None
        self.next_beat = now

    def _event(self, now, text):
        self.events.append('%d %s' % (now, text))
        if len(self.events) > 8:
            self.events.pop(0)

    def heard(self, host, term, claim, now):
        """A heartbeat from `host` (already authenticated by the caller)."""
        if host == self.me:
            return
        p = self.peers.get(host)
        if p is None:
            self.peers[host] = [now, term, claim]
        else:
            p[0] = now
            p[1] = term
            p[2] = claim
        if term > self.term and not self.leading:
            self.term = term
        self.tick(now)

    def alive(self, now):
        """Sorted ids of this section: itself and the hosts heard lately."""
        out = [self.me]
        dead = []
        for h in self.peers:
            if now - self.peers[h][0] < self.timeout:
                out.append(h)
            elif now - self.peers[h][0] > 8 * self.timeout:
                dead.append(h)
        for h in dead:
            del self.peers[h]
        out.sort()
        return out

    def tick(self, now):
        """Apply the rules; returns the current leader id or None."""
        claims = []
        for h in self.peers:
            p = self.peers[h]
            if p[2] and now - p[0] < self.timeout:
                claims.append(h)
        claims.sort()
        if self.leading:
            if claims and claims[0] < self.me:
                self.leading = False
                self._event(now, 'stepped down for ' + claims[0])
            else:
                self.leader = self.me
                return self.me
        if claims:
            if self.leader != claims[0]:
                self._event(now, 'leader ' + claims[0])
            self.leader = claims[0]
            return self.leader
        if self.leader is not None:
            self._event(now, 'lease of ' + self.leader + ' expired')
            self.leader = None
        if now - self.started >= self.timeout and self.alive(now)[0] == self.me:
            hi = self.term
            for h in self.peers:
                if self.peers[h][1] > hi:
                    hi = self.peers[h][1]
            self.term = hi + 1
            self.leading = True
            self.leader = self.me
            self._event(now, 'leading, term %d' % self.term)
        return self.leader

    def led(self, now):
        """True while a leader (this host or another) holds the lease."""
        return self.tick(now) is not None

    def beat(self, now):
        """The heartbeat fields to send now, or None before the next period."""
        if now < self.next_beat:
            return None
        self.next_beat = now + self.period
        self.tick(now)
        return (self.me, self.term, self.leading)

    def status(self, now):
        return {'leader': self.tick(now), 'leading': self.leading, 'term': self.term,
                'alive': self.alive(now), 'events': self.events}


# ---- heartbeat messages ----
#   SPH1 HOST TERM CLAIM PORT SEQ MAC
# CLAIM 1|0; PORT the sender's sync port; SEQ grows with every message of a
# boot (receivers drop a SEQ not above the last one of that host: replays);
# MAC the first 16 hex of HMAC-SHA256(fleet key, the text before " MAC"),
# or "-" in an insecure fleet (no key).

def encode(host, term, claim, port, seq, key=None):
    body = '%s %s %d %d %d %d' % (MAGIC, host, term, 1 if claim else 0, port, seq)
    mac = hmac.mac_hex(key, body) if key else '-'
    return body + ' ' + mac


def decode(data, key=None):
    """-> (host, term, claim, port, seq); ValueError(reason) otherwise."""
    if len(data) > MSG_MAX:
        raise ValueError('heartbeat too long')
    try:
        text = data.decode() if isinstance(data, (bytes, bytearray)) else data
    except Exception:
        raise ValueError('heartbeat not text')
    f = text.split(' ')
    if len(f) != 7 or f[0] != MAGIC:
        raise ValueError('not a heartbeat')
    for i in (2, 3, 4, 5):
        if not f[i].isdigit():
            raise ValueError('bad heartbeat field ' + repr(f[i]))
    try:
        jobline.check_host(f[1])
    except ValueError as e:
        raise ValueError(str(e))
    if key:
        body = text[:len(text) - len(f[6]) - 1]
        if not hmac.check_hex(key, body, f[6]):
            raise ValueError('heartbeat MAC does not verify (stranger or wrong fleet key)')
    elif f[6] != '-':
        pass
    return f[1], int(f[2]), f[3] == '1', int(f[4]), int(f[5])


# ---- what the leader decides ----

def pick(job, alive, known):
    """The alive host that runs a single-run instance: the best rendezvous
    score (plan.score) among eligible alive hosts (`one`: also in the host
    list). None when nobody can."""
    best = None
    bs = None
    for h in alive:
        if not plan.eligible(job, h):
            continue
        if job.kind == 'one' and h not in known:
            continue
        s = plan.score(job.id, h)
        if bs is None or s > bs:
            best = h
            bs = s
    return best


def assignments(lines, me, alive, now, ahead=86400, cfg=None):
    """The leader's pass over its sorted store `lines` at Unix time `now`:
    the new Assign records (text lines) for its section `alive`. Each
    single-run job gets its first unsettled instance (the current one, or
    the next when due within `ahead` s) assigned to an alive host, unless
    it is already assigned to an alive host. cfg: the leader's board cfg,
    whose lat/lon place a sunrise/sunset job (calendar.position_of)."""
    out = []

    def visit(jid, jtext, cancelled, mine, done_k, asg, known):
        if jtext is not None and not cancelled:
            _assign(jid, jtext, done_k, asg, known, me, alive, now, ahead, out, cfg)

    def cap(jtext):
        try:
            return plan.newest(_parse(jtext, cfg), now)
        except Exception:
            return 1 << 62
    groups.scan(lines, None, None, visit, cap=cap)
    return out


def _parse(jtext, cfg):
    # a job line parsed; a calendar job placed at the leader's position (its
    # cfg's lat/lon), its module loaded by the parse
    job = jobline.parse(jtext)
    if job.cal is not None:
        from sporadic.core import calendar
        job.cal.place(calendar.position_of(cfg) if cfg else None)
    return job


def _assign(jid, jtext, done_k, asg, known, me, alive, now, ahead, out, cfg):
    # one single-run job: the Assign of its first unsettled instance, if one is due
    try:
        job = _parse(jtext, cfg)
    except Exception:
        return
    if job.kind not in ('any', 'one'):
        return
    k = plan.newest(job, now)
    if k >= 0 and (done_k >= k or now >= plan.due(job, k) + job.within):
        k = plan.next_k(job, k)
    elif k < 0:
        k = 0 if job.cal is None else job.cal.first(now)
    if k < 0 or done_k >= k or plan.due(job, k) - now > ahead:
        return
    if asg is not None and asg[0] == k and asg[1] in alive:
        return
    h = pick(job, alive, known)
    if h is None:
        return
    from sporadic.core import jobtext
    out.append(jobtext.Assign(jid, h, k, now, me).line())


def duplicate_runs(lines):
    """The single-run instances (`any`/`one`) that more than one host started
    or ran (two sections each ran it, or a takeover raced), from sorted lines:
    a board's store, or the companion's store merged with its results
    history (the whole record: compaction keeps one result per job and host,
    the history keeps every one). -> [(instance 'ID.K', kind, runs)], runs
    [[host, at, outcome], ...] in (at, host) order: per host its first `at`
    and its furthest outcome (run < err < ok; a `miss` is no run). A group's
    job line sorts before its results; a group without one (a cancelled
    job's results on a board) is not judged."""
    out = []
    gid = None
    kind = None
    runs = None          # 'K' -> {host: [host, at, outcome]} of the current single-run job
    for line in lines:
        if line[0] == '.':
            continue
        jid = line[:jobline.ID_LEN]
        if jid != gid:
            _dups_of(gid, kind, runs, out)
            gid = jid
            kind = None
            runs = None
        t = line[jobline.ID_LEN + 1:jobline.ID_LEN + 3]
        if t == 'an' or t == 'on':       # 'ID any...' / 'ID one ...' ('ID a ' is an assignment)
            kind = 'any' if t == 'an' else 'one'
            if runs is None:
                runs = {}
        elif t == 'r ' and runs is not None:
            f = line.split(None, 6)
            if len(f) < 6 or f[5].startswith('miss'):
                continue
            per = runs.get(f[3])
            if per is None:
                per = runs[f[3]] = {}
            at = int(f[4])
            out_ = f[5].rstrip('0123456789')
            r = per.get(f[2])
            if r is None:
                per[f[2]] = [f[2], at, out_]
            else:
                if at < r[1]:
                    r[1] = at
                if _RUN_RANK.get(out_, 0) > _RUN_RANK.get(r[2], 0):
                    r[2] = out_
    _dups_of(gid, kind, runs, out)
    return out


_RUN_RANK = {'run': 0, 'err': 1, 'ok': 2}


def _dups_of(jid, kind, runs, out):
    # one job's instances with more than one host, in K order
    if not runs:
        return
    ks = [int(k) for k in runs if len(runs[k]) > 1]
    ks.sort()
    for k in ks:
        rs = list(runs[str(k)].values())
        rs.sort(key=lambda r: (r[1], r[0]))
        out.append((jid + '.' + str(k), kind, rs))


def duplicates(lines):
    """duplicate_runs as text, for a board's `net?` status: ['ID.K: h1 h2', ...]."""
    out = []
    for inst, kind, rs in duplicate_runs(lines):
        hs = [r[0] for r in rs]
        hs.sort()
        out.append(inst + ': ' + ' '.join(hs))
    return out
