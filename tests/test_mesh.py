"""Boards on a network (docs/wifi.md): virtual boards (`companion vboard`,
the unix port on loopback) set up as a user sets them up, `companion deploy
PORT --id X --sync-port N --peer HOST:PORT`, in a signed fleet; records go
in with `companion add` and `companion sync HOST:PORT`. A network is cut
apart with drop lists: each board is started with
`--env SPORADIC_NET_DROP=/drop.txt` (boards/unix/board.py), a file on its
flash of the ids it neither hears nor talks to. Network timing is the
product's default (docs/wifi.md) except where a test says otherwise: a
sync period its claim is not about is shortened with `--env
SPORADIC_NET_TUNE=sync_ms=...` (boards/unix/board.py: cfg.json's `net`
tuning keys). Every wait polls a condition with a deadline. Plus the pure
leader/assignment logic on CPython."""
import json
import os
import socket

import pytest

from companion.fleet.board_keys import device_secret
from companion.fleet.folder import Fleet
from companion.sync.syncer import GET_LINES
from sporadic.core import jobline, leader, merge, plan, recon
from sporadic.core import recondrv
from sporadic.core import jobtext
from sporadic.desktop import merging
from tests.devutil import synced_once_listening, wait_for

HEAP = '224K'    # runtime + store + recon + net + a signed sync on the 64-bit port (docs/wifi.md);
                 # 192K until board signatures: checking them in a sync took ~24 KiB more (bench/mqtt.py's TCP figure)


class Board:
    """One deployed virtual board, seen through the product: TCP as the
    companion (its device secret from the fleet folder)."""

    def __init__(self, cli, root, bid, port):
        self.cli = cli
        self.id = bid
        self.port = port
        self.dir = os.path.join(root, bid)
        self.vb = None

    def start(self, peers, tune=None):
        env = ['--env', 'SPORADIC_NET_DROP=/drop.txt']
        if tune:
            env += ['--env', 'SPORADIC_NET_TUNE=' + ','.join('%s=%d' % kv for kv in sorted(tune.items()))]
        self.vb = self.cli.vboard('--id', self.id, '--flash', self.dir, '--heap', HEAP, *env)
        argv = ['deploy', self.vb.path, '--id', self.id, '--sync-port', self.port, '-q']
        for p in peers:
            argv += ['--peer', '127.0.0.1:%d' % p]
        self.cli(*argv)

    def sync(self):
        """`companion sync 127.0.0.1:PORT` (sets the board's clock), once it listens."""
        return synced_once_listening(self.cli, self.port, self.id + ' listening', every=0.3).stdout

    def alive(self):
        return self.vb is not None and self.vb.alive()

    def stop(self):
        if self.vb is not None:
            self.vb.stop()
            self.vb = None

    def secret(self):
        return device_secret(Fleet(self.cli.dir), self.id)

    def link(self):
        from companion.link.tcp import TcpLink
        # a board's hello waits for its loop: a board-to-board sync slice, a
        # merge, on a loaded machine longer than 5 s
        return TcpLink('127.0.0.1', self.port, secret=self.secret(), timeout=15)

    def net(self):
        return self.cli.json('net', '127.0.0.1:%d' % self.port)

    def lines(self):
        got = []
        link = self.link()
        try:
            # as `companion sync` asks over TCP: at most GET_LINES lines a G
            recondrv.reconcile(lambda: iter(()), lambda ls: got.extend(ls), link.call, verify=False,
                               get_lines=GET_LINES)
        finally:
            link.close()
        return merging.merge(got)

    def drop(self, ids):
        p = os.path.join(self.dir, 'drop.txt')
        with open(p + '.tmp', 'w') as f:
            f.write('\n'.join(ids) + '\n')
        os.replace(p + '.tmp', p)
        st = os.stat(p)
        os.utime(p, (st.st_atime, st.st_mtime + 1))


