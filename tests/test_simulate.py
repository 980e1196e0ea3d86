"""companion simulate: seeded, reproducible, on the real core (docs/simulate.md)."""
import copy
import gc
import io
import json
import math
import os
import sys
from contextlib import redirect_stdout

import pytest
from hypothesis import given, settings, strategies as st

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, 'firmware'))
sys.path.insert(0, ROOT)

from companion.commands.simulate import command, sweep_values  # noqa: E402
from companion.simulate.engine import Sim  # noqa: E402
from companion.simulate.parallel import simulate  # noqa: E402
from companion.simulate.report import predict_any  # noqa: E402
from companion.simulate.scenario import SYNC_OVERHEAD, _time, dumps, expand, load, select  # noqa: E402
from companion.errors import UserError  # noqa: E402
from companion.simulate import logs  # noqa: E402
from sporadic.core import jobline, plan  # noqa: E402
from sporadic.core import timefmt
from sporadic.desktop import merging


def scn(jobs, hosts, end='2026-01-03T00:00Z', **kw):
    d = {'name': 't', 'start': '2026-01-01T00:00Z', 'end': end, 'jobs': jobs, 'hosts': hosts}
    d.update(kw)
    return d


MIXED = scn("""
each 2026-01-01T06:00Z log rotate ; every=6h
one 2026-01-01T03:00Z backup ; every=4h grace=30m
any:0.01 2026-01-01T00:00Z upload ; every=3h within=2h tick=5m
who:pump-1 2026-01-01T07:00Z relay on ; every=12h
""", [{'ids': 'pump-{1..6}', 'uptime': 'outages 2/d 3h', 'drift_ppm': 50},
      {'ids': ['logger-a', 'logger-b'], 'uptime': 'duty 1d 0.5'}],
    end='2026-01-05T00:00Z',
    visit=[{'companion': 'laptop', 'hosts': 'pump-*', 'interval': '6h', 'jitter': '1h', 'fail': 0.1}],
    contact=[{'a': 'pump-{1..3}', 'b': '*', 'rate': '4/d', 'fail': 0.1}],
    mesh=[{'parties': 'logger-*', 'interval': '30m'}],
    partition=[{'sections': [['pump-{1..3}', 'laptop'], ['pump-{4..6}', 'logger-*']],
                'split_at': '2026-01-02T00:00Z', 'heal_at': '2026-01-03T00:00Z'}])


def test_patterns():
    assert expand('pump-{1..3}') == ['pump-1', 'pump-2', 'pump-3']
    assert expand('n-{08..10}') == ['n-08', 'n-09', 'n-10']
    assert expand('r{1..2}c{1..2}') == ['r1c1', 'r1c2', 'r2c1', 'r2c2']
    names = ['pump-1', 'pump-2', 'logger-a', 'laptop']
    assert select('pump-*', names) == ['pump-1', 'pump-2']
    assert select(['logger-a', 'pump-{2..3}'], names) == ['pump-2', 'logger-a']
    assert select(None, names) == names


def test_reproducible_byte_identical(tmp_path):
    a = json.dumps(simulate(copy.deepcopy(MIXED), 7), sort_keys=True)
    b = json.dumps(simulate(copy.deepcopy(MIXED), 7), sort_keys=True)
    assert a == b
    c = json.dumps(simulate(copy.deepcopy(MIXED), 8), sort_keys=True)
    assert a != c
    # and through the command, text and JSON
    p = tmp_path / 's.toml'
    p.write_text(dumps(MIXED))
    assert load(str(p)) == MIXED      # scenario.dumps writes what load reads back
    outs = []
    for _ in range(2):
        for js in (False, True):
            args = _args(str(p), seed=7, json=js)
            f = io.StringIO()
            with redirect_stdout(f):
                assert command(args) == 0
            outs.append(f.getvalue())
    assert outs[0] == outs[2] and outs[1] == outs[3]
    assert json.loads(outs[1])['seed'] == 7


