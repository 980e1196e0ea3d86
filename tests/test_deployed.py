"""As deployed (issue #12): boards set up only with the product's commands,
every step a `companion ...` process as a user types it (docs/wifi.md,
"Three boards on one machine"): init, vboard x3, deploy with --sync-port
and --peer, add, one serial sync, the jobs spread board to board over TCP
with the companion away, a leader among the three and an `any` job run
exactly once, the results read with `companion sync HOST:PORT`; then a
fourth board built with `companion image` boots from that image and joins.

The tests look at a board's flash folder only as one looks at a board's
LED (its action log: what ran); never to drive it. Board clocks are the
host's (scale 1): the companion sets them at its first visit, as it does
for a real board. The networked boards sync each other every 2 s
(`companion vboard --env SPORADIC_NET_TUNE=sync_ms=2000`: cfg.json's
`net.sync_ms`, the product's 5 s): the jobs are due seconds after they
are added, once they have spread.
"""
import json
import os

import pytest

from companion.make import image
from tests.devutil import CLI, actlog, synced_once_listening, wait_for

pytestmark = pytest.mark.slow   # every test starts virtual boards

HEAP = '192K'   # a signed sync over TCP on the 64-bit unix port (docs/wifi.md#budgets-and-limits)
IDS = ['b1', 'b2', 'b3']
TUNE = ('--env', 'SPORADIC_NET_TUNE=sync_ms=2000')   # a board-to-board sync every 2 s


def start(cli, tmp_path, bid, *more):
    vb = cli.vboard('--id', bid, '--flash', str(tmp_path / bid), '--heap', HEAP, *more)
    vb.flash = str(tmp_path / bid)
    return vb


def net(cli, port):
    return cli.json('net', '127.0.0.1:%d' % port)


def tcp_sync(cli, bid, port, timeout=20):
    """`companion sync 127.0.0.1:PORT` once the board listens (it binds its
    port as it boots; until then the sync is refused)."""
    p = synced_once_listening(cli, port, '%s listening on %d' % (bid, port), timeout)
    assert p.stdout.startswith('synced ' + bid), p.stdout
    return p.stdout


def cfg_keys(text):
    return sorted(json.loads(text))


def test_three_deployed_boards_spread_elect_run_once_and_an_imaged_board_joins(fleet_cli, tmp_path, reserve_ports):
    c = fleet_cli
    assert 'signed' in c('init')
    assert os.path.isfile(os.path.join(c.dir, 'keys', 'peer'))     # the fleet key, made by init
    ports = dict(zip(IDS + ['b4'], reserve_ports(4)))
    boards = {b: start(c, tmp_path, b, *TUNE) for b in IDS}
    for b in IDS:
        peers = []
        for o in IDS:
            if o != b:
                peers += ['--peer', '127.0.0.1:%d' % ports[o]]
        out = c('deploy', boards[b].path, '--id', b, '--sync-port', ports[b], *peers, '-q')
        assert 'syncs on port %d' % ports[b] in out, out
    # the companion visits b2 and b3 once over TCP (their clocks, the host list)
    for b in ('b2', 'b3'):
        tcp_sync(c, b, ports[b])
    # a leader: the lowest id, seen the same by all three
    wait_for(lambda: all(net(c, ports[b])['leader'] == 'b1' for b in IDS), 30, 'b1 leads all three')
    # two jobs, into b1 only (serial); the companion goes away
    j_each = c('add', 'each +8s log hello ; within=10m').strip()
    j_any = c('add', 'any:1 +12s log anyone ; within=10m tick=1m').strip()
    out = c('sync', boards['b1'].path, '-q')
    assert out.startswith('synced b1') and 'sent 0 line(s)' not in out, out
    # the jobs reach b2 and b3 board to board, and run there
    wait_for(lambda: all(actlog(boards[b].flash).get(j_each + '.0') for b in IDS), 120,
             'the each job run on all three boards')
    ran_any = wait_for(lambda: {b for b in IDS if actlog(boards[b].flash).get(j_any + '.0')}, 60,
                       'the any job run')
    # results back through TCP (b2, b3) and serial (b1)
    for b in ('b2', 'b3'):
        assert c('sync', '127.0.0.1:%d' % ports[b], '-q').startswith('synced ' + b)
    c('sync', boards['b1'].path, '-q')
    rows = c.json('results')
    each_hosts = {r['host'] for r in rows if r['instance'] == j_each + '.0' and r['outcome'] == 'ok'}
    assert each_hosts == set(IDS), rows
    assert all(r['verified'] for r in rows if r['instance'] == j_each + '.0'), rows
    # exactly once: one board ran the `any` instance (the leader assigned it),
    # and nothing reports a duplicate
    any_hosts = {r['host'] for r in rows if r['instance'] == j_any + '.0' and r['outcome'] == 'ok'}
    assert len(any_hosts) == 1 and any_hosts == ran_any, (any_hosts, ran_any)
    assert sum(actlog(boards[b].flash).get(j_any + '.0', 0) for b in IDS) == 1
    assert c.json('status')['duplicates'] == {}
    assert all(net(c, ports[b])['duplicates'] == [] for b in IDS)

    # a fourth board from an image: the same provisioning as deploy
    fs = str(tmp_path / 'fs.bin')
    out = c('image', '--board', 'unix', '--id', 'b4', '-o', fs, '--sync-port', ports['b4'],
            '--peer', '127.0.0.1:%d' % ports['b1'])
    assert fs in out
    with open(fs, 'rb') as f:
        imaged = image.read_image(f.read(), image.geometry('unix'))
    with open(os.path.join(boards['b1'].flash, 'cfg.json')) as f:
        deployed = f.read()
    assert cfg_keys(imaged['/cfg.json']) == cfg_keys(deployed)
    b4 = c.vboard('--id', 'b4', '--image', fs, '--heap', HEAP, *TUNE)
    # it syncs over TCP (the companion sets its clock), hears the fleet, follows b1
    tcp_sync(c, 'b4', ports['b4'])
    st = wait_for(lambda: (lambda s: s if s['leader'] == 'b1' else None)(net(c, ports['b4'])), 30,
                  'b4 follows b1')
    assert 'b1' in st['alive']
    wait_for(lambda: 'b4' in net(c, ports['b1'])['alive'], 30, 'b1 hears b4')
    # and over serial; the job it got from the image runs and comes back verified
    # due about when the serial sync that carries it is over (~1 s here)
    j_late = c('add', 'each +2s log late ; within=10m').strip()
    assert c('sync', b4.path, '-q').startswith('synced b4')

    def late_back():
        c('sync', '127.0.0.1:%d' % ports['b4'], '-q')
        return [r for r in c.json('results') if r['instance'] == j_late + '.0' and r['host'] == 'b4']
    got = wait_for(late_back, 90, 'b4 ran the late job', every=2)
    assert got[0]['outcome'] == 'ok' and got[0]['verified'], got


