"""What the companion takes from a board (companion/fleet/folder.py Fleet.receive,
the one path of `companion sync` and `companion serve`): in a signed fleet a
fleet-authored line it does not hold must come with the owner's signature,
so a tampered board cannot put a job into the fleet, where a later key
rotation would sign it."""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, 'firmware'))
sys.path.insert(0, ROOT)

from companion.fleet import keys  # noqa: E402
from companion.fleet.folder import Fleet  # noqa: E402
from companion.fleet.folder import add_job  # noqa: E402

FORGED = '7q2m0c4d each 2026-12-01T06:00Z relay on ; within=1h'


def fleet_at(tmp_path, name, insecure=False):
    f = Fleet(str(tmp_path / name))
    f.init(insecure=insecure)
    return f


def test_an_unsigned_job_from_a_board_is_refused_and_the_rest_taken(tmp_path):
    f = fleet_at(tmp_path, 'f')
    result = '00000000 r b1 0 1796083200 ok - mac'
    refused = dict(f.receive([FORGED, '.h intruder', result], 'board'))
    assert sorted(refused) == sorted([FORGED, '.h intruder', result])
    assert 'not signed by this fleet' in refused[FORGED] and 'not signed by this fleet' in refused['.h intruder']
    # a result no board of this fleet wrote (b1 has no secret here): quarantined too (#29)
    assert refused[result] == 'unverified result from b1 (no board b1 in this fleet)'
    held = f.lines()
    assert FORGED not in held and '.h intruder' not in held and result not in held
    assert len(f.quarantined()) == 3
    # a rotation signs the live lines: the forged job is not among them
    assert not any(l.startswith('7q2m0c4d') for l in f.lines())


def test_a_line_the_owner_signed_comes_back_with_its_batch(tmp_path):
    """A fleet folder restored from an old copy learns a job again from a
    board that holds it with its batch; another fleet's batch proves nothing."""
    f = fleet_at(tmp_path, 'f')
    jid = add_job(f, "each 2026-12-01T06:00Z log hello").id
    job = [l for l in f.lines() if l.startswith(jid)]
    rec = [l for l in f.lines() if l.startswith('.b ')]
    assert len(job) == 1 and len(rec) == 1
    f.write_lines([])                       # the folder lost its jobs.txt
    assert f.receive(job + rec, 'board') == []
    assert job[0] in f.lines()
    other = fleet_at(tmp_path, 'o')
    line = '0123abcd each 2026-12-01T07:00Z log other'
    signed_elsewhere = other.sign([line])
    refused = f.receive([line] + signed_elsewhere, 'board')
    # the line, and the other fleet's batch record itself (it would replace
    # this fleet's slot 1 in a merge: docs/security.md#seals)
    assert [l for l, _ in refused] == [line] + signed_elsewhere and line not in f.lines()
    assert signed_elsewhere[0] not in f.lines()
    assert any(l.startswith('.b @0001 ') for l in f.lines())


def test_after_a_rotation_the_old_keys_batches_still_prove_the_owner(tmp_path):
    f = fleet_at(tmp_path, 'f')
    line = '0123abcd each 2026-12-01T07:00Z log before-rotation'
    old_batch = f.sign([line])
    keys.rotate(f.dir)
    assert f.receive([line] + old_batch, 'board') == []


def test_an_insecure_fleet_takes_what_it_is_given(tmp_path):
    f = fleet_at(tmp_path, 'i', insecure=True)
    assert f.receive([FORGED], 'board') == []
    assert FORGED in f.lines()


@pytest.mark.slow
def test_a_board_tampered_beyond_its_store_cannot_put_a_job_into_the_fleet(tmp_path):
    """A deployed board whose cfg.json was rewritten through its REPL (its
    own checks switched off) and a job line added to its jobs.txt: the next
    `companion sync` refuses that line and says so; the fleet and the other
    boards never hold it, and the sync completes."""
    import json
    import subprocess
    from tests.devutil import CLI
    c = CLI(str(tmp_path / 'fleet'))
    c('init')
    vb = c.vboard('--id', 'mole', '--flash', str(tmp_path / 'mole'))
    try:
        c('deploy', vb.path, '--id', 'mole', '-q')
        keep = c('add', 'each +1h log keep').strip()
        assert c('sync', vb.path, '-q').startswith('synced mole')
        forged = '7q2m0c4d each 2026-12-01T06:00Z relay on'
        code = ("import json\ncfg = json.load(open('cfg.json'))\ncfg['mode'] = 'insecure'\ncfg.pop('pubkey')\n"
                "f = open('cfg.json', 'w')\njson.dump(cfg, f)\nf.close()\n"
                "f = open('jobs.txt', 'a')\nf.write(%r)\nf.close()\n" % (forged + '\n'))
        p = subprocess.run([sys.executable, '-m', 'mpremote', 'connect', vb.path, 'exec', code],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        with open(str(tmp_path / 'mole' / 'cfg.json')) as f:
            assert json.load(f)['mode'] == 'insecure'
        out = c('sync', vb.path)
        assert 'synced mole' in out, out
        assert 'flagged: refused from mole: not signed by this fleet' in out and forged[:8] in out, out
        assert {j['job'] for j in c.json('jobs')} == {keep}
        assert not any(l.startswith(forged[:8]) for l in Fleet(c.dir).lines())
        assert c('sync', vb.path, '-q').startswith('synced mole')     # and the next sync is clean
    finally:
        vb.stop()
