"""Trust on boards: one test per threat of issue 5 (docs/security.md), each
against a board running on the MicroPython unix port (tests/devboot.py boots
its flash folder; the companion talks to its sync server, syncsrv.h, over a
pipe, request by request, exactly the strings a serial or TCP link carries).
The companion side is the real one (companion.fleet.keys signs, companion.sync.syncer
syncs and flags). Nothing under test is mocked.

Each threat is delivered mixed with good lines in the same delivery; each
test checks: refused (with its reason, back to the sender), reported (the
board's quarantine and `I` status), and nothing good lost (the good lines of
the delivery are stored).

Heap: 128K (96K is not enough). The 64-bit unix port roughly doubles object
sizes against a 32-bit board. Measured on the unix port in one sync-server
process: store + recover + jobline + merge ~37K, recon ~11K, trust + batch +
rsa ~15K, and a P of a signed batch leaves ~13K more; at 96K the P runs out
of memory. The memory diet of the firmware is another engineer's work
(bench/device_heap.py measures the runtime at 64K).
"""
import contextlib
import io
import json
import os
import shutil
import subprocess

import pytest

from tests import devutil
from tests.mpy import MICROPYTHON, ROOT

from companion.fleet import keys
from companion.link.base import Link
from companion.sync import syncer
from companion.fleet.board_keys import device_secret, verify_result
from companion.fleet.folder import Fleet
from companion.fleet import queries as fleetcmd
from sporadic.core import batch, jobline, recon
from sporadic.core import hmac as shmac

pytestmark = pytest.mark.needs('micropython', 'mpy-cross')

HEAP = '128K'
T0 = devutil.T0
WEEK = 7 * 86400

SERVE = r'''
import sys, json, gc
from sporadic.device import syncsrv
while True:
    req = sys.stdin.readline()
    if not req:
        break
    req = json.loads(req)
    gc.collect()
    if req == '?modules':    # (this harness's own question: what the board's heap holds)
        print(json.dumps(' '.join(sorted(sys.modules))))
        continue
    print(json.dumps(syncsrv.h(req)))
'''


class Board(Link):
    """A board on MicroPython: flash folder + a live sync server process; a
    Link (companion/link/base.py) the sync drives as it drives a TCP one."""

    def __init__(self, tmp, fleet, host, cfg=None):
        self.fleet = fleet
        self.host = host
        self.dir = str(tmp / host)
        devutil.make_flash(self.dir, host, cfg, fleet=fleet)    # provisioned as deploy does
        self.secret = device_secret(fleet, host)
        self.p = None
        self.bytes_sent = self.bytes_received = 0

    # -- the link (what companion.sync.syncer drives) --

    def _start(self):
        self.script = os.path.join(self.dir + '.serve.py')
        with open(self.script, 'w') as f:
            f.write(SERVE)
        env = dict(os.environ, SPORADIC_CLOCK='step', SPORADIC_CLOCK_START=str(T0))
        self.p = subprocess.Popen([MICROPYTHON, '-X', 'heapsize=' + HEAP, devutil.DEVBOOT, self.dir, self.script],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, env=env)

    def call(self, req, stream=False):
        if self.p is None:
            self._start()
        self.p.stdin.write(json.dumps(req) + '\n')
        self.p.stdin.flush()
        out = self.p.stdout.readline()
        if not out:
            raise AssertionError('board died: ' + self.p.stderr.read()[-3000:])
        self.bytes_sent += len(req)
        self.bytes_received += len(out)
        return json.loads(out)

    def soft_reset(self):
        """Nothing to do: a live sync server, as a board over TCP."""

    def close(self):
        self.stop()

    def reset_counters(self):
        self.bytes_sent = self.bytes_received = 0

    def stop(self):
        if self.p is not None:
            self.p.stdin.close()
            self.p.wait(timeout=30)
            self.p = None

    # -- what a peer or a file does: push lines (P requests, in order) --

    def push(self, lines, chunk=None):
        """Deliver lines in P requests (one, or chunks of `chunk` lines);
        returns {line: reason} of the refused ones."""
        chunk = chunk or len(lines)
        refused = {}
        for i in range(0, len(lines), chunk):
            part = lines[i:i + chunk]
            r = self.call('P ' + '\t'.join(recon.esc(l) for l in part))
            assert not r.startswith('!'), r
            byd = {recon.hexd(recon.digest(l))[:recon.DIGLEN]: l for l in part}
            for w in r.split('\t')[1:]:
                d, _, why = w.partition(' ')
                refused[byd[d]] = recon.unesc(why)
        return refused

    def status(self):
        return json.loads(self.call('I'))

    def modules(self):
        """The modules the sync server's process holds now."""
        return self.call('?modules').split()

    def held(self):
        """Every line the board stores (jobs.txt, logs, outbox)."""
        return set(devutil.all_records(self.dir))

    def quarantine(self):
        return devutil.lines(self.dir, 'quar.txt')

    def run(self, now):
        """One pass of the runtime at `now` (a fresh boot: the sync server stops)."""
        self.stop()
        code = 'from sporadic.device import runtime\nruntime.step(%d)\n' % now
        devutil.boot(self.dir, code=code, start=now, heap=HEAP)


