# The planner: what host H does about job J at time T. Pure: the caller
# passes the clock, the host's own latest result, what it knows others did,
# its rank and a random source. Same answers on a board, in the companion
# and in the simulator. Cost: O(1) per job per wake (no walking instances),
# plus at most _LOOKAHEAD hashes for an `any` job.
import hashlib

try:
    from micropython import const
except ImportError:  # CPython
    def const(x):
        return x



RUN = 'run'      # run instance k now (attempt n)
MISS = 'miss'    # record instance k as missed (covers older unsettled ones too)
FAIL = 'fail'    # record instance k as failed: it was interrupted (crash) and may not be retried
ABORT = 'abort'  # a rollout's later wave: record instance k as aborted (a miss saying why)
WAIT = 'wait'    # nothing before time `at`
IDLE = 'idle'    # nothing ever again for this host
_LOOKAHEAD = const(64)   # `any` draws looked at ahead when computing the next wake
DECIDE_MAX = const(6)   # decisions about one job in one wake (miss, run, ...): board and simulator


def miss_reason(job, k, set_at=None, unknown_since_boot=False, jumps=(), rnk=None, heard=None):
    """Why instance k was missed: the calendar's reason when the instance has
    no time (a polar day: 'no sunrise'), 'clock unknown' (the clock was set
    after it was due, on a board that booted without one), 'clock jump' (a
    jump forward, `jumps` as (at, by) pairs, skipped its window), a rollout's
    later wave that heard too few successes (rnk: the wave, heard as in
    decide), else 'asleep'."""
    if job.cal is not None and job.cal.due(k) is None:
        return job.cal.missing()
    r = job.roll
    if r is not None and rnk and r.need:
        ok = heard[1] if heard is not None and heard[0] == k else 0
        if ok < r.need:
            return r.short_text(ok)
    d = due(job, k)
    if set_at is not None and unknown_since_boot and d < set_at:
        return 'clock unknown'
    for j in jumps:
        if j[1] > 0 and j[0] - j[1] <= d + job.within and d < j[0]:
            return 'clock jump'
    return 'asleep'


def eligible(job, host):
    if job.kind == 'who':
        return job.arg in host
    if job.kind == 'each' and job.on:
        return job.on in host
    return True


def due(job, k):
    """When instance k is due (a calendar day without sunrise or sunset: when its miss
    is recorded, job.cal.due(k) is None)."""
    c = job.cal
    return job.t0 + k * job.every if c is None else c.when(k)


def newest(job, t):
    """The newest instance due at or before t, or -1 before the first."""
    if job.cal is not None:
        return job.cal.newest(t)
    if t < job.t0:
        return -1
    if not job.every:
        return 0
    return (t - job.t0) // job.every


def next_k(job, k):
    """The instance after k, or -1 when the job does not repeat."""
    if job.cal is not None:
        return job.cal.next(k)
    return k + 1 if job.every else -1


def score(jid, host):
    return hashlib.sha256((jid + '/' + host).encode()).digest()[:8]


def rank(jid, host, hosts):
    """Rendezvous rank of host among hosts for job jid (0 = first), or None
    when host is not one of them. One pass: hosts may be a stream (a board's
    '.h' records, device/hostscan.py), where a host with several records
    comes several times in a row and counts once."""
    mine = score(jid, host)
    r = 0
    found = False
    last = None
    for h in hosts:
        if h == last:
            continue
        last = h
        if h == host:
            found = True
        elif score(jid, h) > mine:
            r += 1
    return r if found else None


def draw(rnd, job, k, host, i):
    """Whether host fires instance k of an `any` job at tick i: rnd(key) is a
    32-bit integer, the same for the same key (seeded hash or recorded)."""
    return rnd('%s.%d/%s/%d' % (job.id, k, host, i)) < job.threshold


def hash_rnd(seed):
    """A deterministic random source: key -> 32-bit integer."""
    def rnd(key):
        return int.from_bytes(hashlib.sha256((seed + '|' + key).encode()).digest()[:4], 'big')
    return rnd


def start_at(job, k, rnk):
    """When this host may first start instance k (one: after its rank's grace)."""
    t = due(job, k)
    if job.kind == 'one':
        t += rnk * job.grace
    elif job.roll is not None:
        t += job.roll.starts(rnk)
    return t


