# sporadic board module: ESP8266 with 2 MiB+ flash. Copied to /lib/board.py.
# Facts and their MicroPython sources: boards/esp8266/board.json.
from micropython import const
from sporadic import mboard

NAME = "esp8266"
LED_PIN = const(2)  # ESP-12 blue LED, lit when low
WDT_MS = const(5000)  # the only timeout machine.WDT accepts on this port
RTC_MEM = const(492)  # MEM_USER_MAXLEN
DEEP_MAX_MS = const(4200000)  # deepsleep counts microseconds in 32 bits
CHUNK_MS = const(3600000)

# Tunables the runtime may assign.
LIGHT = True  # machine.lightsleep (idles the CPU); False: time.sleep_ms
DEEP_MS = 0  # deepsleep needs GPIO16 wired to RST: set it only then; 0 = never

unique_id = mboard.unique_id
time_s = mboard.time_s
set_time = mboard.set_time
pin = mboard.pin
pin_toggle = mboard.pin_toggle
reset = mboard.reset


def wdt_feed():
    mboard.wdt_feed(WDT_MS)


def sleep_ms(ms):
    mboard.sleep_ms(ms, LIGHT, DEEP_MS, DEEP_MAX_MS, CHUNK_MS, WDT_MS)


def rtc_memory(data=None):
    return mboard.rtc_memory(data, RTC_MEM)


def led(on):
    pin(LED_PIN, not on)  # lit when low
