"""Staged rollouts with abort (docs/jobline.md#staged-rollouts): the core's
rule (rollout.py and rollout.wave, plan.decide, groups.scan's tally), as board,
companion and simulator use it."""
import pytest

from sporadic.core import groups, jobline, plan, rollout
from sporadic.core.jobline import ParseError
from sporadic.core.timeutil import parse_time

T0 = parse_time('2026-12-01T06:00Z')
H = 3600
LINE = 'each 2026-12-01T06:00Z fw update ; waves=10%,30%,100% wave=6h abort=fail>20%/5'


def job(line=LINE):
    return jobline.parse(line)


def test_options_parse_and_write_back_canonically():
    j = job('each 2026-12-01T06:00Z fw update ; abort=fail>20%/5 wave=6h waves=10%,30%,100%')
    assert j.text() == LINE
    assert j.roll.waves == (10, 30, 100) and j.roll.gap == 6 * H
    assert (j.roll.fail, j.roll.least, j.roll.need) == (20, 5, 0)
    w = job('who:pump 2026-12-01T06:00Z fw update ; need=2 waves=50%,100% every=1d')
    assert w.text() == 'who:pump 2026-12-01T06:00Z fw update ; every=1d waves=50%,100% need=2'
    assert job(LINE).id == job(LINE).id   # the options are part of the signed text


@pytest.mark.parametrize('line, why', [
    ('any:0.1 2026-12-01T06:00Z x ; waves=10%,100%', 'only for each and who:'),
    ('one 2026-12-01T06:00Z x ; waves=10%,100%', 'only for each and who:'),
    ('each 2026-12-01T06:00Z x ; wave=1h', 'need waves='),
    ('each 2026-12-01T06:00Z x ; waves=10%,90%', 'last wave is 100%'),
    ('each 2026-12-01T06:00Z x ; waves=30%,10%,100%', 'rise'),
    ('each 2026-12-01T06:00Z x ; waves=10,100%', 'share'),
    ('each 2026-12-01T06:00Z x ; waves=10%,100% abort=fail<5%', 'fail>P%/N'),
    ('each 2026-12-01T06:00Z x ; waves=10%,100% abort=fail>100%/2', '0..99'),
    ('each 2026-12-01T06:00Z x ; waves=10%,100% need=x', 'whole number'),
    ('each 2026-12-01T06:00Z x ; waves=10%,50%,100% wave=12h', 'outside within=1d'),
    ('each 2026-12-01T06:00Z x ; every=1h waves=10%,100% wave=1h', 'outside within=1h'),
])
def test_bad_rollout_options_are_refused_with_a_reason(line, why):
    with pytest.raises(ParseError) as e:
        jobline.parse(line)
    assert why in str(e.value)


def test_waves_split_the_eligible_hosts_by_rank_the_same_everywhere():
    j = job()
    hosts = ['b%03d' % i for i in range(200)]
    waves = [rollout.wave(j, h, hosts) for h in hosts]
    assert [waves.count(w) for w in range(3)] == [20, 40, 140]
    # any order of the host list, and a streamed one, gives the same waves
    assert [rollout.wave(j, h, iter(sorted(hosts, reverse=True))) for h in hosts] == waves
    assert rollout.wave(j, 'stranger', hosts) is None
    # who: ranks among the hosts it names only
    w = job('who:pump 2026-12-01T06:00Z fw update ; waves=50%,100%')
    mixed = ['pump-%d' % i for i in range(10)] + ['gate-%d' % i for i in range(30)]
    assert sorted(rollout.wave(w, h, mixed) for h in mixed if 'pump' in h) == [0] * 5 + [1] * 5
    assert plan.decide(w, 'gate-1', T0, rnk=rollout.wave(w, 'gate-1', mixed))[0] == plan.IDLE


