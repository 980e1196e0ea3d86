"""Store integrity (issue 12): a store file that is not what the store last
wrote (its stamp, size and sha256, does not match) is handled as an
untrusted delivery in a signed fleet: the fleet-authored lines must be
covered by a verified batch, log.txt holds only this board's own records
under its MAC, the rest is quarantined ("edited FILE: reason") and never
runs; the good lines are kept. A power cut is not an edit.

The boards are set up as a user sets one up: `companion init`, `add`, then
`companion image --board unix` (the image's files are the board's flash
folder here); they run on the MicroPython unix port with the step clock
(tests/devboot.py), started by sporadic.boot as main.py starts them. The
edits are file writes on the flash, what `mpremote fs cp` does; the last
test makes them with mpremote itself, through a virtual board's REPL, on a
board set up with `companion deploy` and synced with `companion sync`.
"""
import json
import os
import shutil
import subprocess
import sys

import pytest

from companion.make import image
from sporadic.core import hmac as shmac
from sporadic.core import jobline
from sporadic.core import outpack
from sporadic.core.timefmt import format_time
from tests.devutil import boot, lines, actlog, wait_for, T0
from tests.test_e2e import results

pytestmark = pytest.mark.needs('micropython', 'mpy-cross')

D = 86400
HEAP = '112K'    # a signed re-check (trust, batch, rsa) on the 64-bit port, then the status read's imports
                 # (syncsrv, storesync, trust) on top of the loop's: 96K ran short in 2 of 12 runs (random keys)
JOB_A = 'each 2026-12-01T06:00Z log hello ; every=1d'
JOB_B = 'each 2026-12-01T07:00Z log other ; every=1d'
DRIVER = '''
import gc, json, sys
from sporadic.device import boot
boot.main(until=%d)
gc.collect()      # the loop's garbage, before the status read compiles syncsrv
from sporadic.device import syncsrv
sys.stdout.write('STATUS ')
json.dump(syncsrv.status(), sys.stdout)
print()
'''


def companion(fleet, *argv):
    p = subprocess.run([sys.executable, '-m', 'companion.cli', '--fleet', fleet] + list(argv),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, (argv, p.stdout, p.stderr)
    return p.stdout


def provisioned(tmp, host='pump-1', insecure=False, jobs=(JOB_A, JOB_B)):
    """(flash folder, fleet folder, {job text: id}): `companion init`,
    `add`, `image --board unix`, the image's files laid out as the flash."""
    fleet = str(tmp / 'fleet')
    companion(fleet, 'init', *(['--insecure'] if insecure else []))
    ids = {j: companion(fleet, 'add', j).strip() for j in jobs}
    img = str(tmp / 'fs.bin')
    companion(fleet, 'image', '--board', 'unix', '--id', host, '-o', img)
    with open(img, 'rb') as f:
        found = image.read_image(f.read(), image.geometry('unix'))
    flash = str(tmp / host)
    for path, data in found.items():
        p = os.path.join(flash, path.lstrip('/'))
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, 'wb') as f:
            f.write(data)
    return flash, fleet, ids


def run(flash, until, env=None, heap=HEAP, check=True):
    # A board that ran out of memory where its loop could not catch it
    # resets itself (boot.main's last resort; on this port the process ends)
    # and boots again, as a board does: its next boot's status is read. On
    # the 64-bit port at HEAP a compaction after a recovery did so in about
    # one run of test_power_cuts_are_not_reported_as_edits in eight.
    for _ in range(3):
        p = boot(flash, DRIVER % until, start=T0, env=env, heap=heap, check=check)
        st = None
        for l in p.stdout.splitlines():
            if l.startswith('STATUS '):
                st = json.loads(l[7:])
        if st is not None or p.returncode != 0 or 'MemoryError' not in p.stdout:
            break
    return st, p


def cfg(flash):
    with open(os.path.join(flash, 'cfg.json')) as f:
        return json.load(f)


def result(jid, host, k, outcome, secret=None, text='done'):
    r = jobline.Result(jid, host, k, T0 + 7 * 3600, outcome, 1, '-', text)
    if secret:
        r.mac = shmac.mac_result(secret, r.line())
    return r.line()


