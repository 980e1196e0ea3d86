"""A real Mosquitto for the tests (issue #32): Debian's `mosquitto` on a
loopback port, its persistence in a folder of the test's, started and
stopped (a clean stop saves its state, as a broker restarted by its
service manager does). The port is reserved as the boards' are
(devutil.PortReservation) and the broker is waited on by connecting to it,
never by sleeping.

    b = Mosquitto(folder, port); b.start(); b.url -> 'mqtt://127.0.0.1:PORT'
    b.stop(); b.start()          # a restart keeps sessions and retained messages
"""
import getpass
import os
import shutil
import signal
import socket
import subprocess

from tests.devutil import wait_for

SBIN = ('/usr/sbin/mosquitto', '/usr/local/sbin/mosquitto')


def mosquitto_path():
    """The broker's executable (often in /usr/sbin, off a user's PATH), or None."""
    p = shutil.which('mosquitto')
    if p:
        return p
    for p in SBIN:
        if os.access(p, os.X_OK):
            return p
    return None


class Mosquitto:
    def __init__(self, folder, port, extra=''):
        self.folder = folder
        self.port = port
        self.proc = None
        self.log = os.path.join(folder, 'mosquitto.log')
        os.makedirs(folder, exist_ok=True)
        self.conf = os.path.join(folder, 'mosquitto.conf')
        with open(self.conf, 'w') as f:
            f.write('listener %d 127.0.0.1\n'
                    # as root it would drop to user mosquitto, who cannot write the test's folder
                    'user %s\n'
                    'allow_anonymous true\n'
                    'persistence true\n'
                    'persistence_location %s/\n'
                    # saved at every change: a broker killed mid-way keeps what it acknowledged
                    'autosave_interval 1\nautosave_on_changes true\n'
                    'persistent_client_expiration 14d\n'
                    'max_queued_messages 10000\n'
                    'log_dest file %s\n'
                    'log_type error\nlog_type warning\nlog_type notice\n%s'
                    % (port, getpass.getuser(), folder, self.log, extra))

    @property
    def url(self):
        return 'mqtt://127.0.0.1:%d' % self.port

    def start(self, timeout=20):
        exe = mosquitto_path()
        self.proc = subprocess.Popen([exe, '-c', self.conf], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)

        def up():
            if self.proc.poll() is not None:
                raise AssertionError('mosquitto exited %s: %s' % (self.proc.returncode,
                                                                 self.proc.stderr.read().decode()[-500:]))
            s = socket.socket()
            try:
                s.connect(('127.0.0.1', self.port))
                return True
            except OSError:
                return False
            finally:
                s.close()
        wait_for(up, timeout, 'mosquitto on port %d' % self.port)
        return self

    def stop(self):
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGTERM)      # saves its persistence file
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stderr.close()
        self.proc = None


def ones_run_while_asleep(c, url, fl, vbs, asleep):
    """The scenario of a board that sleeps through other boards' work (the
    small-heap test of tests/test_mqtt.py, bench/mqtt.py's smallest heaps):
    once `hm` has subscribed, the boards in `asleep` stop; the fleet adds
    five `one` jobs and a `who:` job of each sleeper; `h2` runs the five
    and its records reach the companion through the broker; `h2` stops.
    c: a devutil.CLI, fl(board) its folder. Returns (the `one` jobs' ids,
    {sleeper: its own job's id})."""
    from tests.devutil import actlog
    wait_for(lambda: os.path.exists(os.path.join(fl('hm'), 'mq.sub')), 60, 'hm subscribed')
    for b in asleep:
        vbs[b].stop()
    ones = [c('add', 'one +2s log one%d ; within=1h grace=1s' % i).strip() for i in range(5)]
    mine = {b: c('add', 'who:%s +1s log mine ; within=1h' % b).strip() for b in asleep}
    c('sync', url)
    # h2 runs the five (the others' ranks pass): 10 records on the broker, queued for the sleepers
    wait_for(lambda: all(actlog(fl('h2')).get(j + '.0') for j in ones), 60, 'the one jobs on h2')

    def up():
        c('sync', url)
        return {r['instance'] for r in c.json('results')} >= {j + '.0' for j in ones}
    wait_for(up, 60, 'h2\'s 10 records through the broker', every=1)
    vbs['h2'].stop()
    return ones, mine
