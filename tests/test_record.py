"""A record the user can trust (issue #28): duplicates from the whole record
(the board's rule, core/leader.py duplicate_runs, over the fleet's job file
merged with its results history), however much was compacted since; the
demo's footer agrees with its table."""
import random
import re

import pytest

from sporadic.core import jobline, leader
from companion.fleet.folder import Fleet
from companion.fleet.jobs_file import add_job


T0 = 1796083200  # 2026-12-01T00:00Z


def result(jid, host, k, at, outcome='ok', out='x'):
    return jobline.Result(jid, host, k, at, outcome, output=out).line()


def test_core_rule_reads_every_run_of_a_single_run_job_and_nothing_else():
    lines = sorted([
        'aaaaaaaa any:0.5 2026-12-01T00:00Z log a ; every=1h',
        result('aaaaaaaa', 'p2', 0, T0 + 70, 'run'),
        result('aaaaaaaa', 'p2', 0, T0 + 72),
        result('aaaaaaaa', 'p1', 0, T0 + 60, 'err'),
        result('aaaaaaaa', 'p3', 0, T0 + 99, 'miss'),      # a miss is no run
        result('aaaaaaaa', 'p1', 1, T0 + 3600),
        'bbbbbbbb each 2026-12-01T00:00Z log b ; every=1h',  # every board runs it: no duplicate
        result('bbbbbbbb', 'p1', 0, T0), result('bbbbbbbb', 'p2', 0, T0),
        'cccccccc cancel',                                  # no job line: not judged
        result('cccccccc', 'p1', 0, T0), result('cccccccc', 'p2', 0, T0),
        'dddddddd one 2026-12-01T00:00Z log d ; every=1h',
        result('dddddddd', 'p2', 10, T0 + 36000), result('dddddddd', 'p1', 10, T0 + 36005),
        result('dddddddd', 'p1', 2, T0 + 7200), result('dddddddd', 'p2', 2, T0 + 7300, 'run'),
    ])
    assert leader.duplicate_runs(lines) == [
        ('aaaaaaaa.0', 'any', [['p1', T0 + 60, 'err'], ['p2', T0 + 70, 'ok']]),
        ('dddddddd.2', 'one', [['p1', T0 + 7200, 'ok'], ['p2', T0 + 7300, 'run']]),
        ('dddddddd.10', 'one', [['p2', T0 + 36000, 'ok'], ['p1', T0 + 36005, 'ok']]),
    ]
    assert leader.duplicates(lines) == ['aaaaaaaa.0: p1 p2', 'dddddddd.2: p1 p2', 'dddddddd.10: p1 p2']


def _history(fleet, seed):
    """Seeded runs of single-run and per-board jobs on three boards, received
    as a sync receives them (Fleet.receive compacts jobs.txt; add_results
    keeps the history), some instances run by two or three boards."""
    rnd = random.Random(seed)
    hosts = ['gate-1', 'pump-1', 'pump-2']
    jobs = [add_job(fleet, line, now=T0 + i) for i, line in enumerate((
        'any:0.02 2026-12-01T00:05Z log up ; every=1h within=30m',
        'one 2026-12-01T00:05Z log backup ; every=2h within=1h',
        'each 2026-12-01T00:05Z log hi ; every=30m within=10m'))]
    expect = set()
    for k in range(rnd.randint(3, 8)):
        sent = []
        for j in jobs:
            ran = [h for h in hosts if rnd.random() < 0.45]
            for h in hosts:
                if h in ran:
                    at = j.t0 + k * j.every + rnd.randint(0, 600)
                    sent += [result(j.id, h, k, at, 'run'), result(j.id, h, k, at + 1, rnd.choice(['ok', 'err']))]
                elif rnd.random() < 0.2:
                    sent.append(result(j.id, h, k, j.t0 + k * j.every + j.within, 'miss', 'asleep'))
            if j.kind != 'each' and len(ran) > 1:
                expect.add('%s.%d' % (j.id, k))
        rnd.shuffle(sent)
        fleet.receive(sent, 'seed')
        fleet.add_results(sent)
    return expect