@pytest.fixture
def fleet(tmp_path):
    f = Fleet(str(tmp_path / 'fleet'))
    os.makedirs(f.dir)
    f.init('t')
    return f


@pytest.fixture
def boards(tmp_path, fleet):
    made = []

    def make(host='pump-1', cfg=None):
        b = Board(tmp_path, fleet, host, cfg)
        made.append(b)
        return b
    yield make
    for b in made:
        b.stop()


def sign(fleet, lines):
    """Batch records + lines, as the companion writes them (canonical)."""
    lines = [jobline.canonical(l) for l in lines]
    return keys.sign_lines(fleet.dir, lines) + lines


JOB_A = 'a0000001 each 2026-12-01T06:00Z log a ; every=1d within=2h'
JOB_B = 'b0000001 each 2026-12-01T07:00Z log b ; every=1d within=2h'
JOB_C = 'c0000001 each 2026-12-01T08:00Z log c ; every=1d within=2h'


def assert_reported(b, reason_part, n=1):
    st = b.status()
    q = b.quarantine()
    assert sum(1 for l in q if reason_part in l) >= n, q
    assert any(reason_part in r for r in st['trust']['refusals']), st['trust']['refusals']
    assert st['quarantined'] >= n
    return st


# ---------------------------------------------------------------- threats

def test_forged_line(fleet, boards):
    b = boards()
    good = sign(fleet, ['.h pump-1', JOB_A])
    forged = 'f0000001 each 2026-12-01T06:00Z relay on 1 ; every=1h'
    ref = b.push(good + [forged, '.h mallory'])
    assert set(ref) == {forged, '.h mallory'}
    assert all(r.startswith('not signed') for r in ref.values())
    assert set(good) <= b.held()
    assert forged not in b.held()
    st = assert_reported(b, 'not signed', 2)
    assert st['trust']['mode'] == 'signed'


def test_tampered_line_in_good_batch(fleet, boards):
    b = boards()
    good = sign(fleet, [JOB_A, JOB_B])
    tampered = JOB_A.replace('log a', 'log pwned')
    lines = [good[0], tampered, JOB_B]           # A swapped for its tampered copy
    ref = b.push(lines)
    assert list(ref) == [tampered] and ref[tampered].startswith('not signed')
    assert {good[0], JOB_B} <= b.held() and tampered not in b.held()
    assert_reported(b, 'not signed')


def test_lines_before_their_batch_and_held_batch(fleet, boards):
    # arrival order: lines in one P before their .b in the next are refused
    # (reported, the sender sends them again); a line whose .b the board
    # already holds is accepted without a new signature check
    b = boards()
    good = sign(fleet, [JOB_A, JOB_B])
    ref = b.push([good[1], good[0]])               # same P, line first: fine
    assert ref == {}
    ref = b.push([JOB_B])                          # its .b is held: fine
    assert ref == {} and JOB_B in b.held()


