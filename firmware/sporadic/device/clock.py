# The device clock: UTC Unix epoch seconds in one place, whatever the port's
# epoch (unix port 1970, embedded ports 2000), and whether it can be trusted.
# Raw time and setting the RTC go through the board module.
#
# States: 'unknown' (fresh boot without RTC, never set: no dated job runs)
# and 'trusted' (set by the companion or a signed time record, or kept by
# the RTC across a reset). Large jumps (set or observed) are recorded.
from micropython import const
import time
import board

# The port's epoch difference, computed once: 946684800 s from 1970 to 2000.
OFFSET = 946684800 if time.gmtime(0)[0] == 2000 else 0
FLOOR = const(1704067200)   # 2024-01-01: an RTC reading before this was never set
JUMP_S = const(300)         # a change of more than this is recorded as a jump
JUMPS_KEPT = const(4)

state = 'unknown'
source = ''
set_at = None       # Unix time at which the clock became trusted (this boot)
jumps = []          # [(at, delta, source)] newest last


def raw():
    """The board's time as Unix epoch seconds, trusted or not."""
    return int(board.time_s()) + OFFSET


def init(src='rtc', at=None):
    """At boot: an RTC that kept a plausible time (after a reset or deep
    sleep) is trusted; a board that lost its time is not. From a sync
    (clockset.set): the time just set from src at Unix time at, trusted."""
    global state, source, set_at
    if raw() >= FLOOR:
        state = 'trusted'
        source = src
        set_at = at
    else:
        state = 'unknown'
        source = ''
    return state


def trusted():
    return state == 'trusted'


def now():
    """Unix epoch seconds (int), or None while the clock is unknown."""
    if state != 'trusted':
        return None
    return raw()


def note_jump(at, delta, src):
    jumps.append((at, delta, src))
    if len(jumps) > JUMPS_KEPT:
        jumps.pop(0)



