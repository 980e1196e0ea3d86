# sporadic board module: ESP8266 with 2 MiB+ flash. Copied to /lib/board.py.
# Facts and their MicroPython sources: boards/esp8266/board.json.
from micropython import const

NAME = "esp8266"
LED_PIN = const(2)  # ESP-12 blue LED, lit when low
WDT_MS = const(5000)  # the only timeout machine.WDT accepts on this port
RTC_MEM = const(492)  # MEM_USER_MAXLEN
DEEP_MAX_MS = const(4200000)  # deepsleep counts microseconds in 32 bits
CHUNK_MS = const(3600000)

# Tunables the runtime may assign.
LIGHT = True  # machine.lightsleep (idles the CPU); False: time.sleep_ms
DEEP_MS = 0  # deepsleep needs GPIO16 wired to RST: set it only then; 0 = never

from sporadic.device.mboard import (unique_id, time_s, set_time, pin, pin_toggle, reset,  # noqa: E402
                             wdt_feed, sleep_ms, rtc_memory)


def led(on):
    pin(LED_PIN, not on)  # lit when low