@pytest.mark.slow
def test_replay_of_old_batch_after_done_and_compacted(tmp_path, fleet, boards):
    b = boards()
    at = 'a0000002 each 2026-12-01T00:10Z log once ; within=1h'
    old = sign(fleet, [at])                        # batch 1 (after the host lines): a one-shot job
    assert b.push(old) == {}
    b.run(T0 + 900)                                # it runs
    ran = {l for l in b.held() if l.startswith('a0000002 r pump-1 ')}
    assert any(' ok ' in l for l in ran)
    cancel = sign(fleet, ['a0000002 cancel'])      # batch 2: done, cancelled
    assert b.push(cancel) == {}
    b.call('C')                                    # compacted: the job line is gone
    assert at not in b.held()
    # the companion compacts too: batch 1 is dropped from the fleet file
    # (a board deployed now starts above it; see syncer.deploy's hwm)
    fleet.write_lines([l for l in cancel if l.startswith('a0000002')] + [cancel[0]])
    seq_old = int(old[0][3:11])
    b2 = boards('pump-2', cfg={'hwm': seq_old})    # a board deployed when batch 1 was the fleet's newest
    good = sign(fleet, [JOB_C])
    ref = b2.push(old + good)                      # a replay of the old file, and a good batch
    assert ref[old[0]].startswith('replay: seq %d <= high-water mark %d' % (seq_old, seq_old))
    assert ref[at].startswith('not signed')
    assert set(good) <= b2.held() and at not in b2.held()
    assert_reported(b2, 'replay', 1)
    # the board that still holds batch 1: the replay lands on the cancel
    # (the merge's tombstone) and nothing runs again
    b.push(old)
    b.call('C')
    assert at not in b.held()
    b.run(T0 + 1200)
    assert {l for l in b.held() if l.startswith('a0000002 r pump-1 ')} <= ran   # no new run


def test_rollback_to_older_batch(fleet, boards):
    b = boards()
    older = sign(fleet, [JOB_A])                   # seq S, never delivered to this board
    newer = sign(fleet, [JOB_B])                   # seq S + 1
    s_older, s_newer = int(older[0][3:11]), int(newer[0][3:11])
    assert s_newer == s_older + 1
    assert b.push(newer) == {}
    assert json.load(open(os.path.join(b.dir, 'trust.json')))['hwm'] == s_newer
    good = sign(fleet, [JOB_C])                    # seq S + 2
    ref = b.push(older + good)
    assert ref[older[0]].startswith('replay: seq %d <= high-water mark %d' % (s_older, s_newer))
    assert JOB_A in ref
    assert set(good) <= b.held() and JOB_A not in b.held()
    assert_reported(b, 'replay')


def test_mix_of_two_batches(fleet, boards):
    b = boards()
    ba = sign(fleet, [JOB_A])
    bb = sign(fleet, [JOB_B])
    fa = ba[0].split(' ')
    fb = bb[0].split(' ')
    spliced = ' '.join(fa[:4] + fb[4:])           # header and digests of A, signature of B
    moved = ' '.join([fa[0], fb[1]] + fa[2:])      # A under B's seq
    ref = b.push([spliced, moved, JOB_A, JOB_B] + bb)
    assert ref[spliced].startswith('bad signature on batch ' + fa[1])
    assert ref[moved].startswith('bad signature on batch ' + fb[1])
    assert ref[JOB_A].startswith('not signed')
    assert JOB_B not in ref and set(bb) <= b.held()
    assert_reported(b, 'bad signature', 2)


def test_batch_from_another_fleet(tmp_path, fleet, boards):
    b = boards()
    other = Fleet(str(tmp_path / 'other'))
    os.makedirs(other.dir)
    other.init('o')
    theirs = sign(other, [JOB_A])
    good = sign(fleet, [JOB_B])
    ref = b.push(theirs + good)
    assert ref[theirs[0]].startswith('unknown key %s (another fleet?)' % keys.keyid(other.dir))
    assert ref[JOB_A].startswith('not signed')
    assert set(good) <= b.held()
    assert_reported(b, 'unknown key')