def edit(flash, name, old, new):
    path = os.path.join(flash, name)
    with open(path) as f:
        text = f.read()
    assert old in text
    with open(path, 'w') as f:
        f.write(text.replace(old, new))


def append(flash, name, *new):
    with open(os.path.join(flash, name), 'a') as f:
        f.write(''.join(l + '\n' for l in new))


def quarantined(flash):
    return lines(flash, 'quar.txt')


def held(flash):
    """Every record line on the board (jobs.txt, logs, outbox)."""
    out = lines(flash, 'jobs.txt') + lines(flash, 'log.txt') + lines(flash, 'in.txt')
    od = os.path.join(flash, 'out')
    for n in (os.listdir(od) if os.path.isdir(od) else []):
        got = lines(flash, os.path.join('out', n))
        out += list(outpack.unpack(got)) if n[0] == 'p' else got      # packed: as the board hands it over
    return out


@pytest.mark.slow
def test_edited_and_added_job_lines_are_refused_the_others_run(tmp_path):
    flash, _, ids = provisioned(tmp_path)
    a, b = ids[JOB_A], ids[JOB_B]
    edit(flash, 'jobs.txt', 'log other', 'log pwned')                        # rewritten in an IDE
    append(flash, 'jobs.txt', 'each 2026-12-01T06:30Z log added ; every=1d')  # hand-written, unsorted
    st, _ = run(flash, T0 + D)
    ran = actlog(flash)
    assert ran == {a + '.0': 1}, ran                                           # the untouched job ran
    assert not any('pwned' in l or 'added' in l for l in lines(flash, 'actlog.txt'))
    q = quarantined(flash)
    assert len(q) == 2 and all(l.startswith('edited jobs.txt: not signed: ') for l in q), q
    assert any('log pwned' in l for l in q) and any('log added' in l for l in q)
    assert 'jobs.txt not as this store wrote it: re-imported, 2 line(s) refused' in st['store']['recovered']
    assert st['quarantined'] == 2 and any('log pwned' in r for r in st['trust']['refusals'])
    # the good lines are kept (the batch records too), the refused ones are gone
    j = lines(flash, 'jobs.txt')
    # (one batch record: the seal's slot 1 covers both adds and the board's
    # host line, docs/security.md#seals)
    assert any(l.startswith(a + ' each ') for l in j) and sum(l.startswith('.b ') for l in j) == 1
    assert not any('pwned' in l or 'added' in l for l in j)
    # stamped again: the next boot opens it as its own
    st, _ = run(flash, T0 + 2 * D)
    assert st['store']['recovered'] == [] and st['quarantined'] == 2
    assert actlog(flash) == {a + '.0': 1, a + '.1': 1}


@pytest.mark.slow
def test_lines_appended_to_the_log_are_refused(tmp_path):
    flash, _, ids = provisioned(tmp_path)
    a, b = ids[JOB_A], ids[JOB_B]
    run(flash, T0 + 6 * 3600 + 60)                 # A.0 runs: its outcome is in log.txt
    mine = [l for l in lines(flash, 'log.txt') if ' r pump-1 ' in l]
    assert len(mine) == 1                          # (its start was run.txt: gone with the outcome)
    secret = cfg(flash)['secret']
    forged = [result(b, 'pump-1', 0, 'ok', '11' * 32),        # "B.0 done": it would never run
              result(b, 'pump-1', 0, 'ok'),                   # the same without a MAC
              result(b, 'pump-9', 0, 'ok', '22' * 32),        # another board's, in this board's log
              jobline.canonical('each 2026-12-01T06:30Z log forged')]   # a job line
    append(flash, 'log.txt', *forged)
    st, _ = run(flash, T0 + D)
    assert actlog(flash) == {a + '.0': 1, b + '.0': 1}        # B.0 ran: the forged "ok" did not count
    q = quarantined(flash)
    assert len(q) == 4 and all(l.startswith('edited log.txt: ') for l in q), q
    assert 'bad MAC: a result of pump-1 that pump-1 did not write' in q[0]
    assert 'bad MAC' in q[1] and 'a result of pump-9 in the log of pump-1' in q[2]
    assert 'not a record of this board' in q[3]
    rec = held(flash)
    assert not set(forged) & set(rec)
    assert set(mine) <= set(rec)                             # its own records stay
    assert all(shmac.check_line(secret, l) for l in rec if ' r pump-1 ' in l)
    assert st['quarantined'] == 4


