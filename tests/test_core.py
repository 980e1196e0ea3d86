"""The portable core on CPython: format, planner, merge properties (hypothesis).
tests/test_core_mpy.py runs the same core on the MicroPython unix port."""
import random

import pytest
from hypothesis import given, settings, strategies as st, HealthCheck

from sporadic.core import jobline, merge, plan
from sporadic.core import jobtext
from sporadic.desktop import schedule
from sporadic.desktop import merging
from sporadic.core.jobline import ParseError
from sporadic.core.timeutil import parse_time, parse_duration
from sporadic.core.timefmt import format_time, format_duration

T0 = parse_time('2026-12-01T06:00Z')
DAY = 86400

# -- strategies: random but valid records ------------------------------------

hosts = st.sampled_from(['pump-1', 'pump-2', 'gate', 'relay-9', 'pump-10'])
JOBS = [
    'each 2026-12-01T06:00Z led blink 3 ; every=1d within=2h',
    'each 2026-12-01T06:00Z log hello ; on=pump',
    'who:pump 2026-12-01T07:00Z relay on 2 30 ; within=1h',
    'any:0.01 2026-12-01T00:00Z sensor upload ; every=7d within=1d tick=1m',
    'one 2026-12-01T00:00Z backup rotate ; every=1d grace=1h',
]
JOB_IDS = [jobline.parse(j).id for j in JOBS]


@st.composite
def record(draw):
    kind = draw(st.sampled_from(['job', 'job', 'result', 'result', 'result', 'cancel', 'host', 'conflict']))
    if kind == 'job':
        return jobline.canonical(draw(st.sampled_from(JOBS)))
    jid = draw(st.sampled_from(JOB_IDS))
    if kind == 'cancel':
        return jid + ' cancel'
    if kind == 'host':
        return '.h ' + draw(hosts)
    if kind == 'conflict':
        return jid + ' each 2026-12-02T00:00Z log other'
    r = jobline.Result(jid, draw(hosts), draw(st.integers(0, 5)), T0 + draw(st.integers(0, 9)),
                       draw(st.sampled_from(['run', 'err', 'miss', 'ok'])), draw(st.integers(1, 3)),
                       '-', draw(st.sampled_from(['', 'done', 'x y'])))
    return r.line()


records = st.lists(record(), max_size=25)


def m(*parts):
    return merging.merge(*parts)


# -- merge properties ---------------------------------------------------------

@given(records, records)
def test_merge_commutative(a, b):
    assert m(a, b) == m(b, a)


@given(records, records, records)
def test_merge_associative(a, b, c):
    assert m(m(a, b), c) == m(a, m(b, c))


@given(records)
def test_merge_idempotent(a):
    once = m(a)
    assert m(once) == once
    assert m(a, a) == once


@given(records, st.randoms(use_true_random=False))
def test_output_is_byte_identical_whatever_the_order(a, rnd):
    shuffled = list(a)
    rnd.shuffle(shuffled)
    assert '\n'.join(m(a)) == '\n'.join(m(shuffled))


@given(records, records)
def test_compaction_distributes_over_union(a, b):
    assert m(a + b) == m(m(a), m(b))


@given(records, records)
def test_no_resurrection(a, b):
    """A stale copy never brings back a cancelled job or an older result."""
    merged = m(a)
    out = m(merged, b)
    cancelled = {l[:8] for l in merged if l.endswith(' cancel')}
    for line in out:
        if line[0] != '.' and line[:8] in cancelled:
            assert line.endswith(' cancel'), line
    best = {}
    for line in merged:
        r = jobline.parse(line)
        if isinstance(r, jobline.Result):
            best[(r.id, r.host)] = r.rank()
    for line in out:
        r = jobline.parse(line)
        if isinstance(r, jobline.Result) and (r.id, r.host) in best:
            assert r.rank() >= best[(r.id, r.host)]
    for key in best:
        if key[0] not in {l[:8] for l in out if l.endswith(' cancel')}:
            assert any(l.startswith('%s r %s ' % key) for l in out)


def test_merge_keeps_one_result_per_job_and_host():
    jid = JOB_IDS[0]
    lines = [jobline.Result(jid, 'pump-1', k, T0 + k * DAY, 'ok').line() for k in range(50)]
    out = m(lines, [jobline.canonical(JOBS[0])])
    assert len(out) == 2
    assert ' r pump-1 49 ' in out[1]


