# A board's sync through an MQTT broker (docs/mqtt.md): one bounded step of
# the loop, connect to disconnect within slice_ms (a broker that is down,
# slow or hostile costs the loop that slice, never its jobs).
#
#   PRE/d/ID     QoS 1, board ID's records every board needs (done records
#                of any/one jobs and rollouts, assignments: they stop the others)
#   PRE/r/ID     QoS 1, its results of each/who jobs: only the companion takes them
#   PRE/f/NAME   QoS 1, retained: the fleet's signed lines (the companion's
#                snapshot: one message per batch SEQ, 8 digits, holding the
#                .b record and the live lines it covers; u0..uf the lines
#                that need no batch, by digest)
#   PRE/q/ID     QoS 1, what this board refused of what it took: REASON<TAB>LINE (reported)
#
# The session is persistent (fixed client id, clean_session 0): the broker
# queues what the fleet publishes while the board sleeps. Its first wake, or
# one after the broker lost the session (expired, wiped), subscribes again:
# the retained snapshot then comes whole. What arrives is spooled to flash
# (mq/NAME, piece by piece: net/exchange.py) before it is acknowledged;
# after the disconnect it is merged message by message, in name order
# (batches by SEQ, then the rest) through storesync.receive: the same trust
# checks as every other link (signed batches, replay marks, device MACs, the
# signed host list). Refused lines are quarantined, never run, and reported
# on PRE/q/ID at the next wake (mq.q).
try:
    from micropython import const
except ImportError:  # CPython
    def const(x):
        return x
import os
from sporadic.net.ticks import ticks_ms, ticks_diff

SLICE_MS = const(3000)     # connect to disconnect, at most
EVERY_MS = const(5000)     # a sync each this often (and after the loop wrote records)
RESTART = const(-1)        # sync's answer: restart the board, its next boot merges the spool
STEP_FREE = const(24576)   # free heap under which the loop of a PHASE_RESET board takes its step as a wake


def topic_of(cfg):
    """The fleet's topic prefix: sporadic/ + the id of its fleet key
    (provisioning writes it into cfg mqtt.topic; this for a cfg without)."""
    fk = cfg.get('fleet_key')
    if not fk:
        return 'sporadic/insecure'
    from sporadic.core import hmac
    return 'sporadic/' + hmac.key_id(fk)


class Broker:
    """The board's broker link (cfg['mqtt']) and its figures (status)."""

    def __init__(self, me, cfg, st, ticks=ticks_ms):
        m = cfg['mqtt']
        self.me = me
        self.m = m
        self.st = st
        self.ticks = ticks
        self.pre = m.get('topic') or topic_of(cfg)
        self.slice_ms = m.get('slice_ms', SLICE_MS)
        self.every_ms = m.get('every_ms', EVERY_MS)
        self.max_msg = m.get('max_msg')     # None: the client's bound (mqtt.MAX_MSG)
        self.spool = st.root + 'mq'
        try:
            os.mkdir(self.spool)
        except OSError:
            pass
        self.next = ticks()
        self.stats = {'syncs': 0, 'fail': 0, 'lines_in': 0, 'lines_out': 0, 'refused': 0,
                      'bytes_last': 0, 'ms_last': 0, 'subscribed': 0}
        self.last_err = ''
        self.reasons = []
        self.steps = []          # the last few steps: [ms, bytes, lines in, lines out] (status)
        self.k = 0               # the last number of a spooled message's name (net/exchange.py)
        self.phased = False      # its loop restarts the board for a step its heap cannot hold (main)

    def due(self, now):
        return ticks_diff(now, self.next) >= 0

    def sync(self, restart=False):
        """One broker sync, bounded by slice_ms; returns the lines taken
        (0 when the broker could not be reached: the loop goes on). Three
        phases, each with only its own code in RAM: the log sealed into the
        outbox (a compaction), connect to disconnect (net/exchange.py and
        the client: what arrives is spooled to flash), then the merge of
        the spool (the trust checks, net/spool.py). What either loaded
        leaves RAM after it: a small heap holds the loop and one phase.
        restart: when something is spooled, leave the merge to the next
        boot (the mark spool.MARK) and return RESTART: the caller restarts
        the board (main: a wake's merge in a fresh heap)."""
        import sys
        import sporadic
        had = list(sys.modules)
        t0 = self.ticks()
        self.next = t0 + self.every_ms
        self.taken = 0
        self.spooled = 0        # messages this step spooled (net/exchange.py)
        self.refusals = []
        out0 = self.stats['lines_out']
        try:
            # the log sealed into an outbox segment first (a compaction of
            # the store: its code and the client's are never in RAM together)
            from sporadic.device import storesync
            storesync.seal(self.st)
        except Exception as e:
            self._failed(e)     # the network phase seals it again, or fails the same
        storesync = None
        sporadic.forget_since(had)
        try:
            from sporadic.net import exchange
            exchange.run(self, t0 + self.slice_ms)
            self.stats['syncs'] += 1
        except Exception as e:
            self._failed(e)
        exchange = None
        sporadic.forget_since(had)      # the client's code, the outbox's
        if restart and self.spooled:
            # the merge after a restart, in a fresh heap (device/boot.py)
            from sporadic.net import spool
            spool.keep_report(self.st, self.refusals)
            spool.mark(self.st, 'm')
            return RESTART
        try:
            # what was spooled (acknowledged: on flash), this wake's and what a
            # wake cut short left, through the trust checks
            self._merge()
        except Exception as e:
            self._failed(e)
        finally:
            self._keep_report()
            ss = sys.modules.get('sporadic.device.storesync')
            if ss is not None:
                ss.let_go(self.st)
            ss = None
            sporadic.forget_since(had)  # the trust checks' code
        self.stats['ms_last'] = ticks_diff(self.ticks(), t0)
        self.stats['lines_in'] += self.taken
        self.steps.append([self.stats['ms_last'], self.stats['bytes_last'], self.taken,
                           self.stats['lines_out'] - out0])
        if len(self.steps) > 8:
            self.steps.pop(0)
        return self.taken

    def _failed(self, e):
        self.stats['fail'] += 1
        self.last_err = str(e) or repr(e)

    def _keep_report(self):
        if self.refusals:
            from sporadic.net import spool
            spool.keep_report(self.st, self.refusals)
            self.refusals = []

    # ---- what the fleet wrote comes down ----

    def refused(self, line, why):
        self.st.quarantine(line, why, 'mqtt')
        self.stats['refused'] += 1
        if len(self.reasons) >= 4:
            self.reasons.pop(0)
        self.reasons.append(why)
        self.refusals.append('%s\t%s' % (why, line[:200]))

    def _merge(self):
        # what was spooled, through the trust checks (net/spool.py)
        from sporadic.net import spool
        self.taken += spool.merge(self.st, self.refused)

    def status(self):
        d = dict(self.stats)
        d['last_error'] = self.last_err
        d['refusals'] = self.reasons
        d['steps'] = self.steps
        d['broker'] = '%s:%d' % (self.m['host'], self.m.get('port', 1883))
        return d