def _table_and_footer(text):
    """The demo's table -> {instance: {hosts}} of runs (not misses) of
    single-run jobs; its footer -> the instances it names."""
    ran = {}
    footer = None
    named = set()
    for line in text.splitlines():
        cells = [c.strip() for c in line.split('│')[1:-1]]
        if len(cells) == 6 and cells[1] in ('any', 'one') and not cells[4].startswith('missed'):
            ran.setdefault(cells[2], set()).add(cells[3])
        m = re.match(r'single-run instances that ran on more than one board: (\w+)', line)
        if m:
            footer = m.group(1)
        m = re.match(r'  (\w{8}\.\d+) \((any|one)\) ran on ', line)
        if m:
            named.add(m.group(1))
    assert footer is not None, text
    assert footer == ('none' if not named else str(len(named))), text
    return {i for i, hs in ran.items() if len(hs) > 1}, named


@pytest.mark.parametrize('seed', range(20))
def test_demo_footer_matches_its_table(tmp_path, capsys, seed):
    from companion.demo import show_results
    fleet = Fleet(str(tmp_path / 'fleet'))
    fleet.init('demo', insecure=True)
    expect = _history(fleet, seed)
    capsys.readouterr()
    show_results(fleet)
    table, footer = _table_and_footer(capsys.readouterr().out)
    assert table == footer == expect


def test_a_cancelled_single_run_job_keeps_its_duplicates_on_record(tmp_path):
    from companion.fleet.jobs_file import cancel_job
    from companion.fleet.queries import duplicates
    fleet = Fleet(str(tmp_path / 'fleet'))
    fleet.init('f', insecure=True)
    j = add_job(fleet, 'any:1 2026-12-01T00:05Z log up ; every=1h', now=T0)
    sent = [result(j.id, 'p1', 0, T0 + 300), result(j.id, 'p2', 0, T0 + 310)]
    fleet.receive(sent)
    fleet.add_results(sent)
    cancel_job(fleet, j.id)
    assert not any(l.startswith(j.id + ' r ') for l in fleet.lines())
    d = duplicates(fleet)
    assert list(d) == [j.id + '.0'] and d[j.id + '.0']['hosts'] == ['p1', 'p2']
    assert d[j.id + '.0']['type'] == 'any'


# -- a partition, boards set up with the product's own commands -------------------


