"""The device runtime on the MicroPython unix port (-X heapsize=72K), a
virtual board booted as a board boots (tests/devboot.py), with the step
clock: sleeping advances time at once, so days pass in milliseconds."""
import json
import os

import pytest

from sporadic.core import jobline
from tests.devutil import make_flash, boot, lines, own_results, actlog, T0

pytestmark = pytest.mark.needs('micropython', 'mpy-cross')

H = 3600
D = 86400

DRIVER = '''
import json, sys
from sporadic.device import runtime, clock
rt = runtime.get()
%s
from sporadic.device import syncsrv
sys.stdout.write('STATUS ')
json.dump(syncsrv.status(), sys.stdout)
print()
'''


# The unix port is 64-bit (8-byte pointers) and holds the loaded .mpy code in
# its heap: ~39 KB of the 64 KB go to the firmware's loop code, about 1.4
# times what a 32-bit board needs (docs/device.md#memory). Every test here
# ends with the status read, the sync server's code loaded on top of the
# loop's as a sync does. At 64K that read ran out of contiguous blocks once
# the loop's code grew by ~4 KB (the layout, calendar jobs, the wake index):
# 13.5 KB free, the largest run 448 B (micropython.mem_info at a failure).
# So these tests run at 72K; the loop alone under 64K is bench/device_heap.py's
# figure. 88K since #27's seal slots: after #29 (6ce2fea) the margin at 72K
# was nil: any 15 bytes more in merge.compact's code (even two lines that
# change nothing for these files) and test_user_actions_and_failures' status
# read could no longer place 640 B, at 72K, 76K and 80K alike (it passes at
# 88K, 96K, 256K): fragmentation, not a leak. 104K since #27's outbox
# packing: at 88K the status read again found no 640 B; at 96K the loop has
# its PACK_FREE (32 KB) and packs, and the read after it failed likewise.
# A real sync soft-resets the board first (syncer.fresh_heap), so the read
# on top of the loop here is stricter than a board's; the loop's own budget
# (64K) stays bench/device_heap.py's.
HEAP = '104K'
HEAP_BIG = '104K'


def run(folder, body, start=T0, env=None, check=True, heap=HEAP):
    p = boot(folder, DRIVER % body, start=start, env=env, check=check, heap=heap)
    st = None
    for l in p.stdout.splitlines():
        if l.startswith('STATUS '):
            st = json.loads(l[7:])
    return st, p


def jid(line):
    return jobline.parse(line).id


def outcomes(folder, host, job):
    """{k: [outcome, ...]} of one job's own results, in k order."""
    out = {}
    for r in own_results(folder, host):
        if r['id'] == job:
            out.setdefault(r['k'], []).append(r['outcome'] + ('' if r['attempt'] == 1 else str(r['attempt'])))
    return {k: sorted(v) for k, v in out.items()}


def test_each_repeats_daily(tmp_path):
    job = 'each 2026-12-01T06:00Z log hello ; every=1d within=2h'
    d = make_flash(str(tmp_path), jobs=[job])
    st, _ = run(d, 'runtime.main(until=%d)' % (T0 + 5 * D))
    j = jid(job)
    assert actlog(d) == {'%s.%d' % (j, k): 1 for k in range(5)}
    # one record a run: the outcome (its start was run.txt, gone with it)
    assert outcomes(d, 'dev-1', j) == {k: ['ok'] for k in range(5)}
    for r in own_results(d, 'dev-1'):
        assert r['at'] == T0 + 6 * H + r['k'] * D   # on time, to the second
    assert st['clock'] == 'trusted' and st['jobs'] == 1 and st['pending'] == 1
    assert st['next_wake'] == T0 + 5 * D       # capped by until
    assert st['id'] == 'dev-1' and st['quarantined'] == 0


def test_who_and_on_select_hosts(tmp_path):
    jobs = ['who:pump 2026-12-01T06:00Z log who', 'each 2026-12-01T07:00Z log each-on ; on=valve',
            'each 2026-12-01T08:00Z log all']
    ran = {}
    for host in ('pump-1', 'valve-1'):
        d = make_flash(str(tmp_path / host), host=host, jobs=jobs)
        run(d, 'runtime.main(until=%d)' % (T0 + D))
        ran[host] = sorted(l.split(' ', 1)[1] for l in lines(d, 'actlog.txt'))
    assert ran == {'pump-1': ['all', 'who'], 'valve-1': ['all', 'each-on']}


