"""Issue #29, cases 1 and 7: what a forged record or a hostile leader can do
to a single-run job (docs/security.md#what-a-stolen-board-can-do).

Case 1 runs on boards provisioned as `companion deploy` provisions them
(tests/test_trust_boards.py: the MicroPython unix port, its sync server
answering the exact requests a serial or TCP link carries, its runtime
stepped at chosen times); the companion side is the real syncer. Case 7
runs on virtual boards deployed and synced with the `companion` commands on
loopback (tests/test_mesh.py), against a hostile peer that holds the
fleet's key. Each test fails on the code before #29.
"""
import json
import os
import socket
import threading
import time

import pytest

from companion import cli
from companion.fleet import queries as fleetcmd
from companion.sync import syncer
from companion.fleet.folder import Fleet
from companion.fleet.board_keys import read_fleet_key
from sporadic.core import hmac as shmac
from sporadic.core import jobline, leader, plan
from tests import devutil
from tests.test_trust_boards import sign, fleet, boards  # noqa: F401 (fixtures)

T0 = devutil.T0
ONE = 'e0000001 one 2026-12-01T06:00Z log single ; every=1h within=30m grace=10m'


def _forged(host, k, at=T0 + 6 * 3600):
    # a result in another's name: a well-formed MAC nobody can check but the
    # companion (16 random hex digits)
    return jobline.Result(ONE[:8], host, k, at, 'ok', 1, os.urandom(8).hex(), 'forged').line()


def _runs(b, host='pump-1'):
    """The instances of ONE that host ran (ok) on board b."""
    return sorted({int(l.split()[3]) for l in b.held()
                   if l.startswith(ONE[:8] + ' r %s ' % host) and ' ok ' in l})


# ---- case 1: a forged result does not stop a single-run job ---------------------

def test_forged_results_neither_stop_a_one_job_nor_travel(fleet, boards):
    b1 = boards('pump-1')
    b2 = boards('pump-2')
    fleet.receive(sign(fleet, ['.h pump-1', '.h pump-2', ONE]), 'test')
    for b in (b1, b2):
        assert b.push(sign(fleet, ['.h pump-1', '.h pump-2', ONE])) == {}
    job = jobline.parse(ONE)
    # what a hostile peer (it holds the fleet key) delivers: a run of
    # instance 1 by a host `Z`, one of instance 1,000,000 by `ghost`, and one
    # in the name of a real board, pump-2, of an instance not due yet
    z = _forged('Z', 1)
    ghost = _forged('ghost', 1000000)
    future = _forged('pump-2', 1000000)
    ref = b1.push([z, ghost, future])
    # Z and ghost are no hosts of the fleet's signed host list: quarantined
    assert set(ref) == {z, ghost}, ref
    assert ref[z].startswith("unknown host Z: not in the fleet's signed host list")
    assert ref[ghost].startswith('unknown host ghost')
    assert z not in b1.held() and ghost not in b1.held()
    assert future in b1.held()         # a board cannot check pump-2's MAC ...
    st = b1.status()
    assert st['quarantined'] >= 2 and any('unknown host ghost' in r for r in st['trust']['refusals'])
    # ... but a run of an instance not due yet settles nothing: instances 0,
    # 1 and 2 run (each one at its due time plus two graces: whatever pump-1's rank)
    for k in (0, 1, 2):
        b1.run(plan.due(job, k) + 2 * job.grace + 30)
        assert _runs(b1) == list(range(k + 1)), (k, _runs(b1))
    # the companion checks every MAC: pump-2's forged record is quarantined
    # (FLEET/quar.txt), not merged into jobs.txt, shown in `status`
    rep = syncer._sync(fleet, 'pipe', b1, T0 + 9 * 3600)
    assert any('unverified result from pump-2 (its MAC does not verify)' in x for x in rep['flagged']), \
        rep['flagged']
    assert future not in fleet.lines() and future not in [r.line() for r in fleet.results()]
    assert [q for q in fleet.quarantined() if q.endswith(future)] == ['pump-1: unverified result from pump-2 '
                                                                      '(its MAC does not verify): ' + future]
    rows = {r['id']: r for r in fleetcmd.status_rows(fleet, T0 + 9 * 3600)}
    assert rows['pump-2']['unverified_records'] == 1
    assert fleetcmd.quarantine_info(fleet)['count'] == 1
    # pump-1 still holds it (it cannot check it) and offers it at every sync:
    # refused again, quarantined once
    rep = syncer._sync(fleet, 'pipe', b1, T0 + 9 * 3600 + 60)
    assert any(future[:40] in x for x in rep['flagged']) and fleetcmd.quarantine_info(fleet)['count'] == 1
    # pump-1's real runs reached the fleet; nothing forged is carried on to pump-2
    assert {0, 1, 2} <= {r.k for r in fleet.results() if r.host == 'pump-1' and r.outcome == 'ok'}
    syncer._sync(fleet, 'pipe', b2, T0 + 9 * 3600)
    held2 = b2.held()
    assert not {z, ghost, future} & held2
    assert any(l.startswith(ONE[:8] + ' r pump-1 2 ') for l in held2)


