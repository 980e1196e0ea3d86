"""Boards on a network (docs/wifi.md): the unix port on loopback, one
`micropython` process a board, each with its own flash folder, cut apart
by drop lists (/drop.txt: the ids a board neither hears nor talks to).
Timing is never slept into place: every wait polls a condition with a
deadline. Plus the pure leader/assignment logic on CPython."""
import json
import os
import random
import shutil
import socket
import subprocess
import tempfile

import pytest

from sporadic import jobline, leader, merge, plan, recon
from tests.mpy import MICROPYTHON, mpy_lib
from tests.devutil import wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLEET_KEY = '5a' * 32
HEAP = '128K'    # runtime + store + recon + net + sockets: 64K does not hold them all
T_START = 1796083200  # 2026-12-01T00:00Z, the boards' RTC at power-on
SCALE = 60            # board clocks: a minute a real second (network timing stays real)
NET = {'hb_ms': 150, 'lease_ms': 900, 'sync_ms': 250, 'call_ms': 1500, 'auth_ms': 800,
       'stall_ms': 800, 'idle_ms': 5000, 'max_conn': 4, 'max_req': 8192, 'drop': '/drop.txt'}


def secret(bid):
    return ('%02x' % (sum(bid.encode()) % 256)) * 32


def free_ports(n):
    """n ports free for TCP and UDP, below the kernel's ephemeral range: the
    boards started first make outgoing connections from ephemeral ports, and
    one of those could take a port handed to a board not started yet."""
    lo = 20000
    try:
        with open('/proc/sys/net/ipv4/ip_local_port_range') as f:
            lo = min(lo, int(f.read().split()[0]) - 2000)
    except (OSError, ValueError, IndexError):
        pass
    out = []
    for p in random.sample(range(lo - 8000, lo), 8000):
        t = socket.socket()
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            t.bind(('127.0.0.1', p))
            u.bind(('127.0.0.1', p))
        except OSError:
            continue
        else:
            out.append(p)
            if len(out) == n:
                return out
        finally:
            t.close()
            u.close()
    raise RuntimeError('no %d free ports below %d' % (n, lo))


class Board:
    def __init__(self, root, bid, port, peers, lib):
        self.id = bid
        self.port = port
        self.dir = os.path.join(root, bid)
        os.makedirs(os.path.join(self.dir, 'lib'))
        shutil.copytree(os.path.join(lib, 'sporadic'), os.path.join(self.dir, 'lib', 'sporadic'))
        shutil.copy(os.path.join(ROOT, 'boards', 'unix', 'board.py'), os.path.join(self.dir, 'lib', 'board.py'))
        cfg = {'id': bid, 'sync_port': port, 'bind': '127.0.0.1', 'broadcast': False,
               'peers': ['127.0.0.1:%d' % p for p in peers], 'secret': secret(bid),
               'fleet_key': FLEET_KEY, 'net': NET}
        with open(os.path.join(self.dir, 'cfg.json'), 'w') as f:
            json.dump(cfg, f)
        with open(os.path.join(self.dir, 'main.py'), 'w') as f:
            f.write('from sporadic import net\nnet.main()\n')
        self.proc = None

    def start(self):
        env = dict(os.environ, SPORADIC_CLOCK_START=str(T_START), SPORADIC_CLOCK_SCALE=str(SCALE))
        self.log = open(os.path.join(self.dir, '..', self.id + '.log'), 'w')
        self.proc = subprocess.Popen([MICROPYTHON, '-X', 'heapsize=' + HEAP, os.path.join(ROOT, 'tests', 'devboot.py'),
                                      self.dir], env=env, stdout=self.log, stderr=subprocess.STDOUT)
        wait_for(self.reachable, 10, self.id + ' listening')

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def reachable(self):
        try:
            self.link().close()
            return True
        except Exception:
            return False

    def link(self):
        from companion.transport_tcp import TcpLink
        return TcpLink('127.0.0.1', self.port, secret=secret(self.id), timeout=3)

    def call(self, req):
        link = self.link()
        try:
            return link.call(req)
        finally:
            link.close()

    def net(self):
        return json.loads(self.call('net?'))

    def lines(self):
        got = []
        link = self.link()
        try:
            recon.reconcile(lambda: iter(()), lambda ls: got.extend(ls), link.call, verify=False)
        finally:
            link.close()
        return merge.merge(got)

    def push(self, lines):
        link = self.link()
        try:
            return recon.reconcile(lambda: iter(lines), lambda ls: None, link.call, verify=False)
        finally:
            link.close()

    def drop(self, ids):
        p = os.path.join(self.dir, 'drop.txt')
        with open(p + '.tmp', 'w') as f:
            f.write('\n'.join(ids) + '\n')
        os.replace(p + '.tmp', p)
        st = os.stat(p)
        os.utime(p, (st.st_atime, st.st_mtime + 1))

    def now(self):
        return json.loads(self.call('I'))['raw']