def test_window_missed_when_asleep(tmp_path):
    # the board sleeps through the whole window: recorded as missed, never run late
    job = 'each 2026-12-01T06:00Z log late ; within=1h'
    d = make_flash(str(tmp_path), jobs=[job])
    body = 'rt.step(%d)\nrt.step(%d)\nrt.step(%d)' % (T0 + 5 * H, T0 + 8 * H, T0 + 9 * H)
    st, _ = run(d, body)
    j = jid(job)
    assert actlog(d) == {}
    rs = own_results(d, 'dev-1')
    assert [(r['k'], r['outcome'], r['text']) for r in rs] == [(0, 'miss', 'asleep')]
    assert st['pending'] == 0   # a one-off job that is settled


def test_jump_forward_misses_without_walking(tmp_path):
    # hourly job, the board wakes 100 days later: one miss record covers the
    # older instances, the current one runs; nothing is walked one by one
    job = 'each 2026-12-01T00:00Z log tick ; every=1h'
    d = make_flash(str(tmp_path), jobs=[job])
    t = T0 + 100 * D + 30 * 60
    st, _ = run(d, 'rt.step(%d)\nrt.step(%d)' % (T0 + 1, t))
    j = jid(job)
    n = 100 * 24
    assert actlog(d) == {'%s.0' % j: 1, '%s.%d' % (j, n): 1}
    o = outcomes(d, 'dev-1', j)
    assert o == {0: ['ok'], n - 1: ['miss'], n: ['ok']}


def test_clock_unknown_runs_nothing_until_set(tmp_path):
    job = 'each 2026-12-01T06:00Z log dated ; every=1d within=12h'
    d = make_flash(str(tmp_path), jobs=[job])
    # a fresh board without RTC: its clock reads 1970
    st, _ = run(d, 'runtime.main(max_steps=5)', start=0)
    assert st['clock'] == 'unknown' and 'no dated job' in st['note']
    assert st['next_wake'] is None and actlog(d) == {}
    assert own_results(d, 'dev-1') == []
    # the companion sets the time (at 20:00 on day 1): day 0 was missed
    # because the clock was unknown, day 1 runs
    st, _ = run(d, 'from sporadic.device import clockset\nclockset.set(%d)\nruntime.main(until=%d)' % (T0 + D + 7 * H, T0 + 2 * D), start=0)
    j = jid(job)
    assert st['clock'] == 'trusted' and st['source'] == 'companion'
    assert actlog(d) == {'%s.1' % j: 1}
    rs = own_results(d, 'dev-1')
    assert [(r['k'], r['outcome'], r['text']) for r in rs if r['outcome'] == 'miss'] == [(0, 'miss', 'clock unknown')]
    # the RTC keeps the set time across a reset (the rtc file on the unix board)
    st, _ = run(d, 'runtime.main(until=%d)' % (T0 + 3 * D), start=0)
    assert st['clock'] == 'trusted' and st['source'] == 'rtc'
    assert actlog(d) == {'%s.%d' % (j, k): 1 for k in (1, 2)}


def test_jumps_back_and_forth_run_nothing_twice(tmp_path):
    job = 'each 2026-12-01T06:00Z log once ; every=1d within=1d'
    d = make_flash(str(tmp_path), jobs=[job])
    body = '''
from sporadic.device import clockset
runtime.main(until=%d)
clockset.set(%d)              # back two days
runtime.main(until=%d)
clockset.set(%d)              # forward again, past the first
runtime.main(until=%d)
''' % (T0 + 3 * D, T0 + 1 * D, T0 + 3 * D, T0 + 10 * D, T0 + 12 * D)
    st, _ = run(d, body)
    j = jid(job)
    counts = actlog(d)
    assert all(v == 1 for v in counts.values()), counts
    assert sorted(counts) == sorted('%s.%d' % (j, k) for k in (0, 1, 2, 9, 10, 11))  # 9: still inside its 1d window
    assert any(x[1] < 0 for x in st['jumps']) and any(x[1] > 0 for x in st['jumps'])


