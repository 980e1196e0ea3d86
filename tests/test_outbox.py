"""The outbox streams (issue #27): a board that ran for weeks without a sync
hands every result over in one sync, in pieces its heap allows; a sync cut
in the middle of the hand-over resumes where it stopped, and nothing is lost
or duplicated. Boards are set up with the product's commands (`companion
init`, `vboard`, `deploy`, `add`, `sync`, `results`), as a user does.

The month runs on the virtual board's step clock (`companion vboard --env
SPORADIC_CLOCK=step`: time moves only when the board sleeps, so a month of
hourly jobs takes the board's own work and no more, about a minute here):
the fastest clock there is, and a deterministic one: a loaded test machine
cannot make the board late, so every instance runs and the count is exact.
"""
import collections
import os
import shutil

import pytest

from companion.sync import outbox, syncer
from companion.fleet.folder import Fleet
from sporadic.core import jobline
from tests.devutil import CLI, boot, outbox_lines, unsettled, wait_for

pytestmark = pytest.mark.needs("micropython", "mpy-cross")

HOST = 'b-1'
JOBS = 10
HOURS = 30 * 24          # a month of hourly instances: 7,200 results
# The cut test's syncs: a heap under 128K takes the outbox in 8 KB pieces
# (outbox.outbox_bytes_for). At 64K a sync of this port's .mpy firmware
# breaks off in the outbox's hand-over (devutil.E2E_HEAP).
SYNC_HEAP = '96K'
# the heap at which this (64-bit) port hands every month over in one sync
# (bench/scale_heap.py --parts month --step 2: 58-62K in 4 fresh months on
# 2026-12-07; 72K before the status after the hand-over was asked again on
# a fresh heap; the state the month's loop stops in and the board's host
# paths move it, docs/budgets.md#27)
MONTH_HEAP_64 = '64K'


def board_time(flash):
    """The step clock's time, read from the board's RTC file (outside the chip)."""
    try:
        with open(os.path.join(flash, 'rtc.txt')) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def run_offline(cli, flash, heap, hours, insecure=False, holds=lambda names: True):
    """A board deployed and synced with JOBS hourly jobs, then left alone
    (no sync) until its clock is `hours` past the jobs' first instance and
    its outbox's file names satisfy `holds`. Returns the jobs' ids and their
    first instance's time."""
    cli('init', '--name', 'outbox', *(['--insecure'] if insecure else []))
    vb = cli.vboard('--id', HOST, '--flash', flash, '--heap', heap, '--env', 'SPORADIC_CLOCK=step')
    cli('deploy', vb.path, '--id', HOST)
    for i in range(JOBS):
        cli('add', 'each +1h log j%d ; every=1h within=1h' % i)
    cli('sync', vb.path)
    jobs = [jobline.parse(l) for l in Fleet(cli.dir).lines() if l[:1] != '.' and l.split()[1] == 'each']
    assert len(jobs) == JOBS
    t0 = jobs[0].t0
    out = os.path.join(flash, 'out')
    wait_for(lambda: board_time(flash) >= t0 + (hours + 1) * 3600
             and holds(os.listdir(out) if os.path.isdir(out) else []), timeout=600, every=0.5,
             what='%d board hours' % hours)
    cli.stop_boards()
    return {j.id for j in jobs}, t0


def month_of(rows, ids):
    # the month's results in `companion results --json` rows: {(job, instance, outcome, verified): times}
    return collections.Counter((r['job'], int(r['instance'].split('.')[1]), r['outcome'], r['verified'])
                               for r in rows if r['job'] in ids and int(r['instance'].split('.')[1]) < HOURS)


def sync_a_copy(tmp_path, cli, flash, heap, ids):
    """The board's flash and the fleet copied as they are, the copy synced
    once on a board with `heap`: the month's results it brought (month_of),
    and whether its outbox was freed."""
    fleet2, flash2 = str(tmp_path / ('fleet-' + heap)), str(tmp_path / ('flash-' + heap))
    shutil.copytree(cli.dir, fleet2)
    shutil.copytree(flash, flash2, symlinks=True)
    cli2 = CLI(fleet2)
    try:
        vb = cli2.vboard('--id', HOST, '--flash', flash2, '--heap', heap)
        out = cli2('sync', vb.path, timeout=600)
        assert 'new result' in out, out
        return month_of(cli2.json('results'), ids), outbox_lines(flash2) == []
    finally:
        cli2.stop_boards()


