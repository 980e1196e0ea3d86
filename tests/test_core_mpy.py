"""The same core, run on the MicroPython unix port under a 64 KB heap: merge
properties, byte-identical output to CPython, parser fuzz, planner answers."""
import json
import random

import pytest

from sporadic.core import jobline, merge, plan
from sporadic.desktop import merging
from tests.mpy import run_mpy
from tests.test_core import JOBS, JOB_IDS, T0

pytestmark = pytest.mark.needs('micropython', 'mpy-cross')

MPY_MERGE = r'''
import json, sys
from sporadic.desktop import merging
while True:
    text = sys.stdin.readline()
    if not text:
        break
    a, b, c = json.loads(text)
    m = merging.merge
    ab = m(a, b)
    assert ab == m(b, a), 'commutative'
    assert m(ab, c) == m(a, m(b, c)), 'associative'
    assert m(ab) == ab and m(a, a) == m(a), 'idempotent'
    assert m(a + b) == m(m(a), m(b)), 'distributes'
    print(json.dumps(ab))
'''


def cases(seed, n):
    rnd = random.Random(seed)
    return [[_rand_records(rnd) for _ in range(3)] for _ in range(n)]


def _rand_records(rnd):
    outcomes = ['run', 'err', 'miss', 'ok']
    lines = []
    for _ in range(rnd.randrange(20)):
        kind = rnd.randrange(6)
        jid = rnd.choice(JOB_IDS)
        if kind == 0:
            lines.append(jobline.canonical(rnd.choice(JOBS)))
        elif kind == 1:
            lines.append(jid + ' cancel')
        elif kind == 2:
            lines.append('.h ' + rnd.choice(['a', 'b', 'pump-1']))
        else:
            lines.append(jobline.Result(jid, rnd.choice(['a', 'b', 'pump-1', 'pump-10']), rnd.randrange(4),
                                        T0 + rnd.randrange(5), rnd.choice(outcomes), rnd.randrange(1, 3),
                                        '-', rnd.choice(['', 'ok', 'a b'])).line())
    return lines


@pytest.mark.slow
def test_merge_properties_hold_on_micropython_and_match_cpython():
    cs = cases(1, 150)
    out = run_mpy(MPY_MERGE, stdin=''.join(json.dumps(c) + '\n' for c in cs))
    got = [json.loads(l) for l in out.splitlines()]
    want = [merging.merge(a, b) for a, b, c in cs]
    assert got == want


MPY_PARSE = r'''
import json, sys
from sporadic.core import jobline
while True:
    text = sys.stdin.readline()
    if not text:
        break
    line = json.loads(text)
    try:
        r = jobline.parse(line)
        print(json.dumps(None if r is None else r.line()))
    except jobline.ParseError as e:
        print(json.dumps('ERR ' + str(e)))
'''


def _cpy_parse(line):
    try:
        r = jobline.parse(line)
        return None if r is None else r.line()
    except jobline.ParseError as e:
        return 'ERR ' + str(e)


@pytest.mark.slow
def test_parser_fuzz_on_micropython_matches_cpython():
    rnd = random.Random(3)
    alphabet = 'eachwonyr:0.1 2026-12T06:00Z;="xq\t#.-' + 'abcdefghijklmnopqrstuv'
    lines = []
    for _ in range(600):
        base = rnd.choice(JOBS + [JOB_IDS[0] + ' r pump 1 2 ok - x', '.h pump-1', JOB_IDS[1] + ' cancel'])
        chars = list(base)
        for _ in range(rnd.randrange(4)):
            op = rnd.randrange(3)
            i = rnd.randrange(len(chars) + 1)
            if op == 0 and chars:
                del chars[min(i, len(chars) - 1)]
            elif op == 1:
                chars.insert(i, rnd.choice(alphabet))
            elif chars:
                chars[min(i, len(chars) - 1)] = rnd.choice(alphabet)
        lines.append(''.join(chars))
    lines += ['', '#x', '\x00\xff', 'each', 'any:', '.', '. h', 'é 2026-12-01T00:00Z x']
    out = run_mpy(MPY_PARSE, stdin=''.join(json.dumps(l) + '\n' for l in lines))
    got = [json.loads(l) for l in out.splitlines()]
    for line, g in zip(lines, got):
        w = _cpy_parse(line)
        if line.isascii():
            assert g == w, line
        else:  # repr() of non-ASCII text differs between the ports; the verdict may not
            assert (g or '').startswith('ERR') == (w or '').startswith('ERR'), line
    assert len(got) == len(lines)
    assert sum(1 for g in got if g and not g.startswith('ERR')) > 50  # the fuzz reached good lines too


MPY_PLAN = r'''
import json, sys
from sporadic.core import jobline, plan
q = json.loads(sys.stdin.read())
hosts = q['hosts']
for text in q['jobs']:
    j = jobline.parse(text)
    for h in hosts:
        rk = plan.rank(j.id, h, hosts)
        for now in q['times']:
            for mine in q['mines']:
                a = plan.decide(j, h, now, None if mine is None else tuple(mine), -1, rk, plan.hash_rnd(h))
                print(json.dumps(list(a)))
'''


def test_planner_answers_identical_on_micropython():
    hosts = ['a', 'pump-1', 'pump-2']
    jobs = JOBS + ['each 2026-12-01T06:00Z log x ; every=30s within=10s retry=1']
    times = [T0 - 5000, T0, T0 + 61, T0 + 7300, T0 + 86400 * 400 + 17, 253402300000]
    mines = [None, [0, 'ok', 1], [0, 'run', 1], [3, 'miss', 1], [10 ** 7, 'ok', 1]]
    q = {'hosts': hosts, 'jobs': jobs, 'times': times, 'mines': mines}
    got = [json.loads(l) for l in run_mpy(MPY_PLAN, stdin=json.dumps(q)).splitlines()]
    want = []
    for text in jobs:
        j = jobline.parse(text)
        for h in hosts:
            rk = plan.rank(j.id, h, hosts)
            for now in times:
                for mine in mines:
                    want.append(list(plan.decide(j, h, now, None if mine is None else tuple(mine), -1, rk, plan.hash_rnd(h))))
    assert got == want


MPY_OUTPUT = r'''
import json, sys
from sporadic.core import jobline
for t in json.loads(sys.stdin.read()):
    print(json.dumps(jobline.Result('j', 'b', 0, 1, 'ok', 1, '-', t).line()))
'''


def test_a_records_text_is_cut_and_cleaned_the_same_on_both_ports():
    # A board's record is read again by the companion (Result from the
    # line): both must make the same text of it or its MAC no longer holds.
    # CPython's strip() drops Unicode spaces that MicroPython's keeps.
    texts = ['\xa0reading 12', 'reading 12\u2003', ' \t a\x01b\x7f ', 'x' * 5000,
             '\u3000' + 'y' * 100, 'é' * 70 + '  ', '', '\n\n']
    out = run_mpy(MPY_OUTPUT, stdin=json.dumps(texts))
    got = [json.loads(l) for l in out.splitlines()]
    want = [jobline.Result('j', 'b', 0, 1, 'ok', 1, '-', t).line() for t in texts]
    assert got == want
    assert want[0].endswith(' \xa0reading 12') and want[3].endswith(' ' + 'x' * jobline._OUTPUT_MAX)
