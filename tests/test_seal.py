"""Seals (docs/security.md#seals): the signatures of a fleet's lines do not
multiply with the jobs. Each `add` grows the fleet's newest slot record
(`.b @SLOT SEQ ...`) instead of adding a batch of its own; a later SEQ of a
slot replaces the older one in every merge (companion and boards), so the
job file stays within 1.3x its job lines however the jobs were added.
Also `companion add -f FILE` / `-f -` and `cancel -f`: many lines under one
signature, all or nothing."""
import os
import random
import subprocess
import sys

import pytest

from companion.fleet import keys
from companion.sync import syncer
from companion.fleet import folder as fleetmod
from companion.fleet.folder import Fleet, add_job
from sporadic.core import batch, merge
from sporadic.desktop import batching, merging
from tests.mpy import ROOT

T0 = 1796083200      # 2026-12-01T00:00Z
BUDGET = 1.3

# job lines as users write them (67 bytes on average with their ids, the
# size the issue measured), and the shortest kind, alone
KINDS = ['each 2026-12-01T06:%02dZ log pump-%04d ; every=1d within=1h',
         'who:greenhouse-%d 2026-12-01T07:00Z log vent-%04d ; every=1h within=10m',
         'one 2026-12-02T%02d:00Z log sample-%04d ; every=6h within=30m',
         'each 2026-12-01T06:%02dZ log j%d']


def job_text(i, kinds=KINDS[:3]):
    k = kinds[i % len(kinds)]
    return k % (i % 24, i)


def fleet_at(tmp_path, name='fleet'):
    f = Fleet(str(tmp_path / name))
    os.makedirs(f.dir)
    f.init('t')
    return f


def job_bytes(lines):
    return sum(len(l) + 1 for l in lines if l[:1] != '.' and ' r ' not in l[8:11] and not l.endswith(' cancel'))


def file_ratio(lines):
    return sum(len(l) + 1 for l in lines) / job_bytes(lines)


# ---------------------------------------------------------------- the core rule

def test_merge_keeps_the_latest_version_of_each_slot():
    """merge.compact (the one rule, boards and companion): of one slot's
    records the latest SEQ stays; old-style batches and other slots stay;
    merge stays commutative, associative and idempotent."""
    sig = 'x' * 344
    recs = ['.b @0001 00000003 0badc0de AAAAAAAAAAE= ' + sig,
            '.b @0001 00000009 0badc0de AAAAAAAAAAI= ' + sig,
            '.b @0002 00000004 0badc0de AAAAAAAAAAM= ' + sig,
            '.b @0002 00000011 0badc0de AAAAAAAAAAQ= ' + sig,
            '.b @0003 00000010 0badc0de AAAAAAAAAAU= ' + sig,
            '.b @0003 00000010 0badc0de AAAAAAAAAAY= ' + sig,    # one slot and SEQ twice: never signed so
            '.b 00000001 0badc0de 0000000000000001 ' + sig,
            '.b 00000002 0badc0de 0000000000000002 ' + sig,
            '.h pump-1']
    out = list(merge.compact(sorted(recs)))
    assert out == sorted([recs[1], recs[3], recs[4], recs[5], recs[6], recs[7], recs[8]])
    rnd = random.Random(5)
    for _ in range(200):
        a = rnd.sample(recs, rnd.randint(0, len(recs)))
        b = rnd.sample(recs, rnd.randint(0, len(recs)))
        whole = merging.merge(a + b)
        assert whole == merging.merge(merging.merge(a) + merging.merge(b))
        assert whole == merging.merge(merging.merge(b) + a) == merging.merge(whole)


