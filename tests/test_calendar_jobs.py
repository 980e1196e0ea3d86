"""Calendar jobs (at="cron" tz=ZONE, at=sunrise/sunset+-D) through the product: the
job line, `companion check`, `add`, `jobs`, `plan`, the planner's decisions across DST
changes and catch-up, and (slow) a virtual board deployed with --lat/--lon running them."""
import datetime
import json
import math
import os
import zoneinfo

import pytest

from companion import cli
from sporadic.core import jobline, plan
from companion.fleet.zonerule import zone_rule
from sporadic.core import calendar, sun

UTC = datetime.timezone.utc


def epoch(y, mo=1, d=1, h=0, mi=0):
    return int(datetime.datetime(y, mo, d, h, mi, tzinfo=UTC).timestamp())


def run_cli(capsys, *argv):
    capsys.readouterr()
    rc = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


# ---- the line ----

def test_the_line_keeps_the_name_the_user_wrote_and_signs_the_rule():
    j = jobline.parse('each 2026-01-01T00:00Z pump on 30 ; at="0  6 * *   1-5" tz=Europe/Berlin within=1h', zone_rule=zone_rule)
    assert j.text() == ('each 2026-01-01T00:00Z pump on 30 ; at="0 6 * * 1-5" tz=Europe/Berlin '
                        'tzr=CET-1CEST,M3.5.0,M10.5.0/3 within=1h')
    assert jobline.canonical(j.line()) == j.line()
    # a board has no zone database: the signed line (with tzr=) is all it needs;
    # a zone name parses with the companion's zone rule only, passed in
    assert jobline.canonical(j.line()) == j.line()
    with pytest.raises(jobline.ParseError, match='a zone name needs its rule'):
        jobline.parse('each 2026-01-01T00:00Z x ; at=@daily tz=Europe/Berlin')
    s = jobline.parse('who:light 2026-01-01T00:00Z relay on 1 ; at=sunset+90m within=30m')
    assert s.text().endswith('at=sunset+90m within=30m')
    assert jobline.parse('each 2026-01-01T00:00Z x ; at=sunrise-2h').text().endswith('at=sunrise-2h')
    # a POSIX rule in tz= needs no tzr=
    p = jobline.parse('each 2026-01-01T00:00Z x ; at="30 2 * * *" tz=<+0545>-5:45')
    assert p.text().endswith('tz=<+0545>-5:45') and 'tzr=' not in p.text()


BAD = [
    ('each 2026-01-01T00:00Z x ; at="0 6 * *"', 'expected 5 fields'),
    ('each 2026-01-01T00:00Z x ; at="61 6 * * *"', 'minute: 61 out of range 0-59'),
    ('each 2026-01-01T00:00Z x ; at="0 0 30 2 *"', 'never matches'),
    ('each 2026-01-01T00:00Z x ; at=@daily tz=Europe/Atlantis', "unknown time zone 'Europe/Atlantis'"),
    ('each 2026-01-01T00:00Z x ; at=@daily tz=CET-1CEST', 'no ,start,end rule'),
    ('each 2026-01-01T00:00Z x ; at=@daily every=1d', 'at= and every= together'),
    ('each 2026-01-01T00:00Z x ; every=1d tz=Europe/Berlin', 'tz= needs at='),
    ('each 2026-01-01T00:00Z x ; at=sunset+1x', 'bad offset'),
    ('each 2026-01-01T00:00Z x ; at="0 6 * * 1-5', 'unterminated quote'),
]


def test_whether_a_zone_name_parses_does_not_depend_on_what_was_imported():
    """The zone rule is passed where a line is parsed, never installed into
    the core by an import: in a fresh interpreter that has imported the
    whole companion, the core alone still refuses a zone name without its
    rule, and with the companion's rule passed in it resolves."""
    import subprocess
    import sys
    code = ('from sporadic.core import jobline\n'
            'import companion.cli, companion.commands.core, companion.fleet.folder\n'
            'line = "each 2026-01-01T00:00Z x ; at=@daily tz=Europe/Berlin"\n'
            'try:\n    jobline.parse(line)\nexcept jobline.ParseError as e:\n    print("refused:", e)\n'
            'from companion.fleet.zonerule import zone_rule\n'
            'print(jobline.parse(line, zone_rule=zone_rule).text())\n')
    p = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    refused, parsed = p.stdout.splitlines()
    assert refused.startswith('refused: tz=Europe/Berlin: a zone name needs its rule'), refused
    assert parsed.endswith('tz=Europe/Berlin tzr=CET-1CEST,M3.5.0,M10.5.0/3'), parsed