def test_a_forged_far_future_run_hides_no_real_run(fleet, boards):
    """A far-future run in pump-2's name stays pump-2's newest record of the
    job on pump-1 (the merge keeps the greatest K); pump-3's real run of
    instance 0 still settles it there: pump-1 neither runs it nor records a
    miss (groups.scan's cap: a later instance than the one due is no run)."""
    b1 = boards('pump-1')
    hosts = ['.h pump-1', '.h pump-2', '.h pump-3']
    assert b1.push(sign(fleet, hosts + [ONE])) == {}
    job = jobline.parse(ONE)
    from companion.fleet.board_keys import device_secret
    real = jobline.Result(ONE[:8], 'pump-3', 0, plan.due(job, 0) + 1, 'ok', 1, '-', 'ran').line()
    real = real.replace(' - ', ' %s ' % shmac.mac_result(device_secret(fleet, 'pump-3', create=True), real), 1)
    future = _forged('pump-2', 1000000)
    assert b1.push([future, real]) == {}
    b1.run(plan.due(job, 0) + 2 * job.grace + 30)
    mine = [l for l in b1.held() if l.startswith(ONE[:8] + ' r pump-1 ')]
    assert mine == [], mine          # settled by pump-3: no run, no miss
    b1.run(plan.due(job, 1) + 2 * job.grace + 30)
    assert _runs(b1) == [1]          # the next instance, which nobody ran, runs


def test_a_ghost_in_the_fleet_folder_is_quarantined_and_status_says_so(fleet, boards, capsys):
    """The companion end alone: a board that brings a result of a board the
    fleet never deployed gets it quarantined; `companion status` prints it."""
    b1 = boards('pump-1')
    assert b1.push(sign(fleet, ['.h pump-1', ONE])) == {}
    ghost = _forged('ghost', 1000000)
    # the board was tampered with beyond its store (it checks nothing): the
    # line reaches the companion all the same
    with open(os.path.join(b1.dir, 'jobs.txt'), 'a') as f:
        f.write(ghost + '\n')
    refused = dict(fleet.receive([ghost], 'pump-1'))
    assert refused == {ghost: 'unverified result from ghost (no board ghost in this fleet)'}
    assert ghost not in fleet.lines()
    assert cli.main(['--fleet', fleet.dir, 'status', '--json']) == 0
    out = json.loads(capsys.readouterr().out)
    assert out['quarantine']['count'] == 1 and out['quarantine']['last'][0].endswith(ghost)


# ---- case 7: a hostile leader cannot make an instance run nowhere -----------------