@pytest.fixture
def fleet_of():
    made = []
    root = tempfile.mkdtemp(prefix='sporadic-mesh-')
    lib = mpy_lib()

    def make(ids, links=None):
        ports = free_ports(len(ids))
        port = dict(zip(ids, ports))
        boards = {}
        for b in ids:
            peers = [port[o] for o in ids if o != b and (links is None or o in links.get(b, ()))]
            boards[b] = Board(root, b, port[b], peers, lib)
            made.append(boards[b])
        for b in ids:
            boards[b].start()
        return boards
    yield make
    for b in made:
        b.stop()
    if not os.environ.get('SPORADIC_KEEP'):
        shutil.rmtree(root, ignore_errors=True)


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

def test_records_spread_one_leader_split_runs_once_per_section_heal_reports(fleet_of):
    ids = ['b1', 'b2', 'b3', 'b4', 'b5']
    fl = fleet_of(ids)
    bs = [fl[i] for i in ids]
    hosts = ['.h ' + i for i in ids]
    # every record reaches every connected board (pushed into one)
    fl['b3'].push(hosts)
    wait_for(lambda: all(set(hosts) <= set(b.lines()) for b in bs), 20, 'host list on every board')
    # one leader: the lowest id
    wait_for(agreed(bs, 'b1'), 10, 'b1 leads all five')
    # split {b1 b2 b3} | {b4 b5}
    A, B = ids[:3], ids[3:]
    for i in A:
        fl[i].drop(B)
    for i in B:
        fl[i].drop(A)
    wait_for(agreed([fl[i] for i in B], 'b4'), 10, 'b4 leads the second section')
    assert set(leaders([fl[i] for i in A]).values()) == {'b1'}
    # a single-run job reaches both sections before it is due
    now = fl['b1'].now()
    job = jobline.parse('one %s log single ; grace=1h' % jobline.format_time(now - now % 60 + 600))
    anyjob = jobline.parse('any:0.001 %s log anyone' % jobline.format_time(now - now % 60 + 600))
    for i in ('b2', 'b5'):
        fl[i].push([job.line(), anyjob.line()])

    def runs(section, j):
        found = set()
        for i in section:
            for line in fl[i].lines():
                if line.startswith(j.id + ' r ') and ' 0 ' in line and ' miss' not in line:
                    found.add(line.split()[2])
        return found
    for j in (job, anyjob):
        ra = wait_for(lambda: runs(A, j) if all(len([l for l in fl[i].lines() if l.startswith(j.id + ' r ')]) >= 1
                                                 for i in A) else None, 30, 'a run in section A')
        rb = wait_for(lambda: runs(B, j) if all(len([l for l in fl[i].lines() if l.startswith(j.id + ' r ')]) >= 1
                                                 for i in B) else None, 30, 'a run in section B')
        assert len(ra) == 1 and ra <= set(A), ra
        assert len(rb) == 1 and rb <= set(B), rb
    # heal: one leader again (b4 steps down), the duplicates are reported
    for i in ids:
        fl[i].drop([])
    wait_for(agreed(bs, 'b1'), 15, 'one leader after the heal')
    for j in (job, anyjob):
        dup = wait_for(lambda: [d for d in fl['b3'].net()['duplicates'] if d.startswith(j.id + '.0')],
                       20, 'duplicate reported')
        assert len(dup[0].split(': ')[1].split()) == 2
    # the leader disappears: the next lowest id takes over, nothing is lost
    before = set(fl['b2'].lines())
    fl['b1'].stop()
    wait_for(agreed(bs[1:], 'b2'), 10, 'b2 takes over')
    assert before <= set(fl['b5'].lines()) | before
    wait_for(lambda: before <= set(fl['b5'].lines()), 15, 'b5 holds everything b2 held')