def _result(host, secret, jid='b0000001', k=0, outcome='ok'):
    r = jobline.Result(jid, host, k, T0 + 60, outcome, 1, '-', 'done')
    r.mac = shmac.mac_result(secret, r.line()) if secret else '-'
    return r.line()


def test_record_from_unknown_board(fleet, boards):
    b = boards()
    good = sign(fleet, [JOB_B])
    ghost = _result('ghost-9', '11' * 32)          # well-formed MAC, unknown board
    bare = _result('pump-1', None, k=1)            # no MAC at all
    ref = b.push(good + [ghost, bare])
    assert set(ref) == {ghost, bare} and ref[bare].startswith('no MAC')
    # not a host of the fleet's signed host list: quarantined, never stored (#29)
    assert ref[ghost].startswith("unknown host ghost-9: not in the fleet's signed host list")
    assert ghost not in b.held() and set(good) <= b.held()
    rep = syncer._sync(fleet, 'pipe', b, T0 + 120)
    assert any('no MAC' in r for r in rep['status']['trust']['refusals'])
    assert any('unknown host ghost-9' in r for r in rep['status']['trust']['refusals'])
    assert verify_result(fleet, jobline.parse(ghost)) is False
    row = fleetcmd.status_rows(fleet, T0 + 120)[0]             # `companion status`
    assert row['quarantined'] >= 2 and any('no MAC' in q for q in row['refusals'])


@pytest.mark.slow
def test_board_forges_another_boards_done_record(fleet, boards):
    b1 = boards('pump-1')
    b2 = boards('pump-2')
    assert b1.push(sign(fleet, ['.h pump-1', '.h pump-2', JOB_A])) == {}
    b1.run(T0 + 6 * 3600 + 60)                     # pump-1 really runs A
    real = [l for l in b1.held() if ' r pump-1 ' in l]
    assert real and all(verify_result(fleet, jobline.parse(l)) for l in real)
    # pump-2 claims pump-1 ran B: it can only MAC with its own secret.
    # pump-1 itself refuses a result in its name that it did not write ...
    forged = _result('pump-1', b2.secret)
    ref = b1.push([forged])
    assert list(ref) == [forged] and ref[forged].startswith('bad MAC: a result of pump-1'), ref
    assert forged not in b1.held()
    # ... the others cannot check it (a host of the fleet): they keep it, and
    # the companion quarantines it: never merged, never sent on (#29)
    b2.push(sign(fleet, ['.h pump-1', '.h pump-2', JOB_A]))
    assert b2.push([forged]) == {}
    rep = syncer._sync(fleet, 'pipe', b2, T0 + 7 * 3600)
    assert any('unverified result from pump-1 (its MAC does not verify)' in x for x in rep['flagged']), \
        rep['flagged']
    assert forged not in fleet.lines() and forged not in [r.line() for r in fleet.results()]
    assert any(q.endswith(forged) and q.startswith('pump-2: ') for q in fleet.quarantined())
    syncer._sync(fleet, 'pipe', b1, T0 + 7 * 3600)
    rows = {r['id']: r for r in fleetcmd.status_rows(fleet, T0 + 7 * 3600)}
    assert rows['pump-1']['unverified_records'] == 1          # status shows it
    assert rows['pump-1']['ok'] >= 1                          # the real one kept
    assert rows['pump-2']['unverified_records'] == 0


def test_peer_pushes_clock_back_a_week(fleet, boards):
    b = boards()
    assert b.status()['clock'] == 'trusted'
    back = '.t %d' % (T0 - WEEK)
    ref = b.push([back] + sign(fleet, [JOB_A]))   # unsigned: a peer made it up
    assert ref[back].startswith('not signed')
    # a signed time record a week old (signed then, forwarded now)
    stale = sign(fleet, [back])
    good = sign(fleet, [JOB_B])
    ref = b.push(stale + good)
    assert ref == {}                               # authentic lines are kept...
    st = b.status()
    assert st['raw'] >= T0                         # ...but the clock did not go back
    assert 'time refused' in st['trust']['clock_refused']
    assert any('time refused' in r for r in st['trust']['refusals'])
    assert set(good) <= b.held()
    # a signed time ahead moves it forward; the companion's T over the
    # board's own line is taken as it is (the owner at the cable)
    fwd = sign(fleet, ['.t %d' % (T0 + 3600)])
    assert b.push(fwd) == {}
    assert b.status()['raw'] >= T0 + 3600
    dev, before, heap = b.call('T %d' % (T0 + 7200)).split()
    assert dev == 'pump-1' and int(before) >= T0 + 3600
    assert 100 * 1024 < int(heap) <= 128 * 1024    # its heap, to which the companion sizes P requests
    assert b.status()['source'] == 'companion'