def test_slot_record_parses_and_verifies(tmp_path):
    f = fleet_at(tmp_path)
    lines = [job_text(i) for i in range(3)]
    [rec] = keys.seal(f.dir, [], lines)
    assert rec.startswith('.b @0001 00000001 ')
    assert batch.slot_of(rec) == '.b @0001 ' and batch.rec_seq(rec) == 1
    assert batch.rec_id(rec) == '.b @0001 00000001'
    v = batch.Verifier([keys.load_pub(f.dir)], 0)
    assert v.take(rec) is None
    assert all(v.take(l) is None for l in lines)
    assert v.take(job_text(9)).startswith('not signed')
    assert batch.held_digests(rec) == batch.parse_batch(rec)[2]
    # the slot is signed: moved to another slot, the signature fails
    moved = rec.replace('.b @0001 ', '.b @0002 ', 1)
    assert batch.Verifier([keys.load_pub(f.dir)], 0).take(moved).startswith('bad signature')


# ---------------------------------------------------------------- the fleet folder

def test_adds_one_at_a_time_grow_one_slot(tmp_path):
    """200 jobs added one `add` each: 4 slot records (64 lines each), not
    200 batches; the fleet file within 1.3x its job lines (it was 6.7x: a
    385-byte batch an add)."""
    f = fleet_at(tmp_path)
    for i in range(200):
        add_job(f, job_text(i), now=T0 + i)
    ls = f.lines()
    recs = [l for l in ls if l.startswith('.b ')]
    assert [batch.slot_of(r) for r in recs] == ['.b @%04d ' % i for i in (1, 2, 3, 4)]
    assert len(batch.parse_batch(recs[0])[2]) == batching.SLOT_LINES * batch.DIGEST
    assert file_ratio(ls) <= BUDGET, file_ratio(ls)
    # every job is covered by a record that verifies
    v = batch.Verifier([keys.load_pub(f.dir)], 0)
    assert all(v.take(l) is None for l in sorted(ls, key=batch.ingest_key))


def test_rotation_reseals_into_the_same_slots(tmp_path):
    """`keys rotate`: the live lines sealed again under the new key, slot by
    slot; the old key's versions of the slots go from the fleet file."""
    from companion import cli
    f = fleet_at(tmp_path)
    fleetmod.add_jobs(f, [job_text(i) for i in range(130)], now=T0)
    before = [l for l in f.lines() if l.startswith('.b ')]
    assert cli.main(['--fleet', f.dir, 'keys', 'rotate']) == 0
    after = [l for l in f.lines() if l.startswith('.b ')]
    assert [batch.slot_of(r) for r in after] == [batch.slot_of(r) for r in before] == ['.b @0001 ', '.b @0002 ',
                                                                                     '.b @0003 ']
    assert not set(before) & set(after)
    v = batch.Verifier([keys.load_pub(f.dir)], 0)
    assert all(v.take(l) is None for l in sorted(f.lines(), key=batch.ingest_key) if not l.startswith('.k '))


def test_a_forged_version_of_a_slot_is_refused_by_the_companion(tmp_path):
    """A later SEQ of a slot replaces the fleet's: the companion takes one from
    a board only when its signature verifies, else it would strip the proof
    of the slot's lines from the fleet file."""
    f = fleet_at(tmp_path)
    add_job(f, job_text(1), now=T0)
    [mine] = [l for l in f.lines() if l.startswith('.b @0001 ')]
    p = mine.split(' ')
    p[2] = '99999999'
    forged = ' '.join(p)
    refused = f.receive([forged], 'board')
    assert refused and refused[0][0] == forged and 'not signed by this fleet' in refused[0][1]
    assert mine in f.lines() and forged not in f.lines()


# ---------------------------------------------------------------- the command line

