# sporadic board module: generic ESP32 (4 MiB). Copied to /lib/board.py.
# Facts and their MicroPython sources: boards/esp32/board.json.
from micropython import const

NAME = "esp32"
LED_PIN = const(2)  # DOIT-style DevKit; DevKitC has no user LED
WDT_MS = const(60000)  # machine.WDT takes any positive timeout here
RTC_MEM = const(2048)  # MICROPY_HW_RTC_USER_MEM_MAX
CHUNK_MS = const(3600000)  # longest single sleep call
DEEP_MAX_MS = const(0)  # deep sleep of any length

# Tunables the runtime may assign (board.LIGHT = False while a link is expected).
LIGHT = True  # machine.lightsleep; False: time.sleep_ms (keeps USB/UART alive)
DEEP_MS = 1800000  # sleeps at least this long use deepsleep (reboot); 0 = never

from sporadic.device.mboard import (unique_id, time_s, set_time, pin, pin_toggle, reset,  # noqa: E402
                             wdt_feed, sleep_ms, rtc_memory)


def led(on):
    pin(LED_PIN, on)