@pytest.mark.slow
def test_a_month_without_sync_arrives_in_one_sync(tmp_path):
    cli = CLI(str(tmp_path / 'fleet'))
    flash = str(tmp_path / 'flash')
    try:
        ids, t0 = run_offline(cli, flash, '128K', HOURS)
        held = outbox_lines(flash)
        assert len(held) >= JOBS * HOURS            # nothing dropped while the flash has room
        # the same month on a board of MONTH_HEAP_64 (a copy of this one's
        # flash and of the fleet): every result in one sync (#27; it broke
        # off on S at 96K before the sync stopped loading the parser)
        month, freed = sync_a_copy(tmp_path, cli, flash, MONTH_HEAP_64, ids)
        assert len(month) == JOBS * HOURS and set(month.values()) == {1}
        assert {(k[2], k[3]) for k in month} == {('ok', True)} and freed
        vb = cli.vboard('--id', HOST, '--flash', flash, '--heap', '128K')
        out = cli('sync', vb.path, timeout=600)
        assert 'new result' in out, out
        rows = cli.json('results')
        month = collections.Counter((r['job'], int(r['instance'].split('.')[1])) for r in rows
                                    if r['job'] in ids and int(r['instance'].split('.')[1]) < HOURS)
        assert len(month) == JOBS * HOURS == 7200
        assert set(month.values()) == {1}           # each instance once
        kinds = collections.Counter((r['outcome'], r['verified']) for r in rows
                                    if r['job'] in ids and int(r['instance'].split('.')[1]) < HOURS)
        assert kinds == {('ok', True): 7200}, kinds
        # the board freed what the companion confirmed: its outbox is empty
        assert outbox_lines(flash) == []
        with open(os.path.join(cli.dir, 'results.txt')) as f:
            results = f.read().splitlines()
        assert not unsettled(held, results)         # every record it held is in the fleet's history
        st = cli.json('status')
        assert st['devices'][0]['results_dropped'] == 0
    finally:
        cli.stop_boards()


MP32 = os.environ.get('SPORADIC_MICROPYTHON32') or os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'bench', '.mp32', 'micropython')


# A board cut in an action (run.txt on its flash: Store.started) writes the
# action's `run` record as its store opens, which a sync's first `S` does:
# at this heap the parser's import for that record, beside the log check's
# code, ran out of memory (64K passed or not with the flash folder's path:
# the board's host path is in its heap); with the record's text made by
# the outbox's unpacker instead the sync passes at 58K
CUT_HEAP = '63K'


@pytest.mark.slow
def test_a_small_board_cut_in_an_action_syncs_its_run_record(tmp_path):
    """A deployed board whose power was cut while an action ran syncs on a
    small heap: the instance's `run` record, under the board's MAC, reaches
    `companion results`, and nothing else changes."""
    cli = CLI(str(tmp_path / 'fleet'))
    flash = str(tmp_path / 'flash')
    try:
        cli('init', '--name', 'cut')
        vb = cli.vboard('--id', HOST, '--flash', flash, '--heap', '128K')
        cli('deploy', vb.path, '--id', HOST)
        for i in range(JOBS):
            cli('add', 'each +1h log j%d ; every=1h within=1h' % i)
        cli('sync', vb.path)
        cli.stop_boards()
        jobs = sorted((jobline.parse(l) for l in Fleet(cli.dir).lines()
                       if l[:1] != '.' and l.split()[1] == 'each'), key=lambda j: j.id)
        j, k = jobs[0], 5
        with open(os.path.join(flash, 'run.txt'), 'w') as f:
            f.write('%s %d %d 1 e\n' % (j.id, k, j.t0 + k * 3600))     # what Store.started wrote before the cut
        vb = cli.vboard('--id', HOST, '--flash', flash, '--heap', CUT_HEAP)
        out = cli('sync', vb.path, timeout=600)
        assert 'new result' in out, out
        rows = cli.json('results')
        assert [(r['job'], r['instance'], r['outcome'], r['verified']) for r in rows] == \
            [(j.id, '%s.%d' % (j.id, k), 'started', True)]      # its `run` record, as results names it
        assert not os.path.exists(os.path.join(flash, 'run.txt'))
    finally:
        cli.stop_boards()