def test_a_leader_delays_an_instance_by_one_grace_at_most():
    """The rule (plan.decide, one implementation for boards and simulator):
    under a lease, an instance with no assignment, or assigned to a host that
    does not run it, goes to the ordinary rule one grace later."""
    j = jobline.parse('one 2026-12-01T00:00Z backup ; every=1d grace=10m')
    a = jobline.parse('any:0.5 2026-12-01T00:00Z up ; every=1d tick=1m')
    rnd = plan.hash_rnd('x')
    for job, rnk in ((j, 0), (j, 1), (a, None)):
        due = plan.due(job, 6)
        late = plan.start_at(job, 6, rnk) + job.grace
        for asg in (None, (6, 'ghost'), (6, 'p9')):
            # the lease holds, the leader assigned nothing or another host
            act, k, at, _ = plan.decide(job, 'p2', due + 5, (5, 'ok', 1), rnk=rnk, rnd=rnd,
                                        assigned=asg, led=True)
            assert (act, k, at) == (plan.WAIT, 6, late), (job.kind, asg, act, k, at)
            # one grace later, the ordinary rule: rank 0 (or an `any` draw) runs
            ks = [plan.decide(job, 'p2', late + i * 60, (5, 'ok', 1), rnk=rnk, rnd=rnd,
                              assigned=asg, led=True)[0] for i in range(30)]
            assert ks[0] == plan.RUN if job.kind == 'one' else plan.RUN in ks, (job.kind, rnk, ks)
            # the assignee's run settles it for the others
            assert plan.decide(job, 'p2', late, (5, 'ok', 1), 6, rnk=rnk, rnd=rnd, assigned=asg,
                               led=True)[:2] == (plan.WAIT, 7)
    # a run of an instance not due yet (a forged `r HOST 1000000`) settles nothing
    due = plan.due(j, 6)
    assert plan.decide(j, 'p2', due + 5, (5, 'ok', 1), 1000000, rnk=0)[:2] == (plan.RUN, 6)
    assert plan.decide(j, 'p2', due + 5, (5, 'ok', 1), 6, rnk=0)[:2] == (plan.WAIT, 7)


HEAP = '192K'


@pytest.mark.slow
def test_hostile_leader_with_the_fleet_key_cannot_stop_a_one_or_an_any_job(tmp_path, fleet_cli,
                                                                           reserve_ports):
    """Three virtual boards deployed on loopback (`companion deploy --sync-port
    --peer`), synced with `companion sync`. A hostile peer that stole the
    fleet key heartbeats as leader with term 99, first under an id that is
    no host of the fleet, then in the name of a real board that is switched
    off (boards cannot tell it from that board), and never assigns: the one
    and the any job still run, at most one grace late."""
    from tests.test_mesh import Board as MeshBoard
    cli = fleet_cli
    cli('init')
    ids = ['h2', 'h3', 'h4']
    ports = reserve_ports(len(ids) + 1)
    port = dict(zip(ids, ports))
    fl = {}
    for b in ids:
        fl[b] = MeshBoard(cli, str(tmp_path), b, port[b])
    # `h1`, a real board of the fleet (its `.h` record signed), then off
    h1 = MeshBoard(cli, str(tmp_path), 'h1', ports[-1])
    h1.start([])
    h1.stop()
    try:
        for b in ids:
            fl[b].start([port[o] for o in ids if o != b])
        for b in ids:
            fl[b].sync()
        key = bytes.fromhex(read_fleet_key(Fleet(cli.dir)))   # what a stolen board's cfg.json holds
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        seq = [int(time.time())]

        def beat(host):
            seq[0] += 1
            msg = leader.encode(host, 99, True, ports[-1], seq[0], key).encode()
            for b in ids:
                sock.sendto(msg, ('127.0.0.1', port[b]))

        def led_by():
            return {b: fl[b].net()['leader'] for b in ids}

        # the hostile peer heartbeats every 0.3 s (its cadence) in the name of `who`
        who = ['a0']
        stop = [False]

        def keep_beating():
            while not stop[0]:
                beat(who[0])
                time.sleep(0.3)
        t = threading.Thread(target=keep_beating, daemon=True)
        t.start()
        try:
            # 1. a stranger's claim (an id no `.h` record names): ignored
            why = "heartbeat from a0: not in the fleet's signed host list"
            devutil.wait_for(lambda: all(why in fl[b].net()['hb_rejected'] for b in ids), 20,
                             'every board ignoring a0')
            for b in ids:
                n = fl[b].net()
                assert n['leader'] != 'a0' and 'a0' not in n['alive'], n
            # 2. in the name of h1, a real board: every board follows "h1" (the
            # lowest id claiming) and waits for assignments that never come
            who[0] = 'h1'
            devutil.wait_for(lambda: set(led_by().values()) == {'h1'} or None, 20, 'h1 (hostile) leads')
            # due 8 s on: after the three syncs below (about 3 s)
            one = cli('add', 'one +8s log single ; grace=8s').strip()
            anyj = cli('add', 'any:0.9 +8s log anyone ; tick=2s within=16s').strip()
            for b in ids:
                fl[b].sync()

            def ran(j):
                for b in ids:
                    for line in fl[b].lines():
                        f = line.split()
                        if line.startswith(j + ' r ') and f[3] == '0' and f[5].startswith(('ok', 'run')):
                            return f[2]
                return None
            # due in 8 s; the ordinary rule one grace (8 s) later: rank 0 at
            # 16 s, rank 1 at 24 s; for the `any` job half its window (8 s)
            # later, then a draw (p = 0.9) every 2 s on each board
            runner = devutil.wait_for(lambda: ran(one), 120, 'the one job ran despite the hostile leader')
            assert runner in ids
            devutil.wait_for(lambda: ran(anyj), 120, 'the any job ran despite the hostile leader')
            assert set(led_by().values()) == {'h1'}     # the lease held all along
        finally:
            stop[0] = True
            t.join(5)
    finally:
        for b in fl.values():
            b.stop()


