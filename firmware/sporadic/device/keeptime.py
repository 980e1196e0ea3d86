# A watchdog reset's lost clock brought back (RP2040: board.WDT_SCRATCH), in
# its own module: only such a board's board.py imports it, at its import;
# the others never load it (mboard.wdt_feed leaves the time it reads).
import machine
import sys
import time
from sporadic.device import mboard


def keep_time():
    """At import of the board module, on a board whose clock a watchdog
    reset clears (board.WDT_SCRATCH: RP2040), after a watchdog timeout: set
    the clock to the time the last feed left plus WDT_MS and the time since
    the boot (to within a second); clock.init() then trusts it as an RTC
    that kept its time. Once: the registers are cleared."""
    b = sys.modules['board']
    s = b.WDT_SCRATCH
    m = machine.mem32
    t = m[s + 4] & 0xffffffff
    ok = (m[s] & 0xffffffff) == t ^ mboard.MAGIC and m[s - 4] & 1    # REASON: TIMER (not a forced reset)
    m[s] = 0
    if ok:   # t is what time.time() read (the port's epoch)
        mboard.set_port_time(t + b.WDT_MS // 1000 + time.ticks_ms() // 1000)
