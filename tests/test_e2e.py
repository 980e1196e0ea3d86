"""End to end: the `companion` CLI against virtual boards, through the serial
line only (issue #4, "Done when").

Every verb runs as a user runs it: `companion.cli.main([...])` in this
process (init, deploy, add, sync, results --json, status --json, jobs
--json). The boards are the MicroPython unix port on pseudo-terminals
(companion/vboard/board.py); the companion reaches them only through /dev/pts/N.
The tests read a board's flash folder as an observer would look at a
board's LEDs (its action log, its job file), never to drive it.

Time: each board's clock runs E2E_SCALE (tests/devutil.py; the `world`
fixture of tests/conftest.py) times faster than real time, and the
companion's clock (what `sync` sends with `T`, what `add` resolves `+5m`
against) runs at the same speed (demo.DemoClock, patched into the verbs'
`time` module), so the two agree. Nothing sleeps for timing to pass: every
wait polls a condition with a deadline.
"""
import collections
import os

import pytest

from tests.devutil import outbox_lines, wait_for
from sporadic.core import plan
from sporadic.core.timefmt import format_time

pytestmark = pytest.mark.slow   # every test starts virtual boards


# -- helpers --------------------------------------------------------------------

def actlog(vb):
    """Instances the board's `log` action ran: Counter of 'JOB.K'."""
    try:
        with open(os.path.join(vb.flash_dir, 'actlog.txt')) as f:
            return collections.Counter(l.split(' ', 1)[0] for l in f if l.strip())
    except FileNotFoundError:
        return collections.Counter()


def board_lines(vb):
    """The board's job-line store as it stands on its flash (jobs.txt + the logs)."""
    out = []
    for name in ('jobs.txt', 'log.txt', 'in.txt'):
        try:
            with open(os.path.join(vb.flash_dir, name)) as f:
                out += f.read().splitlines()
        except FileNotFoundError:
            pass
    return out


def outcomes(vb, host):
    """Jobs whose instance 0 the board has recorded an outcome of (not the
    `run` it writes first), on its flash: its store and its outbox."""
    return {l[:8] for l in board_lines(vb) + outbox_lines(vb.flash_dir)
            if ' r %s 0 ' % host in l and ' run ' not in l}


def asleep(vb):
    """The board's interpreter is in time.sleep (nanosleep), not running."""
    for p in vb.interpreter_pids():
        try:
            with open('/proc/%d/wchan' % p) as f:
                if 'nanosleep' in f.read():
                    return True
        except OSError:
            pass
    return False


def results(comp):
    rows = comp.json('results')
    for r in rows:
        assert {'job', 'instance', 'host', 'at', 'outcome', 'output'} <= set(r), r
        assert r['outcome'] in ('ok', 'error', 'missed', 'started'), r
    return rows


def by_instance(rows):
    d = collections.defaultdict(list)
    for r in rows:
        d[r['instance']].append(r)
    return d


# -- the tests --------------------------------------------------------------------