def test_a_run_leaves_no_reference_cycles():
    # a run turns the cyclic collector off (engine.py): whatever it drops
    # must be freed by reference counting, or a year's run would keep it
    gc.collect()
    simulate(MIXED, 1, workers=1)
    simulate(MIXED, 2, verify=True)
    assert gc.collect() == 0
    assert gc.isenabled()


def test_verify_against_merge():
    # every sync (pairwise visits, contacts, mesh rounds, across a split) is
    # checked against merging.merge of the literal line sets: same file, same
    # bytes; every decision against one made from the literal file
    rep = simulate(copy.deepcopy(MIXED), 3, verify=True)
    assert rep['counts']['verified_syncs'] > 50
    assert rep['counts']['decisions'] > 100
    fast = simulate(copy.deepcopy(MIXED), 3)
    fast['counts'].pop('verified_syncs', None)
    rep['counts'].pop('verified_syncs')
    assert json.dumps(fast, sort_keys=True) == json.dumps(rep, sort_keys=True)


def test_verify_a_companion_raised_past_its_first_thousand_versions():
    # a host that last synced with the companion lacks what the companion
    # got since; the lines superseded inside that (sent only as their
    # newest) are summed over the companion's raises since the host's mark
    # (logs.Raises): checked against merging.merge at every sync while the
    # raises pass 1,024 versions (the tree doubles as they come), with visits 10 min
    # to 3 h apart so a host's range spans zero to several of another's
    s = scn('''
each 2026-01-01T00:20Z a ; every=2h
each 2026-01-01T00:50Z b ; every=1d on=pump-1
any:0.05 2026-01-01T01:00Z c ; every=3h within=2h tick=10m
one 2026-01-01T02:40Z d ; every=5h grace=20m
''', [{'ids': 'pump-{01..30}', 'uptime': 'outages 2/d 2h', 'drift_ppm': 40}],
        end='2026-01-05T00:00Z',
        visit=[{'companion': 'laptop', 'hosts': '*', 'interval': '90m', 'jitter': '80m', 'fail': 0.1}])
    sim = Sim(copy.deepcopy(s), 1, True)
    rep = sim.run()
    assert sim.raises[sim.names.index('laptop')].ver > 1024
    assert rep['counts']['verified_syncs'] > 1024
    fast = simulate(copy.deepcopy(s), 1, workers=1)
    rep['counts'].pop('verified_syncs')
    assert json.dumps(fast, sort_keys=True) == json.dumps(rep, sort_keys=True)


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2 ** 32))
def test_raises_spare_what_a_holder_at_any_mark_is_spared(seed):
    # logs.Raises.spared(mark): the bytes of records that a holder of the
    # vector at `mark` lacks but that are superseded inside what it lacks,
    # summed per origin by their definition (a later record of the same job
    # in the range), at every power of two and at random marks, across the
    # tree's doublings (2,100 raises)
    import random
    rng = random.Random(seed)

    class Model(logs.LogModel):
        P = H = 7
        J = 4
        verify = False
    m = Model()
    m.init_logs()
    rs = logs.Raises()
    now = [0] * m.P      # the vector the raises bring: party 6's, origins 0..5
    at = [now[:]]        # the vector at each version
    jobs = [[None] for _ in range(6)]    # per origin: the job of each record
    while rs.ver < 2100:
        h = rng.randrange(6)
        for _ in range(rng.randrange(4)):
            jobs[h].append(rng.randrange(m.J))
            m._write(h, jobs[h][-1], 0, logs.OK_C, None, rng.randrange(20, 90))
        end = len(jobs[h]) - 1
        if end > now[h]:
            rs.raise_(h, now[h], end, m.logs[h])
            now[h] = end
            at.append(now[:])

    def spared(mark):
        tot = 0
        for h in range(6):
            lg = m.logs[h]
            later = set()
            for i in range(now[h], at[mark][h], -1):
                if jobs[h][i] in later:
                    tot += lg.RZ[i]
                later.add(jobs[h][i])
        return tot
    assert rs.ver == len(at) - 1 > 2048
    for mark in [0, 1, 1023, 1024, 1025, 2047, 2048, 2049, rs.ver - 1, rs.ver] + rng.sample(range(rs.ver), 20):
        assert rs.spared(mark) == spared(mark), mark