def test_deploy_and_image_provision_alike_and_a_network_only_when_asked(fleet_cli, tmp_path, reserve_ports):
    """Deploy and image give a board the same cfg keys; a network only when
    the user asks for one: a board deployed without --sync-port/--peer/--wifi
    holds no network keys (so it never imports the network code at boot)."""
    c = fleet_cli
    c('init')
    vb = start(c, tmp_path, 'p1')
    out = c('deploy', vb.path, '--id', 'p1', '-q')
    assert 'syncs on port' not in out
    with open(os.path.join(vb.flash, 'cfg.json')) as f:
        cfg = json.load(f)
    assert not {'sync_port', 'peers', 'wifi'} & set(cfg), cfg
    assert {'fleet_key', 'hwm', 'pubkey', 'secret'} <= set(cfg)
    c('image', '--board', 'unix', '--id', 'p2', '-o', str(tmp_path / 'p2.bin'))
    with open(str(tmp_path / 'p2.bin'), 'rb') as f:
        imaged = json.loads(image.read_image(f.read(), image.geometry('unix'))['/cfg.json'])
    assert sorted(imaged) == sorted(cfg)
    assert imaged['fleet_key'] == cfg['fleet_key'] and imaged['pubkey'] == cfg['pubkey']
    # nothing listening there: one line
    p = c.run('net', '127.0.0.1:%d' % reserve_ports(1)[0], ok=False)   # held, never listening
    assert p.returncode != 0 and p.stderr.startswith('companion: cannot reach') and p.stderr.count('\n') == 1, p.stderr
    # a bad --peer is the user's error, one line, and nothing is written
    p = c.run('deploy', vb.path, '--id', 'p1', '--peer', 'nohost', ok=False)
    assert p.returncode != 0 and p.stderr.startswith('companion: --peer') and p.stderr.count('\n') == 1, p.stderr
    # a real board reaches its peers over Wi-Fi only
    p = c.run('image', '--board', 'esp32', '--id', 'e1', '-o', str(tmp_path / 'e.bin'), '--sync-port', 7370,
              ok=False)
    assert p.returncode != 0 and '--wifi' in p.stderr and not os.path.exists(str(tmp_path / 'e.bin'))
    out = c('image', '--board', 'esp32', '--id', 'e1', '-o', str(tmp_path / 'e.bin'), '--wifi', 'home:pw')
    with open(str(tmp_path / 'e.bin'), 'rb') as f:
        cfg = json.loads(image.read_image(f.read(), image.geometry('esp32'))['/cfg.json'])
    assert cfg['wifi'] == {'ssid': 'home', 'key': 'pw'} and cfg['sync_port'] == 7370


def test_a_board_deployed_with_a_sync_port_listens(fleet_cli, tmp_path, reserve_ports):
    """The issue's first symptom: `companion deploy PORT --id X --sync-port N`,
    then `companion sync 127.0.0.1:N` is answered (the network loop runs
    from the shipped main.py), and over serial the same board still syncs."""
    c = fleet_cli
    c('init')
    (port,) = reserve_ports(1)
    vb = start(c, tmp_path, 'n1')
    c('deploy', vb.path, '--id', 'n1', '--sync-port', port, '-q')
    tcp_sync(c, 'n1', port)
    st = net(c, port)
    assert st['id'] == 'n1' and st['secure'] and st['server']['accepted'] >= 1
    assert c('sync', vb.path, '-q').startswith('synced n1')
    tcp_sync(c, 'n1', port)          # and it listens again after the serial visit
    # the companion of another fleet holds no secret of n1: refused, one line
    other = tmp_path / 'other'
    assert CLI(str(other)).run('init').returncode == 0
    p = CLI(str(other)).run('sync', '127.0.0.1:%d' % port, ok=False)
    assert p.returncode == 2 and p.stderr.count('\n') == 1 and 'Traceback' not in p.stderr, p.stderr
    assert p.stderr.startswith("companion: ") and "refused" in p.stderr, p.stderr
    tcp_sync(c, 'n1', port)          # and its own fleet is still served