def test_deploy_sync_run_results_and_redeploy(world):
    """init, deploy, add, sync, the board runs on its own, sync back, results
    (ok, error, missed), status, jobs; a re-deploy keeps the board's state."""
    c = world.companion
    assert 'fleet' in c('init')
    vb = world.board('pump-1')
    out = c('deploy', vb.path, '--id', 'pump-1', '-q')
    assert 'deployed pump-1' in out and 'frozen' not in out   # the PyPI interpreter has no sporadic inside
    now = world.clock.now()
    # windows are wide (a virtual board boots in ~2 s real = 20 min of its clock)
    j_ok = c('add', 'each +5m log hello ; every=1h within=30m').strip()
    j_err = c('add', 'each +5m pin x on ; within=1h').strip()     # fails on the board: no pin x
    j_miss = c('add', 'each %s log late ; within=10m' % format_time(now - 7200)).strip()
    assert all(len(j) == 8 for j in (j_ok, j_err, j_miss))
    out = c.sync(vb.path)
    assert 'synced pump-1' in out
    wait_for(lambda: actlog(vb)['%s.0' % j_ok], what='the board to run %s.0' % j_ok)
    # the board records its outcomes on its flash; then one sync brings them back
    wait_for(lambda: {j_ok, j_err, j_miss} <= outcomes(vb, 'pump-1'), what='the board to record three outcomes')
    c.sync(vb.path)
    got = {r['job']: r for r in results(c)}
    assert {j_ok, j_err, j_miss} <= set(got), got
    r = got[j_ok]
    assert (r['instance'], r['host'], r['outcome'], r['output']) == ('%s.0' % j_ok, 'pump-1', 'ok', 'hello')
    assert now + 300 <= r['at'] <= now + 300 + 1800     # inside its window, on the board's clock
    assert got[j_err]['outcome'] == 'error' and 'pin must be a number' in got[j_err]['output']
    assert got[j_miss]['outcome'] == 'missed' and got[j_miss]['instance'] == '%s.0' % j_miss

    st = c.json('status')
    (dev,) = st['devices']
    assert dev['id'] == 'pump-1' and dev['clock'] == 'trusted' and dev['last_sync']
    assert dev['ok'] >= 1 and dev['failed'] >= 1 and dev['missed'] >= 1
    assert dev['duplicates'] == [] and st['duplicates'] == {}
    jobs = {j['job']: j for j in c.json('jobs')}
    assert jobs[j_ok]['devices']['pump-1']['outcome'] == 'ok'
    assert jobs[j_miss]['devices']['pump-1']['outcome'] == 'miss'

    # re-deploy: firmware and config again, the job state stays
    before = set(board_lines(vb))
    assert any(l.startswith(j_ok + ' ') for l in before)
    c('deploy', vb.path, '--id', 'pump-1', '-q')
    after = set(board_lines(vb))
    assert before <= after, 'a re-deploy lost lines: %s' % sorted(before - after)[:3]
    n_results = len(results(c))
    out = c.sync(vb.path)
    assert 'received 0 line(s)' in out or len(results(c)) >= n_results
    # the board goes on: the next instance of the series runs, the first does not again
    wait_for(lambda: actlog(vb)['%s.1' % j_ok], what='%s.1 after the re-deploy' % j_ok)
    wait_for(lambda: c.sync(vb.path) and any(r['instance'] == '%s.1' % j_ok for r in results(c)),
             what='%s.1 synced back' % j_ok)
    assert max(actlog(vb).values()) == 1, actlog(vb)
    assert all(len(v) == 1 for v in by_instance(results(c)).values())


def test_store_and_forward_between_two_boards(world):
    """What board A did reaches board B on B's next sync, through the
    companion: B then does not run the `one` instance it would have taken
    over after its grace, nor the `any` instance it learns together with A's
    run."""
    c = world.companion
    c('init')
    a, b = world.board('pump-1'), world.board('pump-2')
    for vb in (a, b):
        c('deploy', vb.path, '--id', vb.board_id, '-q')
    grace = 7200                                     # 12 s real at SCALE 600
    j_one = c('add', 'one +5m log backup ; within=6h grace=2h').strip()
    hosts = ['pump-1', 'pump-2']
    first = 'pump-1' if plan.rank(j_one, 'pump-1', hosts) == 0 else 'pump-2'
    A, B = (a, b) if first == 'pump-1' else (b, a)
    assert plan.rank(j_one, B.board_id, hosts) == 1
    t_one = world.clock.now() + 300
    c.sync(A.path)
    c.sync(B.path)                                   # B holds the `one` job, rank 1
    j_any = c('add', 'any:1 +5m log upload ; within=6h tick=1m').strip()
    t_any = world.clock.now() + 300
    c.sync(A.path)                                   # only A knows the `any` job yet
    wait_for(lambda: actlog(A)['%s.0' % j_one] and actlog(A)['%s.0' % j_any], what='A to run both')
    # and their outcomes on A's flash: a sync between a run's action and its
    # outcome record interrupts the run (recorded `err interrupted`)
    wait_for(lambda: {j_one, j_any} <= outcomes(A, A.board_id), what="A to record both outcomes")
    c.sync(A.path)                                   # A's done records to the companion
    c.sync(B.path)                                   # ... and on to B
    assert world.clock.now() < t_one + grace, 'too slow: B took over before the news reached it'
    # B holds A's records now (in its store, before or after compaction)
    held = '\n'.join(board_lines(B))
    assert ('%s r %s 0 ' % (j_one, A.board_id)) in held or j_one not in held
    assert j_any in held
    # let B's clock pass the point where it would have taken over, then sync
    wait_for(lambda: world.clock.now() > t_one + grace + 1200 and asleep(B), timeout=60,
             what="B's clock past the grace")
    c.sync(B.path)
    c.sync(A.path)
    assert actlog(B)['%s.0' % j_one] == 0 and actlog(B)['%s.0' % j_any] == 0, actlog(B)
    assert actlog(A)['%s.0' % j_one] == 1 and actlog(A)['%s.0' % j_any] == 1, actlog(A)
    runs = [r for r in results(c) if r['outcome'] in ('ok', 'error')]
    assert sorted((r['instance'], r['host']) for r in runs) == sorted(
        [('%s.0' % j_one, A.board_id), ('%s.0' % j_any, A.board_id)])
    st = c.json('status')
    assert st['duplicates'] == {}
    assert {d['id']: d['duplicates'] for d in st['devices']} == {'pump-1': [], 'pump-2': []}
    # the fleet and both boards hold the same records after the last syncs
    jobs = {j['job']: j for j in c.json('jobs')}
    assert jobs[j_one]['devices'][A.board_id]['outcome'] == 'ok'