def test_key_rotation_then_old_key_refused(tmp_path, fleet, boards):
    b = boards()
    old_pub = keys.load_pub(fleet.dir)
    assert b.push(sign(fleet, [JOB_A])) == {}
    # an attacker keeps a copy of the old private key
    stolen = str(tmp_path / 'stolen')
    shutil.copytree(fleet.dir, stolen)
    rec = keys.rotate(fleet.dir)
    new = sign(fleet, [JOB_A, JOB_B])
    assert b.push([rec] + new) == {}
    t = json.load(open(os.path.join(b.dir, 'trust.json')))
    assert t['keys'] == [keys.load_pub(fleet.dir)] and t['keys'] != [old_pub]
    # the old key signs a fresh-looking batch (its SEQ counter runs ahead)
    with open(os.path.join(stolen, 'keys', 'seq'), 'w') as f:
        f.write('50\n')
    theirs = keys.sign_lines(stolen, [JOB_C]) + [JOB_C]
    good = sign(fleet, ['d0000001 each 2026-12-01T09:00Z log d ; every=1d within=2h'])
    ref = b.push(theirs + good)
    assert ref[theirs[0]].startswith('retired key %s' % batch.rsa.keyid(old_pub))
    assert ref[JOB_C].startswith('not signed')
    assert set(good) <= b.held()
    assert_reported(b, 'retired key')


def test_a_delivery_of_many_lines_its_held_seal_covers(fleet, boards, monkeypatch):
    # A P of 70 lines whose seal the board took in an earlier P: every one is
    # looked up in the held seals (BUF_MAX at a time; only the first 64 were
    # before, the rest refused as not signed, so a 4 KB P of a first sync
    # lost a third of its jobs). A line in another rendition than the one
    # sealed (two spaces) is parsed, and its canonical text is the sealed
    # one; a forged line among them is still refused. (A 4 KB P goes to a
    # board with a 160 KB heap or more: syncer.put_bytes_for.)
    monkeypatch.setitem(globals(), 'HEAP', '256K')
    b = boards()
    jobs = ['%08x each 2026-12-01T06:%02dZ log j%d ; every=1d within=2h' % (0xd0000000 + i, i % 60, i)
            for i in range(70)]
    good = sign(fleet, jobs)
    seals = [l for l in good if l.startswith('.b ')]
    lines = [l for l in good if not l.startswith('.b ')]
    assert len(seals) == 1 and len(lines) == 70
    assert b.push(seals) == {}
    forged = 'f0000001 each 2026-12-01T06:00Z relay on 1 ; every=1h'
    spaced = lines[0].replace(' each ', '  each ', 1)
    ref = b.push([spaced] + lines[1:] + [forged])
    assert set(ref) == {forged} and ref[forged].startswith('not signed')
    held = b.held()
    assert set(lines) <= held
    assert spaced not in held


def test_a_delivery_its_seals_cover_loads_no_parser(fleet, boards):
    # #31: a signed delivery's lines are looked up in its seal as they came
    # and its seal record is its own text, so the parser (jobline and
    # timeutil: ~10 KB of a 32-bit board's heap with their names) is not
    # loaded for it; a line in another rendition than the sealed one is
    # parsed (the parser loads for it) and taken
    b = boards()
    good = sign(fleet, ['.h pump-1', JOB_A, JOB_B])
    assert b.push(good) == {}
    assert set(good) <= b.held()
    mods = b.modules()
    assert 'sporadic.device.trust' in mods and 'sporadic.core.jobline' not in mods, mods
    good = sign(fleet, [JOB_C])
    assert b.push([good[0], JOB_C.replace(' each ', '  each ', 1)]) == {}
    assert JOB_C in b.held()


