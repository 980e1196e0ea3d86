"""Staged rollouts on virtual boards set up with the product's commands
(init, deploy, add, sync through companion.cli, boards on the MicroPython
unix port: the `world` fixture of tests/conftest.py, clocks at E2E_SCALE):
a job failing on its first wave is aborted by the later waves once they
have synced the failures, and the aborts show in `status`; a job that
succeeds reaches every wave; a board that heard too few successes waits,
then records a miss at the end of its window."""
import collections
import os

import pytest

from sporadic.core import jobline, rollout
from tests.devutil import wait_for

pytestmark = pytest.mark.slow   # every test starts virtual boards

IDS = ['b1', 'b2', 'b3']


def actlog(vb):
    try:
        with open(os.path.join(vb.flash_dir, 'actlog.txt')) as f:
            return collections.Counter(l.split(' ', 1)[0] for l in f if l.strip())
    except FileNotFoundError:
        return collections.Counter()


def own(vb, jid, at=False):
    """The board's own settled records of job jid on its flash: outcome, output
    (and when, with at=True)."""
    out = []
    for name in ('jobs.txt', 'log.txt', 'in.txt'):
        try:
            with open(os.path.join(vb.flash_dir, name)) as f:
                for l in f:
                    if l.startswith('%s r %s 0 ' % (jid, vb.board_id)):
                        r = jobline.parse(l)
                        if r.outcome != 'run':
                            out.append((r.outcome, r.output) + ((r.at,) if at else ()))
        except FileNotFoundError:
            pass
    return out


def fleet_of_three(world):
    c = world.companion
    c('init')
    boards = {b: world.board(b) for b in IDS}
    for b in IDS:
        c('deploy', boards[b].path, '--id', b, '-q')
    return c, boards


def waves(c, jid):
    """{board: wave} of job jid, by the core's rule over the host list, and the job."""
    j = jobline.parse(jid + ' ' + {r['job']: r['line'] for r in c.json('jobs')}[jid])
    return rollout.waves(j, IDS), j


def test_a_failing_rollout_is_aborted_by_later_waves_and_a_succeeding_one_reaches_every_wave(world):
    c, boards = fleet_of_three(world)
    # 33%: one board of three in wave 0; the next wave 2h (12 s real) later:
    # the first wave's outcomes reach every board through the companion in
    # six syncs before that (about 1 s: ten minutes of board time)
    bad_line = 'each +5m pin x on ; waves=33%,100% wave=2h abort=fail>0%/1'
    good_line = 'each +5m log hello ; waves=33%,100% wave=2h need=1'
    j_bad = c('add', bad_line).strip()      # fails on every board: no pin x
    j_good = c('add', good_line).strip()
    wb = waves(c, j_bad)[0]
    wg = waves(c, j_good)[0]
    assert sorted(wb.values()) == sorted(wg.values()) == [0, 1, 1]
    for b in IDS:   # each board gets both jobs and the host list
        c.sync(boards[b].path)
    first_bad = [b for b in IDS if wb[b] == 0][0]
    first_good = [b for b in IDS if wg[b] == 0][0]
    wait_for(lambda: own(boards[first_bad], j_bad) and own(boards[first_good], j_good), 60,
             'the first waves to run')
    assert own(boards[first_bad], j_bad)[0][0] == 'err'
    # the first waves' outcomes go to the companion, then on to every board
    for b in IDS + IDS:
        c.sync(boards[b].path)
    late_bad = [b for b in IDS if wb[b] == 1]
    late_good = [b for b in IDS if wg[b] == 1]
    wait_for(lambda: all(own(boards[b], j_bad) for b in late_bad) and
             all(actlog(boards[b])['%s.0' % j_good] for b in late_good), 180, 'the later waves to decide')
    for b in late_bad:
        assert own(boards[b], j_bad) == [('miss', 'abort: 1 failed of 1 heard (fail>0%/1)')], b
    assert all(actlog(boards[b])['%s.0' % j_good] == 1 for b in IDS), 'the good job reached every wave'
    for b in IDS:
        c.sync(boards[b].path)
    st = c.json('status')
    aborted = {d['id']: d['aborted'] for d in st['devices']}
    assert aborted == {b: 1 if b in late_bad else 0 for b in IDS}
    ro = st['rollouts'][j_bad]['waves']
    assert [(w['wave'], w['hosts'], w['failed'], w['aborted'], w['waiting']) for w in ro] == [(0, 1, 1, 0, 0),
                                                                                            (1, 2, 0, 2, 0)]
    ro = st['rollouts'][j_good]['waves']
    assert [(w['wave'], w['ran']) for w in ro] == [(0, 1), (1, 2)]
    jobs = {j['job']: j for j in c.json('jobs')}
    assert jobs[j_bad]['rollout']['waves'][1]['aborted'] == 2


def test_a_later_wave_that_heard_too_few_successes_waits_then_misses_at_its_windows_end(world):
    c, boards = fleet_of_three(world)
    # the later wave's hour (6 s real) from 1h to its window's end at 2h
    line = 'each +5m log hello ; waves=33%,100% wave=1h need=1 within=2h'
    jid = c('add', line).strip()
    w, j = waves(c, jid)
    for b in IDS:
        c.sync(boards[b].path)
    end = j.t0 + 2 * 3600
    late = [b for b in IDS if w[b] == 1]
    first = [b for b in IDS if w[b] == 0][0]
    # nobody syncs again: the first wave runs, the later one never hears of it
    wait_for(lambda: all(own(boards[b], jid) for b in late), 120, 'the later wave to record its miss')
    for b in late:
        assert own(boards[b], jid) == [('miss', 'rollout: 0 ok heard, 1 needed')], b
        assert actlog(boards[b])['%s.0' % jid] == 0
        assert own(boards[b], jid, at=True)[0][2] >= end   # not before the end of its window
    assert actlog(boards[first])['%s.0' % jid] == 1
    for b in IDS:
        c.sync(boards[b].path)
    st = c.json('status')
    ro = st['rollouts'][jid]['waves']
    assert [(x['ran'], x['missed'], x['aborted']) for x in ro] == [(1, 0, 0), (0, 2, 0)]