def test_jobs_shared_among_processes_give_the_report_of_one():
    # no decision about a job reads another job's records, so runs over
    # groups of the jobs in worker processes assemble into the same report,
    # duplicates, bytes and files at the end included
    seen = []
    one = simulate(copy.deepcopy(MIXED), 3, workers=1, progress=seen.append)
    for n in (2, 3):
        shared = simulate(copy.deepcopy(MIXED), 3, workers=n, progress=seen.append)
        assert json.dumps(shared, sort_keys=True) == json.dumps(one, sort_keys=True)
    # progress: the share of the simulated time done (every 256 sync events)
    assert len(seen) >= 3 and all(0 < f < 1 for f in seen)
    seen = []
    simulate(dict(copy.deepcopy(MIXED), end='2026-01-15T00:00Z'), 3, workers=1, progress=seen.append)
    assert len(seen) >= 3 and seen == sorted(set(seen))
    assert one['duplicates'] and one['sync']['bytes'] > one['sync']['ok'] * one['sync']['overhead_per_party']
    # on an hourly grid every host fires `any:1` on the hour: which host the
    # loop wakes first depends on when each wake was planned, which the other
    # jobs decide; the report lists runs of one instant in host order
    ties = scn('''
each 2026-01-01T00:20Z a ; every=1d
one 2026-01-01T03:40Z b ; every=7d grace=1h
any:1 2026-01-01T05:00Z tie ; every=1d within=6h tick=1h
''', [{'ids': 'pump-{01..30}', 'uptime': 'outages 1/w 6h', 'drift_ppm': 20}],
        end='2026-01-21T00:00Z', resolution='1h',
        visit=[{'companion': 'laptop', 'hosts': '*', 'interval': '1d', 'jitter': '2h'}])
    one = simulate(copy.deepcopy(ties), 1, workers=1)
    assert json.dumps(simulate(copy.deepcopy(ties), 1, workers=2), sort_keys=True) == json.dumps(one, sort_keys=True)
    assert any(len(set(r['at'] for r in d['runs'])) < len(d['runs']) for d in one['duplicates'])


# a run each of whose two workers takes minutes: the tests below end it early
LONG = scn('''
each 2026-01-01T00:10Z a ; every=1h
each 2026-01-01T00:20Z b ; every=1h
each 2026-01-01T00:30Z c ; every=1h
each 2026-01-01T00:40Z d ; every=1h
''', [{'ids': 'pump-{001..500}', 'drift_ppm': 20}], end='2027-01-01T00:00Z',
    visit=[{'companion': 'laptop', 'hosts': '*', 'interval': '1d', 'jitter': '2h'}])


def test_a_worker_that_fails_stops_the_others_at_once():
    import multiprocessing
    from companion.simulate import parallel
    sim = Sim(copy.deepcopy(LONG), 1)
    sim.job_texts[0] = 'each 2026-01-01T00:10Z'     # the worker given job 0 refuses it
    with pytest.raises(parallel.WorkerFailed, match=r'worker [12] of 2 failed:(.|\n)*UserError'):
        parallel.run_parts(sim, 2)
    # the other worker, minutes from its end, was stopped and reaped
    assert multiprocessing.active_children() == []


