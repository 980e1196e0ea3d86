# A no-op machine module for board modules on the unix port (tests, bench).
# It only counts: WDT_STARTS watchdogs made, FEEDS feeds (tests/test_watchdog.py).
WDT_STARTS = 0
FEEDS = 0
class Pin:
    OUT = 1
    def __init__(self, n, mode=None):
        self.v = 0
    def value(self, v=None):
        if v is None:
            return self.v
        self.v = v
class WDT:
    def __init__(self, timeout=5000):
        global WDT_STARTS
        WDT_STARTS += 1
    def feed(self):
        global FEEDS
        FEEDS += 1
class RTC:
    def datetime(self, t=None):
        pass
    def memory(self, data=None):
        return b""
def unique_id():
    return b"\x01\x02"
def lightsleep(ms):
    pass
def deepsleep(ms):
    raise SystemExit
def reset():
    raise SystemExit
class _Mem:
    # machine.mem32: registers read back as written (an RP2040's watchdog scratch)
    def __init__(self):
        self.d = {}
    def __getitem__(self, a):
        return self.d.get(a, 0)
    def __setitem__(self, a, v):
        self.d[a] = v & 0xffffffff
mem32 = _Mem()
