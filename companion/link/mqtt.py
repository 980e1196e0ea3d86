"""The companion's link to an MQTT broker (docs/mqtt.md), on paho-mqtt 2.x:
one session (a fixed client id, persistent: what boards publish while the
companion is away waits for it), messages taken with manual
acknowledgement (acknowledged only once the fleet folder holds them: a
companion cut off mid-way is sent them again), publishes awaited.
Knows no fleet folder and no line format: companion/sync/mqtt.py does.

    link = BrokerLink(cfg, client_id)       # cfg: companion.fleet.provision.parse_url's dict
    link.open(['PRE/f/#', 'PRE/r/+'])       # UserError(one line) when the broker cannot be reached
    msgs = link.collect()                   # [Message], until the broker has sent all it held
    link.ack(msgs); link.publish(topic, payload, retain=True); link.close()
"""
import queue
import ssl
import threading
import time

from companion.errors import UserError

QUIET_S = 0.5       # nothing more for this long after the subscriptions: all has come
TIMEOUT_S = 20.0    # connect, subscribe, a publish, at most


class Message:
    __slots__ = ('topic', 'payload', 'retain', 'mid', 'qos')

    def __init__(self, m):
        self.topic = m.topic
        self.payload = bytes(m.payload)
        self.retain = bool(m.retain)
        self.mid = m.mid
        self.qos = m.qos


def url_of(cfg):
    return '%s://%s:%d' % ('mqtts' if cfg.get('tls') else 'mqtt', cfg['host'], cfg['port'])


class BrokerLink:
    def __init__(self, cfg, client_id, timeout=TIMEOUT_S):
        import paho.mqtt.client as mqtt
        self.cfg = cfg
        self.url = url_of(cfg)
        self.timeout = timeout
        self.q = queue.Queue()
        self.connected = threading.Event()
        self.subscribed = threading.Event()
        self.rc = None
        self.session_present = None
        self.last_msg = time.monotonic()
        c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=False,
                        protocol=mqtt.MQTTv311, manual_ack=True)
        if cfg.get('user') is not None:
            c.username_pw_set(cfg['user'], cfg.get('password'))
        if cfg.get('tls'):
            ctx = ssl.create_default_context()
            if cfg.get('ca'):
                ctx.load_verify_locations(cadata=cfg['ca'])
            c.tls_set_context(ctx)
        c.on_connect = self._on_connect
        c.on_subscribe = lambda *a: self.subscribed.set()
        c.on_message = self._on_message
        c.on_disconnect = lambda *a: None
        self.c = c

    def _on_connect(self, client, userdata, flags, rc, props=None):
        self.rc = rc
        self.session_present = bool(getattr(flags, 'session_present', False))
        self.connected.set()

    def _on_message(self, client, userdata, m):
        self.last_msg = time.monotonic()
        self.q.put(Message(m))

    def open(self, topics):
        """Connect and subscribe each topic filter at QoS 1 (a subscription
        made again: the broker sends its retained messages again)."""
        try:
            self.c.connect(self.cfg['host'], self.cfg['port'], keepalive=60)
        except (OSError, ssl.SSLError) as e:
            raise UserError('broker %s: cannot connect: %s' % (self.url, getattr(e, 'strerror', None) or e)) from None
        self.c.loop_start()
        if not self.connected.wait(self.timeout):
            self.close()
            raise UserError('broker %s: no answer to CONNECT in %.0f s' % (self.url, self.timeout))
        if self.rc is not None and self.rc.is_failure:
            self.close()
            raise UserError('broker %s refused the connection: %s' % (self.url, self.rc))
        if topics:
            self.c.subscribe([(t, 1) for t in topics])
            if not self.subscribed.wait(self.timeout):
                self.close()
                raise UserError('broker %s: no answer to SUBSCRIBE in %.0f s' % (self.url, self.timeout))
        self.last_msg = time.monotonic()

    def collect(self, quiet=QUIET_S, limit=None):
        """The messages the broker sends until it has been quiet for `quiet`
        seconds (after the subscription: its retained and queued ones)."""
        out = []
        end = time.monotonic() + (limit or 10 * self.timeout)
        while time.monotonic() < end:
            wait = self.last_msg + quiet - time.monotonic()
            if wait <= 0 and self.q.empty():
                break
            try:
                out.append(self.q.get(timeout=max(wait, 0.01)))
            except queue.Empty:
                pass
        return out

    def ack(self, msgs):
        for m in msgs:
            if m.qos:
                self.c.ack(m.mid, m.qos)

    def publish(self, topic, payload, retain=False):
        info = self.c.publish(topic, payload, qos=1, retain=retain)
        info.wait_for_publish(self.timeout)
        if not info.is_published():
            raise UserError('broker %s: no PUBACK for %s in %.0f s (nothing is lost: run it again)'
                            % (self.url, topic, self.timeout))

    def publish_all(self, msgs, retain=False):
        """Publish [(topic, payload)] at once, then wait for every PUBACK
        (a remote broker's round trip is paid once, not per message)."""
        infos = [(t, self.c.publish(t, p, qos=1, retain=retain)) for t, p in msgs]
        end = time.monotonic() + self.timeout + 0.01 * len(infos)
        for t, info in infos:
            info.wait_for_publish(max(0.1, end - time.monotonic()))
            if not info.is_published():
                raise UserError('broker %s: no PUBACK for %s in time (nothing is lost: run it again)'
                                % (self.url, t))

    def close(self):
        try:
            self.c.disconnect()
        finally:
            self.c.loop_stop()