def cli(fleet_dir, *argv, stdin=None):
    return subprocess.run([sys.executable, '-m', 'companion.cli', '--fleet', fleet_dir] + list(argv),
                          input=stdin, capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_add_file_and_stdin_cancel_file(tmp_path):
    f = fleet_at(tmp_path)
    cron = tmp_path / 'jobs.cron'
    cron.write_text('# pumps\n' + ''.join(job_text(i) + '\n' + ('\n' if i == 3 else '') for i in range(39))
                    + 'each +10m log soon ; every=1d\n')     # resolved when added, as `add LINE` does
    p = cli(f.dir, 'check', str(cron))
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stderr.startswith('40 good record(s), 0 bad line(s)'), p.stderr
    p = cli(f.dir, 'add', '-f', str(cron))
    assert p.returncode == 0, p.stderr
    ids = p.stdout.split()
    assert len(ids) == 40 == len(set(ids))
    recs = [l for l in f.lines() if l.startswith('.b ')]
    assert len(recs) == 1 and len(batch.parse_batch(recs[0])[2]) == 40 * batch.DIGEST
    assert any(l.startswith(ids[-1] + ' each 20') and 'log soon' in l for l in f.lines())
    # standard input; the same text twice in one file makes two jobs
    p = cli(f.dir, 'add', '-f', '-', stdin=job_text(100) + '\n' + job_text(100) + '\n')
    assert p.returncode == 0, p.stderr
    more = p.stdout.split()
    assert len(more) == 2 and more[0] != more[1]
    assert [l for l in f.lines() if l.startswith('.b ')][0].startswith('.b @0001 00000002 ')
    # cancel many: ids on the command line and in a file (job lines as listed do too)
    cancel = tmp_path / 'gone.txt'
    cancel.write_text('# not these any more\n%s\n%s each 2026-12-01T06:00Z log x\n' % (ids[0], ids[1]))
    p = cli(f.dir, 'cancel', ids[2], '-f', str(cancel))
    assert p.returncode == 0, p.stderr
    assert sorted(p.stdout.split()[1::2]) == sorted(ids[:3])
    assert set(f.cancelled()) == set(ids[:3])
    live = {j.id for j in f.jobs()}
    assert live == set(ids[3:] + more)
    assert len([l for l in f.lines() if l.startswith('.b ')]) == 1


def test_a_file_with_a_bad_line_adds_nothing(tmp_path):
    f = fleet_at(tmp_path)
    add_job(f, job_text(0), now=T0)
    before = open(f.path('jobs.txt')).read()
    seq = keys.current_seq(f.dir)
    cron = tmp_path / 'jobs.cron'
    cron.write_text(job_text(1) + '\n# fine\n' + 'each 2026-13-01T06:00Z log bad-month\n' + job_text(2) + '\n'
                    + 'whenever log x\n')
    p = cli(f.dir, 'add', '-f', str(cron))
    assert p.returncode == 2
    err = p.stderr.strip().splitlines()
    assert err[0].startswith('%s:3: bad job line' % cron) and err[1].startswith('%s:5: bad job line' % cron)
    assert err[-1].startswith('companion: %s:3: ' % cron) and err[-1].endswith('nothing added')
    assert 'Traceback' not in p.stderr
    assert open(f.path('jobs.txt')).read() == before and keys.current_seq(f.dir) == seq
    # the same through standard input: named <stdin>
    p = cli(f.dir, 'add', '-f', '-', stdin=job_text(3) + '\nnot a job\n')
    assert p.returncode == 2 and p.stderr.startswith('companion: <stdin>:2: bad job line'), p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    # cancel -f: one unknown id, nothing cancelled
    jid = f.jobs()[0].id
    gone = tmp_path / 'gone.txt'
    gone.write_text(jid + '\nvvvvvvvv\n')
    p = cli(f.dir, 'cancel', '-f', str(gone))
    assert p.returncode == 2 and p.stderr.startswith('companion: %s:2: no job vvvvvvvv' % gone), p.stderr
    assert p.stderr.strip().endswith('nothing cancelled')
    assert open(f.path('jobs.txt')).read() == before
    # a file that is not there, or not text
    p = cli(f.dir, 'add', '-f', str(tmp_path / 'nope'))
    assert p.returncode == 2 and p.stderr.startswith('companion: cannot read ')
    (tmp_path / 'bin').write_bytes(b'each \xff\xfe\n')
    p = cli(f.dir, 'add', '-f', str(tmp_path / 'bin'))
    assert p.returncode == 2 and 'not UTF-8' in p.stderr
    assert open(f.path('jobs.txt')).read() == before


# ---------------------------------------------------------------- on a board

def board_file(b):
    """The board's job file as a sync left it: jobs.txt (and in.txt, when a
    delivery is not compacted in yet)."""
    out = []
    for name in ('jobs.txt', 'in.txt'):
        p = os.path.join(b.dir, name)
        if os.path.exists(p):
            with open(p) as fh:
                out += fh.read().splitlines()
    return out


@pytest.mark.needs('micropython', 'mpy-cross')
def test_a_board_keeps_the_latest_seal_however_often_it_syncs(tmp_path):
    """Adds and syncs interleaved (5 adds, a sync, four times): the board
    (MicroPython, provisioned as deploy does, synced by companion.syncer)
    holds one slot record, not one batch an add; a peer relaying the older
    version of the slot later is neither stored nor refused (it proves
    nothing the board lacks), while an old batch it never held is still a
    replay."""
    from tests.test_trust_boards import Board
    f = fleet_at(tmp_path)
    b = Board(tmp_path, f, 'pump-1')
    try:
        versions = []
        for r in range(4):
            for i in range(5):
                add_job(f, job_text(5 * r + i), now=T0 + 10 * r + i)
            versions += [l for l in f.lines() if l.startswith('.b ')]
            syncer._sync(f, 'pipe', b, T0 + 3600 * (r + 1))
            held = board_file(b)
            assert [l for l in held if l.startswith('.b ')] == versions[-1:], r
        assert len({j.id for j in f.jobs()} & {l[:8] for l in held}) == 20
        assert b.quarantine() == []
        # a peer that synced after round 1 relays what it holds: slot 1 as it was then
        stale = versions[1]
        assert batch.rec_seq(stale) < batch.rec_seq(versions[-1])
        assert b.push([stale] + [l for l in f.lines() if l.startswith(f.jobs()[0].id)]) == {}
        assert stale not in b.held() and b.quarantine() == []
        # the same, its signature tampered with: refused and reported, not ignored
        k = len(stale) - 20
        forged = stale[:k] + ('B' if stale[k] == 'A' else 'A') + stale[k + 1:]
        why = b.push([forged])
        assert list(why.values())[0].startswith('bad signature'), why
        assert len(b.quarantine()) == 1
        # an old-style batch of the fleet's key the board never held: still a replay
        old = keys.sign_lines(f.dir, [job_text(900)])[0]
        keys.next_seq(f.dir)
        add_job(f, job_text(901), now=T0 + 99)
        syncer._sync(f, 'pipe', b, T0 + 9 * 3600)
        assert list(b.push([old]).values())[0].startswith('replay')
    finally:
        b.stop()


@pytest.mark.slow
@pytest.mark.needs('micropython', 'mpy-cross')
def test_thousand_jobs_added_one_add_each_fit_the_budget_on_a_board(tmp_path, capsys):
    """The issue's figure: 1,000 jobs, each its own `add` (997 through the
    library, 3 through the command line: the same add_jobs), one sync onto a
    MicroPython board provisioned as deploy does: the board's job file within
    1.3x the bytes of its job lines (it was 452 bytes a job: 6.7x)."""
    from companion import cli
    from tests.test_trust_boards import Board
    f = fleet_at(tmp_path)
    for i in range(997):
        add_job(f, job_text(i), now=T0 + i)
    for i in range(997, 1000):
        assert cli.main(['--fleet', f.dir, 'add', job_text(i)]) == 0
    assert len(f.jobs()) == 1000
    assert file_ratio(f.lines()) <= BUDGET
    b = Board(tmp_path, f, 'pump-1')
    try:
        rep = syncer._sync(f, 'pipe', b, T0 + 3600)
        assert not rep.get('refused'), rep.get('refused')
        held = board_file(b)
        assert len({j.id for j in f.jobs()} & {l[:8] for l in held}) == 1000
        assert sum(l.startswith('.b ') for l in held) == 16          # ceil(1001 / 64)
        ratio = file_ratio(held)
        assert ratio <= BUDGET, ratio
        assert b.quarantine() == []
    finally:
        b.stop()