@pytest.mark.slow
def test_an_action_cut_before_its_outcome_is_on_record_under_its_mac_and_not_run_again(tmp_path):
    """#31: a completion writes one record to the log, its outcome; the
    action's start is run.txt (Store.started), gone with the outcome. A
    board cut during the action (run.txt left on its flash) opens its store
    with the instance's `run` record under its own MAC (recover.py), then
    records it `err interrupted` and never runs it: at most once."""
    flash, _, ids = provisioned(tmp_path)
    a = ids[JOB_A]
    with open(os.path.join(flash, 'run.txt'), 'w') as f:
        f.write('%s 0 %d 1 e\n' % (a, T0 + 6 * 3600))   # what Store.started wrote before the cut
    st, _ = run(flash, T0 + D)
    assert a + '.0' not in actlog(flash)                      # not run again
    assert ids[JOB_B] + '.0' in actlog(flash)
    rec = [l for l in held(flash) if l.startswith(a + ' r pump-1 0 ')]
    assert any(l.split()[5] == 'err' and l.endswith(' interrupted') for l in rec), rec
    assert all(shmac.check_line(cfg(flash)['secret'], l) for l in rec), rec
    # an `each` job's records carry no board signature, the recovered one
    # neither: a sync's store open loads no signing code for it (a 128K
    # board's sync after a cut action then ran out of memory on S)
    assert cfg(flash).get('sign') and not any(jobline.board_signed(l.split()[6]) for l in rec), rec
    assert not os.path.exists(os.path.join(flash, 'run.txt'))
    assert st['quarantined'] == 0
    assert 'an action was cut: its run record written' in st['store']['recovered']


def test_a_cut_actions_record_is_written_without_the_parser(tmp_path):
    """The open that finds run.txt writes the `run` record, under the
    board's MAC, without loading the parser: its names (its functions',
    `default_within` one of them) would stay in the qstr pools of the
    session that opened the store, a small board's sync (a month's `G` ran
    out of memory at 62K for them, docs/budgets.md#27)."""
    flash, _, ids = provisioned(tmp_path)
    a = ids[JOB_A]
    with open(os.path.join(flash, 'run.txt'), 'w') as f:
        f.write('%s 0 %d 1 e\n' % (a, T0 + 6 * 3600))   # what Store.started wrote before the cut
    code = '''
import micropython
from sporadic.device import store
st = store.open_store()
print('NOTES', st.notes)
micropython.qstr_info(1)
'''
    p = boot(flash, code, start=T0 + D, heap=HEAP)
    assert 'an action was cut: its run record written' in p.stdout, p.stdout[-2000:]
    assert 'Q(default_within)' not in p.stdout
    rec = [l for l in lines(flash, 'log.txt') if l.startswith(a + ' r ')]
    assert [l.split()[:6] for l in rec] == [[a, 'r', 'pump-1', '0', str(T0 + 6 * 3600), 'run']], rec
    assert shmac.check_line(cfg(flash)['secret'], rec[0]) and len(rec[0].split()) == 7
    assert not os.path.exists(os.path.join(flash, 'run.txt'))