@pytest.mark.slow
def test_a_64K_board_hands_a_month_over_in_one_sync(tmp_path, monkeypatch):
    """Issue #27: a month of 10 hourly jobs (7,200 results) in one sync of a
    board with a 64 KiB heap. The 32-bit build of the unix port (a board's
    word size: bench/build_micropython32.sh); the 64-bit PyPI port's code
    does not leave the reconciliation room at 64K (docs/budgets.md#27)."""
    if not os.path.isfile(MP32):
        pytest.skip('no 32-bit build at %s: run bench/build_micropython32.sh' % MP32)
    monkeypatch.setenv('SPORADIC_MICROPYTHON', MP32)
    cli = CLI(str(tmp_path / 'fleet'))
    flash = str(tmp_path / 'flash')
    try:
        ids, t0 = run_offline(cli, flash, '128K', HOURS)
        held = outbox_lines(flash)
        assert len(held) >= JOBS * HOURS
        vb = cli.vboard('--id', HOST, '--flash', flash, '--heap', '64K')
        out = cli('sync', vb.path, timeout=600)
        assert 'new result' in out, out
        rows = cli.json('results')
        month = collections.Counter((r['job'], int(r['instance'].split('.')[1]), r['outcome'], r['verified'])
                                    for r in rows
                                    if r['job'] in ids and int(r['instance'].split('.')[1]) < HOURS)
        assert len(month) == JOBS * HOURS == 7200
        assert set(month.values()) == {1}
        assert {(k[2], k[3]) for k in month} == {('ok', True)}
        assert outbox_lines(flash) == []            # freed: the companion confirmed every piece
        with open(os.path.join(cli.dir, 'results.txt')) as f:
            assert not unsettled(held, f.read().splitlines())
    finally:
        cli.stop_boards()


@pytest.mark.slow
def test_outbox_cut_mid_way_resumes(tmp_path):
    """A board with a few days of results (several `O` pieces on a 96K
    heap), synced through a link cut at points spread over the hand-over:
    after the cut, what the fleet holds is a part of the board's records,
    the board still holds the rest, and the next sync completes it: every
    record once, none lost."""
    from tests.test_cable_pull import CutLink
    from companion.vboard.board import VBoard
    cli = CLI(str(tmp_path / 'fleet'))
    flash0 = str(tmp_path / 'flash')
    try:
        ids, t0 = run_offline(cli, flash0, '128K', 5 * 24, insecure=True)
    finally:
        cli.stop_boards()
    # the board's own records: its outbox, and those still in log.txt (the
    # sync seals them into the outbox first); how many wait in the log when
    # the board stops follows the minute the jobs were added at (the outbox
    # alone held 1,197 of 1,210 in runs at one hour of the day)
    held = set(outbox_lines(flash0)) | set(all_own(flash0))
    assert len(held) >= JOBS * 5 * 24

    def point(name, budget):
        d = str(tmp_path / name)
        shutil.copytree(flash0, d + '/flash', symlinks=True)
        shutil.copytree(cli.dir, d + '/fleet', symlinks=True)
        fleet = Fleet(d + '/fleet')
        vb = VBoard(d + '/flash', board_id=HOST, heap=SYNC_HEAP)
        vb.start()
        try:
            link = CutLink(vb.path, budget, lambda link: link.serial.close() or True, timeout=5.0)
            rep = None
            try:
                rep = syncer.sync(fleet, vb.path, progress=False, link=link)
            except Exception:
                pass
            finally:
                link.close()
            got = set(fleet_results(fleet))
            left = set(outbox_lines(d + '/flash'))
            # no record lost at the cut: each is in the fleet or still on the board
            assert not unsettled(held, got | left | set(all_own(d + '/flash')))
            again = syncer.sync(fleet, vb.path, progress=False)
            results = fleet_results(fleet)
            assert len(results) == len(set(results))
            assert not unsettled(held, set(results))
            assert outbox_lines(d + '/flash') == []
            inst = collections.Counter(l.split()[0] + '.' + l.split()[3] for l in results
                                       if l.split()[5] != 'run' and l[:8] in ids)
            assert set(inst.values()) == {1}
            return link.total, link.cut, len(got), rep, again
        finally:
            vb.stop()

    total, cut, _, rep, _ = point('ref', float('inf'))
    assert not cut and rep['new_results'] >= len(held) - JOBS
    partial = 0
    # points from 0.3 (a cut at 0.15 once made the cut link's close raise,
    # in a CI run) up to 3/4 of the reference: one sync of the same flash moves
    # by ~20% in bytes from run to run (58-70 KB seen), and a budget past
    # the sync's own end cuts nothing (0.9 failed so in a CI run)
    for i, frac in enumerate((0.3, 0.5, 0.65, 0.75)):
        _, cut, got, _, again = point('p%d' % i, int(total * frac))
        assert cut
        if 0 < got and again['new_results'] > 0:
            partial += 1        # the cut came mid-way: the next sync took the rest
    assert partial >= 2