def _simulate_in_two_workers(tmp_path):
    """`companion simulate` of LONG in two workers -> (the process, the
    workers' pids), once both are forked (found through /proc)."""
    import subprocess
    import time
    path = tmp_path / 'long.toml'
    path.write_text(dumps(LONG))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, 'firmware')]))
    p = subprocess.Popen([sys.executable, '-m', 'companion.cli', 'simulate', str(path), '--workers', '2'],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    workers = []
    deadline = time.monotonic() + 120
    while len(workers) < 2 and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)    # waiting for the event (both workers forked), not for a duration
        try:
            # read each time: just after Popen the child may not have exec'd yet
            with open('/proc/%d/cmdline' % p.pid, 'rb') as f:
                cmdline = f.read()
            with open('/proc/%d/task/%d/children' % (p.pid, p.pid)) as f:
                kids = [int(c) for c in f.read().split()]
        except OSError:
            kids = []
        workers = []
        for c in kids:      # forked workers carry the command's own command line
            try:
                with open('/proc/%d/cmdline' % c, 'rb') as f:
                    if f.read() == cmdline:
                        workers.append(c)
            except OSError:
                pass
    if len(workers) < 2:
        p.kill()
        p.communicate()
        pytest.fail('the two workers did not start')
    return p, workers


_PROC = pytest.mark.skipif(not os.path.isdir('/proc/self/task'), reason='finds the workers through /proc (Linux)')


@pytest.mark.slow
@_PROC
def test_a_killed_worker_ends_the_command_with_one_line(tmp_path):
    import signal
    p, workers = _simulate_in_two_workers(tmp_path)
    try:
        os.kill(workers[0], signal.SIGKILL)     # as the kernel's OOM killer would
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 2 and out == ''
    assert err.count('\n') == 1 and err.startswith('companion: simulate: worker ')
    assert 'died (killed by SIGKILL' in err and '--workers 1' in err
    assert not os.path.exists('/proc/%d' % workers[1])     # the other one stopped and reaped


@pytest.mark.slow
@_PROC
def test_workers_stop_when_the_command_is_killed(tmp_path):
    import signal
    import time
    p, workers = _simulate_in_two_workers(tmp_path)
    os.kill(p.pid, signal.SIGKILL)      # no cleanup runs in the parent
    p.communicate()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        alive = []
        for w in workers:
            try:
                with open('/proc/%d/stat' % w) as f:
                    if f.read().rsplit(')', 1)[1].split()[0] != 'Z':
                        alive.append(w)
            except OSError:
                pass
        if not alive:
            break
        time.sleep(0.05)    # waiting for the workers to notice, at their next progress report
    for w in alive:
        os.kill(w, signal.SIGKILL)
    assert not alive, 'workers still running after their parent was killed'


def test_each_runs_once_per_host_per_instance():
    s = scn("""
each 2026-01-01T01:00Z a ; every=1h
each 2026-01-01T01:30Z b ; every=2h on=pump
who:log 2026-01-01T00:10Z c ; every=3h
""", [{'ids': 'pump-{1..4}', 'drift_ppm': 100}, {'ids': 'logger-{1..3}'}],
        visit=[{'companion': 'c', 'hosts': '*', 'interval': '1d'}])
    rep = simulate(s, 1)
    a, b, c = rep['jobs']
    assert (a['eligible_hosts'], b['eligible_hosts'], c['eligible_hosts']) == (7, 4, 3)
    for r in (a, b, c):
        assert r['instances'] > 10
        assert r['runs'] == r['expected_runs'] == r['instances'] * r['eligible_hosts']
        assert r['duplicate_runs'] == 0 and r['missed'] == 0
        assert abs(r['delay']['mean_s']) < 60


def test_each_misses_when_down():
    # up half of each day: a job due while down runs late inside its window
    # or is missed, never run late outside it
    s = scn('each 2026-01-01T00:00Z a ; every=1h within=10m\n',
            [{'ids': 'h-{1..4}', 'uptime': 'duty 1d 0.5'}], end='2026-01-11T00:00Z')
    r = simulate(s, 1)['jobs'][0]
    assert r['runs'] + r['missed'] == r['expected_runs']
    assert 0.4 < r['missed'] / r['expected_runs'] < 0.6
    assert r['delay']['max_s'] < 600