@pytest.mark.slow
def test_lines_appended_to_in_txt_and_a_planted_jobs_new_are_refused(tmp_path):
    flash, _, ids = provisioned(tmp_path)
    a = ids[JOB_A]
    via_in = jobline.canonical('each 2026-12-01T06:10Z log via-in ; every=1d')
    append(flash, 'in.txt', via_in)                           # "received by a sync"
    with open(os.path.join(flash, 'jobs.new'), 'w') as f:     # "a compaction in flight" that cancels A
        f.write(''.join(l + '\n' for l in sorted(lines(flash, 'jobs.txt') + [a + ' cancel'])))
    st, _ = run(flash, T0 + D)
    assert actlog(flash) == {a + '.0': 1, ids[JOB_B] + '.0': 1}
    q = quarantined(flash)
    assert any(l.startswith('edited in.txt: not signed: ') and 'via-in' in l for l in q), q
    assert any(l.startswith('edited jobs.new: not signed: ') and a + ' cancel' in l for l in q), q
    assert len(q) == 2
    assert not any('via-in' in l or l == a + ' cancel' for l in held(flash))
    assert not os.path.exists(os.path.join(flash, 'jobs.new'))


def test_the_open_checks_the_boards_own_results_by_their_mac_without_the_parser(tmp_path):
    """#31: a signed board's log holds its results under its MAC; the open
    checks each one's MAC and loads no parser for them (its names would
    stay in the qstr pool of a small board's sync session). A line that
    fails the check is still quarantined."""
    flash, _, ids = provisioned(tmp_path)
    run(flash, T0 + 6 * 3600 + 60)                 # A.0 runs: its outcome is in log.txt
    assert any(' r pump-1 ' in l for l in lines(flash, 'log.txt'))
    code = '''
from sporadic.device import recover, store
parsed = []
valid = recover._valid
def counted(line):
    parsed.append(line)
    return valid(line)
recover._valid = counted
st = store.open_store()
print('PARSED', len(parsed), len(st.notes))
'''

    def opened():
        p = boot(flash, code, start=T0 + D, heap=HEAP)
        (line,) = [l for l in p.stdout.splitlines() if l.startswith('PARSED ')]
        return [int(x) for x in line.split()[1:]]

    assert opened() == [0, 0]
    append(flash, 'log.txt', result(ids[JOB_B], 'pump-1', 0, 'ok', '11' * 32))   # not under its MAC
    opened()
    assert any(l.startswith('edited log.txt: bad MAC') for l in quarantined(flash))


# board code: the store's reads counted (`reads`: the paths read_lines opened)
COUNTED_READS = '''
from sporadic.device import store
reads = []
plain = store.read_lines
def counted(path, torn=False):
    reads.append(path)
    return plain(path, torn)
store.read_lines = counted
'''


def provisioned_with_later_jobs(tmp_path):
    """A provisioned board's flash, and six jobs added after it: the fleet's
    seal records and the six lines, as a sync would deliver them."""
    flash, fleet, _ = provisioned(tmp_path)
    for n in range(6):
        companion(fleet, 'add', 'each 2026-12-01T0%d:30Z log later%d ; every=1h' % (n + 1, n))
    with open(os.path.join(fleet, 'jobs.txt')) as f:
        got = f.read().splitlines()
    return flash, [l for l in got if l.startswith('.b ')], [l for l in got if 'later' in l]


@pytest.mark.slow
def test_unchanged_store_opens_without_a_pass(tmp_path):
    """The stamp short-cut: opening a store whose files match their stamps
    reads no line of jobs.txt (one sha256 over it) and writes nothing."""
    flash, _, _ = provisioned(tmp_path)
    code = COUNTED_READS + '''
st = store.open_store()
print('OPEN', reads.count('jobs.txt') + reads.count('jobs.bad'), store.ops, len(st.notes))
'''
    def open_once():
        p = boot(flash, code, start=T0, heap=HEAP)
        (line,) = [l for l in p.stdout.splitlines() if l.startswith('OPEN ')]
        return [int(x) for x in line.split()[1:]]

    assert open_once() == [0, 1, 0]              # as the image wrote it (makes out/)
    assert open_once() == [0, 0, 0]
    run(flash, T0 + D)                            # runs, compacts (jobs.ok written by the store)
    assert open_once() == [0, 0, 0]
    edit(flash, 'jobs.txt', 'log other', 'log othex')   # same size, other bytes
    reads, ops, notes = open_once()
    assert reads >= 1 and ops > 0 and notes == 1
    assert open_once() == [0, 0, 0]