@pytest.mark.slow
def test_partition_duplicates_stay_on_record_after_compaction(world):
    """Two boards, each its own section (no sync between them): each runs an
    `any` and a `one` instance, and the next ones; then they rejoin (syncs)
    and compact: `status` and `results` name both duplicates with their
    boards, times and last syncs, and go on naming them after every later
    sync, although jobs.txt no longer holds those runs."""
    from tests.devutil import wait_for, has_outcome
    c = world.companion
    c('init')
    a, b = world.board('pump-1'), world.board('pump-2')
    for vb in (a, b):
        c('deploy', vb.path, '--id', vb.board_id, '-q')
    j_any = c('add', 'any:1 +5m log up ; every=1h within=30m tick=1m').strip()
    j_one = c('add', 'one +5m log backup ; every=1h within=50m grace=10m').strip()
    for vb in (a, b):
        c.sync(vb.path)
    fleet = Fleet(c.dir)
    first_sync = {h: fleet.device(h)['last_sync'] for h in ('pump-1', 'pump-2')}
    # the partition: no sync; each board runs .0 and .1 of both jobs on its own
    for vb in (a, b):
        for j in (j_any, j_one):
            wait_for(lambda: has_outcome(vb.flash_dir, j, vb.board_id, 1), timeout=60,
                     what='%s to run %s.1' % (vb.board_id, j))
    dups0 = {j_any + '.0', j_one + '.0'}

    def check():
        st = c.json('status')
        assert dups0 <= set(st['duplicates']), st['duplicates']
        for i in dups0:
            d = st['duplicates'][i]
            assert d['hosts'] == ['pump-1', 'pump-2'] and d['type'] == ('any' if i.startswith(j_any) else 'one')
            for r in d['runs']:
                assert r['last_sync'] is not None and r['last_sync'] <= r['at'] and r['outcome'] == 'ok', d
        assert {dev['id']: dups0 <= set(dev['duplicates']) for dev in st['devices']} == {
            'pump-1': True, 'pump-2': True}
        rows = [r for r in c.json('results') if r['instance'] in dups0]
        assert sorted((r['instance'], r['host']) for r in rows) == sorted(
            (i, h) for i in dups0 for h in ('pump-1', 'pump-2'))
        assert all(r['duplicate'] == ['pump-1', 'pump-2'] for r in rows), rows
        text = c('status') + c('results')
        for i in dups0:
            assert re.search(r'%s \((any|one)\) ran on pump-\d at .*; pump-\d at ' % re.escape(i), text), text
        return st

    # rejoin: each board meets the companion, the companion's news reaches both;
    # the sync that brings a duplicate to light says so
    said = ''.join(c.sync(vb.path) for vb in (a, b, a))
    for i in dups0:
        assert said.count('duplicate: %s ' % i) == 1, said
    # compacted: jobs.txt keeps each host's newest result only, no run of .0
    assert not [l for l in fleet.lines() if re.match(r'(%s|%s) r \S+ 0 ' % (j_any, j_one), l)]
    st = check()
    runs = {r['host']: r['last_sync'] for r in st['duplicates'][j_any + '.0']['runs']}
    assert runs == first_sync, (runs, first_sync)     # each ran after its own sync: two sections
    # every later sync: still on record
    for k in (2, 3):
        for vb in (a, b):
            wait_for(lambda: has_outcome(vb.flash_dir, j_any, vb.board_id, k), timeout=60,
                     what='%s to run %s.%d' % (vb.board_id, j_any, k))
            c.sync(vb.path)
            check()


# -- a board of another fleet -----------------------------------------------------

def _snapshot(*folders):
    """Every file under the folders: {path: bytes} (what `unchanged` means)."""
    import os
    out = {}
    for d in folders:
        for root, _, names in os.walk(d):
            for n in names:
                p = os.path.join(root, n)
                with open(p, 'rb') as f:
                    out[p] = f.read()
    return out


def test_a_board_that_cannot_say_its_fleet_is_refused_and_older_firmware_passes(tmp_path):
    """`F` is how a sync knows the board is of this fleet. A board whose
    answer is an error (out of memory, a /cfg.json it cannot read as a
    config) is refused in one line naming the error, before anything moves
    (it passed as 'firmware without F' before, and the sync went on with a
    board of unknown fleet); firmware that predates F (recon's `!unknown
    request`) still passes."""
    from companion.errors import UserError
    from companion.sync.syncer import check_fleet
    fleet = Fleet(str(tmp_path / 'fleet'))
    fleet.init()
    oom = '!error MemoryError: memory allocation failed, allocating 1024 bytes'
    with pytest.raises(UserError) as e:
        check_fleet(fleet, oom, '/dev/pts/7')
    said = str(e.value)
    assert '\n' not in said and '/dev/pts/7' in said and 'MemoryError' in said and 'nothing was exchanged' in said
    assert check_fleet(fleet, '!unknown request', '/dev/pts/7') is None
    assert check_fleet(fleet, '- - -', '/dev/pts/7') is None