def _vouch(fleet_dir, recs):
    from sporadic.desktop import batching
    return 'V ' + batching.make_vouch(keys.keyid(fleet_dir), recs, lambda d: keys.sign_digest(fleet_dir, d))


def test_a_vouch_stands_for_the_signatures_of_the_records_it_lists(tmp_path, fleet, boards):
    # `V` (docs/security.md#vouches): one signature of the fleet's key over
    # the whole text of the seal records a sync brings; a record it lists
    # needs no RSA check of its own (the key's holder wrote that very text,
    # signature field included: here one it replaced, which alone would not
    # verify). A record it does not list, a vouch of a forged signature or
    # of another fleet's key: each record checked alone, as before.
    b = boards()
    a, b_, c = sign(fleet, [JOB_A]), sign(fleet, [JOB_B]), sign(fleet, [JOB_C])
    resigned = b_[0][:b_[0].rfind(' ') + 1] + a[0][a[0].rfind(' ') + 1:]   # B's record, A's signature
    assert b.call(_vouch(fleet.dir, [a[0], resigned])) == '1'
    tampered = c[0][:c[0].rfind(' ') + 1] + a[0][a[0].rfind(' ') + 1:]    # not listed: checked alone
    ref = b.push(a + [resigned, JOB_B] + [tampered, JOB_C])
    assert set(ref) == {tampered, JOB_C}, ref
    assert ref[tampered].startswith('bad signature')
    assert {a[0], a[1], resigned, JOB_B} <= b.held()
    # a vouch whose signature is not the key's, or another fleet's: refused, nothing vouched
    other = Fleet(str(tmp_path / 'other'))
    os.makedirs(other.dir)
    other.init('o')
    d = sign(fleet, ['d0000001 each 2026-12-01T09:00Z log d ; every=1d within=2h'])
    bad = d[0][:d[0].rfind(' ') + 1] + a[0][a[0].rfind(' ') + 1:]
    v = _vouch(fleet.dir, [bad])
    forged = v[:v.rfind(' ') + 1] + a[0][a[0].rfind(' ') + 1:]
    assert b.call(forged) == '!bad signature on vouch'
    assert b.call(_vouch(other.dir, [bad])).startswith('!unknown key')
    ref = b.push([bad, d[1]])
    assert ref[bad].startswith('bad signature') and ref[d[1]].startswith('not signed')


def test_a_sync_vouches_for_the_seal_records_it_brings_a_roomy_board(tmp_path, fleet, boards, monkeypatch):
    # the companion's sync sends one `V` before its first P when that P and
    # the ones after it bring two seal records or more, to a board with a
    # roomy heap (syncer.ROOMY_HEAP); the board takes it and every line
    monkeypatch.setitem(globals(), 'HEAP', '256K')
    from companion import cli
    src = tmp_path / 'jobs.txt'
    src.write_text(''.join('%08x each 2026-12-01T06:%02dZ log j%d ; every=1d within=2h\n' % (0xd0000000 + i, i % 60, i)
                           for i in range(140)))
    with contextlib.redirect_stdout(io.StringIO()):
        assert cli.main(['--fleet', fleet.dir, 'add', '-f', str(src)]) in (None, 0)
    b = boards()
    seen = []
    inner = b.call

    def call(req, stream=False):
        ans = inner(req, stream)
        seen.append((req[:1], ans if req[:1] == 'V' else ''))
        return ans
    b.call = call
    rep = syncer.sync(fleet, 'x', progress=False, link=b, now=T0)
    assert rep['refused'] == [] and rep['lines_sent'] >= 140
    assert [s for s in seen if s[0] == 'V'] == [('V', '1')]
    assert seen.index(('V', '1')) < seen.index(('P', ''))
    assert {l for l in fleet.lines() if l[:1] != '.' or l[:3] == '.b '} <= b.held()