@pytest.fixture
def fleet_of(tmp_path, fleet_cli, reserve_ports):
    made = []
    cli = fleet_cli
    cli('init')

    def make(ids, links=None, tune=None):
        # tune: {key: ms} of cfg.json's net tuning for every board (SPORADIC_NET_TUNE)
        port = dict(zip(ids, reserve_ports(len(ids))))
        boards = {}
        for b in ids:
            boards[b] = Board(cli, str(tmp_path), b, port[b])
            made.append(boards[b])
        for b in ids:
            peers = [port[o] for o in ids if o != b and (links is None or o in links.get(b, ()))]
            boards[b].start(peers, tune)
        for b in ids:
            boards[b].sync()       # its clock, the host list
        return boards
    make.cli = cli
    yield make
    for b in made:
        b.stop()


def leaders(boards):
    out = {}
    for b in boards:
        if b.alive():
            out[b.id] = b.net()['leader']
    return out


def agreed(boards, who):
    def f():
        ls = leaders(boards)
        return ls if all(v == who for v in ls.values()) else None
    return f


# ---- the fleet on loopback -----------------------------------------------------

@pytest.mark.slow
def test_records_spread_one_leader_split_runs_once_per_section_heal_reports(fleet_of):
    ids = ['b1', 'b2', 'b3', 'b4', 'b5']
    # a board-to-board sync every 2 s (the default 5 s): records spread in
    # seconds; heartbeats and leases stay the product's
    fl = fleet_of(ids, tune={'sync_ms': 2000})
    c = fleet_of.cli
    bs = [fl[i] for i in ids]
    # every record reaches every connected board (the companion brings it to one)
    spread = c('add', 'each +1d log spread').strip()
    fl['b3'].sync()
    wait_for(lambda: all(any(l.startswith(spread + ' ') for l in b.lines()) for b in bs), 60,
             'the job on every board')
    # one leader: the lowest id
    wait_for(agreed(bs, 'b1'), 20, 'b1 leads all five')
    # split {b1 b2 b3} | {b4 b5}
    A, B = ids[:3], ids[3:]
    for i in A:
        fl[i].drop(B)
    for i in B:
        fl[i].drop(A)
    wait_for(agreed([fl[i] for i in B], 'b4'), 20, 'b4 leads the second section')
    assert set(leaders([fl[i] for i in A]).values()) == {'b1'}
    # a single-run job of each kind reaches both sections (one board of each,
    # through the companion) before it is due (a sync period or two)
    job = c('add', 'one +12s log single ; grace=1h').strip()
    anyjob = c('add', 'any:0.001 +12s log anyone').strip()
    for i in ('b2', 'b5'):
        fl[i].sync()

    def runs(section, j):
        found = set()
        for i in section:
            for line in fl[i].lines():
                if line.startswith(j + ' r ') and ' 0 ' in line and ' miss' not in line:
                    found.add(line.split()[2])
        return found
    for j in (job, anyjob):
        ra = wait_for(lambda: runs(A, j) if all(len([l for l in fl[i].lines() if l.startswith(j + ' r ')]) >= 1
                                                 for i in A) else None, 90, 'a run in section A')
        rb = wait_for(lambda: runs(B, j) if all(len([l for l in fl[i].lines() if l.startswith(j + ' r ')]) >= 1
                                                 for i in B) else None, 90, 'a run in section B')
        assert len(ra) == 1 and ra <= set(A), ra
        assert len(rb) == 1 and rb <= set(B), rb
    # heal: one leader again (b4 steps down), the duplicates are reported
    for i in ids:
        fl[i].drop([])
    wait_for(agreed(bs, 'b1'), 20, 'one leader after the heal')
    for j in (job, anyjob):
        dup = wait_for(lambda: [d for d in fl['b3'].net()['duplicates'] if d.startswith(j + '.0')],
                       60, 'duplicate reported')
        assert len(dup[0].split(': ')[1].split()) == 2
    # the companion sees them too
    fl['b3'].sync()
    dups = c.json('status')['duplicates']
    assert {job + '.0', anyjob + '.0'} <= set(dups), dups
    # the leader disappears: the next lowest id takes over, nothing is lost
    before = set(fl['b2'].lines())
    fl['b1'].stop()
    wait_for(agreed(bs[1:], 'b2'), 20, 'b2 takes over')
    wait_for(lambda: before <= set(fl['b5'].lines()), 60, 'b5 holds everything b2 held')