def test_chain_a_b_c_where_a_never_meets_c(fleet_of):
    links = {'ca': ['cb'], 'cb': ['ca', 'cc'], 'cc': ['cb']}
    fl = fleet_of(['ca', 'cb', 'cc'], links)
    fl['ca'].drop(['cc'])
    fl['cc'].drop(['ca'])
    line = '.h from-a'
    fl['ca'].push([line])
    wait_for(lambda: line in fl['cc'].lines(), 20, 'the record from A at C')
    back = '.h from-c'
    fl['cc'].push([back])
    wait_for(lambda: back in fl['ca'].lines(), 20, 'the record from C at A')
    assert 'ca' not in fl['cc'].net()['peers'] and 'cc' not in fl['ca'].net()['peers']


# ---- a hostile network against one board ----------------------------------------

def _hello(port):
    s = socket.create_connection(('127.0.0.1', port), timeout=3)
    f = s.makefile('rb')
    return s, f, f.readline().decode().split()


def test_bad_network_board_keeps_running_and_loses_nothing(fleet_of):
    fl = fleet_of(['h1'])
    b = fl['h1']
    b.push(['.h h1', '.h keep-me'])
    port = b.port
    # half-open: connect, say nothing
    quiet = [socket.create_connection(('127.0.0.1', port), timeout=3) for _ in range(2)]
    # a stalled peer: a good-looking frame header, then silence
    s, f, hello = _hello(port)
    s.sendall(b'SPC1 stall 0123456789abcdef -\n')
    assert f.readline().startswith(b'ERR')   # no MAC: refused before any frame
    # garbage bytes
    g, gf, _ = _hello(port)
    g.sendall(b'\x00\xff GET / HTTP/1.1\r\n\r\n')
    assert gf.readline().startswith(b'ERR garbage')
    # a request larger than allowed (after a proper handshake as the companion)
    from companion.transport_tcp import TcpLink
    from companion.transport import LinkError
    big = TcpLink('127.0.0.1', port, secret=secret('h1'), timeout=3)
    with pytest.raises(LinkError):
        big.call('P ' + 'x' * 20000)
    big.close()
    # a stranger: the wrong key cannot sync, nor set the clock, nor lead
    with pytest.raises(LinkError):
        TcpLink('127.0.0.1', port, secret='00' * 32, timeout=3)
    peer = TcpLink('127.0.0.1', port, fleet_key=FLEET_KEY, me='peer-x', timeout=3)
    assert peer.call('T 1900000000').startswith('!error not allowed')
    assert peer.call('A 99').startswith('!error not allowed')
    peer.close()
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for seq in range(5):
        u.sendto(leader.encode('a0', 99, True, 1, seq + 1, b'wrong key').encode(), ('127.0.0.1', port))
        u.sendto(b'\x00garbage', ('127.0.0.1', port))
    # a stalled companion mid-frame
    stalled = TcpLink('127.0.0.1', port, secret=secret('h1'), timeout=3)
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
    assert {'.h h1', '.h keep-me'} <= set(b.lines())
    assert b.push(['.h later'])['lines_out'] == 1 and '.h later' in b.lines()


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
    a = jobline.Assign(j.id, 'p2', 3, 100, 'p1')
    assert jobline.canonical(a.line()) == a.line() == j.id + ' a p2 3 100 p1 -'
    b = jobline.Assign(j.id, 'p3', 3, 200, 'p4').line()
    c = jobline.Assign(j.id, 'p1', 2, 900, 'p4').line()
    for order in ([a.line(), b, c, j.line()], [j.line(), c, b, a.line()]):
        assert merge.merge(order) == [b, j.line()]
    assert merge.merge([a.line(), j.line(), j.id + ' cancel']) == [j.id + ' cancel']
    anyj = jobline.parse('any:0.5 2026-12-01T00:00Z up')
    x = jobline.Assign(anyj.id, 'p2', 0, 5, 'p1').line()
    assert merge.merge([x, anyj.line(), anyj.id + ' cancel']) == [anyj.id + ' cancel']
    assert merge.merge([x, anyj.line()]) == [x, anyj.line()]
    due = plan.due(j, 3)
    assert plan.decide(j, 'p3', due + 5, (2, 'ok', 1), rnk=2, assigned=(3, 'p3'), led=True)[0] == plan.RUN
    assert plan.decide(j, 'p2', due + 5, (2, 'ok', 1), rnk=0, assigned=(3, 'p3'), led=True)[0] == plan.WAIT
    assert plan.decide(j, 'p2', due + 5, (2, 'ok', 1), rnk=0, led=True)[0] == plan.WAIT
    # leader gone: the others take over one grace later than their rule
    assert plan.decide(j, 'p2', due + 5, (2, 'ok', 1), rnk=0, assigned=(3, 'p3'))[:3] == (plan.WAIT, 3, due + j.grace)
    assert plan.decide(j, 'p2', due + j.grace, (2, 'ok', 1), rnk=0, assigned=(3, 'p3'))[0] == plan.RUN
    # before due under a lease: wake at due whatever the rank
    assert plan.decide(j, 'p3', plan.due(j, 0) - 50, rnk=2, led=True)[:3] == (plan.WAIT, 0, plan.due(j, 0))


