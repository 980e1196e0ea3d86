"""Virtual boards for the runtime tests: a flash folder laid out by the
product's own provisioning (/main.py, /lib/sporadic/*.mpy, /lib/board.mpy,
/cfg.json: companion/fleet/files.py and provision.py, as deploy lays it out), and
micropython -X heapsize=64K booting it through tests/devboot.py."""
import json
import sys
import os
import shutil
import subprocess
import tempfile
import time

from tests.mpy import MICROPYTHON, MPY_CROSS, ROOT

DEVBOOT = os.path.join(ROOT, 'tests', 'devboot.py')
T0 = 1796083200  # 2026-12-01T00:00Z
# The `world` fixture's boards (tests/conftest.py). 64K (ESP8266 class) is the
# goal; today a signed-fleet sync on a fresh 64K heap fails with a
# MemoryError on the first `S` (firmware is on a memory diet meanwhile).
# Back to '64K' when it fits. (It was 144K for a while: a signed sync
# interrupting a running board ran out at 128K, every time; since the
# virtual board mounts its flash folder natively instead of through a Python
# VFS, it passes at 128K.)
E2E_HEAP = os.environ.get('SPORADIC_E2E_HEAP', '128K')
E2E_SCALE = 600          # board and companion clocks: 10 minutes a second


_FIRMWARE = {}


def firmware_files(board):
    """What `companion deploy` / `image` put on a board of that kind
    (companion/fleet/files.py: main.py, the .mpy package, the board module),
    compiled once per test process."""
    if board not in _FIRMWARE:
        from companion.fleet import files
        _FIRMWARE[board] = files.firmware_files(board)
    return _FIRMWARE[board]


def make_flash(folder, host='dev-1', cfg=None, jobs=None, actions=None, actions_source=False, fleet=None,
               board='unix'):
    """Lay out a board's flash in `folder` as the product provisions it
    (companion/fleet/provision.py, the one path of deploy, image and flash):
    from `fleet` when given (its secret, public key, fleet key, replay
    floor; committed to the fleet as deploy does), else a board of no
    fleet with a fixed secret. `cfg` adds keys a test plays with on purpose
    (an old board's replay floor). `jobs`: lines of a jobs.txt copied onto
    the board by hand (no stamp: the store imports it at its first open).
    Returns folder."""
    from companion.fleet import provision
    import hashlib
    secret = None if fleet is not None else hashlib.sha256(host.encode()).hexdigest()
    prov = provision.prepare(fleet, host, board, secret=secret)
    if cfg:
        prov.extra.update(cfg)
    for path, data in firmware_files(board) + prov.config_files():
        dest = os.path.join(folder, path.lstrip('/'))
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(dest, 'wb') as f:
            f.write(data)
    prov.commit(folder)
    if jobs is not None:
        with open(os.path.join(folder, 'jobs.txt'), 'w') as f:
            f.write(''.join(l + '\n' for l in jobs))
    if actions is not None:
        # deploy compiles the user's actions.py with mpy-cross: no compiler
        # runs in the board's heap (source=True puts the .py there instead)
        src = os.path.join(folder, 'actions.py')
        with open(src, 'w') as f:
            f.write(actions)
        if not actions_source:
            p = subprocess.run([MPY_CROSS, '-o', os.path.join(folder, 'actions.mpy'), src],
                               capture_output=True, text=True)
            os.remove(src)
            if p.returncode != 0:   # a syntax error: leave the broken source, as a user would
                with open(src, 'w') as f:
                    f.write(actions)
    return folder


def boot(folder, code=None, start=None, env=None, heap='64K', timeout=120, check=True):
    """Run the board (main.py, or `code`) with the step clock; returns the
    CompletedProcess. start: Unix time its RTC holds when never set."""
    e = dict(os.environ)
    e['SPORADIC_CLOCK'] = 'step'
    if start is not None:
        e['SPORADIC_CLOCK_START'] = str(start)
    e.update(env or {})
    argv = [MICROPYTHON, '-X', 'heapsize=' + heap, DEVBOOT, folder]
    tmp = None
    if code is not None:
        fd, tmp = tempfile.mkstemp(suffix='.py', prefix='devboot-')
        with os.fdopen(fd, 'w') as f:
            f.write(code)
        argv.append(tmp)
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=e)
    finally:
        if tmp:
            os.remove(tmp)
    if check and p.returncode != 0:
        raise AssertionError('board failed (%d):\n%s\n%s' % (p.returncode, p.stdout[-3000:], p.stderr[-3000:]))
    return p


def small_board_batch(n):
    """The file of jobs a small board takes in one signed sync (`companion
    add -f`): one due 2 minutes after it is added, n - 1 daily ones days
    later."""
    return ('each +2m log due now ; within=1d\n'
            + ''.join('each +%dd log later %d ; every=1d\n' % (10 + i, i) for i in range(n - 1)))


