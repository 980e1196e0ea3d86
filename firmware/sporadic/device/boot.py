# How a board starts (main.py calls this): the store is opened first, so its
# recovery (the heaviest moment of a boot) runs in the emptiest heap, then
# its config (cfg.json) picks the loop: the broker's (net/broker.py) or the
# network loop (net/node.py) when a network is configured, else the plain
# one; a board without a network never imports net/ (docs/device.md#memory).
# Each loop imports the runtime itself: a broker wake merges what the fleet
# wrote before it is loaded (docs/mqtt.md#memory).


def networked(cfg, board):
    """A network is configured: Wi-Fi credentials, or, on a board that is on
    its host's network (the unix port: board.HOST_NETWORK), a sync port,
    peers or a broker (mqtt). Provisioning writes these only when asked (--wifi, --sync-port,
    --peer); a board deployed before that held sync_port 7370 by default and
    no Wi-Fi: it keeps the plain loop."""
    if cfg.get('wifi'):
        return True
    return getattr(board, 'HOST_NETWORK', False) and bool(cfg.get('sync_port') or cfg.get('peers')
                                                          or cfg.get('mqtt'))


def main(**kw):
    try:
        return _loop(**kw)
    except MemoryError as e:
        # the last resort: a board never ends its main.py (nobody may press
        # its reset button for weeks). Out of memory where no part of the
        # loop caught it (a heap cut up by a recovery: docs/device.md#memory),
        # it says so and restarts: the store's open has nothing left to
        # recover then, and the loop starts in an unfragmented heap.
        import sys
        import board
        sys.print_exception(e)
        board.reset()


def _merged_first():
    """A broker wake in phases across restarts (net/broker.py, board.PHASE_RESET;
    the mark mq.go, net/spool.py): 'm', the wake's network phase spooled
    messages and restarted the board: this boot merges them in a fresh
    heap, before the parser, the broker loop or the runtime is loaded, and
    restarts again; 'r', the wake's step is taken: the loop runs (True);
    's', the loop restarted for its broker step (its heap held too little):
    the step, then 'r' ('s'). Other boots: False."""
    try:
        f = open('mq.go')
        what = f.read()
        f.close()
    except OSError:
        return False
    if what == 'm':
        try:
            from sporadic.net import spool
        except ImportError:
            what = ''       # deployed again without a broker: no phase to take
    if what != 'm':
        import os
        os.remove('mq.go')
        return True if what == 'r' else 's' if what == 's' else False
    import board
    from sporadic.device import store
    store.feed = board.wdt_feed
    spool.after_reset(store.open_store())
    board.reset()


def _loop(**kw):
    woke = _merged_first()
    # the parser first, as the store's import loaded it before #31's sync
    # let it go: the loop needs it, and the loop's heap keeps its layout
    from sporadic.core import jobline  # noqa: F401
    from sporadic.device import store
    import board
    # a watchdog started before a soft reset still runs: a re-import at
    # open (a file changed behind the store's back) must feed it too
    store.feed = board.wdt_feed
    store.open_store()
    # the config picks the loop; the runtime is not loaded yet: a broker
    # wake takes what the fleet wrote before it (net/broker.py main)
    import sys
    import sporadic
    had = list(sys.modules)
    from sporadic.device import cfgfile
    cfg = cfgfile.load()
    cfgfile = None
    sporadic.forget_since(had)
    if networked(cfg, board):
        if cfg.get('mqtt') and not (cfg.get('sync_port') or cfg.get('peers')):
            # a broker alone: its loop never loads the TCP server (docs/mqtt.md)
            from sporadic.net import broker
            return broker.main(woke=woke, **kw)
        # the TCP network: the runtime set up first (its boot's work in the
        # heap before the server's code), as node.main's loop wants it;
        # the store's roomy extras give way to the loop (store.share)
        store.share()
        from sporadic.device import runtime
        runtime.get()
        from sporadic.net import node
        return node.main(**kw)
    from sporadic.device import runtime
    return runtime.main(**kw)