@pytest.mark.slow
def test_a_board_of_another_fleet_is_refused_before_anything_moves(tmp_path):
    """A board deployed from fleet A meets fleet B: `sync` and `deploy` from B
    end in one line naming both fleets' keys and what to do, exit 2; B's
    folder and the board's flash are unchanged. `deploy --force` moves it:
    A's jobs leave the board, and B's syncs refuse nothing."""
    import os
    from tests.devutil import CLI
    a, b = CLI(str(tmp_path / 'fleet-a')), CLI(str(tmp_path / 'fleet-b'))
    try:
        a('init')
        b('init')
        flash = str(tmp_path / 'flash')
        vb = a.vboard('--id', 'pump-1', '--flash', flash)
        a('deploy', vb.path, '--id', 'pump-1', '-q')
        ja = a('add', 'each +1h log from-a ; every=1d').strip()
        a('sync', vb.path, '-q')
        assert ja in open(os.path.join(flash, 'jobs.txt')).read()
        key_a, key_b = a('keys').split()[0], b('keys').split()[0]
        assert key_a != key_b
        before = _snapshot(b.dir, flash)
        for argv in (('sync', vb.path, '-q'), ('deploy', vb.path, '--id', 'pump-1', '-q')):
            p = b.run(*argv, ok=False)
            assert p.returncode == 2, (argv, p.stdout, p.stderr)
            assert p.stderr.count('\n') == 1 and 'Traceback' not in p.stderr, p.stderr
            assert 'another fleet' in p.stderr and key_a in p.stderr and key_b in p.stderr, p.stderr
            assert '--force' in p.stderr, p.stderr
            assert _snapshot(b.dir, flash) == before, argv
        assert not os.listdir(os.path.join(b.dir, 'devices'))
        # moved on purpose
        out = b('deploy', vb.path, '--id', 'pump-1', '-q', '--force')
        assert 'moved pump-1' in out and key_a in out, out
        jb = b('add', 'each +1h log from-b ; every=1d').strip()
        out = b('sync', vb.path, '-q')
        assert 'refused' not in out and 'flagged' not in out, out
        held = open(os.path.join(flash, 'jobs.txt')).read()
        assert jb in held and ja not in held
        st = b.json('status') if hasattr(b, 'json') else None
        assert st is None or not st['devices'][0]['quarantined']
        # and A now meets a board of B
        p = a.run('sync', vb.path, '-q', ok=False)
        assert p.returncode == 2 and key_b in p.stderr and key_a in p.stderr, p.stderr
    finally:
        a.stop_boards()
        b.stop_boards()


# -- deploy --board: what answers is checked before anything is written -----------

@pytest.mark.slow
def test_deploy_refuses_a_board_name_that_does_not_answer(tmp_path):
    import os
    from tests.devutil import CLI
    c = CLI(str(tmp_path / 'fleet'))
    try:
        c('init')
        flash = str(tmp_path / 'flash')
        vb = c.vboard('--id', 'pump-1', '--flash', flash)
        before = _snapshot(c.dir, flash)
        for board, says in (('esp32', "sys.platform is 'linux'"), ('rp2-pico', "sys.platform is 'linux'"),
                            ('nosuch', 'unknown board')):
            p = c.run('deploy', vb.path, '--id', 'pump-1', '--board', board, '-q', ok=False)
            assert p.returncode == 2 and p.stderr.count('\n') == 1, (board, p.stdout, p.stderr)
            assert says in p.stderr and 'Traceback' not in p.stderr, p.stderr
            assert ('known: esp32, esp32s3, esp8266, rp2-pico, rp2-pico-w, unix' in p.stderr) == (board == 'nosuch')
            assert _snapshot(c.dir, flash) == before, board
        assert not os.listdir(os.path.join(c.dir, 'devices'))
        out = c('deploy', vb.path, '--id', 'pump-1', '--board', 'unix', '-q')
        assert 'deployed pump-1' in out
    finally:
        c.stop_boards()


# -- every user error: one line, exit 2 --------------------------------------------