@pytest.mark.slow
def test_chain_a_b_c_where_a_never_meets_c(fleet_of):
    links = {'ca': ['cb'], 'cb': ['ca', 'cc'], 'cc': ['cb']}
    fl = fleet_of(['ca', 'cb', 'cc'], links)
    c = fleet_of.cli
    fl['ca'].drop(['cc'])
    fl['cc'].drop(['ca'])
    from_a = c('add', 'each +1d log from-a').strip()
    fl['ca'].sync()
    has = lambda b, j: any(l.startswith(j + ' ') for l in b.lines())
    wait_for(lambda: has(fl['cc'], from_a), 60, 'the record from A at C')
    from_c = c('add', 'each +1d log from-c').strip()
    fl['cc'].sync()
    wait_for(lambda: has(fl['ca'], from_c), 60, 'the record from C at A')
    assert 'ca' not in fl['cc'].net()['peers'] and 'cc' not in fl['ca'].net()['peers']


# ---- a hostile network against one board ----------------------------------------

def _hello(port):
    s = socket.create_connection(('127.0.0.1', port), timeout=3)
    f = s.makefile('rb')
    return s, f, f.readline().decode().split()


@pytest.mark.slow
def test_bad_network_board_keeps_running_and_loses_nothing(fleet_of):
    comp = fleet_of.cli
    fl = fleet_of(['h1'])
    b = fl['h1']
    keep = comp('add', 'each +1d log keep-me').strip()
    b.sync()
    port = b.port
    secret = b.secret()
    with open(os.path.join(comp.dir, 'keys', 'peer')) as f:
        fleet_key = f.read().strip()
    # half-open: connect, say nothing (from another address: a board takes
    # at most server.HALF_PER_ADDR half-open connections from one)
    quiet = [socket.create_connection(('127.0.0.1', port), timeout=3, source_address=('127.0.0.2', 0))
             for _ in range(2)]
    # a stalled peer: a good-looking frame header, then silence
    s, f, hello = _hello(port)
    s.sendall(b'SPC1 stall 0123456789abcdef -\n')
    assert f.readline().startswith(b'ERR')   # no MAC: refused before any frame
    # garbage bytes
    g, gf, _ = _hello(port)
    g.sendall(b'\x00\xff GET / HTTP/1.1\r\n\r\n')
    assert gf.readline().startswith(b'ERR garbage')
    # a request larger than allowed (after a proper handshake as the companion)
    from companion.link.tcp import TcpLink
    from companion.link.base import LinkError
    big = TcpLink('127.0.0.1', port, secret=secret, timeout=3)
    with pytest.raises(LinkError):
        big.call('P ' + 'x' * 20000)
    big.close()
    # a stranger: the wrong key cannot sync, nor set the clock, nor lead
    with pytest.raises(LinkError):
        TcpLink('127.0.0.1', port, secret='00' * 32, timeout=3)
    peer = TcpLink('127.0.0.1', port, fleet_key=fleet_key, me='peer-x', timeout=3)
    assert peer.call('T 1900000000').startswith('!error not allowed')
    assert peer.call('A 99').startswith('!error not allowed')
    peer.close()
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for seq in range(5):
        u.sendto(leader.encode('a0', 99, True, 1, seq + 1, b'wrong key').encode(), ('127.0.0.1', port))
        u.sendto(b'\x00garbage', ('127.0.0.1', port))
    # a stalled companion mid-frame
    stalled = TcpLink('127.0.0.1', port, secret=secret, timeout=3)
    stalled._p.sock.sendall(b'100 -\nS')
    # a flood of connections
    flood = []
    for _ in range(12):
        try:
            flood.append(socket.create_connection(('127.0.0.1', port), timeout=3))
        except OSError:
            pass
    busy = 0
    for c in flood:
        try:
            c.settimeout(2)
            if c.recv(64).startswith(b'ERR busy'):
                busy += 1
        except OSError:
            pass
    assert busy >= 1
    for c in flood + [s, g]:
        c.close()
    # the half-open connections and the stalled companion stay open until the
    # board gives up on them itself (auth_ms, stall_ms): closed here, the board
    # would see a clean close instead, and the whole attack above takes a few
    # milliseconds, far less than those deadlines

    def timed_out():
        try:
            st = b.net()
        except LinkError:
            return None       # a slot not freed yet: ERR busy
        return st if st['server']['timeouts'] >= 3 else None
    st = wait_for(timed_out, 10, 'timeouts counted')
    reasons = ' | '.join(st['rejected'])
    assert reasons.count('half-open') >= 2 and 'stalled mid-message' in reasons, reasons
    for c in quiet:
        c.settimeout(2)
        assert c.recv(64).startswith(b'SPS1')   # the hello, then the board hung up
        assert c.recv(64) == b''
    with pytest.raises(LinkError):
        stalled.call('S')
    for c in quiet:
        c.close()
    stalled.close()
    # the board is still there, still leads itself (a lease_ms after its
    # start: the attack may be over before that), holds every record
    st = wait_for(lambda: b.net() if b.net()['leader'] == 'h1' else None, 10, 'h1 leads itself')
    assert b.alive()
    assert st['leader'] == 'h1' and st['sync']['hb_bad'] >= 5 and 'a0' not in st['alive']
    reasons = ' | '.join(st['rejected'])
    for word in ('garbage', 'too large', 'authentication failed'):
        assert word in reasons, reasons
    held = b.lines()
    # its host record (`.h h1 SINCE ed25519:KEY`: its board key, docs/jobline.md)
    assert any(l.split()[:2] == ['.h', 'h1'] for l in held) and any(l.startswith(keep + ' ') for l in held)
    later = comp('add', 'each +1d log later').strip()
    assert 'sent 2 line(s)' in b.sync()           # the job and its signature
    assert any(l.startswith(later + ' ') for l in b.lines())


