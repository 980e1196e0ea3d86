"""The real MicroPython rp2 firmware (RPI_PICO v1.28.0) on an emulated
Raspberry Pi Pico (``companion vboard --board rp2-pico``: rp2040js), driven
only through its USB-CDC serial line, as a user drives a Pico on a cable.

Needs Node.js, the emulator (``npm ci --prefix companion/vboard/rp2emu``), a
MicroPython RPI_PICO UF2 ($SPORADIC_RP2_UF2) and the RP2040 boot ROM
($SPORADIC_RP2_BOOTROM); both default to ../shared/rp2/ beside the repository
(what CI has). Without them every test here skips, saying what is missing.

The board runs at the wall clock's pace (jobs are dated a few seconds
ahead). The tests read the board's flash file only as an observer looks at
a board's LEDs (its action log, through littlefs-python), never to drive it.
"""
import collections
import json
import os
import random
import subprocess
import sys
import time
import types

import pytest

from companion.make import image
from companion.vboard.rp2 import RP2VBoard, missing
from sporadic.core import jobline
from tests.devutil import InProcessCompanion, wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), 'shared', 'rp2')
UF2 = os.environ.get('SPORADIC_RP2_UF2') or os.path.join(SHARED, 'RPI_PICO-v1.28.0.uf2')
BOOTROM = os.environ.get('SPORADIC_RP2_BOOTROM') or os.path.join(SHARED, 'rp2040-bootrom-b1.bin')


def _why_skip():
    why = missing(None, BOOTROM) if os.path.isfile(BOOTROM) else (
        'no RP2040 boot ROM at %s (set SPORADIC_RP2_BOOTROM)' % BOOTROM)
    if why:
        return why
    if not os.path.isfile(UF2):
        return 'no MicroPython RPI_PICO firmware at %s (set SPORADIC_RP2_UF2 to a UF2 from micropython.org)' % UF2
    return None


WHY = _why_skip()
# The emulated Pico's tests run in two xdist groups, each on one worker:
# 'rp2' (these and the short ones elsewhere) and 'rp2-long' (the 5,000-job
# board, the idle hours, the cut-off sync), so at most two emulators share
# the machine while the other worker runs the rest of the suite.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group('rp2'), pytest.mark.skipif(WHY is not None, reason='emulated Pico: %s' % WHY)]

GEOMETRY = image.geometry('rp2-pico')


# -- helpers --------------------------------------------------------------------

def flash_files(flash):
    """{path: bytes} of the board's filesystem as its flash holds it now."""
    with open(flash, 'rb') as f:
        f.seek(GEOMETRY['offset'])
        data = f.read(GEOMETRY['size'])
    return image.read_image(data, GEOMETRY)


def flash_snapshot(flash):
    for _ in range(5):   # a snapshot taken while littlefs commits may miss a block; look again
        try:
            return flash_files(flash)
        except Exception:
            time.sleep(0.05)
    raise AssertionError('cannot read the board flash %s' % flash)


def actlog(flash):
    """Instances the board's `log` action ran: Counter of 'JOB.K'."""
    text = flash_snapshot(flash).get('/actlog.txt', b'').decode()
    return collections.Counter(l.split(' ', 1)[0] for l in text.splitlines() if l.strip())


def outcomes_on_flash(flash, host='pico-1'):
    """Instances ('JOB.K') the board has recorded an outcome of (ok, error,
    miss: not the lease it takes to run one), read off its flash. Tests wait
    on this before a sync that must bring outcomes back: a companion syncing
    every few seconds interrupts each boot of a slow board (the store's open
    takes seconds on this emulated chip) and the board never gets to run."""
    found = set()
    for path, data in flash_snapshot(flash).items():
        if path in ('/jobs.txt', '/log.txt', '/in.txt') or path.startswith('/out/'):
            for line in data.decode(errors='replace').splitlines():
                try:
                    r = jobline.parse(line)
                except jobline.ParseError:
                    continue    # a line torn by a power cut, a batch record's tail
                if isinstance(r, jobline.Result) and r.host == host and r.outcome != 'run':
                    found.add(r.instance())
    return found


@pytest.fixture
def world(tmp_path, capsys):
    boards = []
    comp = InProcessCompanion(str(tmp_path / 'fleet'), capsys)

    def pico(name='pico-1', firmware=True, image_file=None, **kw):
        vb = RP2VBoard(str(tmp_path / (name + '.flash')), firmware=UF2 if firmware else None,
                       bootrom=BOOTROM, image=image_file, stats=str(tmp_path / (name + '.stats')), **kw)
        vb.start()
        boards.append(vb)
        return vb

    w = types.SimpleNamespace(companion=comp, pico=pico, tmp=tmp_path)
    try:
        yield w
    finally:
        for vb in boards:
            vb.stop()