def test_wave_k_starts_wave_times_k_after_due():
    j = job()
    assert plan.decide(j, 'h', T0, rnk=0)[:2] == (plan.RUN, 0)
    assert plan.decide(j, 'h', T0, rnk=2)[:3] == (plan.WAIT, 0, T0 + 12 * H)
    assert plan.decide(j, 'h', T0 + 12 * H, rnk=2, heard=(0, 9, 0))[:2] == (plan.RUN, 0)
    assert plan.decide(j, 'h', T0, rnk=None)[0] == plan.IDLE   # not in the host list: no wave


def test_a_later_wave_aborts_past_the_threshold_and_says_what_it_heard():
    j = job()
    at = T0 + 6 * H
    assert plan.decide(j, 'h', at, rnk=1, heard=(0, 3, 1))[0] == plan.RUN     # 4 heard < 5
    assert plan.decide(j, 'h', at, rnk=1, heard=(0, 4, 1))[0] == plan.RUN     # 20% is not > 20%
    assert plan.decide(j, 'h', at, rnk=1, heard=(0, 3, 2))[:2] == (plan.ABORT, 0)
    assert plan.decide(j, 'h', at, rnk=0, heard=(0, 0, 9))[0] == plan.RUN     # wave 0 never aborts
    # an earlier instance's failures do not stop this one
    d = job(LINE.replace(' ;', ' ; every=1d'))
    assert plan.decide(d, 'h', T0 + 86400 + 6 * H, (0, 'ok', 1), rnk=1, heard=(0, 0, 9))[:2] == (plan.RUN, 1)
    assert j.roll.abort_text(3, 2) == 'abort: 2 failed of 5 heard (fail>20%/5)'


def test_a_later_wave_waits_for_enough_successes_then_misses_at_the_end_of_its_window():
    j = job('each 2026-12-01T06:00Z fw update ; waves=10%,100% wave=6h need=3 within=12h')
    at = T0 + 6 * H
    assert plan.decide(j, 'h', at, rnk=1, heard=(0, 2, 0))[:3] == (plan.WAIT, 0, T0 + 12 * H)
    assert plan.decide(j, 'h', at, rnk=1, heard=(0, 3, 0))[0] == plan.RUN
    assert plan.decide(j, 'h', T0 + 12 * H, rnk=1, heard=(0, 2, 0))[:2] == (plan.MISS, 0)
    assert plan.miss_reason(j, 0, rnk=1, heard=(0, 2, 0)) == 'rollout: 2 ok heard, 3 needed'
    assert plan.miss_reason(j, 0, rnk=1, heard=(0, 3, 0)) == 'asleep'


def test_scan_tallies_the_newest_outcome_of_each_other_host_on_the_newest_instance():
    j = job(LINE.replace(' ;', ' ; every=1d'))
    r = lambda h, k, out: jobline.Result(j.id, h, k, T0 + k, out).line()
    lines = sorted([j.line(), r('a', 0, 'err'), r('a', 1, 'run'), r('a', 1, 'err'),
                    r('b', 1, 'ok'), r('c', 1, 'err'), r('c', 1, 'ok2'), r('d', 1, 'miss'),
                    r('e', 1, 'run'), r('f', 0, 'ok'), r('me', 1, 'err')])
    got = []
    tally = [0, 0, 0]
    groups.scan(lines, 'me', 8, lambda *a: got.append(list(tally)), tally)
    assert got == [[1, 2, 1]]   # b ok, c ok on retry, a failed; run/miss/older and mine not counted
    groups.scan(['.h a'], 'me', 8, lambda *a: got.append(1), tally)
    assert tally == [-1, 0, 0]


MPY_ROLLOUT = r'''
from sporadic.core import jobline, plan, groups, rollout
j = jobline.parse(%r)
hosts = ['b%%03d' %% i for i in range(50)]
print(j.line())
print([rollout.wave(j, h, hosts) for h in hosts])
print([plan.decide(j, 'b001', %d, None, -1, w, None, None, False, (0, ok, err))[0]
       for w, ok, err in ((0, 0, 9), (1, 3, 2), (1, 4, 1), (2, 9, 0))])
t = [0, 0, 0]
groups.scan(sorted([j.line(), j.id + ' r b002 0 1 err -', j.id + ' r b003 0 1 ok -']), 'b001', 8,
            lambda *a: print(t), t)
'''