def test_companion_check_gives_file_line_reason(tmp_path, capsys):
    f = tmp_path / 'jobs.txt'
    f.write_text('each 2026-01-01T00:00Z ok ; at="0 6 * * 1-5" tz=America/Chicago\n'
                 + ''.join(line + '\n' for line, _ in BAD))
    rc, out, err = run_cli(capsys, 'check', f)
    assert rc != 0
    lines = out.splitlines()
    assert len(lines) == len(BAD)
    for n, ((_, reason), got) in enumerate(zip(BAD, lines), 2):
        assert got.startswith('%s:%d: ' % (f, n)) and reason in got, got
    assert '1 good record(s), %d bad line(s)' % len(BAD) in err


def test_check_and_add_warn_where_the_zones_table_and_the_boards_rule_disagree(tmp_path, capsys):
    # Morocco's Ramadan hours are listed year by year to 2087, its footer rule is plain
    # +01: a board evaluates the rule. Europe/Berlin's table and rule agree.
    f = tmp_path / 'jobs.txt'
    f.write_text('each 2026-01-01T00:00Z a ; at="0 6 * * *" tz=Europe/Berlin\n'
                 'each 2026-01-01T00:00Z b ; at="0 6 * * *" tz=Africa/Casablanca\n'
                 'each 2026-01-01T00:00Z c ; at="0 6 * * *" tz=<+01>-1\n')
    rc, out, err = run_cli(capsys, 'check', f)
    assert rc == 0 and '3 good record(s), 0 bad line(s), 1 warning(s)' in err
    (line,) = out.splitlines()
    prefix = '%s:2: warning: tz=Africa/Casablanca: from ' % f
    assert line.startswith(prefix) and 'tzr=<+01>-1' in line and 'a board runs this job by the rule' in line
    # the instant it names is the first at which zoneinfo and the rule part, hour by hour
    from companion.fleet import zones
    from sporadic.core import tzrule
    from sporadic.core.timeutil import parse_time
    t = parse_time(line[len(prefix):].split()[0])
    zi, z = zoneinfo.ZoneInfo('Africa/Casablanca'), tzrule.parse('<+01>-1')
    off = lambda u: int(datetime.datetime.fromtimestamp(u, zi).utcoffset().total_seconds())
    now = int(datetime.datetime.now(UTC).timestamp())
    assert off(t) != tzrule.offset(z, t)
    assert t <= now or off(t - 1) == tzrule.offset(z, t - 1)   # (t is now while they differ)
    assert all(off(u) == tzrule.offset(z, u) for u in range(now, t, 3600))
    assert zones.rule_differs('Europe/Berlin', zones.posix_rule('Europe/Berlin'), now, now + 30 * 31556952) is None
    # companion add says the same (the job is added)
    fleet = str(tmp_path / 'fleet')
    assert run_cli(capsys, '--fleet', fleet, 'init')[0] == 0
    rc, out, err = run_cli(capsys, '--fleet', fleet, 'add', 'each +1m log b ; at="0 6 * * *" tz=Africa/Casablanca')
    assert rc == 0 and jobline.is_id(out.strip())
    assert err.startswith('warning: tz=Africa/Casablanca: from ') and len(err.splitlines()) == 1


