"""A real headless Chromium driven over the DevTools protocol, standard library
only: `--remote-debugging-pipe` (the browser reads commands on its fd 3 and
writes answers on its fd 4, each message JSON ended by a NUL byte), no
websocket client, no selenium/playwright. What tests/test_ui.py needs: open
a page, evaluate a script in it (what a person sees: document text), wait
for a condition, take a screenshot, a phone's width.

    with Chromium() as b:
        b.open(url)
        b.wait("document.body.innerText.includes('pump-1')")
"""
import base64
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time

CHROMIUM = shutil.which('chromium') or shutil.which('chromium-browser') or shutil.which('google-chrome')


class BrowserError(Exception):
    pass


class Chromium:
    def __init__(self, width=1100, height=900, timeout=30):
        if CHROMIUM is None:
            raise BrowserError('no chromium on PATH')
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix='sporadic-chromium-')
        to_browser_r, self._w = os.pipe()
        self._r, from_browser_w = os.pipe()

        def fds():   # the browser's fd 3 (commands in) and fd 4 (answers out)
            a = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)
            b = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)
        self.proc = subprocess.Popen(
            [CHROMIUM, '--headless=new', '--remote-debugging-pipe', '--no-sandbox', '--disable-gpu',
             '--no-first-run', '--no-default-browser-check', '--disable-extensions', '--disable-sync',
             '--disable-background-networking', '--disable-component-update', '--mute-audio',
             '--user-data-dir=' + self.profile, '--window-size=%d,%d' % (width, height), 'about:blank'],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=fds, pass_fds=(3, 4))
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._next = 0
        self._lock = threading.Lock()
        self._answers = {}
        self._cond = threading.Condition()
        self._dead = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.session = None

    def _read(self):
        buf = b''
        while True:
            try:
                chunk = os.read(self._r, 1 << 16)
            except OSError as e:
                chunk, self._dead = b'', str(e)
            if not chunk:
                with self._cond:
                    self._dead = self._dead or 'the browser closed its pipe (exit %s)' % self.proc.poll()
                    self._cond.notify_all()
                return
            buf += chunk
            while b'\0' in buf:
                msg, buf = buf.split(b'\0', 1)
                m = json.loads(msg)
                if 'id' in m:
                    with self._cond:
                        self._answers[m['id']] = m
                        self._cond.notify_all()

    def call(self, method, session=True, **params):
        """Send one command, wait for its answer's result (a protocol error raises)."""
        with self._lock:
            self._next += 1
            n = self._next
        msg = {'id': n, 'method': method, 'params': params}
        if session and self.session:
            msg['sessionId'] = self.session
        os.write(self._w, json.dumps(msg).encode() + b'\0')
        deadline = time.monotonic() + self.timeout
        with self._cond:
            while n not in self._answers:
                if self._dead:
                    raise BrowserError(self._dead)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise BrowserError('no answer to %s in %d s' % (method, self.timeout))
                self._cond.wait(left)
            m = self._answers.pop(n)
        if 'error' in m:
            raise BrowserError('%s: %s' % (method, m['error'].get('message')))
        return m.get('result', {})

    def open(self, url):
        """A new tab on url (the previous one's session is left)."""
        target = self.call('Target.createTarget', session=False, url='about:blank')['targetId']
        self.session = self.call('Target.attachToTarget', session=False, targetId=target, flatten=True)['sessionId']
        self.call('Page.enable')
        self.call('Page.navigate', url=url)
        self.wait("document.readyState === 'complete'")

    def eval(self, expression):
        """The value of a script expression in the page (JSON-able)."""
        r = self.call('Runtime.evaluate', expression=expression, returnByValue=True, awaitPromise=True)
        if r.get('exceptionDetails'):
            raise BrowserError('script failed: %s' % r['exceptionDetails'].get('text'))
        return r['result'].get('value')

    def wait(self, expression, timeout=None, what=None):
        """Wait until the expression is truthy in the page; its value."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            v = self.eval(expression)
            if v:
                return v
            if time.monotonic() > deadline:
                raise BrowserError('timed out waiting for %s; the page says:\n%s'
                                   % (what or expression, self.text()[:3000]))
            time.sleep(0.1)

    def text(self):
        """What a person reads: the page's rendered text."""
        return self.eval('document.body.innerText')

    def phone(self, width=390, height=844):
        self.call('Emulation.setDeviceMetricsOverride', width=width, height=height, deviceScaleFactor=2, mobile=True)

    def screenshot(self, path, full=True):
        params = {'format': 'png'}
        if full:
            params['captureBeyondViewport'] = True
            h = self.eval('document.documentElement.scrollHeight')
            w = self.eval('document.documentElement.clientWidth')
            params['clip'] = {'x': 0, 'y': 0, 'width': w, 'height': h, 'scale': 1}
        data = self.call('Page.captureScreenshot', **params)['data']
        with open(path, 'wb') as f:
            f.write(base64.b64decode(data))

    def close(self):
        try:
            if self._dead is None:
                try:
                    self.call('Browser.close', session=False)
                except BrowserError:
                    pass
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        finally:
            for fd in (self._w, self._r):
                try:
                    os.close(fd)
                except OSError:
                    pass
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