def by_instance(rows):
    d = collections.defaultdict(list)
    for r in rows:
        d[r['instance']].append(r)
    return d


def mpremote(port, *args, timeout=60):
    return subprocess.run([sys.executable, '-m', 'mpremote', 'connect', port] + list(args),
                          capture_output=True, text=True, timeout=timeout)


def companion_cli(fleet, *args):
    return subprocess.Popen([sys.executable, '-m', 'companion.cli', '--fleet', fleet] + list(args),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


# -- the tests --------------------------------------------------------------------

def test_deploy_sync_each_who_one_on_the_boards_own_clock(world):
    """deploy into a signed fleet, add each/who/one jobs, sync; the board
    runs them on its own clock (set by the sync) and one sync brings the
    verified results back."""
    c = world.companion
    assert 'signed' in c('init')
    vb = world.pico()
    out = c('deploy', vb.path, '--id', 'pico-1', '--board', 'rp2-pico', '-q')
    assert 'deployed pico-1' in out, out
    files = flash_files(vb.flash)
    cfg = json.loads(files['/cfg.json'])
    assert (cfg['id'], cfg['board']) == ('pico-1', 'rp2-pico')
    lead = 12
    t_add = time.time()
    j_each = c('add', 'each +%ds log hello ; within=10m' % lead).strip()
    j_who = c('add', 'who:pico +%ds log who ; within=10m' % lead).strip()
    j_not = c('add', 'who:pump +%ds log not-me ; within=10m' % lead).strip()
    j_one = c('add', 'one +%ds log one ; within=10m' % lead).strip()
    out = c.sync(vb.path)
    assert 'synced pico-1' in out
    st = c.json('status')
    assert st['devices'][0]['clock'] == 'trusted'
    want = {'%s.0' % j for j in (j_each, j_who, j_one)}
    wait_for(lambda: want <= set(actlog(vb.flash)), timeout=90, what='the board to run each/who/one')
    wait_for(lambda: want <= outcomes_on_flash(vb.flash), timeout=30, every=0.5, what='their outcomes on the board')
    assert actlog(vb.flash)['%s.0' % j_not] == 0

    def synced_back():
        c.sync(vb.path)
        return {r['job']: r for r in c.results()}

    got = wait_for(lambda: (lambda g: g if {j_each, j_who, j_one} <= set(g) else None)(synced_back()),
                   timeout=60, every=1.0, what='the results synced back')
    for j, text in ((j_each, 'hello'), (j_who, 'who'), (j_one, 'one')):
        r = got[j]
        assert (r['host'], r['outcome'], r['output']) == ('pico-1', 'ok', text), r
        # on the board's clock, not before the time it was given
        assert t_add + lead - 2 <= r['at'] <= time.time() + 2, (r, t_add)
    assert j_not not in got
    st = c.json('status')
    (dev,) = st['devices']
    assert dev['id'] == 'pico-1' and dev['clock'] == 'trusted' and dev['ok'] >= 3
    assert dev['duplicates'] == [] and st['duplicates'] == {}
    assert max(actlog(vb.flash).values()) == 1


def test_an_image_built_on_the_desktop_boots_with_its_jobs(world):
    """`companion image --board rp2-pico` on the desktop, placed at the
    filesystem offset (`vboard --image`): the board boots from it, knows its
    jobs, and after the first sync (its clock) runs them. Its wake index
    lives in a file (no RTC memory) and lists the 12 jobs to come: more than
    an ESP8266's RTC memory holds (runtime.AGENDA_SMALL)."""
    c = world.companion
    c('init')
    # due about when the first sync is over (~3 s here): without a clock till
    # then, it runs after that sync, on the board's own clock
    j = c('add', 'each +6s log from-image ; within=10m').strip()
    later = {c('add', 'each +%dh log later%d' % (h, h)).strip() for h in range(1, 13)}
    fs_bin = str(world.tmp / 'fs.bin')
    c('image', '--board', 'rp2-pico', '--id', 'pico-2', '-o', fs_bin)
    vb = world.pico('pico-2', image_file=fs_bin)
    files = flash_files(vb.flash)
    assert json.loads(files['/cfg.json'])['id'] == 'pico-2'
    assert j.encode() in files['/jobs.txt']
    out = c.sync(vb.path)
    assert 'synced pico-2' in out and 'sent 0 line(s)' in out, out   # the jobs came with the image
    wait_for(lambda: actlog(vb.flash)['%s.0' % j], timeout=90, what='the job from the image to run')
    wait_for(lambda: '%s.0' % j in outcomes_on_flash(vb.flash, 'pico-2'), timeout=30, every=0.5,
             what='its outcome on the board')

    def agenda():
        idx = flash_snapshot(vb.flash).get('/wake.idx', b'').decode().split(' ')
        return {e.split(':')[2] for e in idx[8].split(',')} if len(idx) == 10 and idx[8] != '-' else set()
    wait_for(lambda: agenda() == later, timeout=30, every=0.5, what='the wake index listing the 12 jobs to come')
    wait_for(lambda: c.sync(vb.path) and any(r['job'] == j and r['outcome'] == 'ok' for r in c.results()),
             timeout=60, every=1.0, what='its result')


LARGE_JOBS = 1000   # ~80 KB: the job lines and their 8 slot records (docs/security.md#seals)


def test_a_board_holding_a_large_job_file_syncs(world):
    """A Pico whose jobs.txt holds LARGE_JOBS signed jobs (from an image, as
    a fleet's board after months) syncs new ones. On this emulated chip
    every pass of a sync over that file takes 5 s of wall time and every
    compaction (a rewrite of the file, 110 sectors erased) 10 s at 1,000
    jobs: at one compaction a KB received, a request held two of them and
    outlasted the companion's 20 s answer timeout. The board now compacts once a sync
    (in.txt sized to its heap) and says it is at work while it works
    (syncsrv.w's keep-alives), so the sync completes and the board holds
    every new job."""
    c = world.companion
    c('init')
    big = world.tmp / 'big.cron'
    big.write_text(''.join('each 2027-01-%02dT%02d:%02dZ log big%d ; every=1d within=1h\n'
                           % (1 + i % 28, i // 60 % 24, i % 60, i) for i in range(LARGE_JOBS)))
    c('add', '-f', str(big))
    fs_bin = str(world.tmp / 'fs.bin')
    c('image', '--board', 'rp2-pico', '--id', 'pico-big', '-o', fs_bin)
    vb = world.pico('pico-big', image_file=fs_bin)
    assert len(flash_files(vb.flash)['/jobs.txt']) > 75000
    out = c.sync(vb.path)
    assert 'synced pico-big' in out and 'sent 0 line(s)' in out, out    # the clock; the jobs came with the image
    new = [c('add', 'each 2027-02-01T00:%02dZ log new%d ; every=1d within=1h' % (i, i)).strip() for i in range(8)]
    out = c.sync(vb.path)
    # each job, and the newest slot record they grew (two when it filled up)
    assert 'sent 9 line(s)' in out or 'sent 10 line(s)' in out, out
    held = flash_files(vb.flash)['/jobs.txt']
    assert all(j.encode() in held for j in new)
    assert b'big%d ' % (LARGE_JOBS - 1) in held
    out = c.sync(vb.path)
    assert 'sent 0 line(s), received 0 line(s)' in out, out


def test_power_cut_during_a_run_and_during_a_sync(world):
    """Killing the emulated Pico (its flash keeps what the chip finished) at
    the moment a run lands on flash and at random points of a sync: after
    it boots again and syncs, nothing is lost and nothing ran twice."""
    rnd = random.Random(13)
    c = world.companion
    c('init')
    fs_bin = str(world.tmp / 'fs.bin')     # set up from an image (deploy has its own test)
    c('image', '--board', 'rp2-pico', '--id', 'pico-1', '-o', fs_bin)
    vb = world.pico(image_file=fs_bin)
    # due about when the sync is over (~4 s here), then one each 2 s
    jobs = [c('add', 'each +%ds log cut%d ; within=10m' % (4 + 2 * i, i)).strip() for i in range(3)]
    c.sync(vb.path)
    flash = vb.flash
    # 1. a power cut as soon as the first run reaches the flash
    marker = ('%s.0 ' % jobs[0]).encode()

    def landed():
        with open(flash, 'rb') as f:
            return marker in f.read()

    wait_for(landed, timeout=90, every=0.01, what='the first run on flash')
    vb.kill()
    before = actlog(flash)
    vb = world.pico(firmware=False)          # power back: boots from its flash
    c.sync(vb.path)                           # its clock is gone with the power (RP2040: no RTC battery)
    # 2. power cuts at random points of syncs that carry new jobs
    more = []
    cut_syncs = 0
    for k in range(3):
        # due about when the sync after the cut is over (cut, boot, sync: ~5 s)
        more.append(c('add', 'each +%ds log more%d ; within=10m' % (4, k)).strip())
        p = companion_cli(world.companion.dir, 'sync', vb.path, '-q')
        time.sleep(rnd.uniform(0.3, 1.5))    # (a sync takes 2-4 s here)
        vb.kill()
        out, err = p.communicate(timeout=120)
        if p.returncode:
            cut_syncs += 1
            assert err.strip().count('\n') == 0 and err.startswith('companion: '), err
        vb = world.pico(firmware=False)
        c.sync(vb.path)
    assert cut_syncs >= 1, 'no power cut landed inside a sync'
    want = {'%s.0' % j for j in jobs + more}
    wait_for(lambda: want <= outcomes_on_flash(vb.flash), timeout=120, every=0.5,
             what='an outcome of every instance on the board')

    def all_reported():
        c.sync(vb.path)
        return want <= set(by_instance(c.results()))

    wait_for(all_reported, timeout=60, every=2.0, what='every instance reported')
    ran = actlog(vb.flash)
    assert not (set(before) - set(ran)), 'a power cut lost runs from the action log'
    assert max(ran.values()) == 1, ran                        # nothing ran twice
    rows = by_instance(c.results())
    assert all(len(v) == 1 for v in rows.values()), rows      # each reported once
    for inst in want:
        (r,) = rows[inst]
        assert r['outcome'] in ('ok', 'error', 'missed'), r
        if inst in ran:
            assert r['outcome'] in ('ok', 'error'), r         # a run is never reported missed
    st = c.json('status')
    assert st['duplicates'] == {} and st['devices'][0]['duplicates'] == []


# waits for ever, as an action blocked on a sensor that never answers does
# (a busy loop hangs the chip the same way, but 8 s of it cost a minute of
# the emulator's time: a sleep is idle time, waited on the wall clock)
HANG = '''
import time
def hang():
    while True:
        time.sleep_ms(1000)
'''


def test_a_hung_action_is_reset_by_the_watchdog_and_not_run_again(world):
    """A user's action that never returns: the RP2040 watchdog (8 s) resets
    the chip (its REASON register reads TIMER); after the next sync the
    instance is reported as failed, not run again, and the board goes on."""
    c = world.companion
    c('init')
    vb = world.pico()
    (world.tmp / 'fleet' / 'actions.py').write_text(HANG)   # the fleet's actions: deploy puts them on
    c('deploy', vb.path, '--id', 'pico-1', '-q')      # the board is told by its os.uname().machine
    assert json.loads(flash_files(vb.flash)['/cfg.json'])['board'] == 'rp2-pico'
    j_hang = c('add', 'each +10s hang ; within=10m').strip()
    j_after = c('add', 'each +20s log after ; within=10m').strip()
    c.sync(vb.path)
    # the watchdog resets the chip (the emulator's counters, as a power LED
    # blinking off would show it); it comes back with its clock lost
    wait_for(lambda: vb.stats()['boots'] >= 2, timeout=90, every=0.5, what='a watchdog reset')
    assert vb.stats()['watchdog_reason'] == 1    # REASON.TIMER, not FORCE (machine.reset)

    c.sync(vb.path)                           # its clock
    want = {'%s.0' % j_hang, '%s.0' % j_after}
    try:
        wait_for(lambda: want <= outcomes_on_flash(vb.flash), timeout=120, every=0.5,
                 what='both outcomes on the board')
    except AssertionError as e:
        raise AssertionError('%s; stats %r; jobs.txt %r' % (
            e, vb.stats(), flash_snapshot(vb.flash).get('/jobs.txt', b'')[-1500:])) from None

    def both_reported():
        c.sync(vb.path)
        got = {r['job']: r for r in c.results()}
        return got if {j_hang, j_after} <= set(got) else None

    got = wait_for(both_reported, timeout=60, every=2.0, what='both reported')
    assert got[j_hang]['outcome'] == 'error' and 'interrupt' in got[j_hang]['output'], got[j_hang]
    assert got[j_after]['outcome'] == 'ok'
    assert all(len(v) == 1 for v in by_instance(c.results()).values())
    assert actlog(vb.flash)['%s.0' % j_after] == 1
    assert vb.stats()['boots'] == 2, 'the hung action ran again after the reset'


CHATTER = '''
import time
def chatter():
    for i in range(250):
        print('chatter', i, 'x' * 40)
        time.sleep_ms(20)
    return 'said 250'
'''


def test_a_sync_arrives_while_the_board_prints(world):
    """The companion opens the line while a job floods it with output (what
    the unix port's pty never showed at USB speed): the sync gets through,
    the talking job is reported once, and a job sent by that sync runs."""
    c = world.companion
    c('init')
    vb = world.pico()
    src = world.tmp / 'actions.py'
    src.write_text(CHATTER)
    assert mpremote(vb.path, 'cp', str(src), ':actions.py').returncode == 0
    c('deploy', vb.path, '--id', 'pico-1', '--board', 'rp2-pico', '-q')   # reads the board's /actions.py
    j_talk = c('add', 'each +8s chatter ; within=10m').strip()
    c.sync(vb.path)
    marker = ('%s 0 ' % j_talk).encode()     # its run.txt (Store.started): the action started

    def talking():
        with open(vb.flash, 'rb') as f:
            return marker in f.read()

    wait_for(talking, timeout=90, every=0.02, what='the chatter job to start')
    j_next = c('add', 'each +8s log next ; within=10m').strip()
    out = c.sync(vb.path)                       # into the flood
    assert 'synced pico-1' in out, out
    wait_for(lambda: actlog(vb.flash)['%s.0' % j_next], timeout=90, what='the job sent into the flood to run')
    wait_for(lambda: {'%s.0' % j_talk, '%s.0' % j_next} <= outcomes_on_flash(vb.flash), timeout=30, every=0.5,
             what='both outcomes on the board')

    def reported():
        c.sync(vb.path)
        return {r['job']: r for r in c.results()}

    got = wait_for(lambda: (lambda g: g if {j_talk, j_next} <= set(g) else None)(reported()),
                   timeout=60, every=1.0, what='both reported')
    # the sync landed inside it: interrupted (and reported), not re-run later
    assert got[j_talk]['outcome'] == 'error' and 'interrupt' in got[j_talk]['output'], got[j_talk]
    assert got[j_next]['outcome'] == 'ok'
    assert all(len(v) == 1 for v in by_instance(c.results()).values())


def test_raw_paste_window_large_executions_arrive_intact(world):
    """MicroPython's raw-paste mode lets the host send only a window of bytes
    (the board announces it, then grants it again with \\x01 as it compiles).
    The unix port's pty never pushed back; TinyUSB's CDC on the real
    firmware does. Executions and files many windows long must arrive whole:
    mpremote's own raw-paste (exec), and the companion's link (deploy's
    put_file: a file in one execution, and a streamed one under the same
    flow control), checked on the board and on its flash. (USB holds bytes
    the board has no room for, so an overrun of the window is not lost here
    as it is on a UART; what this catches is a link that miscounts the
    window or its grants: the execution then stalls.)"""
    import hashlib
    from companion.link.serial import SerialLink
    vb = world.pico('paste')
    rng = random.Random(13)
    blob = bytes(rng.randrange(256) for _ in range(6000))
    code = ('import hashlib, binascii\nb = binascii.unhexlify(%r)\n'
            'print("SHA", len(b), binascii.hexlify(hashlib.sha256(b).digest()).decode())\n' % blob.hex())
    p = mpremote(vb.path, 'exec', code, timeout=120)
    assert p.returncode == 0, p.stderr
    assert 'SHA %d %s' % (len(blob), hashlib.sha256(blob).hexdigest()) in p.stdout, p.stdout[-300:]

    files = {'/one_exec.bin': blob[:1900],          # one execution: a base64 literal, about 10 windows
             '/streamed.bin': blob + blob[::-1]}    # streamed raw, two windows ahead at most
    link = SerialLink(vb.path)
    try:
        for path, data in files.items():
            link.put_file(path, data)
        window = link._window
        back = {path: link.get_file(path) for path in files}
    finally:
        link.close()
    assert 0 < window < 1900, window               # the board's window is smaller than what was sent
    assert back == files
    on_flash = flash_files(vb.flash)
    assert {path: on_flash.get(path) for path in files} == files


def test_the_emulators_counters_answer_every_request_of_a_quick_succession(world):
    """Benches read the emulator's counters before and after each step, often
    within a few ms. Each stats() must return the answer to its own request:
    an earlier one told answers apart by the file's mtime, and two answers
    within one tick of the kernel's clock share one (it waited out its
    timeout, "the emulator did not write its stats")."""
    vb = world.pico('counters')
    seen = [vb.stats(timeout=5)['instructions'] for _ in range(40)]
    assert seen == sorted(seen) and seen[-1] > seen[0], seen
