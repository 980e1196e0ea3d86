# What every board with MicroPython's `machine` module does the same way
# (ESP32, ESP32-S3, ESP8266, Pico W). Each boards/<name>/board.py holds its
# facts as constants (WDT_MS, RTC_MEM, CHUNK_MS, DEEP_MAX_MS and the
# tunables LIGHT, DEEP_MS) and imports these functions, which read them from
# the `board` module when called. Not used on the unix port.
from micropython import const
import machine
import sys
import time

MAGIC = const(0x53507444)   # beside the time a feed leaves in the watchdog's scratch registers (keeptime.py reads them)


def _b():
    return sys.modules['board']

_wdt = None
_scratch = 0    # board.WDT_SCRATCH once the watchdog runs (RP2040), else 0
_chunk = 0      # ms slept between two feeds (board.FEED_MS, else half of WDT_MS)
_pins = {}


def unique_id():
    import binascii
    return binascii.hexlify(machine.unique_id()).decode()


def time_s():
    return time.time()


def set_time(unix_s):
    set_port_time(int(unix_s) - (946684800 if time.gmtime(0)[0] == 2000 else 0))   # the port's epoch


def set_port_time(t):
    # t: seconds in the port's own epoch (what time.time() reads)
    t = time.gmtime(t)
    machine.RTC().datetime((t[0], t[1], t[2], t[6], t[3], t[4], t[5], 0))


def _pin(n):
    p = _pins.get(n)
    if p is None:
        p = _pins[n] = machine.Pin(n, machine.Pin.OUT)
    return p


def pin(n, value):
    _pin(n).value(1 if value else 0)


def pin_toggle(n):
    p = _pin(n)
    p.value(1 - p.value())


def reset():
    machine.reset()


def wdt_feed():
    global _wdt, _scratch, _chunk
    if _wdt is None:
        b = _b()
        _wdt = machine.WDT(timeout=b.WDT_MS)
        _scratch = getattr(b, 'WDT_SCRATCH', 0)
        _chunk = getattr(b, 'FEED_MS', 0) or b.WDT_MS // 2
    _feed()


def _feed():
    _wdt.feed()
    if _scratch:
        # an RP2040 loses its clock in a watchdog reset, not these two
        # registers: the time of the last feed, which the reset follows by
        # WDT_MS (time_kept)
        t = int(time.time()) & 0xffffffff
        m = machine.mem32
        m[_scratch + 4] = t
        m[_scratch] = t ^ MAGIC


def sleep_ms(ms):
    """Sleep ms: deep sleep (the board boots again on wake) when DEEP_MS is
    set and ms reaches it, else light sleep (or time.sleep_ms when LIGHT is
    False) in chunks short enough to feed a running watchdog."""
    b = _b()
    ms = int(ms)
    if b.DEEP_MS and ms >= b.DEEP_MS:
        machine.deepsleep(min(ms, b.DEEP_MAX_MS) if b.DEEP_MAX_MS else ms)
    if _wdt is not None:
        _feed()     # each chunk starts at a feed: an action's sleep follows work since the last
    while ms > 0:
        step = min(ms, b.CHUNK_MS if _wdt is None else _chunk)
        if b.LIGHT:
            machine.lightsleep(step)
        else:
            time.sleep_ms(step)
        if _wdt is not None:
            _feed()
        ms -= step


def rtc_memory(data=None):
    size = _b().RTC_MEM
    if not size:
        return b''
    rtc = machine.RTC()
    if data is not None:
        if len(data) > size:
            raise ValueError("rtc memory holds %d bytes" % size)
        rtc.memory(data)
    return bytes(rtc.memory())
