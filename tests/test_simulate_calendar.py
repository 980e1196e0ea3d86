"""companion simulate with calendar jobs (at="cron" tz=..., at=sunset+-D): the
instances the simulated boards run, on the real planner, against oracles written
apart (a brute-force walk over zoneinfo, astral), and the report's counts."""
import datetime
import zoneinfo

import pytest

from companion.simulate.parallel import simulate
from companion.errors import UserError
from companion.simulate.engine import Sim
from sporadic.core import plan

UTC = datetime.timezone.utc
BERLIN = zoneinfo.ZoneInfo('Europe/Berlin')


def epoch(y, mo=1, d=1, h=0, mi=0):
    return int(datetime.datetime(y, mo, d, h, mi, tzinfo=UTC).timestamp())


def cron_oracle(start, end, within, hour, minute, weekdays):
    """UTC due times of local HOUR:MINUTE on `weekdays` (Monday 0) whose window
    closes in (start, end]: the first minute whose Berlin clock shows that local
    time or later (a skipped time is due at the jump, a repeated one once)."""
    shown = []   # (UTC minute, Berlin wall clock), minute by minute
    for t in range(start - 2 * 86400, end + 86400, 60):
        shown.append((t, datetime.datetime.fromtimestamp(t, BERLIN).replace(tzinfo=None)))
    out = []
    day = shown[0][1].date()
    while day <= shown[-1][1].date():
        if day.weekday() in weekdays:
            want = datetime.datetime(day.year, day.month, day.day, hour, minute)
            due = next((t for t, wall in shown if wall >= want), None)
            if due is not None and start < due + within <= end:
                out.append(due)
        day += datetime.timedelta(days=1)
    return out


def runs_of(sim, jid):
    """{host name: [(k, at)]} of the runs the simulated boards recorded for job jid."""
    (j,) = [i for i, job in enumerate(sim.jobs) if job.id == jid]
    out = {}
    for (jj, k), rs in sorted(sim.inst.items()):
        if jj == j:
            for t, x in rs:
                out.setdefault(sim.names[x], []).append((k, t))
    return out


def row(rep, jid):
    (r,) = [r for r in rep['jobs'] if r['id'] == jid]
    return r


# 2026-03-29: Berlin goes from CET to CEST; 02:30 that Sunday never shows
DST = {'name': 'dst', 'seed': 1, 'start': '2026-03-23T00:00Z', 'end': '2026-04-04T00:00Z',
       'jobs': 'pump 2026-03-01T00:00Z pump on ; at="0 6 * * 1-5" tz=Europe/Berlin within=1h\n'
               'one 2026-03-01T00:00Z nightly ; at="30 2 * * *" tz=Europe/Berlin within=2h grace=10m\n',
       'hosts': [{'ids': 'pump-{1..4}', 'uptime': 'always'}],
       'mesh': [{'parties': '*', 'interval': '5m'}]}


def test_cron_jobs_across_a_dst_change_run_every_oracle_instance_once():
    scn = dict(DST, jobs='each ' + DST['jobs'][5:])
    sim = Sim(scn, 1)
    rep = sim.run()
    start, end = epoch(2026, 3, 23), epoch(2026, 4, 4)
    each, one = sim.jobs
    # each: weekdays at 06:00 Berlin, 05:00 UTC before the change and 04:00 after
    want = cron_oracle(start, end, 3600, 6, 0, range(5))
    assert len(want) == 10 and {datetime.datetime.fromtimestamp(t, UTC).hour for t in want} == {4, 5}
    got = runs_of(sim, each.id)
    assert sorted(got) == ['pump-%d' % i for i in range(1, 5)]
    for host, rs in got.items():
        assert [t for k, t in rs] == want, host          # each once, at its due time (always up)
        assert [plan.due(each, k) for k, t in rs] == want
    r = row(rep, each.id)
    assert (r['instances'], r['expected_runs'], r['runs'], r['missed'], r['duplicate_runs']) == (10, 40, 40, 0, 0)
    # one: nightly 02:30, due at 01:00 UTC (the jump) on the 29th; once in the fleet
    want = cron_oracle(start, end, 7200, 2, 30, range(7))
    assert epoch(2026, 3, 29, 1) in want and len(want) == 12
    rs = sorted((k, t) for h in runs_of(sim, one.id).values() for k, t in h)
    assert [k for k, t in rs] == sorted(set(k for k, t in rs))   # no instance twice
    assert [plan.due(one, k) for k, t in rs] == want
    r = row(rep, one.id)
    assert (r['instances'], r['instances_run'], r['runs'], r['duplicate_runs'], r['missed']) == (12, 12, 12, 0, 0)


