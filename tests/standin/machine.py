# A no-op machine module for board modules on the unix port (tests, bench).
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
        pass
    def feed(self):
        pass
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
