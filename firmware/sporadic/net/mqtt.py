# A small MQTT 3.1.1 client for a board (docs/mqtt.md): what the broker sync
# (net/broker.py) needs and nothing more. CONNECT (fixed client id, a
# persistent session: clean_session 0), SUBSCRIBE at QoS 1, PUBLISH at QoS
# 0/1 (PUBACK awaited; an unacknowledged record is sent again at the next
# wake), PUBACK of what arrives (after the caller kept it), PINGREQ,
# DISCONNECT. Every read and write has a deadline (a broker that trickles
# or stops costs the caller its slice, never more); a message longer than
# max_msg is read away in pieces and reported; a message is handed over in
# 512-byte pieces (piece()), never held whole.
# Runs on MicroPython's socket (unix port, ESP32) and on CPython (tests).
# micropython-lib's umqtt.simple would need the network at deploy time (mip)
# and blocks without a deadline: this is the project's own.
try:
    from micropython import const
except ImportError:  # CPython
    def const(x):
        return x
import socket
from sporadic.net.ticks import ticks_ms, ticks_diff, TIMED_OUT

CONNECT = const(0x10)
CONNACK = const(0x20)
PUBLISH = const(0x30)
PUBACK = const(0x40)
SUBSCRIBE = const(0x82)
SUBACK = const(0x90)
PINGREQ = const(0xC0)
PINGRESP = const(0xD0)
DISCONNECT = const(0xE0)
MAX_MSG = const(16384)     # the longest message a board takes (a bigger one is skipped)
_PIECE = const(512)        # bytes read at once from the socket

REFUSED = ('', 'unacceptable protocol version', 'client id rejected', 'server unavailable',
           'bad user name or password', 'not authorised')


class MQTTError(OSError):
    pass


def _str(s):
    if isinstance(s, str):
        s = s.encode()
    return bytes((len(s) >> 8, len(s) & 0xff)) + s


def _head(kind, n):
    # fixed header: type/flags, then the remaining length (1-4 bytes, 7 bits each)
    b = bytearray((kind,))
    while True:
        d = n & 0x7f
        n >>= 7
        b.append(d | 0x80 if n else d)
        if not n:
            return bytes(b)