def main(max_ms=None, max_steps=None, woke=False):
    """The board's loop with a broker and no TCP network (cfg mqtt, no
    sync_port or peers: boot.main picks it): the runtime's steps, a broker
    step every every_ms. Never imports net/node.py nor the TCP server. A
    board that cannot join its Wi-Fi says why and runs the plain loop.
    The wake's step comes before the runtime is loaded (its pass code, the
    planner, the actions): its merge has their room (docs/mqtt.md#memory).
    A board whose clock survives a restart (board.PHASE_RESET) restarts
    after a wake's network phase that spooled messages: its boot merges
    them before this (net/spool.py after_reset) and calls it with woke
    (True); its loop restarts the board for a later step when its heap
    holds less than STEP_FREE (a wake then, woke 's': the step, then the
    loop at the next boot)."""
    import sys
    import board
    import sporadic
    from sporadic.device import store
    had = list(sys.modules)
    from sporadic.device import cfgfile
    cfg = cfgfile.load()
    me = cfgfile.host_id(cfg, board)
    from sporadic.net import wifi
    joined = wifi.wifi_join(cfg, board)
    cfgfile = wifi = None
    sporadic.forget_since(had)
    bk = None
    if joined:
        bk = Broker(me, cfg, store.open_store())
        phased = getattr(board, 'PHASE_RESET', False)
        if woke is not True:
            if bk.sync(phased) == RESTART:
                board.reset()
            if woke:
                # the loop restarted for this step: it runs in a fresh heap again
                from sporadic.net import spool
                spool.mark(bk.st, 'r')
                board.reset()
        else:
            bk.next = bk.ticks() + bk.every_ms     # the step was taken before the restart
        bk.phased = phased
        board.wdt_feed()
    cfg = None
    from sporadic.device import runtime
    rt = runtime.get()
    if bk is None:
        print('sporadic: no network (Wi-Fi not joined): running without it')
        return runtime.main(max_steps=max_steps)
    bk.m = rt.cfg['mqtt']
    return loop(rt, bk, None, max_ms, max_steps, True)


def _tight():
    import gc
    if not hasattr(gc, 'mem_free'):
        return False
    gc.collect()
    return gc.mem_free() < STEP_FREE


def loop(rt, bk, node=None, max_ms=None, max_steps=None, woke=False):
    """The runtime's steps, the broker's step when due (a bounded slice;
    at once after a step that wrote records: the others wait on a done
    record of an any/one job), and the TCP node's polls when there is one
    (net/node.py main), else a 200 ms rest. woke: the wake's step was
    taken already (main)."""
    import time
    import board
    from sporadic.device import clock
    st = rt.store
    print('sporadic: %s syncs through %s' % (rt.id, bk.status()['broker']))
    t0 = ticks_ms()
    wake = None
    steps = 0
    changed = False
    # a wake takes what the fleet wrote while the board slept before its first
    # step (a cancel, another board's done record decide what is due now);
    # a broker that is down costs that one slice
    if not woke:
        bk.sync()
        board.wdt_feed()
    while max_ms is None or ticks_diff(ticks_ms(), t0) < max_ms:
        now = clock.now()
        if node is not None and node.changed:
            changed = True
            node.changed = False
        if changed or wake is None or (now is not None and now >= wake):
            if max_steps is not None and steps >= max_steps:
                break
            steps += 1
            changed = False
            if node is not None and node.lead():
                node.changed = False
            logged = st.log_size
            wake = rt.step(now, None if node is None else node.led)
            if wake is None:
                wake = (now or 0) + 60
            if st.log_size != logged:
                bk.next = ticks_ms()
        board.wdt_feed()
        if bk.due(ticks_ms()):
            if bk.phased and _tight():
                # too little heap for the step beside the loop: the step as
                # a wake, in a fresh heap (main), the loop at the boot after
                from sporadic.net import spool
                spool.mark(st, 's')
                board.reset()
            if bk.sync():
                changed = True
            board.wdt_feed()
        if node is not None:
            node.poll(200)
        elif hasattr(time, 'sleep_ms'):
            time.sleep_ms(200)
        else:
            time.sleep(0.2)
    if node is not None:
        node.close()
        return node
    return bk