def fleet_results(fleet):
    with open(fleet.path('results.txt')) as f:
        return f.read().splitlines()


def all_own(flash):
    out = []
    for n in ('jobs.txt', 'log.txt'):
        try:
            with open(os.path.join(flash, n)) as f:
                out += [l for l in f.read().split('\n')[:-1] if l[8:11] == ' r ']
        except FileNotFoundError:
            pass
    return out


FULL = r'''
import os
from sporadic.device import store, storesync, outbox
from sporadic.core import jobline

sys.path.insert(0, %r)
from ramflash import RAMFlash   # a small flash: LittleFS on 512-byte blocks in RAM

bd = RAMFlash(%d)
os.VfsLfs2.mkfs(bd)
os.mount(os.VfsLfs2(bd), '/flash')
with open('/flash/jobs.txt', 'w') as f:
    f.write(''.join(l + '\n' for l in %r))
st = store.Store('/flash/')
n = 0
for i in range(%d):
    r = jobline.Result('aaaaaaaa', 'dev-1', i, 1796083200 + i * 3600, 'ok', 1, '0123456789abcdef', 'n%%d' %% i)
    st.append(r.line())
    n += 1
    if st.needs_compaction():
        st.compact()
storesync.seal(st)
kept = sum(1 for l in storesync.outbox(st))
head = next(outbox.answer(st, 1 << 20))
print('N', n, 'KEPT', kept, 'LOST', st.out_lost(), 'HEAD', head, 'HEALTH', storesync.health(st)['outbox_dropped'])
up = int(head.split()[0])
storesync.ack(st, up, int(head.split()[2]))
print('AFTER', st.out_lost(), st.out_seqs(), storesync.health(st)['outbox_dropped'])
'''


def test_a_full_flash_drops_the_oldest_results_counted_and_reported():
    """On a flash too small for what the board wrote between two syncs, the
    oldest outbox files go, every record of them counted: the count is in
    the answer to `O` and in the status until the companion acknowledges it;
    what is kept plus what is counted is everything written, and the store
    keeps compacting (no ENOSPC)."""
    from tests.mpy import run_mpy
    job = 'aaaaaaaa each 2026-12-01T00:00Z log t ; every=1h'
    out = run_mpy(FULL % (os.path.dirname(os.path.abspath(__file__)), 48, [job], 1500), heap='128K', timeout=300)
    f = out.split()
    n, kept, lost = int(f[f.index('N') + 1]), int(f[f.index('KEPT') + 1]), int(f[f.index('LOST') + 1])
    assert n == 1500 and lost > 0 and kept + lost == n, out
    head = out.split('HEAD ')[1].split(' HEALTH')[0].split()
    assert int(head[2]) == lost and int(out.split('HEALTH ')[1].split()[0]) == lost
    assert out.split('AFTER ')[1].split()[0] == '0'     # counted by the companion: reported once