def _bad_args(tmp):
    """verb -> command lines a user gets wrong (every verb of the parser)."""
    no = str(tmp / 'no' / 'such')
    return {
        'check': [['check', no + '.txt']],
        'merge': [['merge', no + '.txt'], ['merge', 'F/jobs.txt', '-o', no + '/out.txt'],
                  ['merge', 'F/jobs.txt', '--workers', '0']],
        'plan': [['plan', no], ['plan', 'F/jobs.txt', '--until', '+1d'],
                 ['plan', 'F/jobs.txt', '--hosts', 'a', '--until', 'soon'],
                 ['plan', 'F/jobs.txt', '--hosts', 'a', '--until', '+1d', '--limit', '0']],
        'keys': [['keys', 'turn']],
        'init': [['init']],                                       # F is a fleet already
        'add': [['add', ''], ['add', 'each +30x log x'], ['add', 'sometimes +1m log x']],
        'cancel': [['cancel', 'xx'], ['cancel', 'aaaaaaaa']],
        'jobs': [['--fleet', no, 'jobs']],
        'results': [['results', '--since', 'yesterday'], ['results', '--job', 'zz']],
        'status': [['--fleet', no, 'status']],
        'deploy': [['deploy', no], ['deploy', '127.0.0.1:1'], ['deploy', no, '--board', 'nosuch'],
                   ['deploy', no, '--lat', '100', '--lon', '0'], ['deploy', no, '--id', 'a b'],
                   ['deploy', no, '--sync-port', '0'], ['deploy', no, '--peer', 'nocolon']],
        'net': [['net', '127.0.0.1:1', '--timeout', '1']],
        'sync': [['sync', no], ['sync', '127.0.0.1:1']],
        'ui': [['ui', '--port', '99999'], ['ui', '--for', '-1'], ['--fleet', no, 'ui'], ['ui', '--host', '999.1.1.1']],
        'serve': [['serve', '--port', '99999'], ['serve', '--bind', '999.1.1.1'], ['serve', '--for', '-1']],
        'vboard': [['vboard', '--heap', 'zz'], ['vboard', '--env', 'X'], ['vboard', '--clock-scale', '-1'],
                   ['vboard', '--flash', '/proc/sporadic-no'], ['vboard', '--board', 'nosuch'],
                   ['vboard', '--board', 'rp2-pico', '--flash', no + '.flash']],
        'image': [['image', '--board', 'nosuch', '--id', 'x', '-o', 'x.img'],
                  ['image', '--board', 'unix', '--id', 'x', '-o', no + '/x.img']],
        'flash': [['flash', '--board', 'nosuch', no], ['flash', '--board', 'esp32', no]],
        'simulate': [['simulate', no + '.toml']],
        'demo': [['demo', '--seconds', '-1'], ['demo', '--scale', '0']],
    }


def test_every_verb_with_bad_arguments_says_one_line_and_exits_2(tmp_path, capsys, monkeypatch):
    from companion import cli
    monkeypatch.delenv('SPORADIC_DEBUG', raising=False)
    monkeypatch.delenv('SPORADIC_RP2_UF2', raising=False)
    monkeypatch.chdir(tmp_path)
    fleet = str(tmp_path / 'F')
    assert cli.main(['--fleet', fleet, 'init', '--insecure']) == 0
    cases = _bad_args(tmp_path)
    verbs = set(cli.build_parser()._subparsers._group_actions[0].choices)
    assert verbs == set(cases), 'a verb without bad-argument cases: %s' % (verbs ^ set(cases))
    for verb, argvs in cases.items():
        for argv in argvs:
            argv = [a.replace('F/', fleet + '/') for a in argv]
            capsys.readouterr()
            rc = cli.main(argv if argv[0] == '--fleet' else ['--fleet', fleet] + argv)
            out, err = capsys.readouterr()
            assert rc == 2, (argv, rc, out, err)
            assert err.startswith('companion: ') and err.count('\n') == 1, (argv, err)
            assert 'Traceback' not in out + err and 'internal error' not in err, (argv, err)
    assert not (tmp_path / 'no').exists()      # nothing was made on the way


