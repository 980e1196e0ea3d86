"""The wake index (issue #15, firmware/sporadic/device/wake.py, agenda.py): a
wake with nothing due reads neither the job file nor its hash; a wake with
jobs due decides those jobs alone, read at the offsets the index keeps; a
change to the store (a sync, an edit behind its back) or a torn, corrupt,
forged or misplacing index costs one full pass, never a missed or a doubled
run.

Boards are set up with `companion init`, `add` and `image --board unix`
(tests/test_integrity.provisioned) and booted on the MicroPython unix port
with the step clock, as main.py boots them (sporadic.boot). The unix
board's RTC memory is the file rtcmem.bin on its flash (boards/unix/board.py).
"""
import json
import os
import shutil

import pytest

from tests.devutil import boot, actlog, lines, T0, MICROPYTHON
from tests.test_integrity import provisioned, quarantined, HEAP

pytestmark = pytest.mark.skipif(MICROPYTHON is None, reason='micropython not installed')

H = 3600
D = 86400
DAILY = 'each 2026-12-01T06:00Z log daily ; every=1d'
HOURLY = 'each 2026-12-01T00:30Z log hourly ; every=1h'
ONCE = 'one 2026-12-02T12:00Z log once'

# One wake as a board makes it (power on, open, one step), counting what
# it reads of jobs.txt: lines streamed and files hashed.
WAKE = '''
import json
from sporadic.device import store
store.WAKE_INDEX = %r
read = [0, 0]
_lines = store.read_lines
def counted(path, torn=False):
    for l in _lines(path, torn):
        if path.endswith('jobs.txt'):
            read[0] += 1
        yield l
store.read_lines = counted
from sporadic.device import stamp
_hash = stamp.file_stamp
def hashed(path):
    if path.endswith('jobs.txt'):
        read[1] += 1
    return _hash(path)
stamp.file_stamp = hashed
from sporadic.core import plan
decided = []
_decide = plan.decide
def deciding(job, *a):
    if job.id not in decided:
        decided.append(job.id)
    return _decide(job, *a)
plan.decide = deciding
store.open_store()
from sporadic.device import runtime
rt = runtime.get()
w = rt.step(%d)
print('WAKE ' + json.dumps({'next': w, 'lines': read[0], 'hashed': read[1], 'jobs': rt.jobs,
                            'decided': decided, 'notes': rt.store.notes}))
'''


def wake(flash, now, index=True, check=True, env=None):
    p = boot(flash, WAKE % (index, now), start=T0, heap=HEAP, check=check, env=env)
    for l in p.stdout.splitlines():
        if l.startswith('WAKE '):
            return json.loads(l[5:])
    return None


def loop(flash, until, index=True, env=None, check=True):
    """A board's loop (sporadic.boot.main) until `until`."""
    code = 'from sporadic.device import store\nstore.WAKE_INDEX = %r\nfrom sporadic.device import boot\nboot.main(until=%d)\n'
    return boot(flash, code % (index, until), start=T0, heap=HEAP, env=env, check=check)


def rtcmem(flash):
    with open(os.path.join(flash, 'rtcmem.bin'), 'rb') as f:
        return f.read()


def set_rtcmem(flash, data):
    with open(os.path.join(flash, 'rtcmem.bin'), 'wb') as f:
        f.write(data)


@pytest.fixture
def board(tmp_path):
    flash, fleet, ids = provisioned(tmp_path, jobs=(DAILY, HOURLY, ONCE))
    age(flash)
    return flash, ids


def age(flash, s=60):
    # the image was flashed a minute before the board's first boot: an index
    # written in the second its jobs.txt was is "racy" (wake.vouches), its
    # open hashes the file
    import time
    t = time.time() - s
    for name in os.listdir(flash):
        p = os.path.join(flash, name)
        if os.path.isfile(p):
            os.utime(p, (t, t))


def test_idle_wake_reads_nothing_of_the_job_file(board):
    flash, ids = board
    first = wake(flash, T0 + 60)                 # the first wake: one full pass, the index written
    assert first['lines'] > 0 and first['hashed'] == 1
    assert rtcmem(flash).startswith(b'w2 ')
    idle = wake(flash, T0 + 120)
    assert idle['lines'] == 0 and idle['hashed'] == 0, idle
    assert idle['next'] == first['next'] == T0 + 30 * 60 and idle['jobs'] == first['jobs'] == 3
    # the baseline decides the same, reading the whole file
    base = wake(flash, T0 + 120, index=False)
    assert base['next'] == idle['next'] and base['lines'] > 0 and base['hashed'] == 1