def test_miss_reason_is_the_boards():
    # a clock 1 % slow, set by the companion once a day: it jumps 864 s
    # forward (more than device/clock.py's JUMP_S, so the board records the
    # jump) and skips whole windows of a 1-minute job; the host records those
    # misses with plan.miss_reason's 'clock jump', as a board does, not 'asleep'
    s = scn('each 2026-01-01T00:00Z a ; every=5m within=1m\n',
            [{'ids': 'h-{1..2}', 'drift_ppm': [-10000, -10000]}], end='2026-01-04T00:00Z',
            visit=[{'companion': 'c', 'hosts': '*', 'interval': '1d', 'phase': 'start'}])
    sim = Sim(s, 1, verify=True)
    rep = sim.run()
    assert rep['jobs'][0]['missed'] > 0
    misses = [line for lg in sim.logs[:2] for line in lg.lines[1:] if jobline.parse(line).outcome == 'miss']
    assert len(misses) == 4          # two hosts, two corrections after the first visit
    assert all(line.endswith(' - clock jump') for line in misses)
    # the same hosts with true clocks miss nothing
    s['hosts'][0]['drift_ppm'] = 0
    assert simulate(s, 1)['jobs'][0]['missed'] == 0


def _one(mesh, grace='10m', outages=None, hosts=5, days=4):
    h = {'ids': 'h-{1..%d}' % hosts}
    if outages:
        h['uptime'] = outages
    return scn('one 2026-01-01T00:00Z job ; every=1h grace=%s\n' % grace, [h],
               end='2026-01-%02dT00:00Z' % (1 + days), mesh=[{'parties': '*', 'interval': mesh, 'offset': '1m'}])


def test_one_exactly_once_when_sync_faster_than_grace():
    r = simulate(_one('5m'), 1)['jobs'][0]
    assert r['instances'] >= 90
    assert r['duplicate_runs'] == 0 and r['missed'] == 0 and r['runs'] == r['instances']
    assert r['delay']['max_s'] == 0
    # slower than the grace: rank 1 starts before it can know
    r = simulate(_one('25m'), 1)['jobs'][0]
    assert r['duplicate_runs'] > 0


def test_all_knew_is_the_next_round_after_the_run():
    # rounds at :01, :06, ...; the first-ranked host runs each instance at
    # :00, every host has it in the :01 round: all knew 60 s after the run
    # (the simulator takes each host's wakes up to its syncs, so hosts learn
    # out of time order; the figure must not show it)
    r = simulate(_one('5m'), 1)['jobs'][0]
    assert r['all_knew'] == {'n': r['instances_run'], 'mean_s': 60.0, 'p95_s': 60, 'max_s': 60, 'never': 0}
    # hosts down for hours learn late or, down at the end, never
    r = simulate(_one('5m', outages='outages 3/d 4h'), 1)['jobs'][0]
    assert r['all_knew']['n'] + r['all_knew']['never'] == r['instances_run']
    assert r['all_knew']['max_s'] > 3600 and r['all_knew']['never'] > 0


def test_one_down_hosts_cost_delay_then_misses():
    up = simulate(_one('5m', grace='10m'), 1)['jobs'][0]
    down = simulate(_one('5m', grace='10m', outages='outages 3/d 4h'), 1)['jobs'][0]
    assert up['delay']['p95_s'] == 0
    assert down['delay']['p95_s'] >= 600          # a rank's grace per host down
    # a short window and few hosts: when every ranked host is down it is missed
    s = _one('5m', grace='20m', outages='outages 3/d 6h', hosts=2)
    s['jobs'] = 'one 2026-01-01T00:00Z job ; every=1h within=30m grace=20m\n'
    r = simulate(s, 1)['jobs'][0]
    assert r['missed'] > 0 and r['runs'] + r['missed'] >= r['instances']