def test_one_ranked_host_first_and_grace(tmp_path):
    job = 'one 2026-12-01T06:00Z log backup ; every=1d grace=1h'
    j = jid(job)
    hosts = ['.h h-a', '.h h-b', '.h h-c']
    from sporadic.core import plan
    order = sorted(['h-a', 'h-b', 'h-c'], key=lambda h: plan.score(j, h), reverse=True)
    # every board alone (no sync): rank r starts at due + r x grace
    starts = {}
    for h in order:
        d = make_flash(str(tmp_path / h), host=h, jobs=hosts + [job])
        run(d, 'runtime.main(until=%d)' % (T0 + D))
        rs = [r for r in own_results(d, h) if r['outcome'] == 'ok']     # at: the run's start
        starts[h] = rs[0]['at']
    assert [starts[h] - (T0 + 6 * H) for h in order] == [0, H, 2 * H]
    # rank 1 learns before its grace ends that rank 0 started: it stays idle
    d0 = str(tmp_path / order[0])
    d1 = make_flash(str(tmp_path / 'second'), host=order[1], jobs=hosts + [job])
    got = [r['line'] for r in own_results(d0, order[0]) if r['k'] == 0]
    body = 'rt.step(%d)\nfrom sporadic.device import storesync\nstoresync.receive(rt.store, %r)\nruntime.main(until=%d)' % (T0 + 6 * H + 60, got, T0 + D)
    run(d1, body)
    assert actlog(d1) == {}
    # a host not in the list never runs a `one` job
    d2 = make_flash(str(tmp_path / 'stranger'), host='h-z', jobs=hosts + [job])
    st, _ = run(d2, 'runtime.main(until=%d)' % (T0 + 3 * D))
    assert actlog(d2) == {} and st['pending'] == 0


def test_any_fires_once_and_stops_on_news(tmp_path):
    job = 'any:0.05 2026-12-01T00:00Z log draw ; every=1d within=1d tick=10m'
    j = jid(job)
    d = make_flash(str(tmp_path / 'a'), host='h-a', jobs=[job])
    run(d, heap=HEAP_BIG, body='runtime.main(until=%d)' % (T0 + 10 * D))
    counts = actlog(d)
    # p = 0.05 per 10 min over 144 ticks a day: fires almost surely, once a day at most
    assert all(v == 1 for v in counts.values())
    assert len(counts) >= 9
    firsts = [r['at'] - (T0 + r['k'] * D) for r in own_results(d, 'h-a') if r['outcome'] == 'ok']
    assert all(0 <= x < D and x % 600 == 0 for x in firsts)
    assert len(set(firsts)) > 1          # random instants, not a fixed offset
    # another host that has heard of h-a's runs does not fire those instances
    # (heard on the day: a run of an instance not due yet by its clock would
    # settle nothing, docs/security.md#what-a-stolen-board-can-do)
    got = [r['line'] for r in own_results(d, 'h-a')]
    d2 = make_flash(str(tmp_path / 'b'), host='h-b', jobs=[job])
    for k in range(10):
        day = [l for l in got if l.split()[3] == str(k)]
        run(d2, heap=HEAP_BIG, start=T0 + k * D,
            body='from sporadic.device import storesync\nstoresync.receive(rt.store, %r)\nruntime.main(until=%d)'
            % (day, T0 + (k + 1) * D))
    ran_b = actlog(d2)
    assert not (set(ran_b) & set(counts)), (ran_b, counts)


def test_user_actions_and_failures(tmp_path):
    user = '''
def greet(name, punct="!"):
    return "hi " + name + punct

def boom():
    raise ValueError("sensor not found")

def _private():
    return 1
'''
    jobs = ['each 2026-12-01T06:00Z greet "big world"', 'each 2026-12-01T06:01Z boom',
            'each 2026-12-01T06:02Z nosuch thing', 'each 2026-12-01T06:03Z _private',
            'each 2026-12-01T06:04Z pin 5 on', 'each 2026-12-01T06:05Z led blink 2',
            'each 2026-12-01T06:06Z pin x on', 'each 2026-12-01T06:07Z log still running',
            'each 2026-12-01T06:08Z pulse 4 250', 'each 2026-12-01T06:09Z sleep 1000']
    d = make_flash(str(tmp_path), jobs=jobs, actions=user)
    run(d, 'runtime.main(until=%d)' % (T0 + D), heap=HEAP_BIG)
    res = {}
    for r in own_results(d, 'dev-1'):
        if r['outcome'] != 'run':
            res[r['id']] = (r['outcome'], r['text'])
    by = [res[jid(l)] for l in jobs]
    assert by[0] == ('ok', 'hi big world!')
    assert by[1] == ('err', 'ValueError: sensor not found')
    assert by[2] == ('err', 'unknown action nosuch')
    assert by[3] == ('err', 'unknown action _private')
    assert by[4] == ('ok', 'pin 5 on')
    assert by[5] == ('ok', 'blinked 2')
    assert by[6][0] == 'err' and 'pin must be a number' in by[6][1]
    assert by[7] == ('ok', 'still running')
    assert by[8] == ('ok', 'pulsed 4 for 250ms')
    assert by[9] == ('ok', 'slept 1000ms')
    pins = [l.split(' ', 1)[1] for l in lines(d, 'pins.txt')]
    assert pins == ['pin 5 1', 'led 1', 'led 0', 'led 1', 'led 0', 'pin 4 1', 'pin 4 0']