@pytest.mark.slow
def test_forged_results_from_a_hostile_peer_do_not_stop_a_deployed_board(tmp_path, fleet_cli, reserve_ports):
    """Case 1 as it was found: a board deployed with `companion deploy
    --sync-port` and synced with `companion sync HOST:PORT`; a hostile peer
    holding the fleet key connects to its sync server as a board would and
    pushes `r Z 1`, `r ghost 1000000` and runs of instances 0 and 1,000,000
    in the name of h2, a real board of the fleet (switched off), deployed
    with its board key. The board refuses all four (h2's: not signed by h2,
    docs/security.md#board-signatures) and runs instances 0, 1 and 2 of a
    `one` job; `companion status` shows the refusals."""
    from sporadic.core import recon
    from sporadic.net import peer
    from tests.test_mesh import Board as MeshBoard
    cli = fleet_cli
    cli('init')
    p1, p2 = reserve_ports(2)
    h2 = MeshBoard(cli, str(tmp_path), 'h2', p2)      # a real board of the fleet, then off
    h2.start([])
    h2.stop()
    h1 = MeshBoard(cli, str(tmp_path), 'h1', p1)
    try:
        h1.start([])
        # instance 0 due 10 s on (after the forged push), then one every 8 s
        job = cli('add', 'one +10s log single ; every=8s within=8s grace=3s').strip()
        h1.sync()
        key = bytes.fromhex(read_fleet_key(Fleet(cli.dir)))   # what a stolen board's cfg.json holds

        def forged(host, k):
            return jobline.Result(job, host, k, int(time.time()), 'ok', 1, os.urandom(8).hex(), 'x').line()
        z, ghost, future = forged('Z', 1), forged('ghost', 1000000), forged('h2', 1000000)
        first = forged('h2', 0)
        link = peer.PeerLink('h9', '127.0.0.1', p1, lambda _: key, 5000)
        try:
            answer = link.call('P ' + '\t'.join(recon.esc(l) for l in (z, ghost, future, first)))
        finally:
            link.close()
        refused = [recon.unesc(w.partition(' ')[2]) for w in answer.split('\t')[1:]]
        assert sorted(r.split(':')[0] for r in refused) == ['not signed', 'not signed', 'unknown host Z',
                                                            'unknown host ghost'], answer

        def newest():
            # the store keeps h1's newest result of the job (its watermark)
            ks = [int(l.split()[3]) for l in h1.lines() if l.startswith(job + ' r h1 ')]
            return ks and ks[0] >= 2
        devutil.wait_for(newest, 120, 'h1 past instance 2')
        held = h1.lines()
        assert not {z, ghost, future, first} & set(held)
        h1.sync()
        fleet = Fleet(cli.dir)
        assert future not in fleet.lines() and first not in fleet.lines()
        # every run reached the companion from h1's outbox: instances 0, 1, 2 ran
        ok = {r.k for r in fleet.results() if r.id == job and r.host == 'h1' and r.outcome == 'ok'}
        assert {0, 1, 2} <= ok, sorted(ok)
        st = cli.json('status')
        rows = {r['id']: r for r in st['devices']}
        assert any('board signature of h2' in r for r in rows['h1']['refusals']), rows['h1']
    finally:
        h1.stop()


