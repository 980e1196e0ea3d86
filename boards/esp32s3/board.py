# sporadic board module: generic ESP32-S3 (DevKitC-1). Copied to /lib/board.py.
# Facts and their MicroPython sources: boards/esp32s3/board.json.
from micropython import const
import machine

NAME = "esp32s3"
LED_PIN = const(48)  # WS2812 on DevKitC-1 v1.0 (v1.1: 38)
WDT_MS = const(60000)  # machine.WDT takes any positive timeout here
RTC_MEM = const(2048)  # MICROPY_HW_RTC_USER_MEM_MAX
CHUNK_MS = const(3600000)  # longest single sleep call
DEEP_MAX_MS = const(0)  # deep sleep of any length

# Tunables the runtime may assign (board.LIGHT = False while a link is expected).
LIGHT = True  # machine.lightsleep; False: time.sleep_ms (keeps USB/UART alive)
DEEP_MS = 1800000  # sleeps at least this long use deepsleep (reboot); 0 = never

from sporadic.device.mboard import (unique_id, time_s, set_time, pin, pin_toggle, reset,  # noqa: E402
                             wdt_feed, sleep_ms, rtc_memory)


_np = None


def led(on):
    global _np
    if _np is None:
        import neopixel
        _np = neopixel.NeoPixel(machine.Pin(LED_PIN), 1)
    _np[0] = (0, 12, 0) if on else (0, 0, 0)
    _np.write()