@pytest.mark.slow
@pytest.mark.xdist_group('rp2')
def test_the_emulated_pico_hands_its_outbox_over_in_one_sync(tmp_path):
    """The real rp2 firmware (emulated Pico) holding two days of 10 hourly
    jobs' records in its outbox (packed and raw files as a board's loop wrote
    them, on the unix port: copied onto the Pico deployed as that board)
    hands every one over in one sync, streamed from its LittleFS, and frees
    them once the companion holds them."""
    from tests.test_rp2 import WHY, UF2, BOOTROM
    if WHY is not None:
        pytest.skip('emulated Pico: %s' % WHY)
    import subprocess
    import sys
    from companion.vboard.rp2 import RP2VBoard
    cli = CLI(str(tmp_path / 'fleet'))
    flash = str(tmp_path / 'flash')
    try:
        ids, t0 = run_offline(cli, flash, '128K', 2 * 24)
    finally:
        cli.stop_boards()
    # both kinds of file: the raw segments but the newest packed by the
    # board's own code (as a board short of flash packs them)
    boot(flash, 'import os\nfrom sporadic.device import store, outbox\nst = store.open_store()\n'
         'n = outbox.files(st)[-1][1]\nos.rename("out/" + n, "keep")\noutbox.pack(st)\n'
         'os.rename("keep", "out/" + n)\n', heap='128K')
    out = os.path.join(flash, 'out')
    names = sorted(os.listdir(out))
    assert any(n[0] == 'p' for n in names) and any(n.isdigit() for n in names), names
    held = outbox_lines(flash)
    vb = RP2VBoard(str(tmp_path / 'pico.flash'), firmware=UF2, bootrom=BOOTROM)
    vb.start()
    try:
        cli.run('deploy', vb.path, '--id', HOST, '--board', 'rp2-pico', '-q', timeout=900)
        args = [sys.executable, '-m', 'mpremote', 'connect', vb.path,
                'exec', "import os\ntry:\n os.mkdir('out')\nexcept OSError:\n pass"]
        for n in names:
            args += ['+', 'fs', 'cp', os.path.join(out, n), ':out/' + n]
        p = subprocess.run(args, capture_output=True, text=True, timeout=900)
        assert p.returncode == 0, p.stderr
        rep = syncer.sync(Fleet(cli.dir), vb.path, progress=False)
        assert rep['status']['store']['outbox'] == 0 and rep['status']['store']['outbox_dropped'] == 0
        results = fleet_results(Fleet(cli.dir))
        assert not unsettled(held, set(results))
        assert len([l for l in results if l[:8] in ids and l.split()[5] == 'ok']) >= len(
            [l for l in held if l.split()[5] == 'ok'])
    finally:
        vb.stop()


def test_pack_unpack_round_trip():
    """core/outpack.py: unpacking gives back every line byte for byte, but a
    `run` record directly followed by the same instance's outcome; a file
    whose board is not named by its results stays as it was (`@`)."""
    import random
    from sporadic.core import outpack
    rnd = random.Random(7)
    lines = []
    t = 1796083200
    for i in range(400):
        jid = rnd.choice(['aaaaaaaa', 'bbbbbbbb', '3k1v0a9c'])
        k = rnd.randint(0, 50)
        att = rnd.choice(['', '', '2'])
        t += rnd.randint(-100, 4000)        # a clock set back included
        mac = '%016x' % rnd.getrandbits(64)
        if rnd.random() < 0.1:
            lines.append('%s a b-2 %d %d b-1 %s' % (jid, k, t, mac))     # a leader's assignment
            continue
        lines.append('%s r b-1 %d %d run%s %s' % (jid, k, t, att, mac))
        if rnd.random() < 0.8:
            out = rnd.choice(['', ' blinked 3', ' a b  c', ' =x @y'])
            lines.append('%s r b-1 %d %d %s%s %s%s' % (jid, k, t, rnd.choice(['ok', 'err', 'miss']), att, mac, out))
    packed = list(outpack.pack(lines, 'b-1'))
    assert packed[0] == '@b-1'
    back = list(outpack.unpack(packed))
    want = [l for i, l in enumerate(lines)
            if not (' run' in l and i + 1 < len(lines) and lines[i + 1].split()[:4] == l.split()[:4]
                    and lines[i + 1].split()[5] != 'run'
                    and lines[i + 1].split()[5].lstrip('abcdefghijklmnopqrstuvwxyz') == l.split()[5][3:])]
    assert back == want
    assert len(back) < len(lines)
    assert sum(len(s) + 1 for s in packed) < 0.5 * sum(len(l) + 1 for l in lines)
    assert list(outpack.unpack(['@'] + lines)) == lines


CUT_O = r'''
from sporadic.device import outbox, syncsrv
real = outbox.read_lines


def cut(path, torn=False):
    # the board runs out of memory reading its outbox, after 5 records
    n = 0
    for line in real(path, torn):
        n += 1
        if n > 5:
            raise MemoryError('memory allocation failed, allocating 1057 bytes')
        yield line


outbox.read_lines = cut
syncsrv.w('O 8192')
'''