# ---- board keys: a stolen board cannot write a single-run record in another's name -----

def _board_signed(fleet, host, line):
    """`line` (its MAC '-') with host's MAC and board signature, as host's
    firmware writes it (core/recsig.py, the key its provisioning made)."""
    from companion.fleet.board_keys import device_secret, sign_seed, sign_pub
    from sporadic.core import recsig
    seed = sign_seed(fleet, host)
    mac = recsig.sign(seed, sign_pub(seed)[8:], line, shmac.mac_result(device_secret(fleet, host), line))
    return line.replace(' - ', ' %s ' % mac, 1)


def test_a_stolen_board_cannot_settle_a_due_instance_in_another_boards_name(fleet, boards):
    """Boards provisioned as deploy provisions them (each its own key pair,
    its public key in its signed host record). pump-3 is stolen: it holds
    the fleet key, its own secret and board key. In pump-2's name it writes a
    run of the instance due now (its MAC made up, or signed with its own
    key), and an assignment of that instance to itself by pump-2 as leader:
    pump-1 refuses all three (quarantined, reported back, in status), runs
    the instance, and still takes pump-2's real, signed run of the next one
    (it then does not run it)."""
    b1 = boards('pump-1')
    b2 = boards('pump-2')
    boards('pump-3')                               # provisioned (its key), then stolen
    assert all(' ed25519:' in l for l in fleet.lines() if l.startswith('.h '))
    from companion.fleet.board_keys import sign_path
    assert os.stat(sign_path(fleet, 'pump-3')).st_mode & 0o777 == 0o600    # as the secrets
    fleet.receive(sign(fleet, [ONE]), 'test')
    for b in (b1, b2):
        assert b.push(sorted(fleet.lines())) == {}
    job = jobline.parse(ONE)
    due0 = plan.due(job, 0)
    made_up = _forged('pump-2', 0, due0 + 1)
    own_key = _board_signed(fleet, 'pump-3', made_up.replace(made_up.split()[6], '-'))  # its own key
    asg = jobline.parse('%s a pump-3 0 %d pump-2 %s' % (ONE[:8], due0, os.urandom(8).hex())).line()
    ref = b1.push([made_up, own_key, asg])
    assert set(ref) == {made_up, own_key, asg}, ref
    assert ref[made_up].startswith('not signed: a single-run record needs the board signature of pump-2')
    assert ref[own_key].startswith('bad board signature: not written by pump-2')
    assert ref[asg].startswith('not signed: a single-run record needs the board signature of pump-2')
    assert not {made_up, own_key, asg} & b1.held()
    st = b1.status()
    assert st['quarantined'] >= 3 and any('board signature' in r for r in st['trust']['refusals'])
    b1.run(due0 + 2 * job.grace + 30)
    assert _runs(b1) == [0]                        # the instance ran
    # pump-2's own record of instance 1: signed by its firmware, taken by pump-1
    b2.run(plan.due(job, 1) + 2 * job.grace + 30)
    real = [l for l in b2.held() if l.startswith(ONE[:8] + ' r pump-2 1 ')]
    assert real and all(len(l.split()[6]) == 105 for l in real), real
    assert b1.push(real) == {}
    b1.run(plan.due(job, 1) + 2 * job.grace + 30)
    assert _runs(b1) == [0]                        # settled by pump-2: not run again
    # the companion checks the signature too, after the MAC
    syncer._sync(fleet, 'pipe', b2, T0 + 9 * 3600)
    assert set(real) <= set(fleet.lines()) | {r.line() for r in fleet.results()}
    no_sig = jobline.Result(ONE[:8], 'pump-2', 2, plan.due(job, 2) + 1, 'ok', 1, '-', 'old').line()
    no_sig = no_sig.replace(' - ', ' %s ' % shmac.mac_result(b2.secret, no_sig), 1)
    refused = dict(fleet.receive([no_sig], 'pump-2'))
    assert refused == {no_sig: 'unverified result from pump-2 (a single-run record without the '
                               'board signature of pump-2)'}, refused
    assert no_sig not in fleet.lines()