# ---- the pure logic (CPython) ------------------------------------------------------

def _run_election(es, t0, t1, step=100, cut=lambda a, b: False):
    for t in range(t0, t1, step):
        for x in es.values():
            hb = x.beat(t)
            if hb:
                for y in es.values():
                    if y is not x and not cut(x.me, y.me):
                        y.heard(hb[0], hb[1], hb[2], t)
    return {h: x.tick(t1) for h, x in es.items()}


def test_election_lowest_leads_split_heal_and_loss():
    es = {h: leader.Elector(h, 0, 1000, 200) for h in ['e3', 'e1', 'e2', 'e4']}
    assert set(_run_election(es, 0, 3000).values()) == {'e1'}
    split = lambda a, b: (a < 'e3') != (b < 'e3')
    got = _run_election(es, 3000, 6000, cut=split)
    assert got == {'e1': 'e1', 'e2': 'e1', 'e3': 'e3', 'e4': 'e3'}
    got = _run_election(es, 6000, 9000)
    assert set(got.values()) == {'e1'} and not es['e3'].leading
    del es['e1']   # the leader disappears
    assert set(_run_election(es, 9000, 12000).values()) == {'e2'}


def test_assignment_record_parses_merges_and_plans():
    j = jobline.parse('one 2026-12-01T00:00Z backup ; every=1d')
    a = jobtext.Assign(j.id, 'p2', 3, 100, 'p1')
    assert jobline.canonical(a.line()) == a.line() == j.id + ' a p2 3 100 p1 -'
    b = jobtext.Assign(j.id, 'p3', 3, 200, 'p4').line()
    c = jobtext.Assign(j.id, 'p1', 2, 900, 'p4').line()
    for order in ([a.line(), b, c, j.line()], [j.line(), c, b, a.line()]):
        assert merging.merge(order) == [b, j.line()]
    assert merging.merge([a.line(), j.line(), j.id + ' cancel']) == [j.id + ' cancel']
    anyj = jobline.parse('any:0.5 2026-12-01T00:00Z up')
    x = jobtext.Assign(anyj.id, 'p2', 0, 5, 'p1').line()
    assert merging.merge([x, anyj.line(), anyj.id + ' cancel']) == [anyj.id + ' cancel']
    assert merging.merge([x, anyj.line()]) == [x, anyj.line()]
    due = plan.due(j, 3)
    assert plan.decide(j, 'p3', due + 5, (2, 'ok', 1), rnk=2, assigned=(3, 'p3'), led=True)[0] == plan.RUN
    assert plan.decide(j, 'p2', due + 5, (2, 'ok', 1), rnk=0, assigned=(3, 'p3'), led=True)[0] == plan.WAIT
    assert plan.decide(j, 'p2', due + 5, (2, 'ok', 1), rnk=0, led=True)[0] == plan.WAIT
    # the assignee ran it: settled for the others too
    assert plan.decide(j, 'p2', due + j.grace, (2, 'ok', 1), 3, rnk=0, assigned=(3, 'p3'), led=True)[:2] == \
        (plan.WAIT, 4)
    # leader gone: the others take over one grace later than their rule
    assert plan.decide(j, 'p2', due + 5, (2, 'ok', 1), rnk=0, assigned=(3, 'p3'))[:3] == (plan.WAIT, 3, due + j.grace)
    assert plan.decide(j, 'p2', due + j.grace, (2, 'ok', 1), rnk=0, assigned=(3, 'p3'))[0] == plan.RUN
    # before due under a lease: wake at due whatever the rank
    assert plan.decide(j, 'p3', plan.due(j, 0) - 50, rnk=2, led=True)[:3] == (plan.WAIT, 0, plan.due(j, 0))


