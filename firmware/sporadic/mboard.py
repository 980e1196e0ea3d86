# What every board with MicroPython's `machine` module does the same way
# (ESP32, ESP32-S3, ESP8266, Pico W): each boards/<name>/board.py keeps its
# own facts (pins, watchdog and sleep limits, RTC memory) and passes them in.
# Not used on the unix port.
import machine
import time

_wdt = None
_pins = {}


def unique_id():
    import binascii
    return binascii.hexlify(machine.unique_id()).decode()


def time_s():
    return time.time()


def set_time(unix_s):
    off = 946684800 if time.gmtime(0)[0] == 2000 else 0   # the port's epoch
    t = time.gmtime(int(unix_s) - off)
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


def wdt_feed(timeout_ms):
    global _wdt
    if _wdt is None:
        _wdt = machine.WDT(timeout=timeout_ms)
    _wdt.feed()


def sleep_ms(ms, light, deep_ms, deep_max_ms, chunk_ms, wdt_ms):
    """Sleep ms: deep sleep (the board boots again on wake) when deep_ms is
    set and ms reaches it, else light sleep (or time.sleep_ms when light is
    False) in chunks short enough to feed a running watchdog."""
    ms = int(ms)
    if deep_ms and ms >= deep_ms:
        machine.deepsleep(min(ms, deep_max_ms) if deep_max_ms else ms)
    while ms > 0:
        step = min(ms, chunk_ms if _wdt is None else wdt_ms // 2)
        if light:
            machine.lightsleep(step)
        else:
            time.sleep_ms(step)
        if _wdt is not None:
            _wdt.feed()
        ms -= step


def rtc_memory(data, size):
    if not size:
        return b''
    rtc = machine.RTC()
    if data is not None:
        if len(data) > size:
            raise ValueError("rtc memory holds %d bytes" % size)
        rtc.memory(data)
    return bytes(rtc.memory())