class Client:
    """One session with a broker; every call bounded by `deadline` (a ticks_ms
    value, set per wake by the caller: connect to disconnect)."""

    def __init__(self, cid, host, port=1883, user=None, password=None, keepalive=60,
                 tls=None, max_msg=MAX_MSG, ticks=ticks_ms):
        self.cid = cid
        self.host = host
        self.port = port
        self.user = user
        self.password = password
        self.keepalive = keepalive
        self.tls = tls              # None, or {'ca': PEM text or None, 'insecure': bool}
        self.max_msg = max_msg
        self.ticks = ticks
        self.sock = None
        self.raw = None             # the TCP socket under TLS: its timeout bounds the TLS reads too
        self.deadline = None
        self.pid = 0
        self.unacked = []           # packet ids published at QoS 1, no PUBACK yet
        self.pong = False
        self.skipped = 0            # messages longer than max_msg, read away
        self.left = 0               # bytes of the message being delivered not read yet (piece)
        self._pbuf = None           # the one buffer of piece()
        self.bytes_out = 0
        self.bytes_in = 0

    # ---- bytes, within the deadline ----

    def _left(self):
        left = ticks_diff(self.deadline, self.ticks())
        if left <= 0:
            raise MQTTError('broker: out of time')
        return left

    def _send(self, data):
        mv = memoryview(data)
        s = self.sock
        put = getattr(s, 'send', None) or s.write
        while len(mv):
            self.raw.settimeout(self._left() / 1000)
            try:
                n = put(mv)
            except OSError as e:
                if e.args and e.args[0] in TIMED_OUT:
                    continue        # checked against the deadline above
                raise
            if n is None:
                n = 0
            self.bytes_out += n
            mv = mv[n:]

    def _recv(self, n):
        # n bytes into one new buffer of n (header fields: a few bytes)
        buf = bytearray(n)
        self._fill(memoryview(buf))
        return buf

    def _fill(self, mv):
        # len(mv) bytes into mv (no piece joined to the next)
        n = len(mv)
        got = 0
        s = self.sock
        into = getattr(s, 'recv_into', None) or s.readinto
        while got < n:
            self.raw.settimeout(self._left() / 1000)
            k = n - got
            try:
                r = into(mv[got:], k if k < _PIECE else _PIECE)
            except OSError as e:
                if e.args and e.args[0] in TIMED_OUT:
                    continue        # checked against the deadline above
                raise
            if r is None:
                continue            # MicroPython: a timeout without an error
            if not r:
                raise MQTTError('broker closed the connection')
            got += r
        self.bytes_in += n

    def piece(self):
        """The next piece (at most 512 bytes, a memoryview of one buffer
        reused for every piece: write it away before the next call) of the
        message being delivered to on_msg, or None at its end."""
        k = self.left
        if k <= 0:
            return None
        if k > _PIECE:
            k = _PIECE
        if self._pbuf is None:
            self._pbuf = bytearray(_PIECE)
        mv = memoryview(self._pbuf)[:k]
        self._fill(mv)
        self.left -= k
        return mv

    def _skip(self, n):
        self.left = n
        while self.piece() is not None:
            pass

    def _packet_head(self):
        return self._recv(1)[0], self._length()

    def _length(self):
        # the fixed header's remaining length (1 to 4 bytes, 7 bits each)
        n = 0
        sh = 0
        while True:
            d = self._recv(1)[0]
            n |= (d & 0x7f) << sh
            if not d & 0x80:
                return n
            sh += 7
            if sh > 21:
                raise MQTTError('broker: bad packet length')

    # ---- the session ----

    def connect(self, deadline, clean=False):
        """Open the connection and the session; True when the broker held
        this client's session (its subscriptions and queued messages)."""
        self.deadline = deadline
        ai = socket.getaddrinfo(self.host, self.port)[0]
        s = socket.socket(ai[0], socket.SOCK_STREAM)
        self.sock = s
        self.raw = s
        s.settimeout(self._left() / 1000)
        s.connect(ai[-1])
        if self.tls is not None:
            self.sock = _wrap(s, self.host, self.tls)
        flags = 0x02 if clean else 0
        pay = _str(self.cid)
        if self.user is not None:
            flags |= 0x80
            pay += _str(self.user)
            if self.password is not None:
                flags |= 0x40
                pay += _str(self.password)
        var = _str('MQTT') + bytes((4, flags, self.keepalive >> 8, self.keepalive & 0xff))
        self._send(_head(CONNECT, len(var) + len(pay)) + var + pay)
        t, n = self._packet_head()
        if t != CONNACK or n != 2:
            raise MQTTError('broker: no CONNACK')
        b = self._recv(2)
        if b[1]:
            raise MQTTError('broker refused the connection: %s' % (
                REFUSED[b[1]] if b[1] < len(REFUSED) else 'code %d' % b[1]))
        return bool(b[0] & 1)

    def _next_pid(self):
        self.pid = self.pid % 65535 + 1
        return self.pid

    def subscribe(self, topics, on_msg):
        """SUBSCRIBE each topic filter at QoS 1; messages that arrive before
        the SUBACK go to on_msg as in poll()."""
        pid = self._next_pid()
        body = bytes((pid >> 8, pid & 0xff))
        for t in topics:
            body += _str(t) + b'\x01'
        self._send(_head(SUBSCRIBE, len(body)) + body)
        while True:
            t, n = self._packet_head()
            if t & 0xf0 == SUBACK:
                b = self._recv(n)
                if (b[0] << 8 | b[1]) != pid:
                    continue
                for c in b[2:]:
                    if c == 0x80:
                        raise MQTTError('broker refused the subscription (not authorised?)')
                return
            self._dispatch(t, n, on_msg)

    def publish(self, topic, payload, qos=1, retain=False):
        """Send one message; at QoS 1 its packet id waits in `unacked`
        until the broker's PUBACK arrives (poll or wait_acks)."""
        if isinstance(payload, str):
            payload = payload.encode()
        t = _str(topic)
        n = len(t) + len(payload) + (2 if qos else 0)
        hdr = _head(PUBLISH | (qos << 1) | (1 if retain else 0), n) + t
        if qos:
            pid = self._next_pid()
            hdr += bytes((pid >> 8, pid & 0xff))
            self.unacked.append(pid)
        self._send(hdr)
        self._send(payload)

    def wait_acks(self, on_msg):
        """Read until every QoS 1 message published has its PUBACK."""
        while self.unacked:
            t, n = self._packet_head()
            self._dispatch(t, n, on_msg)

    def ping(self):
        self.pong = False
        self._send(bytes((PINGREQ, 0)))

    def poll(self, on_msg, quiet_ms):
        """Take what the broker sends until it has answered the last PINGREQ
        and then sent nothing for quiet_ms (all it held for this session has
        come), or the deadline. on_msg keeps a message
        durably before it returns: only then is it acknowledged (PUBACK),
        so a message cut off is delivered again. on_msg(topic, size, piece):
        piece() gives the payload's next piece (None at its end; what
        on_msg leaves unread is read away); size and piece None: the
        message was longer than max_msg and was read away."""
        while True:
            if self.pong:
                left = ticks_diff(self.deadline, self.ticks())
                w = quiet_ms if quiet_ms < left else left
                if w <= 0:
                    return
                self.raw.settimeout(w / 1000)
                one = bytearray(1)
                into = getattr(self.sock, 'recv_into', None) or self.sock.readinto
                try:
                    r = into(one, 1)
                except OSError as e:
                    if e.args and e.args[0] in TIMED_OUT:
                        return      # quiet: done
                    raise
                if r is None:
                    return          # quiet (MicroPython: a timeout without an error)
                if not r:
                    raise MQTTError('broker closed the connection')
                self.bytes_in += 1
                t, n = one[0], self._length()
            else:
                t, n = self._packet_head()
            self._dispatch(t, n, on_msg)

    def _dispatch(self, t, n, on_msg):
        k = t & 0xf0
        if k == PUBLISH:
            qos = (t >> 1) & 3
            tl = self._recv(2)
            tl = tl[0] << 8 | tl[1]
            topic = bytes(self._recv(tl)).decode()
            n -= 2 + tl
            pid = None
            if qos:
                p = self._recv(2)
                pid = p[0] << 8 | p[1]
                n -= 2
            if n > self.max_msg:
                self._skip(n)
                self.skipped += 1
                on_msg(topic, None, None)
            else:
                # the payload in pieces (piece()), never whole: a message
                # costs the heap one 512-byte buffer whatever its length
                self.left = n
                on_msg(topic, n, self.piece)
                self._skip(self.left)       # what on_msg did not read
            if qos:
                # QoS 2 is never asked for (SUBSCRIBE at 1): the broker downgrades
                self._send(bytes((PUBACK, 2, pid >> 8, pid & 0xff)))
        elif k == PUBACK:
            b = self._recv(n)
            pid = b[0] << 8 | b[1]
            if pid in self.unacked:
                self.unacked.remove(pid)
        elif k == PINGRESP:
            self._skip(n)
            self.pong = True
        else:
            self._skip(n)

    def disconnect(self):
        """A clean DISCONNECT (the broker then drops no will and keeps the
        session), then the socket closes; never raises."""
        s = self.sock
        if s is None:
            return
        try:
            self.raw.settimeout(1)
            (getattr(s, 'send', None) or s.write)(bytes((DISCONNECT, 0)))
            self.bytes_out += 2
        except Exception:
            pass
        self.close()

    def close(self):
        s = self.sock
        r = self.raw
        self.sock = self.raw = None
        for x in (s, r):
            if x is not None:
                try:
                    x.close()
                except Exception:
                    pass


def der(pem):
    """The first certificate of a PEM text as DER bytes (what MicroPython's
    ssl takes; CPython's too)."""
    import binascii
    b = pem.find('-----BEGIN CERTIFICATE-----')
    e = pem.find('-----END CERTIFICATE-----', b)
    if b < 0 or e < 0:
        raise ValueError('no PEM certificate')
    body = pem[b + 27:e].replace('\r', '').replace('\n', '')
    return binascii.a2b_base64(body)


def _wrap(s, host, tls):
    # TLS (mqtts://): the board's ssl module. With a CA (cfg mqtt.ca, PEM)
    # the broker's certificate is checked; without one it is not (the broker
    # is untrusted anyway: every line is signed or MACed; TLS then keeps the
    # password and the traffic from onlookers only: docs/mqtt.md)
    import ssl
    if hasattr(ssl, 'SSLContext'):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ca = tls.get('ca')
        if ca:
            ctx.load_verify_locations(cadata=der(ca))
            ctx.verify_mode = ssl.CERT_REQUIRED
        else:
            if hasattr(ctx, 'check_hostname'):
                ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        return ctx.wrap_socket(s, server_hostname=host)
    return ssl.wrap_socket(s, server_hostname=host)