def test_an_action_s_outcome_is_recorded_once_whatever_it_returns(tmp_path):
    # An action returning a sensor dump of 3 KB (its record keeps the
    # first _OUTPUT_MAX characters), or an object whose str() raises: each ran
    # once and has its outcome. Before: the record's cleaning built a list
    # of every character (a MemoryError), and str() ran outside the
    # action's try; the pass gave up after the action, and every pass
    # after ran it again (the same instance, once a minute).
    user = '''
def _count(name):
    f = open("/calls.txt", "a")
    f.write(name + "\\n")
    f.close()

def dump():
    _count("dump")
    return "x" * 3000

class _Odd:
    def __str__(self):
        raise ValueError("no text")

def odd():
    _count("odd")
    return _Odd()
'''
    jobs = ['each 2026-12-01T06:00Z dump', 'each 2026-12-01T06:01Z odd']
    d = make_flash(str(tmp_path), jobs=jobs, actions=user)
    run(d, 'runtime.main(until=%d)' % (T0 + 9 * H), heap=HEAP)
    assert sorted(lines(d, 'calls.txt')) == ['dump', 'odd']
    res = {r['id']: (r['outcome'], r['text']) for r in own_results(d, 'dev-1') if r['outcome'] != 'run'}
    assert res[jid(jobs[0])] == ('ok', 'x' * jobline._OUTPUT_MAX)
    assert res[jid(jobs[1])] == ('err', 'ValueError: no text')


def test_a_full_flash_stops_no_loop_and_runs_no_instance_twice(tmp_path):
    # A user's action logging readings to the flash fills it (a board's
    # LittleFS, tests/ramflash.py), and the records after it find no room,
    # then some (LittleFS frees blocks as files are rewritten). Before, the
    # loop ended on the wake index's write: main.py over, the board dead
    # until someone resets it. Now the status says the flash is full, an
    # outcome that could not be written is written a minute later (no
    # action starts before it), and every instance has one outcome.
    user = '''
def fill():
    f = open("/calls.txt", "a")
    f.write("fill\\n")
    f.close()
    f = open("/readings.txt", "a")
    try:
        while True:
            f.write("20.5C " * 40)
            f.flush()
    except OSError:
        pass
    f.close()
    return "flash full"
'''
    jobs = ['each 2026-12-01T06:00Z fill', 'each 2026-12-01T06:00Z log tick ; every=10m']
    d = make_flash(str(tmp_path), jobs=jobs, actions=user)
    env = {'SPORADIC_RAM_FLASH': '640'}
    st, _ = run(d, 'runtime.main(until=%d)' % (T0 + 8 * H), env=env, heap='1M')
    assert st['error'].endswith(': the flash is full'), st['error']
    assert lines(d, 'calls.txt') == ['fill']
    assert outcomes(d, 'dev-1', jid(jobs[0])) == {0: ['ok']}
    ticks = outcomes(d, 'dev-1', jid(jobs[1]))
    # each instance that ran has its one outcome (before the guard: the
    # ticks cut off by the full flash ran and left none)
    assert sorted(ticks) == list(range(len(ticks))) and len(ticks) > 5, ticks
    assert all(len(v) == 1 for v in ticks.values()), ticks
    assert ticks[0] == ['ok'] and ['err'] in ticks.values()   # the log action's own write failed
    os.remove(os.path.join(d, 'readings.txt'))   # room again (and a restart)
    st, _ = run(d, 'runtime.main(until=%d)' % (T0 + 9 * H), start=T0 + 8 * H, env=env, heap='1M')
    assert lines(d, 'calls.txt') == ['fill'] and st['error'] == ''
    ticks = outcomes(d, 'dev-1', jid(jobs[1]))
    assert ticks[max(ticks)] == ['ok'] and max(ticks) >= 17, ticks
    assert all(len(v) == 1 for v in ticks.values()), ticks


