# The runtime's set-up at boot (runtime.Runtime() calls init): /cfg.json
# read, the host id and the planner's seed, the store opened, the clock
# read, the counters of the loop. Its code is in RAM for that only
# (runtime.py lets it go at once): a small heap's loop never holds it.
import gc
import os
import sys
import board
import sporadic
from sporadic.device import cfgfile, clock, store
from sporadic.core import jobline, plan


def init(rt, root='', cfg=None):
    rt.cfg = cfgfile.load() if cfg is None else cfg
    rt.id = cfgfile.host_id(rt.cfg, board)
    seed = rt.cfg.get('seed') or rt.cfg.get('secret')
    if not seed:
        import binascii
        seed = binascii.hexlify(os.urandom(8)).decode()
        rt.cfg['seed'] = seed
        if cfg is None:
            try:
                cfgfile.save(rt.cfg)
            except OSError:
                pass
    rt.rnd = plan.hash_rnd(seed)
    store.feed = board.wdt_feed   # long reads feed the watchdog (store.FEED_LINES)
    # Open the store (recovery may re-import a hand-written jobs.txt, the
    # heaviest moment of a boot) before the actions are loaded, then let
    # the parser's rare parts go again; the loop's names first (names()).
    if store.opened is None or store.opened.root != root:
        names()
    rt.store = store.open_store(root)
    jobline.unload()
    gc.collect()
    if rt.cfg.get('mode') == 'insecure' or not (rt.cfg.get('mode') or rt.cfg.get('pubkey')):
        rt.store._tr = None     # nothing to check (trust.load's rule): never load it
    if clock.state == 'unknown' and clock.source == '':
        clock.init()
    rt.last = []            # newest own result lines (this boot)
    rt.jobs = 0
    rt.pending = 0
    rt.bad_jobs = 0
    rt.next_wake = None
    rt.last_now = None
    rt.steps = 0
    rt.unknown_since_boot = not clock.trusted()
    rt.reset_wanted = False
    rt.error = ''
    rt._asg = None          # (k, host) of the job being decided (leader.py)
    rt._tally = [-1, 0, 0]  # a rollout's outcomes heard, for the job being decided (groups.scan)
    rt._lease = None        # this step's lease check (step's `lease`)
    rt._pj = None           # (text, job) _cap parsed for _visit
    rt.mac = bool(rt.cfg.get('secret'))   # records carry hmac.mac_result (docs/security.md)


def names():
    """The loop's modules (the wake index's, a pass's, a compaction's)
    imported once before the store opens, each let go at once: what stays
    is their names. MicroPython interns every identifier of a module it
    loads (its qstrs, kept for good) in a pool that grows by blocks that
    double and are allocated whole: at the 621st name a block of 640
    entries, ~7 KB in one piece on a 64-bit port. Interned here, that
    block (when the loop needs it at all) is taken in the heap's emptiest
    moment, not in the first pass after a recovery (and a delivery) cut the
    heap into pieces smaller than it: that boot ended with `MemoryError
    ... allocating 640 bytes` (docs/device.md#memory). The loop would
    intern the same names at its first pass or compaction: none is added."""
    had = list(sys.modules)
    from sporadic.core import hmac, groups
    hmac = groups = None
    sporadic.forget_since(had)
    from sporadic.device import wake, agenda
    wake = agenda = None
    sporadic.forget_since(had)
    from sporadic.device import actions
    actions = None
    sporadic.forget_since(had)
    from sporadic.device import fold
    fold = None
    sporadic.forget_since(had)
    gc.collect()