def small_board_cycle(companion, fleet, vb, board_id, n, folder):
    """tests/test_esp8266.py's cycle on a deployed virtual board `vb`
    (bench/heap_romfs.py --batch measures the heap it needs): a signed batch
    of n jobs (small_board_batch, written in `folder`) added with `add -f`,
    one sync, the due job's outcome recorded on the board (or the board
    gone), a second sync. companion(fleet, *argv) runs the CLI and raises
    when it fails. Returns (the due job's id, the fleet's lines after)."""
    from companion.fleet.folder import Fleet
    from tests.test_e2e import outcomes
    batch = os.path.join(folder, 'batch.txt')
    with open(batch, 'w') as f:
        f.write(small_board_batch(n))
    companion(fleet, 'add', '-f', batch)
    (due,) = [l.split(' ', 1)[0] for l in Fleet(fleet).lines() if ' log due now' in l]
    companion(fleet, 'sync', vb.path)
    wait_for(lambda: due in outcomes(vb, board_id) or not vb.alive(), 60, 'the board to record %s.0' % due)
    companion(fleet, 'sync', vb.path)
    return due, Fleet(fleet).lines()


def lines(folder, name):
    try:
        with open(os.path.join(folder, name)) as f:
            return f.read().splitlines()
    except FileNotFoundError:
        return []


def outbox_lines(folder, complete=False):
    """The board's outbox (out/N raw, out/pN packed) as full lines, oldest
    first, unpacked with the board's own codec (sporadic.core.outpack);
    `complete`: a torn last line of a file is no record."""
    from sporadic.core import outpack
    od = os.path.join(folder, 'out')
    out = []
    if not os.path.isdir(od):
        return out
    names = [n for n in os.listdir(od) if n.lstrip('p').isdigit()]
    for n in sorted(names, key=lambda n: (int(n.lstrip('p')), n[0] != 'p')):
        with open(os.path.join(od, n), encoding='utf-8', errors='replace') as f:
            text = f.read()
        got = text.split('\n')
        got = got[:-1] if complete or not got[-1] else got
        out += outpack.unpack((['@'] if n[0] != 'p' else []) + [l for l in got if l])
    return out


def unsettled(before, after):
    """The records of `before` that `after` lost: each one not in `after`,
    except a `run` record whose outcome (same job, host, instance and
    attempt) is there (the outbox leaves such a `run` out once packed)."""
    def key(l):
        f = l.split(' ', 6)
        o = f[5].rstrip('0123456789')
        return (f[0], f[2], f[3], f[5][len(o):] or '1'), o
    done = set()
    for l in after:
        if l[8:11] == ' r ':
            k, o = key(l)
            if o != 'run':
                done.add(k)
    return set(l for l in before if l not in after and not (key(l)[1] == 'run' and key(l)[0] in done))


def all_records(folder):
    """Every record line the board holds: jobs.txt, log.txt, in.txt, outbox."""
    return (lines(folder, 'jobs.txt') + lines(folder, 'log.txt') + lines(folder, 'in.txt')
            + outbox_lines(folder))


def own_results(folder, host):
    """Own result records (outbox + log + jobs.txt), parsed: list of dicts."""
    seen = set()
    res = []
    for l in all_records(folder):
        f = l.split(None, 7)
        if len(f) >= 7 and f[1] == 'r' and f[2] == host and l not in seen:
            seen.add(l)
            tok = f[5]
            o = tok.rstrip('0123456789')
            res.append({'id': f[0], 'k': int(f[3]), 'at': int(f[4]), 'outcome': o,
                        'attempt': int(tok[len(o):] or 1), 'text': f[7] if len(f) > 7 else '',
                        'line': l})
    return res


def wait_for(cond, timeout=30.0, what='condition', every=0.05):
    """Poll cond() until it returns something true (returned); a virtual
    board is another process, so tests wait for its outcome, never for time."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = cond()
        if last:
            return last
        time.sleep(every)
    raise AssertionError('timed out after %.0f s waiting for %s (last: %r)' % (timeout, what, last))


def synced_once_listening(cli, port, what, timeout=20, every=0.5):
    """`companion sync 127.0.0.1:PORT -q` (a CLI's run) tried until it
    succeeds: a networked board binds its port as it boots, and refuses a
    sync until then. Times out saying the last try's own words, so that a
    board that answered with an error is told from one that never listened."""
    last = []

    def once():
        p = cli.run('sync', '127.0.0.1:%d' % port, '-q', ok=False)
        last[:] = [(p.stdout + p.stderr).strip()[-300:]]
        return p if p.returncode == 0 else None
    try:
        return wait_for(once, timeout, what, every=every)
    except AssertionError as e:
        raise AssertionError('%s; the last try said: %s' % (e, last[0] if last else '-')) from None


def has_outcome(folder, jid, host, k, outcomes=('ok', 'err')):
    """The board's flash folder holds an outcome of jid.k by host (its
    jobs.txt or its logs), as one looks at a board's LED."""
    import re
    pat = re.compile(r'^%s r %s %d \d+ (%s)' % (jid, host, k, '|'.join(outcomes)))
    for name in ('jobs.txt', 'log.txt', 'in.txt', 'out.txt'):
        try:
            with open(os.path.join(folder, name)) as fh:
                if any(pat.match(l) for l in fh):
                    return True
        except FileNotFoundError:
            pass
    return False