def test_broken_actions_module_is_reported(tmp_path):
    jobs = ['each 2026-12-01T06:00Z greet x', 'each 2026-12-01T06:01Z log fine']
    d = make_flash(str(tmp_path), jobs=jobs, actions='def greet(:\n')
    run(d, heap=HEAP_BIG, body='runtime.main(until=%d)' % (T0 + D))
    res = {r['id']: (r['outcome'], r['text']) for r in own_results(d, 'dev-1') if r['outcome'] != 'run'}
    assert res[jid(jobs[0])][0] == 'err' and 'actions.py: SyntaxError' in res[jid(jobs[0])][1]
    assert res[jid(jobs[1])] == ('ok', 'fine')


def test_retry_reruns_failed_instance(tmp_path):
    user = '''
n = [0]
def flaky():
    n[0] += 1
    if n[0] < 3:
        raise OSError("try %d" % n[0])
    return "made it"
'''
    job = 'each 2026-12-01T06:00Z flaky ; retry=3'
    job2 = 'each 2026-12-01T06:00Z boom2 ; retry=1'
    d = make_flash(str(tmp_path), jobs=[job, job2], actions=user + 'def boom2():\n    raise OSError("no")\n')
    run(d, 'runtime.main(until=%d)' % (T0 + D))
    assert outcomes(d, 'dev-1', jid(job)) == {0: ['err', 'err2', 'ok3']}
    assert outcomes(d, 'dev-1', jid(job2)) == {0: ['err', 'err2']}


def test_cancelled_job_never_runs(tmp_path):
    job = 'each 2026-12-01T06:00Z log cancelled ; every=1d'
    j = jid(job)
    d = make_flash(str(tmp_path), jobs=[job, j + ' cancel'])
    st, _ = run(d, 'runtime.main(until=%d)' % (T0 + 3 * D))
    assert actlog(d) == {} and st['jobs'] == 0


def test_reset_action_records_ok_then_reboots(tmp_path):
    job = 'each 2026-12-01T06:00Z reset'
    job2 = 'each 2026-12-01T07:00Z log after'
    d = make_flash(str(tmp_path), jobs=[job, job2])
    _, p = run(d, 'runtime.main(until=%d)' % (T0 + D))
    assert p.returncode == 0
    assert outcomes(d, 'dev-1', jid(job)) == {0: ['ok']}
    assert actlog(d) == {}           # the board reset before 07:00
    run(d, 'runtime.main(until=%d)' % (T0 + D))      # boots again
    assert outcomes(d, 'dev-1', jid(job)) == {0: ['ok']}
    assert actlog(d) == {jid(job2) + '.0': 1}


def test_bad_lines_quarantined_good_kept(tmp_path):
    d = make_flash(str(tmp_path), jobs=['each 2026-12-01T06:00Z log good'])
    body = 'from sporadic.device import storesync\nprint("RECV", storesync.receive(rt.store, ["each 2026-13-01T06:00Z log bad", "any:2 2026-12-01T06:00Z x", "# c", "each 2026-12-01T07:00Z log also"]))\nruntime.main(until=%d)' % (T0 + D)
    st, p = run(d, body)
    assert 'RECV (1, 2)' in p.stdout
    q = lines(d, 'quar.txt')
    assert len(q) == 2 and 'month' in q[0] and 'P out of range' in q[1]
    assert st['quarantined'] == 2
    assert sorted(l.split(' ', 1)[1] for l in lines(d, 'actlog.txt')) == ['also', 'good']


