"""Virtual boards for the runtime tests: a flash folder laid out by the
product's own provisioning (/main.py, /lib/sporadic/*.mpy, /lib/board.mpy,
/cfg.json: companion/files.py and provision.py, as deploy lays it out), and
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


_FIRMWARE = {}


def firmware_files(board):
    """What `companion deploy` / `image` put on a board of that kind
    (companion/files.py: main.py, the .mpy package, the board module),
    compiled once per test process."""
    if board not in _FIRMWARE:
        from companion import files
        _FIRMWARE[board] = files.firmware_files(board)
    return _FIRMWARE[board]


def make_flash(folder, host='dev-1', cfg=None, jobs=None, actions=None, actions_source=False, fleet=None,
               board='unix'):
    """Lay out a board's flash in `folder` as the product provisions it
    (companion/provision.py, the one path of deploy, image and flash):
    from `fleet` when given (its secret, public key, fleet key, replay
    floor; committed to the fleet as deploy does), else a board of no
    fleet with a fixed secret. `cfg` adds keys a test plays with on purpose
    (an old board's replay floor). `jobs`: lines of a jobs.txt copied onto
    the board by hand (no stamp: the store imports it at its first open).
    Returns folder."""
    from companion import provision
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


def lines(folder, name):
    try:
        with open(os.path.join(folder, name)) as f:
            return f.read().splitlines()
    except FileNotFoundError:
        return []


def all_records(folder):
    """Every record line the board holds: jobs.txt, log.txt, in.txt, outbox."""
    out = lines(folder, 'jobs.txt') + lines(folder, 'log.txt') + lines(folder, 'in.txt')
    od = os.path.join(folder, 'out')
    if os.path.isdir(od):
        for n in sorted(os.listdir(od), key=int):
            out += lines(folder, os.path.join('out', n))
    return out


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


def actlog(folder):
    """Instances the `log` action ran: {'ID.K': count}."""
    n = {}
    for l in lines(folder, 'actlog.txt'):
        inst = l.split(' ', 1)[0]
        n[inst] = n.get(inst, 0) + 1
    return n


def free_ports(n):
    """n ports free for TCP and UDP on loopback, below the kernel's ephemeral
    range: a board started first makes outgoing connections from ephemeral
    ports, and one of those could take a port handed to a board not started
    yet. (A board's sync port is chosen at deploy time, before the board
    binds it: port 0 cannot be used.)"""
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
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            t.bind(('127.0.0.1', p))
            u.bind(('127.0.0.1', p))
        except OSError:
            continue
        else:
            out.append(p)
            if len(out) == n:
                return out
        finally:
            t.close()
            u.close()
    raise RuntimeError('no %d free ports below %d' % (n, lo))


class CLI:
    """`companion --fleet DIR VERB ...` as a user types it: a new process
    each time (python -m companion.cli of this checkout)."""

    def __init__(self, fleet_dir):
        self.dir = fleet_dir

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
        return VboardProcess([sys.executable, '-m', 'companion.cli', '--fleet', self.dir, 'vboard']
                             + [str(a) for a in argv])


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