def test_leader_assigns_alive_hosts_once_and_reports_duplicates():
    j = jobline.parse('one 2026-12-01T00:00Z backup ; every=1d')
    lines = merge.merge(['.h p1', '.h p2', '.h p3', j.line()])
    t = j.t0 + 10
    new = leader.assignments(lines, 'p1', ['p1', 'p2', 'p3'], t)
    assert len(new) == 1 and new[0].split()[3] == '0'
    lines = merge.merge(lines + new)
    assert leader.assignments(lines, 'p1', ['p1', 'p2', 'p3'], t + 5) == []
    host = new[0].split()[2]
    rest = [h for h in ['p1', 'p2', 'p3'] if h != host]
    again = leader.assignments(lines, 'p1', rest, t + 5)   # the assignee went away
    assert len(again) == 1 and again[0].split()[2] in rest
    done = merge.merge(lines + again + [j.id + ' r %s 0 %d ok -' % (host, t)])
    nxt = leader.assignments(done, 'p1', ['p1', 'p2', 'p3'], t + 10)
    assert len(nxt) == 1 and nxt[0].split()[3] == '1'     # the next instance, ahead of time
    dup = merge.merge(done + [j.id + ' r %s 0 %d ok -' % (rest[0], t)])
    assert leader.duplicates(dup) == ['%s.0: %s' % (j.id, ' '.join(sorted([host, rest[0]])))]


def test_heartbeat_codec_refuses_strangers_and_garbage():
    k = b'fleet'
    m = leader.encode('p1', 4, True, 7370, 12, k)
    assert leader.decode(m, k) == ('p1', 4, True, 7370, 12)
    for bad, key in ((m, b'other'), (m.replace(' 4 ', ' 5 '), k), ('x' * 300, k), ('SPH1 a b', k),
                     (b'\xff\xfe', k)):
        with pytest.raises(ValueError):
            leader.decode(bad, key)