def test_rank_matches_plan_rank():
    s = _one('5m', hosts=9)
    sim = Sim(s, 1)
    names = [h.name for h in sim.hosts]
    for x, n in enumerate(names):
        assert sim._rank(0, x) == plan.rank(sim.jobs[0].id, n, names)


def test_any_analytic_agreement():
    # N always-up hosts, p per tick, all merging every S: the closed form of
    # docs/simulate.md against the simulator, within 3 sigma
    s = scn('any:0.02 2026-01-01T00:00Z upload ; every=2h within=2h tick=1m\n',
            [{'ids': 'h-{1..5}'}], end='2026-01-26T00:00Z',
            mesh=[{'parties': '*', 'interval': '20m', 'offset': '7m'}])
    rep = simulate(s, 1)
    a = rep['analytic'][0]
    assert a['applies'] and a['instances_run'] >= 250
    assert 0.3 < a['predicted_p_dup'] < 0.6
    assert abs(a['measured_p_dup'] - a['predicted_p_dup']) <= 3 * a['sigma']
    assert abs(a['measured_runs_per_run_instance'] - a['predicted_runs_per_run_instance']) < 0.15
    # faster syncs, fewer duplicates; still within the error
    s['mesh'][0]['interval'] = '4m'
    b = simulate(s, 2)['analytic'][0]
    assert b['predicted_p_dup'] < a['predicted_p_dup'] / 2
    assert abs(b['measured_p_dup'] - b['predicted_p_dup']) <= 3 * b['sigma']
    # the check says when it does not apply
    s['mesh'][0]['fail'] = 0.1
    c = simulate(s, 2)['analytic'][0]
    assert not c['applies'] and 'fail' in c['why_not']


def test_predict_any_limits():
    # no sync inside the window: every host draws the whole window
    n, p, ticks = 4, 0.01, 60
    pr, pd, er = predict_any(n, p, 60, 3600, 0, 10 ** 9, 10 ** 8)
    a = 1 - (1 - p) ** ticks
    assert math.isclose(pr, 1 - (1 - a) ** n)
    assert math.isclose(er, n * a)
    assert math.isclose(pd, 1 - (1 - a) ** n - n * a * (1 - a) ** (n - 1))
    # a sync before every tick: nobody can fire twice... but two can fire at one tick
    pr, pd, er = predict_any(2, 1.0, 60, 3600, 0, 60, 0)
    assert pr == 1.0 and pd == 1.0 and er == 2.0


def test_partition_duplicates_reported_across_sections():
    s = scn('one 2026-01-01T00:00Z job ; every=1h grace=10m\n',
            [{'ids': ['a-{1..3}', 'b-{1..3}']}], end='2026-01-04T00:00Z',
            mesh=[{'parties': '*', 'interval': '5m', 'offset': '1m'}],
            partition=[{'sections': [['a-*'], ['b-*']],
                        'split_at': '2026-01-02T00:00Z', 'heal_at': '2026-01-03T00:00Z'}])
    rep = simulate(s, 1)
    r = rep['jobs'][0]
    # exactly once per section: one extra run per instance due while split
    assert r['duplicate_instances'] == r['duplicate_runs'] == 24
    assert r['cross_section_duplicates'] == 24
    dups = rep['duplicates']
    assert len(dups) == 24 and all(d['cross_section'] for d in dups)
    for d in dups:
        assert len(d['runs']) == 2
        assert {x['host'][0] for x in d['runs']} == {'a', 'b'}
        assert '2026-01-02' <= d['due'] < '2026-01-03'
    # after the heal every host learns of both runs
    assert r['all_knew']['never'] == 0
    assert rep['sync']['failed_split'] > 0