def test_merge_reports_every_bad_line_where_it_is_however_often_it_recurs():
    """merging.merge parses each distinct line once: a bad line repeated in
    one file and in the next is still reported at each place."""
    errors = []
    a = ['each nonsense', JOBS[0], 'each nonsense', '', '# a comment']
    b = [JOBS[0], 'each nonsense', 'any:2 2026-12-01T06:00Z x']
    assert merging.merge(('a.txt', a), ('b.txt', b), errors=errors) == [jobline.canonical(JOBS[0])]
    assert [e.split(': ')[0] for e in errors] == ['a.txt:1', 'a.txt:3', 'b.txt:2', 'b.txt:3']
    assert 'bad time' in errors[2] and 'P out of range' in errors[3]


def test_conflict_is_reported_and_resolved_deterministically():
    jid = JOB_IDS[0]
    a = [jid + ' each 2026-12-01T06:00Z led blink 3 ; every=1d within=2h']
    b = [jid + ' who:pump 2026-12-01T06:00Z log other']
    c1, c2 = [], []
    assert merging.merge(a, b, conflicts=c1) == merging.merge(b, a, conflicts=c2)
    assert c1 and c1 == c2


def test_done_instance_is_not_run_again_after_merge_with_stale_copy():
    job = jobline.parse(jobline.canonical(JOBS[0]))
    done = jobline.Result(job.id, 'pump-1', 3, T0 + 3 * DAY, 'ok').line()
    stale = [job.line(), jobline.Result(job.id, 'pump-1', 1, T0 + DAY, 'ok').line()]
    merged = m([job.line(), done], stale)
    mine = [jobline.parse(l) for l in merged if ' r pump-1 ' in l][0]
    act = plan.decide(job, 'pump-1', T0 + 3 * DAY + 60, (mine.k, mine.outcome, mine.attempt))
    assert act[0] == plan.WAIT and act[1] == 4


# -- the parser ---------------------------------------------------------------

BAD = [
    ('bogus 2026-12-01T06:00Z x', 'unknown type'),
    ('each 2026-12-01 x', 'bad time'),
    ('each 2026-12-01T06:00 x', 'bad time'),
    ('each 2026-02-30T06:00Z x', 'no such date'),
    ('each 2026-12-01T06:00Z', 'missing command'),
    ('each 2026-12-01T06:00Z x ; every=3y', 'bad duration'),
    ('each 2026-12-01T06:00Z x ; colour=red', 'unknown option'),
    ('any:1.5 2026-12-01T06:00Z x', 'out of range'),
    ('any:0 2026-12-01T06:00Z x', 'out of range'),
    ('any:abc 2026-12-01T06:00Z x', 'bad probability'),
    ('who: 2026-12-01T06:00Z x', 'needs a substring'),
    ('one 2026-12-01T06:00Z x ; tick=1m', 'only for any'),
    ('each 2026-12-01T06:00Z x ; every=1d every=2d', 'twice'),
    ('each 2026-12-01T06:00Z log "open', 'unterminated quote'),
    ('abcdefgh r pump 1 2 done -', 'bad outcome'),
    ('.z foo', 'unknown fleet record'),
    ('each 2026-12-01T06:00Z x ; every=1h within=2h', 'longer than every'),
]


@pytest.mark.parametrize('line,reason', BAD)
def test_bad_lines_have_reasons(line, reason):
    with pytest.raises(ParseError) as e:
        jobline.parse(line)
    assert reason in str(e.value)


def test_check_reports_file_and_line_and_keeps_good_lines():
    errors = []
    text = ['# fleet', JOBS[0], 'each nonsense', '', JOBS[1], 'any:2 2026-12-01T06:00Z x']
    good = list(merging.canonical_lines(text, 'jobs.txt', errors))
    assert len(good) == 2
    assert len(errors) == 2
    assert errors[0].startswith('jobs.txt:3: bad time')
    assert errors[1].startswith('jobs.txt:6: P out of range')


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=80))
def test_parser_fuzz_never_crashes(text):
    try:
        r = jobline.parse(text)
    except ParseError:
        return
    if r is not None:
        line = r.line()
        assert jobline.canonical(line) == line  # canonical is a fixed point


@given(st.lists(st.sampled_from(JOBS[0].split(' ') + ['"a b"', ';', 'every=1d', 'x', '  ']), max_size=12))
def test_parser_fuzz_on_job_shaped_text(words):
    try:
        r = jobline.parse(' '.join(words))
    except ParseError:
        return
    if r is not None:
        assert jobline.canonical(r.line()) == r.line()


def test_canonical_form_and_quotes():
    j = jobline.parse('each   2026-12-01T06:00:00Z   log  "hello  world" x ; within=1d every=1d')
    assert j.text() == 'each 2026-12-01T06:00Z log "hello  world" x ; every=1d'
    assert j.args() == ['hello  world', 'x']
    assert jobline.parse(j.line()).line() == j.line()


def test_same_line_same_id_salted_add_differs():
    a = jobline.parse(JOBS[0])
    b = jobline.parse('each  2026-12-01T06:00Z led blink 3 ; within=2h every=1d')
    assert a.id == b.id
    assert jobline.parse(JOBS[0], salt='1796000000').id != a.id


