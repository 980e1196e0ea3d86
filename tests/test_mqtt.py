"""The fleet through an MQTT broker (issue #32, docs/mqtt.md), against a real
Mosquitto (tests/broker.py; skipped where it is not installed)."""
import time

import pytest

from tests.broker import Mosquitto


def paho_client(cid, clean=True):
    import paho.mqtt.client as mqtt
    return mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=cid, clean_session=clean,
                       protocol=mqtt.MQTTv311)


def retained(url_port, topic, timeout=10):
    """The retained messages under topic (a filter), read by a fresh client."""
    import threading
    got = {}
    done = threading.Event()
    c = paho_client('reader-%d' % time.monotonic_ns())
    c.on_message = lambda cl, u, m: got.__setitem__(m.topic, bytes(m.payload)) if m.retain else None
    c.on_subscribe = lambda *a: done.set()
    c.connect('127.0.0.1', url_port)
    c.loop_start()
    c.subscribe(topic, 1)
    done.wait(timeout)
    # the retained messages come right after the SUBACK; a PINGREQ round trip is not exposed by paho:
    # wait until nothing new arrives for a moment (bounded)
    n = -1
    end = time.monotonic() + timeout
    while n != len(got) and time.monotonic() < end:
        n = len(got)
        done.clear()
        done.wait(0.3)
    c.disconnect()
    c.loop_stop()
    return got


def test_the_fixture_broker_keeps_retained_messages_across_a_restart(mosquitto):
    c = paho_client('writer')
    c.connect('127.0.0.1', mosquitto.port)
    c.loop_start()
    c.publish('t/a', b'kept', qos=1, retain=True).wait_for_publish(10)
    c.disconnect()
    c.loop_stop()
    mosquitto.stop()
    mosquitto.start()
    assert retained(mosquitto.port, 't/#') == {'t/a': b'kept'}