def decide(job, host, now, mine=None, done_k=-1, rnk=None, rnd=None, assigned=None, led=False,
           heard=None):
    """-> (action, k, at, attempt).
    mine: this host's latest result as (k, outcome, attempt) or None.
    done_k: highest instance of this job someone else started or ran (any/one).
    rnk: this host's rank (one) or its wave (a rollout: wave()), None if the
      host is not ranked.
    rnd: random source for `any` (see draw).
    assigned: the newest assignment of this job known here, (k, host) from an
      `ID a HOST K ...` line, or None (any/one only; docs/wifi.md).
    led: True while a section leader holds the lease for this host: an
      unassigned any/one instance then waits one grace for the leader's
      assignment before drawing or ranking.
    heard: a rollout's outcomes of other hosts known here, (k, ok, err) for
      the newest instance any of them settled (groups.scan's tally), or None.
      A later wave past the abort threshold for instance k: ABORT; with fewer
      than need= successes heard: it waits (then misses at the window's end)."""
    if not eligible(job, host) or (rnk is None and (job.kind == 'one' or job.roll is not None)):
        return IDLE, -1, 0, 0
    single = job.kind in ('any', 'one')
    k = newest(job, now)
    if done_k > k:
        # a run of an instance not due yet: no honest host wrote it (a forged
        # `r HOST 1000000`, docs/security.md): it settles nothing
        done_k = -1
    lead = single and (led or assigned is not None)   # wake at due: an assignment may come
    if k < 0:
        k = 0 if job.cal is None else job.cal.first(now)
        if k < 0:   # never, or a sun job on a host that does not know where it is
            return IDLE, -1, 0, 0
        return WAIT, k, due(job, k) if lead else start_at(job, k, rnk), 1
    mk = -1
    if mine is not None:
        mk, outcome, attempt = mine
        if mk == k and outcome in ('run', 'err') and not (single and done_k >= k):
            end = due(job, k) + job.within
            if attempt <= job.retry and now < end:
                return RUN, k, now, attempt + 1
            if outcome == 'run':
                return FAIL, k, now, attempt
    if mk < k and not (single and done_k >= k):
        if job.cal is not None and job.cal.due(k) is None:   # a day without sunrise (sunset)
            return MISS, k, now, 0
        end = due(job, k) + job.within
        if now >= end:
            return MISS, k, now, 0
        pk = k - 1 if job.cal is None else job.cal.prev(k)
        if mk < pk and not (single and done_k >= pk):
            return MISS, pk, now, 0
        if single and (led or (assigned is not None and assigned[0] == k)):
            if assigned is not None and assigned[0] == k and assigned[1] == host:
                return RUN, k, now, 1
            # assigned to another host, or a lease without an assignment yet:
            # the ordinary rule, one grace later (`any`: at most half its
            # window, `grace=` being a `one` option). A leader only chooses who
            # goes first; one that assigns nothing, or a host that does not
            # run, delays an instance by one grace at most, never stops it
            # (docs/security.md#what-a-stolen-board-can-do)
            t = start_at(job, k, rnk) + (job.grace if job.kind == 'one' else min(job.grace, job.within // 2))
            if now < t:
                return (WAIT, k, t, 1) if t < end else (WAIT, k, end, 0)
        if job.kind == 'any':
            return _any(job, host, now, k, end, rnd)
        t = start_at(job, k, rnk)
        if t >= end:
            return WAIT, k, end, 0
        if now >= t:
            r = job.roll
            if r is not None and rnk:   # a later wave: what the earlier ones did
                ok = err = 0
                if heard is not None and heard[0] == k:
                    ok = heard[1]
                    err = heard[2]
                if r.aborts(ok, err):
                    return ABORT, k, now, 0
                if ok < r.need:
                    return WAIT, k, end, 0
            return RUN, k, now, 1
        return WAIT, k, t, 1
    # instance k is settled for this host: wait for the next one
    nk = next_k(job, mk if mk > k else k)
    if nk < 0:
        return IDLE, -1, 0, 0
    return WAIT, nk, due(job, nk) if lead else start_at(job, nk, rnk), 1


def _any(job, host, now, k, end, rnd):
    d = due(job, k)
    i = (now - d) // job.tick
    if draw(rnd, job, k, host, i):
        return RUN, k, now, 1
    j = i + 1
    while j <= i + _LOOKAHEAD:
        t = d + j * job.tick
        if t >= end:
            return WAIT, k, end, 0
        if draw(rnd, job, k, host, j):
            return WAIT, k, t, 1
        j += 1
    t = d + j * job.tick
    return WAIT, k, t if t < end else end, 0