@given(st.integers(0, 253402300799))
def test_time_round_trip(t):
    assert parse_time(format_time(t)) == t


@given(st.integers(1, 10 ** 7))
def test_duration_round_trip(n):
    assert parse_duration(format_duration(n)) == n


# -- the planner ----------------------------------------------------------------

def job(text):
    return jobline.parse(text)


def test_repeat_instances_are_deterministic():
    j = job(JOBS[0])
    assert plan.due(j, 5) == T0 + 5 * DAY
    assert plan.newest(j, T0 + 5 * DAY + 10) == 5
    assert plan.newest(j, T0 - 1) == -1


def test_each_runs_in_window_and_misses_after():
    j = job(JOBS[0])  # every 1d, within 2h
    assert plan.decide(j, 'gate', T0 - 100)[:3] == (plan.WAIT, 0, T0)
    assert plan.decide(j, 'gate', T0 + 60)[:2] == (plan.RUN, 0)
    assert plan.decide(j, 'gate', T0 + 3 * 3600)[:2] == (plan.MISS, 0)
    assert plan.decide(j, 'gate', T0 + 60, mine=(0, 'ok', 1))[:3] == (plan.WAIT, 1, T0 + DAY)


def test_catch_up_runs_only_the_newest_instance_and_coalesces_misses():
    j = job(JOBS[0])
    now = T0 + 10 * DAY + 60
    act = plan.decide(j, 'gate', now, mine=(2, 'ok', 1))
    assert act[:2] == (plan.MISS, 9)        # 3..9 become one missed record
    act = plan.decide(j, 'gate', now, mine=(9, 'miss', 1))
    assert act[:2] == (plan.RUN, 10)


def test_clock_far_in_the_future_does_not_walk_instances():
    j = job('each 2026-12-01T06:00Z log x ; every=30s within=10s')
    now = parse_time('9999-01-01T00:00:05Z')
    act = plan.decide(j, 'gate', now, mine=(0, 'ok', 1))
    k = (now - j.t0) // 30
    assert act[:2] == (plan.MISS, k - 1)
    assert plan.decide(j, 'gate', now, mine=(k - 1, 'miss', 1))[:2] == (plan.RUN, k)


def test_clock_backwards_runs_nothing_twice():
    j = job(JOBS[0])
    act = plan.decide(j, 'gate', T0 + 60, mine=(5, 'ok', 1))
    assert act[0] == plan.WAIT and act[1] == 6 and act[2] == T0 + 6 * DAY


def test_who_and_on_filters():
    assert plan.decide(job(JOBS[2]), 'gate', T0 + 3600)[0] == plan.IDLE
    assert plan.decide(job(JOBS[2]), 'pump-3', T0 + 3600)[0] == plan.RUN
    assert plan.decide(job(JOBS[1]), 'gate', T0)[0] == plan.IDLE
    assert plan.decide(job(JOBS[1]), 'pump-3', T0)[0] == plan.RUN


def test_one_is_ranked_and_fails_over_after_grace():
    j = job(JOBS[4])
    hs = ['a', 'b', 'c']
    ranks = sorted(plan.rank(j.id, h, hs) for h in hs)
    assert ranks == [0, 1, 2]
    second = [h for h in hs if plan.rank(j.id, h, hs) == 1][0]
    act = plan.decide(j, second, j.t0 + 60, rnk=1)
    assert act[:3] == (plan.WAIT, 0, j.t0 + 3600)
    assert plan.decide(j, second, j.t0 + 3601, rnk=1)[:2] == (plan.RUN, 0)
    assert plan.decide(j, second, j.t0 + 3601, done_k=0, rnk=1)[0] == plan.WAIT
    assert plan.decide(j, 'stranger', j.t0, rnk=None)[0] == plan.IDLE


def test_any_fires_from_the_injected_source_and_stops_when_done():
    j = job('any:0.5 2026-12-01T00:00Z sensor upload ; every=1d tick=1m')
    always = lambda key: 0
    never = lambda key: 1 << 32
    assert plan.decide(j, 'a', j.t0 + 5, rnd=always)[:2] == (plan.RUN, 0)
    w = plan.decide(j, 'a', j.t0 + 5, rnd=never)
    assert w[0] == plan.WAIT and w[2] > j.t0
    assert plan.decide(j, 'a', j.t0 + 5, done_k=0, rnd=always)[0] == plan.WAIT
    # a seeded hash source: the fire tick is the same on every evaluation
    rnd = plan.hash_rnd('seed')
    first = plan.decide(j, 'a', j.t0, rnd=rnd)
    t = first[2] if first[0] == plan.WAIT else j.t0
    assert plan.decide(j, 'a', t, rnd=rnd)[0] == plan.RUN


