# Milliseconds that never wrap: the clock of the network's timeouts and timers.
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