def test_leader_assigns_alive_hosts_once_and_reports_duplicates():
    j = jobline.parse('one 2026-12-01T00:00Z backup ; every=1d')
    lines = merging.merge(['.h p1', '.h p2', '.h p3', j.line()])
    t = j.t0 + 10
    new = leader.assignments(lines, 'p1', ['p1', 'p2', 'p3'], t)
    assert len(new) == 1 and new[0].split()[3] == '0'
    lines = merging.merge(lines + new)
    assert leader.assignments(lines, 'p1', ['p1', 'p2', 'p3'], t + 5) == []
    host = new[0].split()[2]
    rest = [h for h in ['p1', 'p2', 'p3'] if h != host]
    again = leader.assignments(lines, 'p1', rest, t + 5)   # the assignee went away
    assert len(again) == 1 and again[0].split()[2] in rest
    done = merging.merge(lines + again + [j.id + ' r %s 0 %d ok -' % (host, t)])
    nxt = leader.assignments(done, 'p1', ['p1', 'p2', 'p3'], t + 10)
    assert len(nxt) == 1 and nxt[0].split()[3] == '1'     # the next instance, ahead of time
    dup = merging.merge(done + [j.id + ' r %s 0 %d ok -' % (rest[0], t)])
    assert leader.duplicates(dup) == ['%s.0: %s' % (j.id, ' '.join(sorted([host, rest[0]])))]


def test_heartbeat_codec_refuses_strangers_and_garbage():
    k = b'fleet'
    m = leader.encode('p1', 4, True, 7370, 12, k)
    assert leader.decode(m, k) == ('p1', 4, True, 7370, 12)
    for bad, key in ((m, b'other'), (m.replace(' 4 ', ' 5 '), k), ('x' * 300, k), ('SPH1 a b', k),
                     (b'\xff\xfe', k)):
        with pytest.raises(ValueError):
            leader.decode(bad, key)