def _outcomes(flash):
    return sorted(l for l in lines(flash, 'actlog.txt'))


def test_runs_across_wakes_are_those_of_a_board_without_the_index(board, tmp_path):
    flash, ids = board
    base = str(tmp_path / 'base')
    shutil.copytree(flash, base)
    # a board that sleeps and wakes, rebooting at each step of a 3-day run
    t = T0
    while t < T0 + 3 * D:
        t += 5 * H + 7 * 60
        loop(flash, t)
        loop(base, t, index=False)
    assert actlog(flash) == actlog(base)
    assert all(n == 1 for n in actlog(flash).values())
    assert ids[DAILY] + '.2' in actlog(flash) and ids[ONCE] + '.0' in actlog(flash)


def _prime_then_due(flash, ids):
    # the index written at 01:00 says: nothing before 06:00 but the hourly
    wake(flash, T0 + H)
    return T0 + 6 * H + 60


@pytest.mark.parametrize('damage', ['garbage', 'torn', 'forged', 'empty'])
def test_a_damaged_index_costs_a_full_pass_never_a_run(board, damage):
    flash, ids = board
    wake(flash, T0 + H)
    good = rtcmem(flash)
    f = good.decode().split(' ')
    if damage == 'garbage':
        set_rtcmem(flash, b'\xff\x00' * 40)
    elif damage == 'torn':
        set_rtcmem(flash, good[:len(good) // 2])
    elif damage == 'empty':
        set_rtcmem(flash, b'')
    else:
        # "nothing due for ten days", its MAC made without the board's secret
        import hashlib
        f[2] = str(T0 + 10 * D)
        f[8] = '-'
        body = ' '.join(f[:-1])
        set_rtcmem(flash, (body + ' ' + hashlib.sha256(body.encode()).hexdigest()[:16] + '\n').encode())
    w = wake(flash, T0 + 6 * H + 60)            # the daily job is due: it runs
    assert w['lines'] > 0, w
    assert actlog(flash).get(ids[DAILY] + '.0') == 1
    w = wake(flash, T0 + 6 * H + 120)           # and only once
    assert actlog(flash).get(ids[DAILY] + '.0') == 1


def test_a_job_file_edited_behind_the_stores_back_is_seen(board):
    flash, ids = board
    wake(flash, T0 + H)
    # an edit that changes the file's size (mpremote fs cp of another file)
    path = os.path.join(flash, 'jobs.txt')
    with open(path) as f:
        text = f.read()
    with open(path, 'w') as f:
        f.write(text.replace(' log daily ', ' log dailyX ', 1))
    w = wake(flash, T0 + H + 60)
    assert w['hashed'] == 1 and w['lines'] > 0
    assert any(l.startswith('edited ') for l in quarantined(flash)), quarantined(flash)


def test_an_edit_keeping_size_and_mtime_is_caught_at_the_next_full_pass(board):
    flash, ids = board
    wake(flash, T0 + H)
    path = os.path.join(flash, 'jobs.txt')
    st = os.stat(path)
    with open(path) as f:
        text = f.read()
    with open(path, 'w') as f:
        f.write(text.replace(' log daily ', ' log dailX ', 1))
    assert os.path.getsize(path) == st.st_size
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    # what the index gives up: an idle wake takes the file on its word ...
    assert wake(flash, T0 + H + 60)['hashed'] == 0
    # ... until the next full pass hashes it: the board starts again and its
    # open re-checks the file (the edited line refused, never run)
    p = boot(flash, WAKE % (True, T0 + 6 * H + 60), start=T0, heap=HEAP)
    assert 'WAKE ' not in p.stdout                   # the pass reset the board
    w = wake(flash, T0 + 6 * H + 120)
    assert w['hashed'] == 1
    assert any(l.startswith('edited ') for l in quarantined(flash)), quarantined(flash)
    assert ids[DAILY] + '.0' not in actlog(flash)


def test_a_sync_invalidates_the_index(board, tmp_path):
    flash, ids = board
    assert wake(flash, T0 + H)['next'] == T0 + H + 30 * 60     # the hourly job, next
    # a job the fleet adds after the image, due before that, delivered by a sync
    from tests.test_integrity import companion
    fleet = os.path.join(os.path.dirname(flash), 'fleet')     # provisioned() made it there
    companion(fleet, 'add', 'each 2026-12-01T01:10Z log later ; every=1d')
    with open(os.path.join(fleet, 'jobs.txt')) as f:
        fleet_lines = f.read().splitlines()
    code = 'from sporadic.device import store, storesync\nstoresync.receive(store.open_store(), %r, "peer")\n'
    boot(flash, code % fleet_lines, start=T0, heap=HEAP)
    w = wake(flash, T0 + H + 15 * 60)
    assert w['lines'] > 0 and w['jobs'] == 4, w
    assert any(l.endswith(' later') for l in lines(flash, 'actlog.txt')), lines(flash, 'actlog.txt')


@pytest.mark.parametrize('compacted', [False, True])
def test_a_sync_carries_the_index_the_next_wake_decides_what_it_brought(board, tmp_path, compacted):
    # a roomy heap's delivery (device/carry.py): the index is written again
    # for the store it leaves, the new job due at once; the next wake decides
    # that job alone, reads no line of jobs.txt, counts it, runs it. Then
    # compacted as a sync's G request does (the digest index on): every
    # offset looked up again
    flash, ids = board
    assert wake(flash, T0 + H)['next'] == T0 + H + 30 * 60
    from tests.test_integrity import companion
    fleet = os.path.join(os.path.dirname(flash), 'fleet')
    new = companion(fleet, 'add', 'each 2026-12-01T01:10Z log later ; every=1d').strip()
    with open(os.path.join(fleet, 'jobs.txt')) as f:
        held = set(lines(flash, 'jobs.txt'))
        brought = [l for l in f.read().splitlines() if l not in held]
    assert any(l.startswith(new + ' ') for l in brought), brought
    code = ('from sporadic.device import store, storesync\nst = store.open_store()\n'
            'storesync.receive(st, %r, "peer")\n' % brought)
    if compacted:
        code += 'st.rx = True\nassert st.compact()\n'
    boot(flash, code, start=T0, heap='256K')
    w = wake(flash, T0 + H + 15 * 60)
    assert w['decided'] == [new] and w['lines'] == 0, w
    assert w['jobs'] == 4 and w['next'] == T0 + H + 30 * 60, w
    assert actlog(flash).get(new + '.0') == 1
    # the next wake as a full pass would decide it: the hourly job at 01:30
    w = wake(flash, T0 + H + 20 * 60)
    assert w['decided'] == [] and w['lines'] == 0 and w['next'] == T0 + H + 30 * 60, w
    assert wake(flash, T0 + H + 20 * 60 + 5, index=False)['next'] == T0 + H + 30 * 60


def test_a_sync_bringing_a_cancel_leaves_the_index_stale(board, tmp_path):
    # a line the index cannot vouch for (a cancel: the job leaves the count)
    # is not carried: the next wake's full pass decides every job
    flash, ids = board
    wake(flash, T0 + H)
    from tests.test_integrity import companion
    fleet = os.path.join(os.path.dirname(flash), 'fleet')
    companion(fleet, 'cancel', ids[ONCE])
    with open(os.path.join(fleet, 'jobs.txt')) as f:
        held = set(lines(flash, 'jobs.txt'))
        brought = [l for l in f.read().splitlines() if l not in held]
    assert any(l.startswith(ids[ONCE] + ' cancel') for l in brought), brought
    code = 'from sporadic.device import store, storesync\nstoresync.receive(store.open_store(), %r, "peer")\n'
    boot(flash, code % brought, start=T0, heap='256K')
    w = wake(flash, T0 + H + 15 * 60)
    assert w['lines'] > 0 and sorted(w['decided']) == sorted([ids[DAILY], ids[HOURLY]]) and w['jobs'] == 2, w


def test_power_cuts_while_writing_the_index_never_double_a_run(board, tmp_path):
    flash0, ids = board
    base = str(tmp_path / 'base')
    shutil.copytree(flash0, base)
    loop(base, T0 + 8 * H, index=False)
    want = actlog(base)
    d = str(tmp_path / 'count')
    shutil.copytree(flash0, d)
    code = ('from sporadic.device import boot, store\nboot.main(until=%d)\nprint("OPS", store.ops)\n'
            % (T0 + 8 * H))
    p = boot(d, code, start=T0, heap=HEAP)
    total = int(p.stdout.split('OPS')[1].split()[0])
    for n in range(1, total + 1, max(1, total // 25)):
        d = str(tmp_path / ('c%d' % n))
        shutil.copytree(flash0, d)
        p = loop(d, T0 + 8 * H, env={'SPORADIC_CRASH_AFTER': str(n)}, check=False)
        assert p.returncode in (0, 77), p.stderr[-2000:]
        loop(d, T0 + 8 * H)
        got = actlog(d)
        assert all(c == 1 for c in got.values()), (n, got)
        # an instance interrupted by the cut is recorded as such, not run again
        assert set(got) <= set(want), (n, got, want)


def test_a_due_wake_decides_the_due_job_alone(board):
    flash, ids = board
    first = wake(flash, T0 + H)                  # a full pass: the index written
    assert first['lines'] > 0 and sorted(first['decided']) == sorted(ids.values())
    # 01:30, the hourly job's next instance: only its group is read and decided
    due = wake(flash, T0 + H + 30 * 60 + 5)
    assert due['decided'] == [ids[HOURLY]], due
    assert due['lines'] == 0, due
    assert due['hashed'] == 1     # the open took jobs.txt on the index's word: hashed before a run
    assert due['jobs'] == 3 and due['next'] == T0 + 2 * H + 30 * 60
    assert actlog(flash).get(ids[HOURLY] + '.1') == 1
    # what the due wake recorded answers the next wake: nothing due, nothing read
    idle = wake(flash, T0 + H + 45 * 60)
    assert idle['lines'] == 0 and idle['decided'] == [] and idle['next'] == T0 + 2 * H + 30 * 60, idle
    assert actlog(flash).get(ids[HOURLY] + '.1') == 1


def _reindex(flash, edit):
    # rewrite the index under the board's own MAC (what a board that wrote
    # a wrong index would hold): edit(fields) changes the fields
    from sporadic.core import hmac
    with open(os.path.join(flash, 'cfg.json')) as f:
        secret = json.load(f)['secret']
    f = rtcmem(flash).decode().split(' ')
    edit(f)
    body = ' '.join(f[:-1])
    set_rtcmem(flash, (body + ' ' + hmac.mac_hex(secret, body) + '\n').encode())


@pytest.mark.parametrize('where', ['other-group', 'mid-line', 'past-the-end', 'none'])
def test_an_index_misplacing_a_due_group_costs_a_full_pass_never_a_run(board, where):
    flash, ids = board
    wake(flash, T0 + H)
    hourly = ids[HOURLY]

    def edit(f):
        agenda = [e.split(':') for e in f[8].split(',')]
        offs = {e[2]: e[1] for e in agenda}
        for e in agenda:
            if e[2] == hourly:
                e[1] = {'other-group': offs[ids[DAILY]], 'mid-line': str(int(e[1]) + 3),
                        'past-the-end': '999999', 'none': '-'}[where]
        f[8] = ','.join(':'.join(e) for e in agenda)
    _reindex(flash, edit)
    w = wake(flash, T0 + H + 30 * 60 + 5)
    assert w['lines'] > 0 and sorted(w['decided']) == sorted(ids.values()), w
    assert actlog(flash).get(hourly + '.1') == 1
    w = wake(flash, T0 + H + 30 * 60 + 65)
    assert actlog(flash).get(hourly + '.1') == 1


# A loop counting its full passes: each streams jobs.txt through store.read_lines
# once (so does a compaction); rt.steps counts every wake.
LOOP_COUNTED = '''
from sporadic.device import store
store.WAKE_INDEX = %r
streamed = [0]
_lines = store.read_lines
def counted(path, torn=False):
    if path.endswith('jobs.txt'):
        streamed[0] += 1
    return _lines(path, torn)
store.read_lines = counted
from sporadic.device import boot
rt = boot.main(until=%d)
print('LOOP %%d %%d %%d %%d' %% (streamed[0], rt.steps, store.open_store().compactions, rt.jobs))
'''

MINUTES = ['each 2026-12-01T00:%02dZ log m%02d ; every=1h' % (m, m) for m in range(0, 60, 5)]
ONE_AT_7 = 'one 2026-12-01T07:00Z log once7'


@pytest.mark.slow
def test_a_day_of_due_wakes_runs_what_a_board_without_the_index_runs(tmp_path):
    # 14 jobs due at 13 different minutes of each hour: more than the
    # index's agenda holds, a `one` (its rank streams the host records),
    # and enough runs for the log to be compacted under the agenda
    flash, fleet, ids = provisioned(tmp_path, jobs=MINUTES + [DAILY, ONE_AT_7])
    age(flash)
    base = str(tmp_path / 'base')
    shutil.copytree(flash, base)
    counts = {True: [0, 0, 0], False: [0, 0, 0]}
    t = T0
    while t < T0 + 8 * H:
        t += 2 * H + 47 * 60      # a reboot now and then; the loop light-sleeps between
        for d, index in ((flash, True), (base, False)):
            p = boot(d, LOOP_COUNTED % (index, t), start=T0, heap=HEAP)
            got = [int(x) for x in p.stdout.split('LOOP ')[1].split()[:4]]
            assert got.pop() == len(MINUTES) + 2     # the jobs the loop reports, whatever its last wake was
            counts[index] = [a + b for a, b in zip(counts[index], got)]
    assert actlog(flash) == actlog(base)
    ran = actlog(flash)
    assert all(n == 1 for n in ran.values()) and ids[ONE_AT_7] + '.0' in ran and ids[DAILY] + '.0' in ran
    # every 5 minutes from 00:00 to the last loop's end (08:21): 101 instances
    assert sum(1 for k in ran if k.split('.')[0] in [ids[m] for m in MINUTES]) == 101
    streamed, steps, compactions = counts[True]
    assert compactions > 0
    assert counts[False][0] >= counts[False][1]      # the baseline streams the file every wake
    # with the index, a full pass only after the agenda runs out (every 8
    # due minutes), a boot, or a compaction; never more than one wake in 3
    print('streamed, steps, compactions: index', counts[True], 'baseline', counts[False])
    assert streamed * 3 < steps, counts
    assert len(rtcmem(flash)) <= 492      # an ESP8266's RTC memory holds the index


def test_a_compaction_in_the_loop_keeps_the_index_the_next_idle_wake_reads_nothing(tmp_path):
    # 40 jobs due at 01:10 (more than the agenda holds: a full pass) whose
    # runs fill the log past LOG_MAX (one record a run since #31), so that
    # pass ends in a compaction; 30 more due tomorrow. The compaction moves every group but changes no
    # decision: the index is kept (its offsets looked up again), and the
    # next idle wakes read nothing of jobs.txt. (It was cleared: the next
    # wake after every compaction was a full pass over the whole file.)
    burst = ['each 2026-12-01T01:10Z log b%d ; every=1d' % i for i in range(40)]
    later = ['each 2026-12-02T06:00Z log d%d ; every=1d' % i for i in range(30)]
    flash, fleet, ids = provisioned(tmp_path, jobs=burst + later)
    age(flash)
    first = wake(flash, T0 + 60)
    assert first['lines'] > 0 and first['next'] == T0 + 60 + H     # (MAX_SLEEP)
    due = wake(flash, T0 + H + 10 * 60 + 5)
    assert sorted(k for k in actlog(flash)) == sorted(ids[b] + '.0' for b in burst)
    assert os.listdir(os.path.join(flash, 'out')), 'the log was compacted into the outbox'
    assert due['next'] == T0 + H + 10 * 60 + 5 + H     # nothing before tomorrow: MAX_SLEEP
    assert rtcmem(flash).startswith(b'w2 '), 'the index survives the compaction'
    for t in (T0 + 2 * H + 10 * 60, T0 + 3 * H + 10 * 60):
        idle = wake(flash, t)
        assert idle['lines'] == 0 and idle['decided'] == [], idle
        assert idle['jobs'] == len(burst) + len(later)
    assert wake(flash, T0 + D + 6 * H + 5)['decided']   # the 30 at 06:00 tomorrow are still found
    for s in (65, 125, 185):   # (a pass defers what it cannot log before the next compaction)
        wake(flash, T0 + D + 6 * H + s)
    ran = actlog(flash)
    assert sorted(k for k in ran if k.split('.')[0] in [ids[x] for x in later]) == sorted(ids[x] + '.0' for x in later)
    assert set(ran.values()) == {1}
