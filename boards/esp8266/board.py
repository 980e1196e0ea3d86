# sporadic board module: ESP8266 with 2 MiB+ flash. Copied to /lib/board.py.
# Facts and their MicroPython sources: boards/esp8266/board.json.
from micropython import const
import machine
import time

NAME = "esp8266"
LED_PIN = const(2)  # ESP-12 blue LED, lit when low
WDT_MS = const(5000)  # the only timeout machine.WDT accepts on this port
RTC_MEM = const(492)  # MEM_USER_MAXLEN
DEEP_MAX_MS = const(4200000)  # deepsleep counts microseconds in 32 bits
CHUNK_MS = const(3600000)

# Tunables the runtime may assign.
LIGHT = True  # machine.lightsleep (idles the CPU); False: time.sleep_ms
DEEP_MS = 0  # deepsleep needs GPIO16 wired to RST: set it only then; 0 = never

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
    pin(LED_PIN, not on)


def wdt_feed():
    global _wdt
    if _wdt is None:
        _wdt = machine.WDT(timeout=WDT_MS)
    _wdt.feed()


def sleep_ms(ms):
    ms = int(ms)
    if DEEP_MS and ms >= DEEP_MS:
        machine.deepsleep(min(ms, DEEP_MAX_MS))  # reboots on wake
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