def test_status_and_outbox_ack(tmp_path):
    jobs = ['each 2026-12-01T00:00Z log t ; every=10m']
    d = make_flash(str(tmp_path), jobs=jobs)
    body = '''
runtime.main(until=%d)
from sporadic.device import storesync
top = storesync.seal(rt.store)
mine = 0
for l in storesync.outbox(rt.store, top):
    if ' r dev-1 ' in l and l.split()[5] != 'run':
        mine += 1
print('OUT', top, mine)
print('ACK', storesync.ack(rt.store, top), rt.store.out_seqs())
''' % (T0 + 2 * D)
    st, p = run(d, heap=HEAP_BIG, body=body)
    out = [l for l in p.stdout.splitlines() if l.startswith('OUT ')][0].split()
    # every outcome record, 144 a day (a `run` record before its outcome is
    # left out once the outbox is packed: device/outbox.py)
    assert int(out[1]) >= 2 and int(out[2]) == 2 * 144
    ack = [l for l in p.stdout.splitlines() if l.startswith('ACK ')][0].split(' ', 2)
    assert 1 <= int(ack[1]) <= int(out[1]) and ack[2] == '[]'   # outbox files removed (packed: fewer than segments)
    s = st['store']
    assert s['compactions'] >= 2 and s['outbox'] == 0 and s['log_bytes'] == 0
    assert st['last'][-1].split()[5] == 'ok' and len(st['last']) == 5
    # the folded file keeps one result per host: it does not grow with runs
    assert len(lines(d, 'jobs.txt')) == 2


def test_a_small_heaps_loop_holds_no_compaction_setup_or_record_parser_between_passes(tmp_path):
    # #31: the compaction (device/fold.py and core/merge.py's rules), the
    # boot's set-up (device/rtinit.py), the host records' scan and the
    # parser's rare half (jobtext: a result parsed) are in RAM only while
    # used: after a day of passes with compactions, the loop holds none
    # of them, and what a pass needs (core/order.py) stays
    jobs = ['each 2026-12-01T06:00Z log x ; every=10m']
    d = make_flash(str(tmp_path), jobs=jobs)
    body = '''runtime.main(until=%d)
import sys
print('LOADED', ' '.join(m for m in ('sporadic.device.fold', 'sporadic.core.merge', 'sporadic.device.rtinit',
                                      'sporadic.device.hostscan', 'sporadic.core.jobtext',
                                      'sporadic.core.order') if m in sys.modules))
''' % (T0 + D)
    st, p = run(d, body)
    loaded = [l for l in p.stdout.splitlines() if l.startswith('LOADED')][0].split()[1:]
    assert st['store']['compactions'] >= 2
    assert loaded == ['sporadic.core.order']
    acts = actlog(d)   # every instance from 06:00 to the day's end ran, once
    assert len(acts) == 18 * 6 and set(acts.values()) == {1}


def test_torn_log_line_is_dropped_and_quarantined(tmp_path):
    job = 'each 2026-12-01T06:00Z log x ; every=1d'
    d = make_flash(str(tmp_path), jobs=[job])
    run(d, 'runtime.main(until=%d)' % (T0 + D))
    with open(os.path.join(d, 'log.txt'), 'a') as f:
        f.write(jid(job) + ' r dev-1 1 17961')        # power lost mid-line
    st, _ = run(d, 'runtime.main(until=%d)' % (T0 + 2 * D))
    assert 'dropped a torn line from log.txt' in st['store']['recovered']
    assert st['quarantined'] == 1 and 'torn' in lines(d, 'quar.txt')[0]
    assert actlog(d) == {jid(job) + '.0': 1, jid(job) + '.1': 1}


def test_a_small_heap_lets_a_pass_code_go_and_keeps_the_user_actions(tmp_path):
    # #31: on a small heap (below runtime.KEEP_INDEX_CODE) the actions, the
    # group scanner and the MAC leave RAM once a pass is done, so the wake
    # index's work after it has their room; /actions.py stays imported (its
    # state lives on from one run to the next)
    user = 'n = 0\n\ndef count():\n    global n\n    n += 1\n    return n\n'
    jobs = ['each 2026-12-01T06:00Z count ; every=1h']
    d = make_flash(str(tmp_path), jobs=jobs, actions=user)
    body = '''runtime.main(until=%d)
import sys
print('LOADED', ' '.join(m for m in ('sporadic.device.actions', 'sporadic.core.groups', 'sporadic.core.hmac',
                                      'actions') if m in sys.modules))
''' % (T0 + 10 * H)
    st, p = run(d, body)
    loaded = [l for l in p.stdout.splitlines() if l.startswith('LOADED')][0].split()[1:]
    assert loaded == ['actions']
    oks = sorted((r['k'], r['text']) for r in own_results(d, 'dev-1') if r['outcome'] == 'ok')
    assert [t for _, t in oks] == ['1', '2', '3', '4']
