# sporadic board module: Raspberry Pi Pico W (RP2040). Copied to /lib/board.py.
# Facts and their MicroPython sources: boards/rp2-pico-w/board.json.
from micropython import const
import machine
import time

NAME = "rp2-pico-w"
LED_PIN = "LED"  # on the CYW43 Wi-Fi chip (WL_GPIO0)
WDT_MS = const(8000)  # WDT_TIMEOUT_MAX is 8388 on RP2040
CHUNK_MS = const(3600000)  # lightsleep refuses delays of 2**32 us or more

# Tunables the runtime may assign.
LIGHT = True  # machine.lightsleep; False: time.sleep_ms (keeps USB alive)
DEEP_MS = 0  # deepsleep here is lightsleep + reset: never worth it

_wdt = None
_pins = {}


def unique_id():
    import binascii
    return binascii.hexlify(machine.unique_id()).decode()


def time_s():
    return time.time()


def set_time(unix_s):
    off = 946684800 if time.gmtime(0)[0] == 2000 else 0
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


def led(on):
    pin(LED_PIN, on)


def wdt_feed():
    global _wdt
    if _wdt is None:
        _wdt = machine.WDT(timeout=WDT_MS)
    _wdt.feed()


def sleep_ms(ms):
    ms = int(ms)
    while ms > 0:
        step = min(ms, CHUNK_MS if _wdt is None else WDT_MS // 2)
        if LIGHT:
            machine.lightsleep(step)
        else:
            time.sleep_ms(step)
        if _wdt is not None:
            _wdt.feed()
        ms -= step


def reset():
    machine.reset()


def rtc_memory(data=None):
    return b""  # no RTC user memory on RP2040
