# sporadic board module: generic ESP32 (4 MiB). Copied to /lib/board.py.
# Facts and their MicroPython sources: boards/esp32/board.json.
from micropython import const
import machine
import time

NAME = "esp32"
LED_PIN = const(2)  # DOIT-style DevKit; DevKitC has no user LED
WDT_MS = const(60000)  # machine.WDT takes any positive timeout here
RTC_MEM = const(2048)  # MICROPY_HW_RTC_USER_MEM_MAX
CHUNK_MS = const(3600000)  # longest single sleep call

# Tunables the runtime may assign (board.LIGHT = False while a link is expected).
LIGHT = True  # machine.lightsleep; False: time.sleep_ms (keeps USB/UART alive)
DEEP_MS = 1800000  # sleeps at least this long use deepsleep (reboot); 0 = never

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
    if DEEP_MS and ms >= DEEP_MS:
        machine.deepsleep(ms)  # does not return: the board boots again
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
    rtc = machine.RTC()
    if data is not None:
        if len(data) > RTC_MEM:
            raise ValueError("rtc memory holds %d bytes" % RTC_MEM)
        rtc.memory(data)
    return bytes(rtc.memory())