def actlog(folder):
    """Instances the `log` action ran: {'ID.K': count}."""
    n = {}
    for l in lines(folder, 'actlog.txt'):
        inst = l.split(' ', 1)[0]
        n[inst] = n.get(inst, 0) + 1
    return n


class PortReservation:
    """Loopback ports held for boards not started yet, below the kernel's
    ephemeral range (a board started first connects out from ephemeral
    ports). A board's sync port is written by deploy before the board binds
    it, and MicroPython's sockets cannot say which port 0 became, so the
    port cannot be the board's own pick; instead each one stays bound here,
    not listening, until release(): bound first without SO_REUSEADDR (so
    no one else holds it, another reservation included), then flagged
    SO_REUSEADDR, which lets the board's server (net/node.py sets it too)
    bind and listen there while nobody else can. The board's UDP socket on
    the same number is free when picked and, below the ephemeral range,
    never handed out by the kernel."""

    def __init__(self):
        self.socks = []

    def take(self, n):
        import random
        import socket
        lo = 20000
        try:
            with open('/proc/sys/net/ipv4/ip_local_port_range') as f:
                lo = min(lo, int(f.read().split()[0]) - 2000)
        except (OSError, ValueError, IndexError):
            pass
        out = []
        for p in random.sample(range(lo - 8000, lo), 8000):
            t = socket.socket()
            try:
                t.bind(('127.0.0.1', p))
                u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                try:
                    u.bind(('127.0.0.1', p))
                finally:
                    u.close()
            except OSError:
                t.close()
                continue
            t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.socks.append(t)
            out.append(p)
            if len(out) == n:
                return out
        raise RuntimeError('no %d free ports below %d' % (n, lo))

    def release(self):
        for t in self.socks:
            t.close()
        self.socks = []


class CLI:
    """`companion --fleet DIR VERB ...` as a user types it: a new process
    each time (python -m companion.cli of this checkout)."""

    def __init__(self, fleet_dir):
        self.dir = fleet_dir
        self.boards = []      # the vboards started through this CLI

    def run(self, *argv, ok=True, timeout=120):
        p = subprocess.run([sys.executable, '-m', 'companion.cli', '--fleet', self.dir] + [str(a) for a in argv],
                           capture_output=True, text=True, timeout=timeout, cwd=ROOT)
        if ok:
            assert p.returncode == 0, 'companion %s -> %d\n%s\n%s' % (' '.join(map(str, argv)), p.returncode,
                                                                     p.stdout, p.stderr)
        return p

    def __call__(self, *argv, **kw):
        return self.run(*argv, **kw).stdout

    def json(self, *argv):
        return json.loads(self(*argv, '--json'))

    def vboard(self, *argv):
        """`companion vboard ...` started as a user starts it (it runs until
        stopped); returns a VboardProcess once it printed its device path."""
        vb = VboardProcess([sys.executable, '-m', 'companion.cli', '--fleet', self.dir, 'vboard']
                           + [str(a) for a in argv])
        self.boards.append(vb)
        return vb

    def stop_boards(self):
        for vb in self.boards:
            vb.stop()
        self.boards = []


class InProcessCompanion:
    """`companion --fleet DIR VERB ...` run in this process (cli.main), its
    output read through pytest's capsys; on `clock` (a DemoClock) when
    given: the companion's wall clock, injected (cli.main's clock)."""

    def __init__(self, fleet_dir, capsys, clock=None):
        self.dir = fleet_dir
        self.capsys = capsys
        self.clock = clock

    def __call__(self, *argv, ok=True):
        from companion import cli
        self.capsys.readouterr()
        clock = time.time if self.clock is None else (lambda: float(self.clock.now()))
        rc = cli.main(['--fleet', self.dir] + [str(a) for a in argv], clock=clock)
        out, err = self.capsys.readouterr()
        if ok:
            assert rc == 0, 'companion %s -> %d\n%s\n%s' % (' '.join(map(str, argv)), rc, out, err)
        return out

    def json(self, *argv):
        return json.loads(self(*argv, '--json'))

    def sync(self, port):
        out = self('sync', port, '-q')
        assert out.startswith('synced '), out
        return out

    def results(self):
        return self.json('results')


class VboardProcess:
    def __init__(self, argv, timeout=20):
        import select
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, cwd=ROOT)
        line = b''
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while not line.endswith(b'\n'):
            r, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(fd, 256) if r else b''
            if not chunk:
                self.stop()
                raise AssertionError('companion vboard printed no device path: %r' % argv)
            line += chunk
        self.path = line.decode().strip()

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
