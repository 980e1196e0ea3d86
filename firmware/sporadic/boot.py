# How a board starts (main.py calls this): the store is opened first, so its
# recovery (the heaviest moment of a boot) runs in the emptiest heap, then
# the runtime is imported and its loop runs (docs/device.md#memory).


def main(**kw):
    from sporadic import store
    store.open_store()
    from sporadic import runtime
    return runtime.main(**kw)