def test_the_scan_counts_a_single_run_record_of_a_keyed_host_only_when_signed():
    """groups.scan, the one scanner of boards, leader, status and simulator:
    a record that reached a store without its job (the check on arrival
    needs the job's kind) still settles nothing unless signed, when its
    host (an assignment's leader) has a board key; an `each` job's result
    and a host without a key count as before."""
    from sporadic.core import ed25519, groups, recsig
    seed = '11' * 32
    pub = ed25519.public(bytes.fromhex(seed)).hex()
    each = 'e0000002 each 2026-12-01T06:00Z log all ; every=1h'

    def rec(jid, host, k, by=None):
        body = ('%s a pump-1 %d %d %s -' % (jid, k, T0, by) if by else
                '%s r %s %d %d ok - x' % (jid, host, k, T0))
        mac = os.urandom(8).hex()
        return body.replace(' -', ' ' + mac, 1), body.replace(' -', ' ' + recsig.sign(seed, pub, body, mac), 1)

    def seen(lines):
        out = {}
        groups.scan(sorted(lines), 'pump-1', 16,
                    lambda jid, text, c, mine, done_k, asg, hosts: out.__setitem__(jid, (done_k, asg)))
        return out
    hosts = ['.h pump-1', '.h pump-2 1796000000 ed25519:' + pub, '.h pump-3']
    plain, signed = rec(ONE[:8], 'pump-2', 3)
    aplain, asigned = rec(ONE[:8], None, 4, by='pump-2')
    assert seen(hosts + [ONE, plain, aplain])[ONE[:8]] == (-1, None)
    assert seen(hosts + [ONE, signed, asigned])[ONE[:8]] == (3, (4, 'pump-1'))
    assert seen(hosts + [ONE, rec(ONE[:8], 'pump-3', 3)[0]])[ONE[:8]][0] == 3     # no key: as before
    assert seen(hosts + [each, rec(each[:8], 'pump-2', 3)[0]])[each[:8]][0] == 3  # each: as before


def test_a_jobs_kind_is_found_in_a_large_sorted_file_by_bisection(tmp_path):
    """device/boardsig.py looks a job up in jobs.txt by bisection (no pass
    over the store): every job of a 2,000-job file with results, cancels and
    assignments around it, and none that is not there."""
    import random
    from sporadic.device import boardsig
    rnd = random.Random(5)
    ids = sorted({'%08x' % rnd.randrange(16 ** 8) for _ in range(2000)})
    ids = [i.translate(str.maketrans('wxyz', 'abcd')) for i in ids]
    lines = ['.h pump-1', '.h pump-2']
    want = {}
    for n, j in enumerate(ids):
        kind = ('one', 'any', 'each')[n % 3]
        job = '%s %s 2026-12-01T06:00Z log %d ; every=1h' % (j, kind, n)
        want[j] = job
        lines += ['%s a pump-1 %d %d pump-2 %016x' % (j, n, T0, n)] * (n % 2) + [job]
        lines += ['%s r pump-%d %d %d ok %016x x' % (j, h, n, T0, n) for h in (1, 2)]
    lines = sorted(set(lines))
    path = str(tmp_path / 'jobs.txt')
    with open(path, 'w') as f:
        f.write(''.join(l + '\n' for l in lines))
    for j in ids:
        assert boardsig._job_line(path, j) == want[j], j
    for j in ('00000000', 'vvvvvvvv', ids[7][:7] + ('0' if ids[7][7] != '0' else '1')):
        if j not in want:
            assert boardsig._job_line(path, j) is None
