# The clock of the network's timeouts and timers (server, node, peer, the
# broker's loop and client), and what a socket's timeout raises: its own
# module so that a board on a broker alone keeps it without wire.py and
# hmac (about 3.7 KB of a 32-bit heap, docs/mqtt.md#memory).
import time

try:
    _raw = time.ticks_ms
    _PERIOD = time.ticks_add(0, -1) + 1
    _mono = [0, 0]          # last raw reading, wraps seen x period

    def ticks_ms():
        """Milliseconds that never wrap (time.ticks_ms wraps after days)."""
        r = _raw()
        if r < _mono[0]:
            _mono[1] += _PERIOD
        _mono[0] = r
        return r + _mono[1]
except AttributeError:  # CPython
    def ticks_ms():
        return int(time.monotonic() * 1000)


def ticks_diff(a, b):
    return a - b


# what a socket's timeout raises (OSError's first argument): EAGAIN (MicroPython's
# timeout), ETIMEDOUT, ETIMEDOUT (lwip), CPython's 'timed out'
TIMED_OUT = (11, 110, 116, 'timed out')
