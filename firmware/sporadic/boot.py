# How a board starts (main.py calls this): the store is opened first, so its
# recovery (the heaviest moment of a boot) runs in the emptiest heap, then
# the runtime is imported and its config picks the loop: the network loop
# (net.py) when a network is configured, else the plain one; a board without
# a network never imports net (docs/device.md#memory).


def networked(cfg):
    """A network is configured: Wi-Fi credentials, or a sync port / peers
    (the unix port is on the host's network; deploy writes these only when
    asked: --wifi, --sync-port, --peer)."""
    return bool(cfg.get('wifi') or cfg.get('sync_port') or cfg.get('peers'))


def main(**kw):
    from sporadic import store
    store.open_store()
    from sporadic import runtime
    if networked(runtime.get().cfg):
        from sporadic import net
        return net.main(**kw)
    return runtime.main(**kw)