@pytest.mark.needs('micropython', 'mpy-cross')
def test_the_same_rollout_answers_on_micropython():
    from tests.mpy import run_mpy
    j = job()
    at = T0 + 12 * H
    hosts = ['b%03d' % i for i in range(50)]
    want = [j.line(), str([rollout.wave(j, h, hosts) for h in hosts]),
            str([plan.decide(j, 'b001', at, None, -1, w, None, None, False, (0, ok, err))[0]
                 for w, ok, err in ((0, 0, 9), (1, 3, 2), (1, 4, 1), (2, 9, 0))]), '[0, 1, 1]']
    assert want[2] == "['run', 'abort', 'run', 'run']"
    out = run_mpy(MPY_ROLLOUT % (LINE, at))
    assert out.split('\n')[:4] == want


def test_waves_of_a_host_list_at_once_match_each_hosts_own(tmp_path):
    j = job()
    hosts = ['b%03d' % i for i in range(60)]
    assert rollout.waves(j, hosts) == {h: rollout.wave(j, h, hosts) for h in hosts}


def test_companion_plan_shows_each_boards_wave_and_start(tmp_path, capsys):
    from companion import cli
    f = tmp_path / 'plan.txt'
    hosts = ['b%d' % i for i in range(10)]
    f.write_text(LINE + '\n' + ''.join('.h %s\n' % h for h in hosts))
    assert cli.main(['plan', str(f), '--from', '2026-12-01T00:00Z', '--until', '2026-12-02T00:00Z',
                     '--json']) == 0
    import json
    rows = json.loads(capsys.readouterr().out)
    j = job()
    want = rollout.waves(j, hosts)
    assert {r['host']: (r['wave'], r['at']) for r in rows} == {h: (w, T0 + w * 6 * H) for h, w in want.items()}
    assert sorted(want.values()) == [0, 1, 1, 2, 2, 2, 2, 2, 2, 2]
    assert cli.main(['plan', str(f), '--from', '2026-12-01T00:00Z', '--until', '2026-12-02T00:00Z']) == 0
    out = capsys.readouterr().out
    assert 'run (wave 2)' in out and '18:00' in out


# -- the simulator: rollouts under a sync schedule ---------------------------------

def rollout_scn(hosts, waves, wave, least=2, drift=0):
    return {'name': 'r', 'start': '2026-01-01T00:00Z', 'end': '2026-01-10T00:00Z',
            'failing_actions': ['fwupdate'],
            'jobs': ('each 2026-01-02T00:00Z fwupdate ; waves=%s wave=%s abort=fail>10%%/%d within=7d\n'
                     'each 2026-01-02T00:00Z log ok ; waves=%s wave=%s abort=fail>10%%/%d within=7d\n'
                     % (waves, wave, least, waves, wave, least)),
            'hosts': [{'ids': hosts, 'drift_ppm': drift}],
            'visit': [{'companion': 'laptop', 'hosts': '*', 'interval': '1d'}]}


@pytest.mark.parametrize('waves, wave', [('10%,30%,100%', '1d'), ('5%,100%', '12h'), ('10%,100%', '2d')])
def test_simulated_rollout_stops_within_the_bound_and_a_good_one_reaches_everyone(waves, wave):
    from companion.simulate.engine import Sim
    sim = Sim(rollout_scn('b{01..60}', waves, wave), 1, verify=True)   # every decision against groups.scan
    rep = sim.run()
    bad, good = rep['jobs']
    ro = bad['rollout']
    assert ro['failing'] and ro['waves'][0]['ran'] == ro['waves'][0]['hosts']   # wave 0 always runs
    assert ro['ran'] + ro['aborted'] == 60        # every board ran it or recorded an abort
    assert ro['ran'] <= ro['bound']
    assert ro['aborted'] > 0
    assert good['rollout']['ran'] == good['runs'] == 60 and good['rollout']['aborted'] == 0
    assert rep['counts']['verified_syncs'] > 0