def test_file_and_bytes_accounting():
    s = copy.deepcopy(MIXED)
    rep = simulate(s, 1)
    f = rep['file_at_end']
    # jobs + host records + at most one result per (job, host)
    assert f['host_lines_max'] <= 4 + 8 + 4 * 8
    assert rep['sync']['bytes'] >= rep['sync']['ok'] * SYNC_OVERHEAD
    s['sync_overhead'] = 0
    rep0 = simulate(s, 1)
    assert rep0['sync']['bytes'] < rep['sync']['bytes']


def test_errors_are_user_errors():
    with pytest.raises(UserError):
        simulate(scn('each nonsense\n', [{'ids': 'h-1'}]), 1)
    with pytest.raises(UserError):
        simulate(scn('each 2026-01-01T00:00Z a\n', [{'ids': 'h-1', 'uptime': 'sometimes'}]), 1)
    with pytest.raises(UserError):
        simulate(scn('each 2026-01-01T00:00Z a\n', [{'ids': 'h 1'}]), 1)


def test_sweep_and_plot_message(tmp_path):
    p = tmp_path / 's.toml'
    p.write_text(dumps(_one('5m', days=1)))
    f = io.StringIO()
    with redirect_stdout(f):
        command(_args(str(p), sweep='mesh.interval=5m,45m', json=True))
    pts = json.loads(f.getvalue())['points']
    assert [x['value'] for x in pts] == ['5m', '45m']
    d = [x['report']['by_type']['one']['duplicate_runs'] for x in pts]
    assert d[0] == 0 and d[1] > 0
    assert sweep_values('1h..1d', 4) == ['1h', '3h', '8h', '1d']
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        with pytest.raises(UserError, match='matplotlib'):
            command(_args(str(p), sweep='mesh.interval=5m,45m', plot=str(tmp_path / 'x.png')))
    else:
        with redirect_stdout(io.StringIO()):
            command(_args(str(p), sweep='mesh.interval=5m,45m', plot=str(tmp_path / 'x.png')))
        assert (tmp_path / 'x.png').stat().st_size > 1000


def test_sweep_of_a_scenario_with_toml_date_times(tmp_path):
    """`companion simulate X.toml --sweep` as a user types it, on a scenario
    whose start and end are TOML's native date-times (not strings): the
    sweep copies the scenario once a point and must not go through JSON."""
    import subprocess
    text = dumps(_one('5m', days=1))
    text = text.replace('start = "2026-01-01T00:00Z"', 'start = 2026-01-01T00:00:00Z')
    text = text.replace('end = "2026-01-02T00:00Z"', 'end = 2026-01-02T00:00:00Z')
    assert 'start = 2026-01-01T00:00:00Z' in text and 'end = 2026-01-02T00:00:00Z' in text
    p = tmp_path / 'dt.toml'
    p.write_text(text)
    r = subprocess.run([sys.executable, '-m', 'companion.cli', 'simulate', str(p), '--sweep',
                        'mesh.interval=5m,45m', '--json'], capture_output=True, text=True, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    pts = json.loads(r.stdout)['points']
    assert [x['value'] for x in pts] == ['5m', '45m']
    assert all(x['report']['start'] == '2026-01-01T00:00Z' for x in pts)


@pytest.mark.parametrize('name', ['floppy', 'wifi', 'split', 'calendar'])
def test_examples_load_and_run(name):
    s = load(os.path.join(ROOT, 'examples', name + '.toml'))
    # a short slice of each example, to keep the suite fast
    start = _time(s['start'], 'start')
    s['end'] = timefmt.format_time(start + 3 * 86400)
    rep = simulate(s)
    assert rep['hosts'] >= 20 and rep['sync']['ok'] > 0
    assert sum(r['runs'] for r in rep['jobs']) > 0


# -- helpers --

def _args(path, seed=None, json=False, sweep=None, plot=None, steps=6, verify=False, workers=None):
    import argparse
    return argparse.Namespace(scenario=path, seed=seed, json=json, sweep=sweep, plot=plot, steps=steps,
                              verify=verify, workers=workers)
