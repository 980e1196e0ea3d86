"""`companion ui`: the fleet folder as a read-only local web page.

The standard library's ThreadingHTTPServer on 127.0.0.1 (another address
only with --host, on purpose). Three paths, every other one is a 404:

    /             the page (page.html next to this file: HTML, CSS, a small script)
    /state.json   what it shows (view.snapshot), ?span=1h|6h|1d|7d|30d for the timeline,
                  ?plan=ID,ID the boards whose next 24 hours it shows (default the first 24);
                  an ETag from the folder's stamp (view.stamp) and the minute:
                  the page asks every POLL_S seconds with If-None-Match, a 304 costs
                  a few stat calls; a sync, serve, add or cancel shows without a reload
    /favicon.ico  204 (a browser asks for it)

Nothing is fetched from elsewhere, nothing is written. The clock is passed
in (now), so a test or a bench can give the fleet's own.
"""
import hashlib
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from sporadic.core.timeutil import parse_duration
from companion.ui import view

PAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'page.html')
POLL_S = 2          # the page's poll interval (it reads it from the state)


def page_bytes():
    with open(PAGE, 'rb') as f:
        return f.read()


class Cache:
    """The last answer per span, under its ETag: many tabs, one render."""

    def __init__(self):
        self.lock = threading.Lock()
        self.last = {}

    def get(self, key):
        with self.lock:
            return self.last.get(key)

    def put(self, key, value):
        with self.lock:
            if len(self.last) >= 16:      # spans x boards asked for: a few, kept
                self.last.clear()
            self.last[key] = value


def make_server(folder, host='127.0.0.1', port=0, now=None, log=None):
    """A ThreadingHTTPServer serving the page of the fleet at folder (not
    started: serve_forever() it, or handle_request()); now: the clock
    (seconds), default time.time."""
    clock = now or time.time
    cache = Cache()
    page = page_bytes()
    # bound to this machine only: a page of another site that names this
    # address (DNS rebinding) is refused by its Host header; --host on purpose
    # (another address) answers whatever name the network gives it
    loopback = {'127.0.0.1', 'localhost', '[::1]', '::1'}
    allowed = loopback if host in loopback else None

    class Handler(BaseHTTPRequestHandler):
        server_version = 'sporadic-ui'
        sys_version = ''

        def log_message(self, fmt, *args):
            if log:
                log('%s %s' % (self.address_string(), fmt % args))

        def _send(self, code, body, ctype, extra=()):
            self.send_response(code)
            self.send_header('Content-Type', ctype)
            self.send_header('Content-Length', str(len(body)))
            self.send_header('Cache-Control', 'no-cache')
            self.send_header('X-Content-Type-Options', 'nosniff')
            self.send_header('Referrer-Policy', 'no-referrer')
            for k, v in extra:
                self.send_header(k, v)
            self.end_headers()
            if self.command != 'HEAD':
                self.wfile.write(body)

        def _error(self, code, msg):
            self._send(code, (json.dumps({'error': msg}) + '\n').encode(), 'application/json')

        def do_HEAD(self):
            self.do_GET()

        def do_GET(self):
            if allowed is not None and self.headers.get('Host', '').rsplit(':', 1)[0] not in allowed:
                return self._error(403, 'this page answers to %s only' % host)
            url = urlsplit(self.path)
            if url.path in ('/', '/index.html'):
                return self._send(200, page, 'text/html; charset=utf-8',
                                  [('Content-Security-Policy', "default-src 'none'; connect-src 'self'; "
                                    "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src 'self' data:")])
            if url.path == '/favicon.ico':
                return self._send(204, b'', 'image/x-icon')
            if url.path != '/state.json':
                return self._error(404, 'no such page: %s (the fleet page is at /)' % url.path[:80])
            q = parse_qs(url.query)
            span_text = (q.get('span') or ['1d'])[0]
            try:
                span = parse_duration(span_text)
            except ValueError:
                return self._error(400, 'span=%s: want a duration such as 1h, 1d, 7d' % span_text[:20])
            plan_for = tuple(h for h in (q.get('plan') or [''])[0].split(',') if h)[:view.PLAN_BOARDS] or None
            t = int(clock())
            st = view.stamp(folder)
            tag = '"%s"' % hashlib.sha256(repr((st, span, plan_for, t // 60)).encode()).hexdigest()[:24]
            if self.headers.get('If-None-Match') == tag:
                return self._send(304, b'', 'application/json', [('ETag', tag)])
            hit = cache.get((span, plan_for))
            if hit is not None and hit[0] == tag:
                body = hit[1]
            else:
                t0, c0 = time.perf_counter(), time.thread_time()
                try:
                    data = view.snapshot(folder, t, span, plan_for)
                except Exception as e:   # a bug: one line on the page, the server goes on
                    data = {'now': t, 'problems': ['internal error (a bug, please report it): %s: %s'
                                                   % (type(e).__name__, ' '.join(str(e).split())[:200])]}
                data['render_ms'] = round((time.perf_counter() - t0) * 1000, 1)
                data['render_cpu_ms'] = round((time.thread_time() - c0) * 1000, 1)   # this thread's CPU
                data['poll_s'] = POLL_S
                data['spans'] = view.SPANS
                body = json.dumps(data, separators=(',', ':')).encode()
                cache.put((span, plan_for), (tag, body))
            return self._send(200, body, 'application/json', [('ETag', tag)])

    import socket

    class Server(ThreadingHTTPServer):
        address_family = socket.AF_INET6 if ':' in host else socket.AF_INET
        daemon_threads = True

    return Server((host, port), Handler)


def serve(folder, host='127.0.0.1', port=8370, seconds=None, out=print):
    """Run the page until Ctrl-C (or for `seconds`); prints its address first."""
    server = make_server(folder, host, port)
    addr = server.server_address
    shown = '[%s]' % addr[0] if ':' in addr[0] else addr[0]
    out('fleet page of %s on http://%s:%d/ (Ctrl-C to stop)' % (folder, shown, addr[1]), flush=True)
    if seconds is not None:
        threading.Timer(seconds, server.shutdown).start()
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
