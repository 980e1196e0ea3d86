# sporadic board module: the MicroPython unix port as a virtual board.
# Copied to /lib/board.py. The board's flash is mounted at / before this runs
# (tests/devboot.py, companion/vboard/board.py), so every path here is on its flash.
#
# Clock (virtual, never the host's wall clock):
#   SPORADIC_CLOCK=step   time moves only when sleep_ms is called: sleeping
#                         advances it at once (tests never really sleep)
#   otherwise             real elapsed time x SPORADIC_CLOCK_SCALE (default 1;
#                         3600 = an hour a second)
#   SPORADIC_CLOCK_START  Unix time the RTC holds at power-on when it was never
#                         set (a board with a battery RTC); absent = 0 (1970:
#                         a board that lost its time, clock unknown)
# A set time is kept in /rtc.txt (virtual time and the real time it was
# taken at), so it survives a soft reboot or a crash, as an RTC does.
# Pins and the LED are appended to /pins.txt: "TIME pin N V" / "TIME led V".
from micropython import const
import os
import time

NAME = 'unix'
LED_PIN = const(-1)  # no LED pin: a virtual LED, recorded as "led"
RTC_FILE = '/rtc.txt'
PINS_FILE = '/pins.txt'
RTCMEM_FILE = '/rtcmem.bin'
UID_FILE = '/uid.txt'


def _env(name, default=None):
    try:
        v = os.getenv(name)
    except Exception:
        v = None
    return default if v is None or v == '' else v


STEP = _env('SPORADIC_CLOCK') == 'step'

# The network (net/node.py, docs/wifi.md): the host's. Several virtual boards share one
# machine, so a board listens on loopback (its own sync port) and does not
# broadcast; SPORADIC_NET_DROP names a file on its flash of board ids it
# neither hears nor talks to (tests cut a network apart with it).
# SPORADIC_NET_TUNE="sync_ms=1000,forget_ms=6000": cfg.json's `net` tuning
# keys (docs/wifi.md) for a board whose cfg.json does not set them (tests
# shorten the intervals their claims are not about).
HOST_NETWORK = True     # no Wi-Fi to join: a sync port is enough for a network
NET_BIND = '127.0.0.1'
NET_BROADCAST = False
NET_DROP = _env('SPORADIC_NET_DROP')
# A broker wake restarts the board after its network phase when it spooled
# messages, and merges them at the next boot in a fresh heap (net/broker.py,
# docs/mqtt.md#memory): the clock survives the restart (rtc.txt).
PHASE_RESET = True


def _tune(text):
    out = {}
    for kv in (text or '').split(','):
        k, _, v = kv.partition('=')
        if k.strip():
            out[k.strip()] = int(v)
    return out


NET_TUNE = _tune(_env('SPORADIC_NET_TUNE'))
SCALE = int(_env('SPORADIC_CLOCK_SCALE', '1'))

_base = None    # virtual Unix time at real time _ref
_ref = 0.0
_pins = {}


def _real():
    return time.time()


def _load():
    global _base, _ref
    if _base is not None:
        return
    try:
        with open(RTC_FILE) as f:
            a, b = f.read().split()
        _base = int(a)
        _ref = float(b)
        return
    except (OSError, ValueError):
        pass
    _base = int(_env('SPORADIC_CLOCK_START', '0'))
    _ref = _real()


def _save():
    with open(RTC_FILE, 'w') as f:
        f.write('%d %s\n' % (_base, repr(_ref)))


def time_s():
    """Raw port time in seconds (this port's epoch is 1970)."""
    _load()
    if STEP:
        return _base
    return _base + int((_real() - _ref) * SCALE)


def set_time(unix_s):
    global _base, _ref
    _load()
    _base = int(unix_s)
    _ref = _real()
    _save()


def sleep_ms(ms):
    global _base
    ms = int(ms)
    if ms <= 0:
        return
    _load()
    if STEP:
        _base += (ms + 999) // 1000
        _save()
    else:
        time.sleep_ms(ms // SCALE if SCALE > 1 else ms)


def unique_id():
    uid = _env('SPORADIC_UID')
    if uid:
        return uid
    try:
        with open(UID_FILE) as f:
            return f.read().strip()
    except OSError:
        pass
    import binascii
    uid = binascii.hexlify(os.urandom(6)).decode()
    with open(UID_FILE, 'w') as f:
        f.write(uid + '\n')
    return uid


def _record(what):
    with open(PINS_FILE, 'a') as f:
        f.write('%d %s\n' % (time_s(), what))


def pin(n, value):
    v = 1 if value else 0
    _pins[n] = v
    _record('pin %d %d' % (n, v))


def pin_toggle(n):
    pin(n, 1 - _pins.get(n, 0))


def led(on):
    _record('led %d' % (1 if on else 0))


def wdt_feed():
    pass


def reset():
    # A soft reset: the process ends; vboard/devboot start it again.
    raise SystemExit(0)


def rtc_memory(data=None):
    if data is not None:
        with open(RTCMEM_FILE, 'wb') as f:
            f.write(data)
        return bytes(data)
    try:
        with open(RTCMEM_FILE, 'rb') as f:
            return f.read()
    except OSError:
        return b''