def _flash_of_two_outbox_files(tmp_path):
    """A board's flash with two raw outbox files of 20 results each."""
    from tests.devutil import make_flash
    d = make_flash(str(tmp_path / 'flash'), host=HOST)
    os.makedirs(os.path.join(d, 'out'), exist_ok=True)
    for n in (1, 2):
        with open(os.path.join(d, 'out', str(n)), 'w') as f:
            for k in range(20):
                f.write('aaaaaaaa r %s %d %d ok 0123456789abcdef n%d\n' % (HOST, n * 100 + k, 1796083200 + k, k))
    return d


def _o_answer(d, script):
    """What the board of flash d answers between STX and ETX when it runs
    script (a `syncsrv.w('O ...')`)."""
    from tests.devutil import boot
    out = boot(d, script, heap='256K').stdout
    return out[out.rindex('\x02') + 1:out.index('\x03', out.rindex('\x02'))].replace('\x06', '')


def test_an_outbox_answer_cut_by_the_board_frees_nothing(tmp_path):
    """A board that fails in the middle of its `O` answer (a MemoryError
    while it reads its outbox, streamed by syncsrv.w) says so on a line of
    its own: the companion takes none of the answer and acknowledges
    nothing, so the board frees nothing (glued to the last record, the
    error was taken for a bad record and the whole answer acknowledged: the
    records after it were lost)."""
    from companion import cli
    from companion.errors import UserError
    d = _flash_of_two_outbox_files(tmp_path)
    answer = _o_answer(d, CUT_O)
    assert answer.splitlines()[-1].startswith('!error MemoryError'), answer[-200:]
    fleet = Fleet(str(tmp_path / 'fleet'))
    assert cli.main(['--fleet', fleet.dir, 'init', '--insecure']) == 0
    acks = []
    with pytest.raises(UserError, match='board refused the outbox: MemoryError'):
        outbox.outbox(fleet, HOST, lambda req: answer, acks.append, None, [])
    assert acks == [] and fleet.results() == []
    assert sorted(os.listdir(os.path.join(d, 'out'))) == ['1', '2']


def test_an_outbox_answer_out_of_memory_is_asked_again_on_a_fresh_heap(tmp_path):
    """A board whose `O` answer runs out of memory (its heap scattered by
    the reconciliation before it: a 96K unix board after a cut sync) is
    given a fresh heap once and asked again: every record arrives, is
    acknowledged once, and nothing is taken from the refused answer."""
    from companion import cli
    d = _flash_of_two_outbox_files(tmp_path)
    cut = _o_answer(d, CUT_O)
    whole = _o_answer(d, 'from sporadic.device import syncsrv\nsyncsrv.w("O 8192")\n')
    assert cut.splitlines()[-1].startswith('!error MemoryError') and '!error' not in whole
    fleet = Fleet(str(tmp_path / 'fleet'))
    assert cli.main(['--fleet', fleet.dir, 'init', '--insecure']) == 0
    answers = [cut, whole]
    fresh, acks = [], []
    got = outbox.outbox(fleet, HOST, lambda req: answers.pop(0), lambda req: acks.append(req) or '1',
                        None, [], fresh=lambda: fresh.append(1))
    assert fresh == [1] and answers == [] and acks == ['A 2 0']
    assert got['records'] == 40 and len(fleet.results()) == 40


def test_an_outbox_answer_with_no_room_for_the_packer_sends_the_lines_as_they_are(tmp_path):
    """A board that cannot load the outbox packer's code (a loop's heap over
    TCP, scattered, where no fresh heap can be asked for: three deployed
    boards' `O` failed `allocating 1280 bytes` with 56 KB free: the name
    pool's next block of 1,280 entries, 14 KB on the 64-bit port) answers with its raw outbox files unpacked: every record arrives
    and is acknowledged once, none is lost or refused. (The failure is
    the board's own import raising MemoryError, as it did there.)"""
    from companion import cli
    d = _flash_of_two_outbox_files(tmp_path)
    core = os.path.join(d, 'lib', 'sporadic', 'core')
    for name in os.listdir(core):
        if name.startswith('outpack.'):
            os.remove(os.path.join(core, name))
    with open(os.path.join(core, 'outpack.py'), 'w') as f:
        f.write("raise MemoryError('memory allocation failed, allocating 1280 bytes')\n")
    answer = _o_answer(d, 'from sporadic.device import syncsrv\nsyncsrv.w("O 8192")\n')
    assert '!error' not in answer, answer[-300:]
    assert answer.count('\n@\n') == 2, answer[:300]      # both files as they are, not packed
    fleet = Fleet(str(tmp_path / 'fleet'))
    assert cli.main(['--fleet', fleet.dir, 'init', '--insecure']) == 0
    acks = []
    got = outbox.outbox(fleet, HOST, lambda req: answer, lambda req: acks.append(req) or '1', None, [])
    assert acks == ['A 2 0'] and got['records'] == 40 and len(fleet.results()) == 40