def test_crash_mid_run_is_at_most_once_unless_retry():
    j = job(JOBS[0])
    assert plan.decide(j, 'gate', T0 + 60, mine=(0, 'run', 1))[0] == plan.FAIL
    r = job('each 2026-12-01T06:00Z led blink 3 ; every=1d within=2h retry=2')
    assert plan.decide(r, 'gate', T0 + 60, mine=(0, 'run', 1))[:4] == (plan.RUN, 0, T0 + 60, 2)
    assert plan.decide(r, 'gate', T0 + 60, mine=(0, 'err', 2))[:4] == (plan.RUN, 0, T0 + 60, 3)
    assert plan.decide(r, 'gate', T0 + 60, mine=(0, 'err', 3))[0] == plan.WAIT


def test_hosts_with_the_same_file_decide_the_same():
    """Each host merges the records in its own order and split; what it
    then decides for each job at each time equals what the raw records say,
    read without merge: its own best result (the greatest instance, then
    attempt, then run < err < miss < ok: docs/jobline.md#merge) and its
    rank among every host listed."""
    rng = random.Random(7)
    lines = [jobline.canonical(j) for j in JOBS] + ['.h a', '.h b', '.h c']
    for _ in range(30):
        jid = rng.choice(JOB_IDS)
        lines.append(jobline.Result(jid, rng.choice('abc'), rng.randrange(3), T0 + rng.randrange(DAY),
                                    rng.choice(['ok', 'err', 'run', 'miss']), rng.randrange(1, 3)).line())
    hosts = sorted({l[3:] for l in lines if l.startswith('.h ')})
    rank_of = {'run': 0, 'err': 1, 'miss': 2, 'ok': 3}
    raw = [jobline.parse(l) for l in lines]

    def expected_mine(jid, h):
        rs = [r for r in raw if isinstance(r, jobline.Result) and r.id == jid and r.host == h]
        if not rs:
            return None
        b = max(rs, key=lambda r: (r.k, r.attempt, rank_of[r.outcome]))
        return (b.k, b.outcome, b.attempt)

    jobs = [jobline.parse(jobline.canonical(j)) for j in JOBS]
    decided = 0
    for h in hosts:
        order = lines[:]
        rng.shuffle(order)
        cut = rng.randrange(len(order))
        copy = [jobline.parse(l) for l in m(order[:cut], order[cut:])]
        hs = [r.rest for r in copy if isinstance(r, jobline.Fleet) and r.kind == "h"]
        assert hs == hosts
        assert sorted(r.id for r in copy if isinstance(r, jobline.Job)) == sorted(JOB_IDS)
        own = {}
        for r in copy:
            if isinstance(r, jobline.Result) and r.host == h:
                assert r.id not in own, 'two results of one job and host'
                own[r.id] = (r.k, r.outcome, r.attempt)
        for now in range(T0 - DAY, T0 + 3 * DAY, 3571):
            for j in jobs:
                got = plan.decide(j, h, now, mine=own.get(j.id), rnk=plan.rank(j.id, h, hs), rnd=plan.hash_rnd(h))
                want = plan.decide(j, h, now, mine=expected_mine(j.id, h), rnk=plan.rank(j.id, h, hosts),
                                   rnd=plan.hash_rnd(h))
                assert got == want, (h, now, j.id)
                decided += 1
    assert decided == len(hosts) * len(jobs) * len(range(T0 - DAY, T0 + 3 * DAY, 3571))


def test_schedule_rows():
    rows = list(schedule.schedule(job(JOBS[4]), ['a', 'b', 'c'], T0 - 6 * 3600, T0 + DAY))
    assert [r['state'] for r in rows].count('run') == 2  # instances 0 and 1
    assert sorted(r['rank'] for r in rows if r['instance'].endswith('.0')) == [0, 1, 2]
    with pytest.raises(ValueError):
        list(schedule.schedule(job('each 2026-12-01T00:00Z x ; every=1s'), ['a'], T0, T0 + 10 * DAY, limit=1000))


@given(record(), st.lists(st.tuples(st.integers(0, 80), st.sampled_from(list(' x1-\t\x7f"é.') + ['ok2', ' r ', '00'])), max_size=3))
def test_fast_path_accepts_only_what_parse_writes_back(line, edits):
    """The CPython regex accelerator is not a second parser: whatever it
    accepts, parse() accepts and writes back unchanged."""
    for i, s in edits:
        line = line[:i] + s + line[i + 1:]
    if jobtext.fast_canonical is None:
        pytest.skip('no accelerator on this interpreter')
    if jobtext.fast_canonical(line) is not None:
        assert jobline.parse(line).line() == line
