# sporadic board module: Raspberry Pi Pico W (RP2040). Copied to /lib/board.py.
# Facts and their MicroPython sources: boards/rp2-pico-w/board.json.
from micropython import const

NAME = "rp2-pico-w"
LED_PIN = "LED"  # on the CYW43 Wi-Fi chip (WL_GPIO0)
WDT_MS = const(8000)  # WDT_TIMEOUT_MAX is 8388 on RP2040
FEED_MS = const(7000)  # a sleep's chunks between feeds (half of WDT_MS elsewhere): each wake sets the clocks up again and feeds, 20,000-35,000 instructions
CHUNK_MS = const(3600000)  # lightsleep refuses delays of 2**32 us or more
RTC_MEM = const(0)  # no RTC user memory on RP2040
WDT_SCRATCH = const(0x4005800C)  # WATCHDOG SCRATCH0-1: kept by a watchdog reset, which the clock is not
DEEP_MAX_MS = const(0)  # (no deep sleep: DEEP_MS is 0)

# Tunables the runtime may assign.
LIGHT = True  # machine.lightsleep; False: time.sleep_ms (keeps USB alive)
DEEP_MS = 0  # deepsleep here is lightsleep + reset: never worth it

from sporadic.device.mboard import (unique_id, time_s, set_time, pin, pin_toggle, reset,  # noqa: E402
                             wdt_feed, sleep_ms, rtc_memory)
from sporadic.device.keeptime import keep_time  # noqa: E402

keep_time()  # after a watchdog timeout: the clock it cleared, from the last feed's


def led(on):
    pin(LED_PIN, on)