def test_a_cron_job_while_hosts_sleep_is_missed_and_counted():
    scn = dict(DST, jobs='each ' + DST['jobs'][5:].splitlines()[0],
               hosts=[{'ids': 'pump-{1..3}', 'uptime': 'outages 1/d 8h'}])
    sim = Sim(scn, 1)
    rep = sim.run()
    r = row(rep, sim.jobs[0].id)
    ran = sum(len(v) for v in runs_of(sim, sim.jobs[0].id).values())
    assert 0 < ran < 30 and r['runs'] == ran and r['missed'] == 30 - ran
    assert set(r['miss_records']) == {'asleep'}


def sunset_oracle(day, lat, lon):
    from astral import Observer
    from astral.sun import sunset
    date = datetime.date(1970, 1, 1) + datetime.timedelta(days=day)
    lmt = datetime.timezone(datetime.timedelta(hours=lon / 15))   # sun days are local mean time dates
    try:
        return sunset(Observer(lat, lon), date, tzinfo=lmt).timestamp()
    except ValueError:    # the sun does not set
        return None


def test_sunset_jobs_run_at_each_hosts_position_and_polar_days_are_misses():
    pytest.importorskip('astral', reason="astral is not installed (pip install -e '.[test]')")
    scn = {'name': 'sun', 'start': '2026-06-10T00:00Z', 'end': '2026-06-20T00:00Z',
           'jobs': 'each 2026-06-01T00:00Z lights on ; at=sunset+20m within=30m\n'
                   'one 2026-06-01T00:00Z gate close ; at=sunset-1h within=2h grace=10m\n',
           'hosts': [{'ids': 'berlin-{1..2}', 'lat': 52.52, 'lon': 13.40},
                     {'ids': 'lisbon-1', 'lat': 38.72, 'lon': -9.14},
                     {'ids': 'svalbard-1', 'lat': 78.22, 'lon': 15.65}],
           'mesh': [{'parties': '*', 'interval': '5m'}]}
    sim = Sim(scn, 1)
    rep = sim.run()
    each, one = sim.jobs
    start, end = epoch(2026, 6, 10), epoch(2026, 6, 20)
    got = runs_of(sim, each.id)
    assert 'svalbard-1' not in got                       # midnight sun: no sunset, no run
    for host, pos in (('berlin-1', (52.52, 13.40)), ('berlin-2', (52.52, 13.40)), ('lisbon-1', (38.72, -9.14))):
        days = [d for d in range(start // 86400 - 2, end // 86400 + 2)
                if start < sunset_oracle(d, *pos) + 1200 + 1800 <= end]
        assert [k for k, t in got[host]] == days, host   # every day once
        for k, t in got[host]:
            assert abs(t - (sunset_oracle(k, *pos) + 1200)) < 120, (host, k)
    r = row(rep, each.id)
    assert r['runs'] == sum(len(v) for v in got.values()) == 30 and r['duplicate_runs'] == 0
    assert r['expected_runs'] == 40 and r['missed'] == 10    # Svalbard's ten days
    # the records: every host's first wake also settles the day before the start as
    # missed (its window closed before the board came; no sunset at Svalbard)
    assert r['miss_records'] == {'no sunset': 11, 'asleep': 3}
    # one: once a day in the fleet, by whoever ranks first, at that host's sunset - 1h
    rs = runs_of(sim, one.id)
    ks = sorted(k for v in rs.values() for k, t in v)
    assert ks == sorted(set(ks)) and len(ks) == row(rep, one.id)['instances_run'] == row(rep, one.id)['runs']
    for host, v in rs.items():
        pos = dict(berlin=(52.52, 13.40), lisbon=(38.72, -9.14))[host.split('-')[0]]
        for k, t in v:
            assert abs(t - (sunset_oracle(k, *pos) - 3600)) < 120 + 3 * 600


def test_sun_jobs_need_their_hosts_positions():
    scn = {'name': 'x', 'start': '2026-06-10T00:00Z', 'end': '2026-06-11T00:00Z',
           'jobs': 'each 2026-06-01T00:00Z lights on ; at=sunset within=30m\n',
           'hosts': [{'ids': 'a-{1..3}'}]}
    with pytest.raises(UserError, match=r'jobs:1: at=sunset needs the position of a-1 and 2 more: '
                                        r'give lat and lon in its \[\[hosts\]\]'):
        simulate(scn)
    scn['hosts'] = [{'ids': 'a-1', 'lat': 95, 'lon': 0}]
    with pytest.raises(UserError, match=r'hosts\[0\]: lat 95 lon 0: want -90\.\.90'):
        simulate(scn)
    scn['hosts'] = [{'ids': 'a-1', 'lat': 50}]
    with pytest.raises(UserError, match=r'hosts\[0\]: lat and lon go together'):
        simulate(scn)


def test_the_simulator_runs_calendar_jobs_through_the_cli(tmp_path, capsys):
    from companion import cli
    f = tmp_path / 's.toml'
    f.write_text('name = "cal"\nseed = 1\nstart = "2026-06-10T00:00Z"\nend = "2026-06-13T00:00Z"\n'
                 'jobs = """\neach 2026-01-01T00:00Z x ; at="0 6 * * *" tz=Europe/Berlin\n'
                 'each 2026-01-01T00:00Z y ; at=sunset within=1h\n"""\n'
                 '[[hosts]]\nids = "a-{1..2}"\nuptime = "always"\nlat = 52.52\nlon = 13.40\n'
                 '[[hosts]]\nids = "north-1"\nlat = 78.22\nlon = 15.65\n')
    assert cli.main(['simulate', str(f)]) == 0
    out = capsys.readouterr().out
    assert 'miss records of calendar jobs: ' in out and 'no sunset 4' in out   # 3 days and the day before the start


def test_calendar_jobs_verified_against_the_literal_files():
    # --verify: every decision again from groups.scan over the host's literal file
    # (its done_k at the planner's previous instance, not k - 1: cron ids are minutes)
    scn = dict(DST, jobs='one 2026-03-01T00:00Z nightly ; at="30 2 * * *" tz=Europe/Berlin within=20h grace=3h\n'
                         'any:0.3 2026-03-01T00:00Z up ; at="0 */6 * * *" tz=Europe/Berlin within=5h tick=1h\n'
                         'each 2026-03-01T00:00Z lights ; at=sunset+20m within=3h\n',
               end='2026-03-30T12:00Z',
               hosts=[{'ids': 'p-{1..4}', 'uptime': 'outages 2/d 9h', 'drift_ppm': 50, 'lat': 52.5, 'lon': 13.4}],
               mesh=[], visit=[{'companion': 'laptop', 'hosts': '*', 'interval': '1d', 'jitter': '12h', 'fail': 0.2}])
    rep = simulate(scn, 3, verify=True)
    assert rep['counts']['verified_syncs'] > 0
    assert all(r['runs'] > 0 for r in rep['jobs'])