BUSY = '''
import time
def busy():
    f = open('/busy.txt', 'a')
    f.write('start\\n')
    f.close()
    t = time.ticks_ms()
    while time.ticks_diff(time.ticks_ms(), t) < 20000:
        pass
    return 'done'
'''


def test_sync_interrupts_a_sleeping_or_running_board_and_it_resumes(world):
    """A sync interrupts main.py asleep in time.sleep, or busy in an action,
    cleanly; main.py runs again after the sync (a job added then runs);
    nothing runs twice."""
    c = world.companion
    c('init')
    vb = world.board('pump-1', actions=BUSY)
    c('deploy', vb.path, '--id', 'pump-1', '-q')
    j_tick = c('add', 'each +5m log tick ; every=20m within=10m').strip()

    def last_tick():
        ks = [int(i.split('.')[1]) for i in actlog(vb) if i.startswith(j_tick + '.')]
        return max(ks) if ks else -1

    c.sync(vb.path)
    # a tick's window is 1 s real; the sync itself takes about that long, so
    # .0 may pass during it (missed, as it should be): wait for whichever runs first
    wait_for(lambda: last_tick() >= 0, what='the first tick')
    # asleep: the loop waits for the next tick in time.sleep
    wait_for(lambda: asleep(vb), what='main.py asleep')
    j_later = c('add', 'each +5m log later').strip()
    c.sync(vb.path)
    # main.py ran again after the sync: the job it learned then runs
    wait_for(lambda: actlog(vb)['%s.0' % j_later], what='the job added at the sync to run after it')
    # running: a busy action (20 s real, cut short by the sync) is under way when the companion comes
    busy_path = os.path.join(vb.flash_dir, 'busy.txt')
    j_busy = c('add', 'each +5m busy ; within=2h').strip()
    c.sync(vb.path)
    wait_for(lambda: os.path.exists(busy_path), what='the busy action to start')
    c.sync(vb.path)                                   # Ctrl-C lands inside the action
    with open(busy_path) as f:
        assert f.read().count('start') == 1
    # syncs at arbitrary moments of the running loop
    for _ in range(6):
        c.sync(vb.path)
    n = last_tick()   # (instances whose window passed during the syncs are missed, not run late)
    wait_for(lambda: last_tick() > n, what='ticks go on after the syncs')

    def busy_reported():
        c.sync(vb.path)
        return [r for r in results(c) if r['job'] == j_busy]

    (rb,) = wait_for(busy_reported, what='the interrupted action reported')
    assert rb['outcome'] == 'error' and 'interrupt' in rb['output'], rb    # not re-run late, not lost
    with open(busy_path) as f:
        assert f.read().count('start') == 1
    log = actlog(vb)
    assert max(log.values()) == 1, log
    assert all(len(v) == 1 for v in by_instance(results(c)).values())
    st = c.json('status')
    assert st['devices'][0]['clock'] == 'trusted'