@pytest.mark.slow
def test_torn_log_tail_is_recovered_not_reported_as_an_edit(tmp_path):
    flash, _, ids = provisioned(tmp_path)
    a = ids[JOB_A]
    run(flash, T0 + 6 * 3600 + 60)
    with open(os.path.join(flash, 'log.txt'), 'a') as f:
        f.write(a + ' r pump-1 1 17961')          # power lost mid-line
    with open(os.path.join(flash, 'in.txt'), 'a') as f:
        f.write('.h pum')                        # and mid-receive
    st, _ = run(flash, T0 + D + 6 * 3600 + 60)
    assert 'dropped a torn line from log.txt' in st['store']['recovered']
    assert not any('not as this store wrote it' in n for n in st['store']['recovered']), st['store']
    q = quarantined(flash)
    assert q and all(': torn last line (power loss while writing): ' in l for l in q), q
    assert not any(l.startswith('edited ') for l in q)
    assert actlog(flash) == {a + '.0': 1, a + '.1': 1, ids[JOB_B] + '.0': 1}


@pytest.mark.slow
def test_power_cuts_are_not_reported_as_edits(tmp_path):
    """A signed store ended at flash mutations through runs, compactions and
    a signed delivery: each time it reopens with nothing re-imported and
    nothing quarantined as edited (jobs.nok carries a compaction's stamp
    across its last renames; in.ok is written after each delivery)."""
    # a tick every 5 minutes: one record a run (#31), several compactions in the 12 hours
    flash0, fleet, ids = provisioned(tmp_path, jobs=(JOB_A, 'each 2026-12-01T00:00Z log tick ; every=5m'))
    # a delivery signed by the fleet after the image was made
    companion(fleet, 'add', 'each 2026-12-01T03:00Z log later ; every=1h')
    with open(os.path.join(fleet, 'jobs.txt')) as f:
        fleet_lines = f.read().splitlines()
    code = '''
from sporadic.device import store, clock, storesync
st = store.open_store()
storesync.receive(st, %r, 'peer')
from sporadic.device import boot
boot.main(until=%d)
''' % (fleet_lines, T0 + 12 * 3600)
    d = str(tmp_path / 'count')
    shutil.copytree(flash0, d)
    p = boot(d, code + 'print("OPS", store.ops, st.compactions)\n', start=T0, heap=HEAP)
    total, compactions = [int(x) for x in p.stdout.split('OPS')[1].split()[:2]]
    assert compactions >= 3
    for i, n in enumerate(range(1, total, max(1, total // 30))):
        d = str(tmp_path / ('c%d' % i))
        shutil.copytree(flash0, d)
        p = boot(d, code, start=T0, heap=HEAP, env={'SPORADIC_CRASH_AFTER': str(n)}, check=False)
        assert p.returncode in (0, 77), p.stderr[-2000:]
        st, _ = run(d, T0 + 12 * 3600)
        notes = st['store']['recovered']
        assert not any('not as this store wrote it' in x for x in notes), (n, notes)
        assert not any(l.startswith('edited ') for l in quarantined(d)), (n, quarantined(d))
        # the 06:00 run happened, or the cut fell between its start record and
        # its action: then it is not run again (at most once) and its
        # outcome says so, nothing lost
        ran = ids[JOB_A] + '.0' in actlog(d)
        cut = [l for l in held(d) if l.startswith(ids[JOB_A] + ' r ') and l.split()[3] == '0'
               and l.split()[5] == 'err' and l.endswith(' interrupted')]
        assert ran or cut, (n, actlog(d), [l for l in held(d) if l.startswith(ids[JOB_A])])


@pytest.mark.slow
def test_in_txt_is_stamped_as_a_chain_of_its_deliveries(tmp_path):
    """Each delivery stamps only what it appended to in.txt (in.ok: the
    chain of its pieces, docs/device.md#stamps): a sync's P does not hash
    the whole file again. The store reopens with the three deliveries as
    they were; an edit of the middle one (same size) is caught at the open."""
    flash, fleet, ids = provisioned(tmp_path)
    for n in range(3):
        companion(fleet, 'add', 'each 2026-12-01T0%d:30Z log later%d ; every=1h' % (n + 1, n))
    with open(os.path.join(fleet, 'jobs.txt')) as f:
        got = [l for l in f.read().splitlines() if l and 'later' in l or l.startswith('.b ')]
    parts = [got[:len(got) // 3], got[len(got) // 3:2 * len(got) // 3], got[2 * len(got) // 3:]]
    code = """
from sporadic.device import store, storesync
st = store.open_store()
for part in %r:
    print('TOOK', storesync.receive(st, part, 'peer'))
print('INOK', open('in.ok').read())
""" % (parts,)
    p = boot(flash, code, start=T0, heap=HEAP)
    assert p.stdout.count('TOOK') == 3 and 'TOOK (0,' not in p.stdout and ', 0)' in p.stdout, p.stdout
    ok = p.stdout.split('INOK ')[1].split()
    with open(os.path.join(flash, 'in.txt'), 'rb') as f:
        body = f.read()
    ends = [int(x) for x in ok[0].split(',')]
    assert len(ends) == 3 and ends[-1] == len(body), ok
    again = """
from sporadic.device import store
st = store.open_store()
print('OPENED', st.in_size, st.notes)
"""
    p = boot(flash, again, start=T0, heap=HEAP)
    assert 'OPENED %d []' % len(body) in p.stdout, p.stdout
    i = body.index(b'later', ends[0])
    assert i < ends[1]
    with open(os.path.join(flash, 'in.txt'), 'wb') as f:
        f.write(body[:i] + b'latex' + body[i + 5:])      # the middle delivery, same size
    p = boot(flash, again, start=T0, heap=HEAP)
    assert 'OPENED %d []' % len(body) not in p.stdout, p.stdout
    assert any(l.startswith('edited in.txt: ') and 'latex' in l for l in quarantined(flash)), quarantined(flash)


@pytest.mark.slow
def test_a_sync_session_keeps_its_verified_seals_for_its_next_delivery(tmp_path):
    """A sync session with no loop on a roomy heap (a Pico's) keeps the
    Verifier of its first delivery for the next: the lines of a second P
    that the first P's seal covers are taken without reading the store's
    seals again (seals.py is never loaded: ~0.27 s of a Pico's first sync
    of 300 jobs, docs/budgets.md#27); once the store compacts, the next
    delivery starts a fresh Verifier and looks its lines up in the seals
    the store holds, which cover them too."""
    flash, seals, later = provisioned_with_later_jobs(tmp_path)
    parts = [seals + later[:2], later[2:4], later[4:]]
    code = """
import sys
from sporadic.device import store, storesync
st = store.open_store()
for i, part in enumerate(%r):
    if i == 2:
        st.compact()
    print('TOOK', storesync.receive(st, part, 'sync', keep=True), 'sporadic.device.seals' in sys.modules)
""" % (parts,)
    p = boot(flash, code, start=T0, heap='192K')
    took = [l.split(' ', 1)[1] for l in p.stdout.splitlines() if l.startswith('TOOK ')]
    assert took == ['(%d, 0) False' % (len(seals) + 2), '(2, 0) False', '(2, 0) True'], p.stdout


@pytest.mark.slow
def test_a_sync_session_keeps_its_pending_lines_for_the_compaction_after_it(tmp_path):
    """On a roomy heap the lines a sync session's deliveries took stay in
    RAM as the store's pending lines (carry.pending): the compaction after
    them (the sync's next S, N or G) does not read in.txt again (a Pico's
    first sync of 300 jobs: 0.18 s), and folds in every line, in order."""
    flash, seals, later = provisioned_with_later_jobs(tmp_path)
    code = COUNTED_READS + """
from sporadic.device import storesync
st = store.open_store()
for part in %r:
    storesync.receive(st, part, 'sync', keep=True)
inp = sorted(plain('in.txt'))
del reads[:]
print('PENDING', st.pending() == inp, len(inp))
st.compact()
print('READ', reads.count('in.txt'), st.in_size)
""" % ([seals + later[:3], later[3:]],)
    p = boot(flash, code, start=T0, heap='192K')
    assert 'PENDING True %d' % (len(seals) + len(later)) in p.stdout, p.stdout
    assert 'READ 0 0' in p.stdout, p.stdout
    held = lines(flash, 'jobs.txt')
    assert all(l in held for l in later) and held == sorted(held)


@pytest.mark.slow
def test_insecure_fleet_takes_an_edited_file_as_before(tmp_path):
    flash, _, ids = provisioned(tmp_path, insecure=True)
    edit(flash, 'jobs.txt', 'log other', 'log edited')
    append(flash, 'jobs.txt', 'each 2026-12-01T06:30Z log added')
    st, _ = run(flash, T0 + D)
    ran = {l.split(' ', 1)[1] for l in lines(flash, 'actlog.txt')}
    assert ran == {'hello', 'edited', 'added'}, ran
    assert st['quarantined'] == 0 and st['trust']['mode'].startswith('insecure')
    assert st['store']['recovered'] == ['jobs.txt not as this store wrote it: re-imported, 0 line(s) refused']


def mpremote(port, *args):
    """The tool a person with the cable uses."""
    p = subprocess.run([sys.executable, '-m', 'mpremote', 'connect', port] + list(args),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, (args, p.stdout, p.stderr)
    return p.stdout


@pytest.mark.slow
def test_store_edited_through_the_repl_of_a_deployed_board(world):
    """init, deploy, add, sync; then jobs.txt and log.txt changed through the
    board's REPL with mpremote. The next sync's open re-checks them: the
    edited and added lines are refused and reported (`companion status`),
    never run, nothing the board did not do comes back (`companion
    results`), and the untouched job runs on; the edited job comes back
    from the companion at that sync, as the owner wrote it."""
    c = world.companion
    c('init')
    vb = world.board('pump-1')
    c('deploy', vb.path, '--id', 'pump-1', '-q')
    keep = c('add', 'each +5m log keep ; every=1h within=30m').strip()
    victim = c('add', 'each +5m log victim ; every=1h within=30m').strip()
    c.sync(vb.path)
    wait_for(lambda: actlog_(vb, keep + '.0') and actlog_(vb, victim + '.0'), timeout=60,
             what='both jobs to run once')
    # the person with the cable: jobs.txt out, one line rewritten, one added, back in
    local = os.path.join(str(world.tmp), 'jobs.txt')
    mpremote(vb.path, 'fs', 'cp', ':jobs.txt', local)
    with open(local) as f:
        text = f.read()
    assert victim + ' each ' in text and 'log victim' in text
    due = format_time(world.clock.now() - 60)      # due now, on the board's clock
    forged_job = jobline.canonical('each %s log added-by-hand ; every=1h within=30m' % due)
    with open(local, 'w') as f:
        f.write(text.replace('log victim', 'log pwned') + forged_job + '\n')
    mpremote(vb.path, 'fs', 'cp', local, ':jobs.txt')
    # ... and three lines appended to log.txt: "victim.1 done" (so it would not
    # run), a job line, another board's result
    k = max(instances(vb, victim)) + 1
    forged = [result(victim, 'pump-1', k, 'ok', '11' * 32),
              jobline.canonical('each %s log from-the-log ; every=1h within=30m' % due),
              result(keep, 'pump-9', 0, 'ok', '22' * 32)]
    code = "f = open('log.txt', 'a')\n" + ''.join('f.write(%r)\n' % (l + '\n') for l in forged) + 'f.close()\n'
    mpremote(vb.path, 'exec', code)
    # the next sync (its soft reset opens the store: the check) and the board runs on
    out = c('sync', vb.path)
    assert 'synced pump-1' in out
    st = c.json('status')
    (dev,) = st['devices']
    refusals = '\n'.join(dev['refusals'])
    assert dev['quarantined'] >= 5, dev
    assert 'jobs.txt not as this store wrote it: re-imported, 2 line(s) refused' in dev['recovered'], dev
    text = c('status')
    assert 'pump-1 refused' in text and 'edited' in text
    assert 'pump-1 store: jobs.txt not as this store wrote it' in text
    q = lines(vb.flash_dir, 'quar.txt')
    assert any(l.startswith('edited jobs.txt: not signed') and 'log pwned' in l for l in q), q
    assert any(l.startswith('edited jobs.txt: not signed') and 'added-by-hand' in l for l in q), q
    assert any(l.startswith('edited log.txt: bad MAC') for l in q), q
    assert any(l.startswith('edited log.txt: not a record of this board') and 'from-the-log' in l for l in q), q
    assert any(l.startswith('edited log.txt: a result of pump-9') for l in q), q
    assert 'edited' in refusals
    # the board runs on: keep's next instances, victim as the owner wrote it
    # (a later instance of each: on a loaded machine the sync can outlast an
    # instance's 30-minute window at 600x, 3 s, and the loop then records it
    # missed; the forged `done` of victim.k is refused above, by its MAC)
    k_keep = max(instances(vb, keep))
    wait_for(lambda: max(instances(vb, keep)) > k_keep and max(instances(vb, victim)) >= k,
             timeout=60, what='keep and victim to run after the edit')
    c.sync(vb.path)
    texts = [l.split(' ', 1)[1] for l in lines(vb.flash_dir, 'actlog.txt')]
    assert set(texts) == {'keep', 'victim'}, texts                  # nothing edited or added ran
    rows = results(c)
    assert rows and all(r['verified'] is True for r in rows), [r for r in rows if r['verified'] is not True]
    assert all(r['output'] in ('', 'keep', 'victim') for r in rows), rows
    assert not any(r['host'] == 'pump-9' for r in rows)
    assert {j['job'] for j in c.json('jobs')} == {keep, victim}     # the fleet took nothing in


def actlog_(vb, inst):
    return actlog(vb.flash_dir).get(inst, 0)


def instances(vb, job):
    # the instances of job in the board's action log (-1: none yet)
    return [int(i.split('.')[1]) for i in actlog(vb.flash_dir) if i.startswith(job + '.')] or [-1]


@pytest.mark.slow
def test_the_re_check_feeds_the_watchdog(tmp_path, capsys):
    """A re-check of a changed file is several passes over it: each feeds
    the watchdog as it goes (store.feed every FEED_LINES lines read, every
    8 KB hashed, every 64 digests looked up), as the loop's passes do."""
    from companion import cli
    fleet = str(tmp_path / 'fleet')
    assert cli.main(['--fleet', fleet, 'init']) == 0
    n = 300
    for i in range(n):
        assert cli.main(['--fleet', fleet, 'add', 'each 2026-12-02T06:00Z log j%d ; every=1d' % i]) == 0
    capsys.readouterr()
    img = str(tmp_path / 'fs.bin')
    assert cli.main(['--fleet', fleet, 'image', '--board', 'unix', '--id', 'pump-1', '-o', img]) == 0
    with open(img, 'rb') as f:
        found = image.read_image(f.read(), image.geometry('unix'))
    flash = str(tmp_path / 'pump-1')
    for path, data in found.items():
        p = os.path.join(flash, path.lstrip('/'))
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, 'wb') as f:
            f.write(data)
    code = '''
from sporadic.device import store
feeds = [0]
def feed():
    feeds[0] += 1
store.feed = feed
st = store.open_store()
print('FEEDS', feeds[0], st.quarantined, len(st.notes), st.notes)
'''
    last = [None]

    def feeds():
        p = boot(flash, code, start=T0, heap='128K')
        last[0] = p.stdout
        return [int(x) for x in p.stdout.split('FEEDS')[1].split()[:3]]

    unchanged = feeds()[0]
    edit(flash, 'jobs.txt', 'log j7 ', 'log jX ')
    got, refused, notes = feeds()
    assert (refused, notes) == (1, 1), last[0]
    assert got >= 4 * n // 64 > unchanged, (got, unchanged)