def test_version_and_the_vboard_entry():
    import subprocess
    import sys
    from tests.mpy import ROOT
    p = subprocess.run([sys.executable, '-m', 'companion.cli', '--version'], capture_output=True, text=True,
                       cwd=ROOT)
    assert p.returncode == 0 and re.match(r'companion \d+\.\d+', p.stdout), (p.stdout, p.stderr)
    for argv in (['--clock-scale', '0'], ['--heap', 'zz'], ['--board', 'rp2-pico', '--flash', '/proc/none.flash']):
        p = subprocess.run([sys.executable, '-m', 'companion.commands.vboard'] + argv, capture_output=True, text=True,
                           cwd=ROOT, env=dict(__import__('os').environ, SPORADIC_RP2_UF2=''), timeout=60)
        assert p.returncode == 2 and p.stderr.count('\n') == 1 and 'Traceback' not in p.stderr, (argv, p.stderr)


# -- actions are checked where the job is written ----------------------------------

def test_add_and_check_refuse_an_action_no_board_runs(tmp_path, capsys):
    from companion import cli
    fleet = str(tmp_path / 'F')
    assert cli.main(['--fleet', fleet, 'init', '--insecure']) == 0
    jobs = tmp_path / 'F' / 'jobs.txt'
    before = jobs.read_text()
    capsys.readouterr()
    assert cli.main(['--fleet', fleet, 'add', 'each +30s frobnicate 1']) == 2
    err = capsys.readouterr().err
    assert err.count('\n') == 1 and "action 'frobnicate'" in err, err
    assert 'they run: led, log, pin, pulse, reset, sleep' in err, err
    assert jobs.read_text() == before
    # check knows the same table: FILE:LINE per job, exit 1 (a lint)
    f = tmp_path / 'mine.txt'
    f.write_text('each 2026-12-01T00:00Z log hi\neach 2026-12-01T00:00Z frobnicate 1\n')
    assert cli.main(['--fleet', fleet, 'check', str(f)]) == 1
    out = capsys.readouterr().out
    assert out.startswith('%s:2: ' % f) and 'frobnicate' in out and out.count('\n') == 1, out
    # an action of the user's own, in the fleet's actions.py (deploy puts it on every board)
    (tmp_path / 'F' / 'actions.py').write_text('def frobnicate(n):\n    return n\n\ndef _helper():\n    pass\n')
    assert cli.main(['--fleet', fleet, 'check', str(f)]) == 0
    assert cli.main(['--fleet', fleet, 'add', 'each +30s frobnicate 1']) == 0
    capsys.readouterr()
    assert cli.main(['--fleet', fleet, 'add', 'each +30s _helper']) == 2


@pytest.mark.slow
def test_deploy_learns_a_boards_own_actions(tmp_path):
    """A board with its own /actions.py: deploy reads it, `add` takes its
    actions and refuses others, naming the board and what it runs."""
    import os
    from tests.devutil import CLI
    c = CLI(str(tmp_path / 'fleet'))
    try:
        c('init')
        flash = str(tmp_path / 'flash')
        os.makedirs(flash)
        with open(os.path.join(flash, 'actions.py'), 'w') as f:
            f.write('def water(ms):\n    return "watered " + ms\n')
        vb = c.vboard('--id', 'pump-1', '--flash', flash)
        c('deploy', vb.path, '--id', 'pump-1', '-q')
        t = int(__import__('time').time())
        j = c('add', 'each +1m water 30').strip()
        assert len(j) == 8
        # jobs: the board's next run of it, as the planner decides on the fleet's copy
        (row,) = [r for r in c.json('jobs') if r['job'] == j]
        nxt = row['devices']['pump-1']['next']
        assert nxt['what'] == 'wait' and nxt['instance'] == j + '.0' and t + 60 <= nxt['at'] <= t + 62, nxt
        assert 'next %s.0 at ' % j in c('jobs')
        assert 'no results yet' in c('results')
        p = c.run('add', 'each +1m frobnicate 1', ok=False)
        assert p.returncode == 2 and p.stderr.count('\n') == 1, p.stderr
        assert '(pump-1)' in p.stderr and 'water' in p.stderr and "'frobnicate'" in p.stderr, p.stderr
    finally:
        c.stop_boards()