def test_a_status_out_of_memory_is_asked_again_on_a_fresh_heap():
    """The status (`I`, the sync's last request) of a board whose heap the
    outbox's pieces scattered (a 64K unix board after a month of results:
    `board refused the status: MemoryError`, the sync reported as failed
    though every result had arrived) is asked again once on a fresh heap;
    any other refusal is the board's answer as it was."""
    from companion.errors import UserError
    from companion.sync.outbox import board_status
    oom = '!error MemoryError: memory allocation failed, allocating 521 bytes'

    def board(*answers):
        asked, fresh = [], []
        left = list(answers)
        return asked, fresh, (lambda req: asked.append(req) or left.pop(0)), (lambda: fresh.append(1))

    asked, fresh, call, again = board(oom, '{"id": "b-1"}')
    assert board_status(call, again) == {'id': 'b-1'}
    assert asked == ['I', 'I'] and fresh == [1]
    asked, fresh, call, again = board(oom, oom)
    with pytest.raises(UserError, match='board refused the status: MemoryError'):
        board_status(call, again)                   # once, then the refusal stands
    assert fresh == [1]
    asked, fresh, call, again = board('!error OSError: 5')
    with pytest.raises(UserError, match='board refused the status: OSError: 5'):
        board_status(call, again)
    assert asked == ['I'] and fresh == []


def test_a_status_or_outbox_raising_out_of_memory_is_asked_again_on_a_fresh_heap(tmp_path):
    """The same where the board runs out of memory around its answer, not
    in it: the request's snippet compiled, or the answer's repr printed
    (the link raises; a 64K board after a month's hand-over, with one
    flash: the status's repr, 304 bytes, the sync reported as broken off
    though every result had arrived). Any other raise stays a raise."""
    from companion import cli
    from companion.link.base import LinkExecError
    from companion.sync.outbox import board_status
    raised = LinkExecError('Traceback (most recent call last):\n  File "<stdin>", line 3, in <module>\n'
                           'MemoryError: memory allocation failed, allocating 304 bytes\n')

    def board(*answers):
        asked, fresh = [], []
        left = list(answers)

        def call(req):
            asked.append(req)
            a = left.pop(0)
            if isinstance(a, Exception):
                raise a
            return a
        return asked, fresh, call, (lambda: fresh.append(1))

    asked, fresh, call, again = board(raised, '{"id": "b-1"}')
    assert board_status(call, again) == {'id': 'b-1'}
    assert asked == ['I', 'I'] and fresh == [1]
    asked, fresh, call, again = board(LinkExecError('Traceback:\nOSError: 5\n'))
    with pytest.raises(LinkExecError, match='OSError: 5'):
        board_status(call, again)
    assert fresh == []
    # the outbox: the raised answer taken as nothing, asked again on a fresh heap
    d = _flash_of_two_outbox_files(tmp_path)
    whole = _o_answer(d, 'from sporadic.device import syncsrv\nsyncsrv.w("O 8192")\n')
    fleet = Fleet(str(tmp_path / 'fleet'))
    assert cli.main(['--fleet', fleet.dir, 'init', '--insecure']) == 0
    asked, fresh, call, again = board(raised, whole)
    acks = []
    got = outbox.outbox(fleet, HOST, call, lambda req: acks.append(req) or '1', None, [], fresh=again)
    assert fresh == [1] and asked == ['O 32768', 'O 32768'] and acks == ['A 2 0']
    assert got['records'] == 40 and len(fleet.results()) == 40