def test_rollout_bound_formula():
    from companion.simulate.report import rollout_bound
    roll = jobline.parse('each 2026-01-02T00:00Z x ; waves=1%,10%,100% wave=1d abort=fail>10%/3 within=7d').roll
    day = 86400
    assert rollout_bound(roll, [10, 90, 900], day) == 100    # wave 2 starts 2S after wave 0
    assert rollout_bound(roll, [10, 90, 900], day // 2) == 10
    assert rollout_bound(roll, [1, 1, 998], day // 2) == 1000  # 3 failures only by wave 2
    assert rollout_bound(roll, [1, 1, 998], 3 * day) == 1000


def test_no_bound_is_claimed_when_clocks_drift():
    from companion.simulate.engine import Sim
    rep = Sim(rollout_scn('b{01..20}', '10%,100%', '1d', drift=50), 1).run()
    assert 'bound' not in rep['jobs'][0]['rollout'] and 'drift' in rep['jobs'][0]['rollout']['bound_why_not']


def test_the_companion_plans_each_boards_wave_and_cancel_stops_those_not_run(tmp_path):
    """next_for (what `jobs` shows a board doing next) decides a rollout with
    the board's wave and what the fleet's copy says the others did; a
    cancel leaves nothing to do for the boards that have not run it."""
    from companion.commands.fleet import next_text
    from companion.fleet import queries as fleetcmd
    from companion.fleet.folder import Fleet
    from companion.fleet.host_list import add_host
    from companion.fleet.jobs_file import add_job, cancel_job
    f = Fleet(str(tmp_path / 'fleet'))
    f.init(insecure=True)
    hosts = ['b%d' % i for i in range(10)]
    for h in hosts:
        add_host(f, h)
    j = add_job(f, LINE.replace("fw update", "log update").replace("20%/5", "0%/1"), now=T0 - H)
    w = rollout.waves(j, hosts)
    nxt = {h: fleetcmd.next_for(f, h, T0 + H)[j.id] for h in hosts}
    assert {h: (n['what'], n['at']) for h, n in nxt.items()} == {
        h: ('run', T0 + H) if w[h] == 0 else ('wait', T0 + w[h] * 6 * H) for h in hosts}
    # the first wave fails, on record: the later waves abort when their turn comes
    failed = [jobline.Result(j.id, h, 0, T0 + 60, 'err').line() for h in hosts if w[h] == 0]
    f.receive(failed)       # as a sync takes them in (syncer._sync)
    f.add_results(failed)
    late = [h for h in hosts if w[h] == 1]
    assert all(fleetcmd.next_for(f, h, T0 + 6 * H)[j.id]['what'] == plan.ABORT for h in late)
    assert next_text(fleetcmd.next_for(f, late[0], T0 + 6 * H)[j.id]) == ', aborts %s.0 now' % j.id
    st = fleetcmd.rollout_states(f, T0 + 6 * H)[j.id]
    assert [(s['wave'], s['failed'], s['waiting']) for s in st['waves']] == [(0, 1, 0), (1, 0, 2), (2, 0, 7)]
    cancel_job(f, j.id)
    assert all(j.id not in fleetcmd.next_for(f, h, T0 + 6 * H) for h in hosts)


def test_waves_combine_with_a_calendar():
    j = job('each 2026-01-01T00:00Z log x ; at="0 6 * * *" within=12h waves=50%,100% wave=3h')
    assert j.text() == 'each 2026-01-01T00:00Z log x ; at="0 6 * * *" within=12h waves=50%,100% wave=3h'
    day = parse_time('2026-01-05T06:00Z')
    act, k, at, _ = plan.decide(j, 'h', day + 60, (j.cal.prev(j.cal.newest(day)), 'ok', 1), rnk=1)
    assert (act, at) == (plan.WAIT, day + 3 * H)
    assert plan.decide(j, 'h', day + 3 * H, (j.cal.prev(k), 'ok', 1), rnk=1, heard=(k, 1, 0))[:2] == (plan.RUN, k)