def test_results_filters(tmp_path, capsys):
    from companion import cli
    fleet = Fleet(str(tmp_path / 'F'))
    fleet.init('f', insecure=True)
    j1 = add_job(fleet, 'each 2026-12-01T00:05Z log a ; every=1h', now=T0)
    j2 = add_job(fleet, 'each 2026-12-01T00:05Z log b ; every=1h', now=T0 + 1)
    got = [result(j.id, h, k, T0 + 300 + k * 3600) for j in (j1, j2) for h in ('p1', 'p2') for k in (0, 1, 2)]
    fleet.add_results(got)

    def rows(*argv):
        capsys.readouterr()
        assert cli.main(['--fleet', fleet.dir, 'results', '--json'] + list(argv)) == 0
        return {(r['job'], r['host'], r['instance']) for r in __import__('json').loads(capsys.readouterr().out)}
    assert len(rows()) == 12
    assert rows('--host', 'p2') == {(j.id, 'p2', '%s.%d' % (j.id, k)) for j in (j1, j2) for k in (0, 1, 2)}
    assert rows('--job', j1.id, '--host', 'p1') == {(j1.id, 'p1', '%s.%d' % (j1.id, k)) for k in (0, 1, 2)}
    assert rows('--job', j2.id + '.1') == {(j2.id, h, j2.id + '.1') for h in ('p1', 'p2')}
    assert rows('--since', '2026-12-01T02:00Z', '--host', 'p1', '--host', 'p2', '--job', j1.id) == {
        (j1.id, h, j1.id + '.2') for h in ('p1', 'p2')}
    assert rows('--since', '1d') == set()          # a day before now: long after these
    capsys.readouterr()
    assert cli.main(['--fleet', fleet.dir, 'results', '--host', 'nobody']) == 0
    assert 'no results matching yet' in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.xdist_group('rp2')
def test_deploy_board_checked_on_the_real_rp2_firmware(tmp_path, capsys):
    """The emulated Pico (the real RPI_PICO firmware): `deploy --board esp32`
    and `--board rp2-pico-w` are refused before anything is written (its
    sys.platform, its machine); `--board rp2-pico` deploys."""
    import os
    from tests import test_rp2 as rp2
    if rp2.WHY is not None:
        pytest.skip('emulated Pico: %s' % rp2.WHY)
    from tests.devutil import InProcessCompanion
    from companion.vboard.rp2 import RP2VBoard
    c = InProcessCompanion(str(tmp_path / 'fleet'), capsys)
    c('init')
    vb = RP2VBoard(str(tmp_path / 'pico.flash'), firmware=rp2.UF2, bootrom=rp2.BOOTROM)
    vb.start()
    try:
        before = _snapshot(c.dir)
        from companion import cli
        for board, says in (('esp32', "its sys.platform is 'rp2'"), ('rp2-pico-w', "which is board rp2-pico")):
            capsys.readouterr()
            rc = cli.main(['--fleet', c.dir, 'deploy', vb.path, '--id', 'pico-1', '--board', board, '-q'])
            err = capsys.readouterr().err
            assert rc == 2 and err.count('\n') == 1 and says in err, (board, err)
            assert _snapshot(c.dir) == before, board
            files = rp2.flash_files(vb.flash)
            assert '/cfg.json' not in files and '/main.py' not in files, board
        out = c('deploy', vb.path, '--id', 'pico-1', '--board', 'rp2-pico', '-q')
        assert 'deployed pico-1' in out
    finally:
        vb.stop()