def test_add_jobs_and_plan_show_the_zone(tmp_path, capsys):
    fleet = str(tmp_path / 'fleet')
    assert run_cli(capsys, '--fleet', fleet, 'init')[0] == 0
    rc, out, err = run_cli(capsys, '--fleet', fleet, 'add',
                           'each 2026-01-01T00:00Z pin 5 on ; at="0 6 * * 1-5" tz=Europe/Berlin within=1h')
    assert rc == 0 and 'past its window' not in err
    jid = out.strip()
    rc, out, _ = run_cli(capsys, '--fleet', fleet, 'jobs', '--json')
    (row,) = [r for r in json.loads(out) if r['job'] == jid]
    assert 'tz=Europe/Berlin' in row['line']
    rc, out, _ = run_cli(capsys, '--fleet', fleet, 'plan', os.path.join(fleet, 'jobs.txt'), '--hosts', 'pump-1',
                         '--from', '2026-03-27T00:00Z', '--until', '2026-03-31T00:00Z', '--json')
    rows = json.loads(out)
    # Friday 06:00 CET, Monday 06:00 CEST: an hour apart in UTC, the same on the zone's clock
    assert [(r['at'], r['local'], r['instance']) for r in rows] == [
        (epoch(2026, 3, 27, 5), '2026-03-27T06:00 Europe/Berlin', '%s.%d' % (jid, epoch(2026, 3, 27, 6) // 60)),
        (epoch(2026, 3, 30, 4), '2026-03-30T06:00 Europe/Berlin', '%s.%d' % (jid, epoch(2026, 3, 30, 6) // 60))]
    rc, out, _ = run_cli(capsys, '--fleet', fleet, 'plan', os.path.join(fleet, 'jobs.txt'), '--hosts', 'pump-1',
                         '--from', '2026-03-27T00:00Z', '--until', '2026-03-31T00:00Z')
    assert 'zone time' in out and 'Europe/Berlin' in out


def test_plan_of_a_sun_job_needs_positions(tmp_path, capsys):
    f = tmp_path / 'jobs.txt'
    f.write_text('each 2026-01-01T00:00Z relay on ; at=sunset+20m\n')
    rc, out, err = run_cli(capsys, '--fleet', str(tmp_path / 'none'), 'plan', f, '--hosts', 'a',
                           '--from', '2026-06-01T00:00Z', '--until', '2026-06-03T00:00Z')
    assert rc == 2 and err.startswith('companion: ') and 'needs the position of a' in err
    rc, out, err = run_cli(capsys, 'plan', f, '--hosts', 'a', '--lat', '52.52', '--from', '2026-06-01T00:00Z',
                           '--until', '2026-06-03T00:00Z')
    assert rc == 2 and '--lat and --lon go together' in err
    rc, out, err = run_cli(capsys, 'plan', f, '--hosts', 'a', '--lat', '52.52', '--lon', '13.4', '--json',
                           '--from', '2026-06-01T00:00Z', '--until', '2026-06-03T00:00Z')
    rows = json.loads(out)
    day = epoch(2026, 6, 1) // 86400
    assert [r['at'] for r in rows] == [sun.event(d, 52.52, 13.4, False) + 1200 for d in (day, day + 1)]
    # above the polar circle in June the sun does not set: the day is a miss
    rc, out, err = run_cli(capsys, 'plan', f, '--hosts', 'a', '--lat', '78.2', '--lon', '15.6', '--json',
                           '--from', '2026-06-01T00:00Z', '--until', '2026-06-03T00:00Z')
    assert {(r['state'], r['note']) for r in json.loads(out)} == {('missed', 'no sunset')}


# ---- the planner: a board's wakes, simulated with plan.decide ----

def board_loop(job, start, end, wake_every=None, host='pump-1'):
    """What one host does from start to end, waking when decide says (or every
    wake_every seconds when given: a board asleep longer): [(action, k, at)]."""
    now, mine, out = start, None, []
    while now < end:
        act, k, at, att = plan.decide(job, host, now, mine)
        if act in (plan.RUN, plan.MISS):
            out.append((act, k, now))
            mine = (k, 'ok' if act == plan.RUN else 'miss', 1)
            continue
        if act == plan.IDLE:
            break
        assert at > now or wake_every, (act, k, at, now)
        now = max(at, now + 1) if wake_every is None else now + wake_every
    return out


def test_a_cron_job_runs_each_local_time_once_across_both_changes():
    j = jobline.parse('each 2026-03-01T00:00Z x ; at="*/30 1-3 * * *" tz=Europe/Berlin within=10m', zone_rule=zone_rule)
    zi = zoneinfo.ZoneInfo('Europe/Berlin')
    for day in ((2026, 3, 29), (2026, 10, 25)):
        got = board_loop(j, epoch(*day) - 86400 - 7200, epoch(*day) + 43200)   # 22:00 UTC the day before .. noon
        local = lambda k: datetime.datetime.fromtimestamp(k * 60, UTC).strftime('%d %H:%M')
        runs = [(local(k), datetime.datetime.fromtimestamp(t, zi).strftime('%H:%M %Z')) for a, k, t in got if a == plan.RUN]
        misses = [local(k) for a, k, t in got if a == plan.MISS]
        for a, k, t in got:
            if a == plan.RUN:
                assert t == plan.due(j, k)
        if day[1] == 3:
            # 02:00 and 02:30 never show: due at the jump, with 03:00; the newest runs,
            # the older are recorded missed (one watermark, 02:30)
            assert runs[6:] == [('29 01:00', '01:00 CET'), ('29 01:30', '01:30 CET'),
                                ('29 03:00', '03:00 CEST'), ('29 03:30', '03:30 CEST')]
            assert misses == ['27 03:30', '29 02:30']   # the first: before the board came
        else:
            # 02:00 and 02:30 show twice: they run once, in CEST; nothing in the second pass
            assert runs[6:] == [('25 01:00', '01:00 CEST'), ('25 01:30', '01:30 CEST'), ('25 02:00', '02:00 CEST'),
                                ('25 02:30', '02:30 CEST'), ('25 03:00', '03:00 CET'), ('25 03:30', '03:30 CET')]
            assert misses == ['23 03:30']
        assert [r[0][3:] for r in runs[:6]] == ['01:00', '01:30', '02:00', '02:30', '03:00', '03:30']


def test_the_time_field_starts_the_series():
    # 06:00 CEST on June 1 is 04:00Z, before the series starts at 05:00Z: June 2's is the first
    j = jobline.parse('each 2026-06-01T05:00Z x ; at="0 6 * * *" tz=Europe/Berlin', zone_rule=zone_rule)
    assert plan.newest(j, epoch(2026, 6, 1, 23)) == -1
    assert plan.decide(j, 'a', epoch(2026, 5, 20), None)[:3] == (plan.WAIT, epoch(2026, 6, 2, 6) // 60,
                                                                  epoch(2026, 6, 2, 4))
    on_time = jobline.parse('each 2026-06-01T04:00Z x ; at="0 6 * * *" tz=Europe/Berlin', zone_rule=zone_rule)
    assert plan.newest(on_time, epoch(2026, 6, 1, 4)) == epoch(2026, 6, 1, 6) // 60
    # Berlin's sunset on June 1 is about 19:25Z: a series from 20:00Z starts the next day
    s = jobline.parse('each 2026-06-01T20:00Z x ; at=sunset')
    day = epoch(2026, 6, 1) // 86400
    s.cal.place((52.52, 13.40))
    assert plan.newest(s, epoch(2026, 6, 1, 23)) == -1
    assert plan.decide(s, 'a', epoch(2026, 6, 1, 21), None)[:3] == (
        plan.WAIT, day + 1, sun.event(day + 1, 52.52, 13.40, False))


def test_after_a_long_sleep_only_the_newest_open_instance_runs():
    j = jobline.parse('each 2026-01-01T00:00Z x ; at="0 6 * * *" tz=America/Chicago within=2d', zone_rule=zone_rule)
    got = board_loop(j, epoch(2026, 2, 1), epoch(2026, 2, 5), wake_every=3 * 86400)
    # wakes on Feb 1 00:00Z (Jan 31 18:00 CST: Jan 31's 06:00 is open, Jan 30's is not)
    # and Feb 4 00:00Z: Feb 3's runs, Feb 2's (open too) is recorded missed
    assert [(a, datetime.datetime.fromtimestamp(k * 60, UTC).strftime('%m-%d')) for a, k, _ in got] == [
        ('miss', '01-30'), ('run', '01-31'), ('miss', '02-02'), ('run', '02-03')]


def test_a_far_future_clock_decides_at_once():
    j = jobline.parse('one 2026-01-01T00:00Z x ; at="0 3 1 * *" tz=America/Chicago grace=2h', zone_rule=zone_rule)
    now = epoch(9999, 6, 1)
    assert datetime.datetime.fromtimestamp(plan.newest(j, now) * 60, UTC).strftime('%Y-%m-%d') == '9999-05-01'
    act, k, at, _ = plan.decide(j, 'a', now, (plan.newest(j, now), 'ok', 1), rnk=0)
    assert act == plan.WAIT and datetime.datetime.fromtimestamp(k * 60, UTC).strftime('%Y-%m-%d %H:%M') == '9999-06-01 03:00'   # May 31 19:00 CDT now


def test_sun_jobs_run_at_each_hosts_sunset_and_miss_polar_days():
    j = jobline.parse('each 2026-06-01T00:00Z x ; at=sunset+20m within=30m')
    assert plan.decide(j, 'a', epoch(2026, 6, 2), None)[0] == plan.IDLE   # no position: nothing
    j.cal.place((52.52, 13.40))
    got = board_loop(j, epoch(2026, 6, 1), epoch(2026, 6, 4))
    day = epoch(2026, 6, 1) // 86400
    assert got == [(plan.RUN, d, sun.event(d, 52.52, 13.40, False) + 1200) for d in (day, day + 1, day + 2)]
    j.cal.place((78.2, 15.6))   # Svalbard: no sunset in June
    got = board_loop(j, epoch(2026, 6, 1), epoch(2026, 6, 3))
    assert [a for a, _, _ in got] == [plan.MISS, plan.MISS] and [k for _, k, _ in got] == [day, day + 1]
    j.cal.place(None)
    assert plan.decide(j, 'a', epoch(2026, 6, 2), None)[0] == plan.IDLE   # placed nowhere again: nothing


HOSTS = ['.h p-1 1796154607 52.52 13.405', '.h p-2', '.h p-3 1796154607 -33.86 151.21']


def fleet_file(*jobs):
    from sporadic.desktop import merging
    return merging.merge(list(HOSTS) + [j.line() for j in jobs])


def test_a_one_calendar_job_ranks_the_host_list_and_the_next_waits_its_grace():
    from sporadic.core import groups
    j = jobline.parse('one 2026-03-01T00:00Z x ; at="30 2 * * *" tz=Europe/Berlin grace=20m within=1h', zone_rule=zone_rule)
    seen = {}
    groups.scan(fleet_file(j), 'p-1', 8, lambda jid, text, c, mine, dk, asg, hosts: seen.update({jid: hosts}))
    hosts = seen[j.id]
    assert hosts == ['p-1', 'p-2', 'p-3']   # positioned records name their host only
    order = sorted(hosts, key=lambda h: plan.rank(j.id, h, hosts))
    assert sorted(plan.rank(j.id, h, hosts) for h in hosts) == [0, 1, 2]
    # the spring change: 02:30 never shows in Berlin, the instance is due at the jump
    k = (epoch(2026, 3, 29, 2, 30)) // 60
    jump = epoch(2026, 3, 29, 1)   # 02:00 CET = 01:00Z
    assert plan.due(j, k) == jump
    for r, h in enumerate(order):
        act, kk, at, _ = plan.decide(j, h, jump - 60, (plan.newest(j, jump - 60), 'ok', 1), rnk=r)
        assert (act, kk, at) == (plan.WAIT, k, jump + r * 1200)
        assert plan.decide(j, h, jump + r * 1200, (kk - 1440, 'ok', 1), rnk=r)[:2] == (plan.RUN, k)
    # once the first ran it (done by another), the standby does not take it over
    act, kk, at, _ = plan.decide(j, order[1], jump + 1200, (k - 1440, 'ok', 1), done_k=k, rnk=1)
    assert act == plan.WAIT and kk == epoch(2026, 3, 30, 2, 30) // 60   # the next day's, on the zone's clock


def test_an_any_calendar_job_draws_on_its_ticks_inside_the_window():
    j = jobline.parse('any:0.05 2026-01-01T00:00Z x ; at="0 6 * * 1-5" tz=America/Chicago tick=1m within=2h', zone_rule=zone_rule)
    rnd = plan.hash_rnd('seed')
    k = (epoch(2026, 1, 5, 6)) // 60          # Monday 06:00 CST = 12:00Z
    d = plan.due(j, k)
    assert d == epoch(2026, 1, 5, 12)
    for h in ('p-1', 'p-2', 'p-3'):
        act, kk, at, _ = plan.decide(j, h, d, (k - 3 * 1440, 'ok', 1), rnd=rnd)   # Friday's was the last
        fires = [i for i in range(120) if plan.draw(rnd, j, k, h, i)]
        if fires and fires[0] == 0:
            assert (act, kk) == (plan.RUN, k)
        elif fires and fires[0] < 64:
            assert (act, kk, at) == (plan.WAIT, k, d + fires[0] * 60)
            assert plan.decide(j, h, at, (k - 3 * 1440, 'ok', 1), rnd=rnd)[:2] == (plan.RUN, k)
        else:
            assert act == plan.WAIT and at > d


def test_a_leader_assigns_a_calendar_instance_to_a_host_of_the_positioned_list():
    from sporadic.core import leader
    from sporadic.core import jobtext
    j = jobline.parse('one 2026-01-01T00:00Z x ; at="0 3 1 * *" tz=America/Chicago grace=2h', zone_rule=zone_rule)
    lines = fleet_file(j)
    now = epoch(2026, 3, 1, 8)        # 02:00 CST: the March instance is an hour ahead
    (a,) = leader.assignments(lines, 'p-2', ['p-1', 'p-2', 'p-3'], now)
    rec = jobtext.parse_assign(a[:8], a[11:])
    best = max(['p-1', 'p-2', 'p-3'], key=lambda h: plan.score(j.id, h))
    assert (rec.host, rec.k, rec.by) == (best, epoch(2026, 3, 1, 3) // 60, 'p-2')
    # a host not in the host list is never picked for a `one` job
    assert leader.assignments(merging_without(lines, best), 'p-2', [best], now) == []


def test_a_leader_assigns_a_sunset_instance_at_the_position_of_its_cfg():
    # the leader plans a sun job where its board is (cfg lat/lon, passed in): no cfg, no position,
    # no instance to assign
    from sporadic.core import leader
    from sporadic.core import jobtext
    j = jobline.parse('one 2026-06-01T00:00Z x ; at=sunset grace=1h within=2h')
    lines = fleet_file(j)
    day = epoch(2026, 6, 1) // 86400
    dusk = sun.event(day, 52.52, 13.40, False)
    alive = ['p-1', 'p-2', 'p-3']
    assert leader.assignments(lines, 'p-2', alive, dusk - 600) == []
    (a,) = leader.assignments(lines, 'p-2', alive, dusk - 600, cfg={'lat': 52.52, 'lon': 13.40})
    rec = jobtext.parse_assign(a[:8], a[11:])
    assert rec.k == day and rec.by == 'p-2'


def merging_without(lines, host):
    return [l for l in lines if not (l.startswith('.h ') and jobline.host_of(l) == host)]


def test_a_calendar_jobs_watermark_keeps_one_result_a_host():
    from sporadic.desktop import merging
    j = jobline.parse('each 2026-01-01T00:00Z x ; at="0 6 * * *" tz=Europe/Berlin', zone_rule=zone_rule)
    days = [epoch(2026, 1, d, 6) // 60 + 60 for d in range(1, 31)]   # local minute ids
    results = ['%s r %s %d %d ok - done' % (j.id, h, k, k * 60) for h in ('p-1', 'p-3') for k in days]
    out = merging.merge(fleet_file(j) + results)
    assert [l for l in out if ' r ' in l] == ['%s r %s %d %d ok - done' % (j.id, h, days[-1], days[-1] * 60)
                                              for h in ('p-1', 'p-3')]


# ---- a virtual board, deployed with its position ----

def _lon_for(t, solar_hour):
    # the longitude whose local mean solar time at UTC instant t is solar_hour
    lon = (solar_hour - (t % 86400) / 3600.0) * 15
    return round((lon + 180) % 360 - 180, 3)


@pytest.mark.slow
def test_a_board_deployed_with_its_position_runs_cron_and_sunset_jobs(world):
    from tests.test_e2e import actlog, results, board_lines
    from tests.devutil import wait_for
    c = world.companion
    c('init')
    now = world.clock.now()
    # a board on the equator where the sun sets in about 30 minutes of the board's clock,
    # and one near the pole where the sun does not set today (or, near an equinox, does)
    lon = _lon_for(now + 1800, 18.1)
    lon_n = _lon_for(now + 1800, 12.0)
    eq, north = world.board('eq-1'), world.board('north-1')
    c('deploy', eq.path, '--id', 'eq-1', '--lat', '0', '--lon', lon, '-q')
    c('deploy', north.path, '--id', 'north-1', '--lat', '89.9', '--lon', lon_n, '-q')
    with open(os.path.join(c.dir, 'devices', 'eq-1.json')) as f:
        info = json.load(f)
    assert (info['lat'], info['lon']) == (0.0, lon)        # companion plan finds it there
    # windows wide for a board at 600x (test_e2e: ~2 s real = 20 min of its clock to boot)
    j_cron = c('add', 'each +1m log cron ; at="*/30 * * * *" tz=Asia/Kathmandu within=25m').strip()
    j_sun = c('add', 'each +1m log dusk ; at=sunset+20m within=1h').strip()
    for vb in (eq, north):
        c.sync(vb.path)
    day = (now + 1800 + int(lon * 240)) // 86400
    dusk = sun.event(day, 0.0, lon, False) + 1200
    assert now < dusk < now + 3 * 3600
    day_n = (now + 1800 + int(lon_n * 240)) // 86400
    wait_for(lambda: actlog(eq)['%s.%d' % (j_sun, day)] and
             sum(n for i, n in actlog(eq).items() if i.startswith(j_cron)) >= 2,
             timeout=120, what='the equator board to run dusk and two cron instances')
    wait_for(lambda: any(l.startswith(j_sun + ' r north-1 %d ' % day_n) for l in board_lines(north)),
             timeout=120, what='the north board to settle day %d' % day_n)
    for vb in (eq, north):
        c.sync(vb.path)
    rows = results(c)
    assert len({(r['instance'], r['host']) for r in rows}) == len(rows)   # each settled once per board
    crons = [r for r in rows if r['job'] == j_cron and r['host'] == 'eq-1' and r['outcome'] == 'ok']
    assert len(crons) >= 2
    for r in crons:
        k = int(r['instance'].split('.')[1])
        assert (k * 60) % 1800 == 0                        # a :00/:30 minute in Kathmandu
        due = k * 60 - (5 * 3600 + 45 * 60)
        assert due <= r['at'] < due + 1500, r              # inside its window, on the board's clock
    (d,) = [r for r in rows if r['job'] == j_sun and r['host'] == 'eq-1' and r['instance'].endswith('.%d' % day)]
    assert d['outcome'] == 'ok' and dusk <= d['at'] < dusk + 3600, (d, dusk)
    (n,) = [r for r in rows if r['job'] == j_sun and r['host'] == 'north-1' and r['instance'].endswith('.%d' % day_n)]
    if sun.event(day_n, 89.9, lon_n, False) is None:
        assert (n['outcome'], n['output']) == ('missed', 'no sunset'), n
    else:
        assert n['outcome'] in ('ok', 'missed'), n
    jobs = {j['job']: j for j in c.json('jobs')}
    assert 'tz=Asia/Kathmandu' in jobs[j_cron]['line']
    # each board's position is in the host list, which the boards hold (not quarantined),
    # and `companion plan` of the fleet's file (its hosts, their positions) places the dusk
    from companion.fleet.folder import Fleet
    from companion.fleet.host_list import degrees_text
    recs = {jobline.host_of(l): l for l in Fleet(c.dir).lines() if l.startswith('.h ')}
    # the position, then the board key (docs/jobline.md)
    pos = {h: r.rsplit(' ', 1)[0] for h, r in recs.items()}
    assert pos['eq-1'].endswith(' 0 ' + degrees_text(lon)) and pos['north-1'].endswith(' 89.9 ' + degrees_text(lon_n))
    assert set(recs.values()) <= set(board_lines(eq)) and set(recs.values()) <= set(board_lines(north))
    from sporadic.core.timefmt import format_time
    rows = c.json('plan', os.path.join(c.dir, 'jobs.txt'), '--from', format_time(dusk - 3600),
                  '--until', format_time(dusk + 3600))
    (p,) = [r for r in rows if r['job'] == j_sun and r['host'] == 'eq-1']
    assert p['at'] == dusk and (p['lat'], p['lon']) == (0.0, float(degrees_text(lon)))
    from tests.test_host_position import astral_sunset
    assert abs(dusk - 1200 - astral_sunset(0.0, lon, day)) < 120

