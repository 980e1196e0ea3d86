"""sporadic: the board firmware. core/ is portable (boards and companion), device/ and net/ run on a board, desktop/ never goes to one."""
def _keep_builtins():
    # `import os` (time, json, ...) of a built-in module that a file may
    # extend looks for that file along sys.path first, at every import,
    # when the name is not in sys.modules (MicroPython keeps built-ins out
    # of it): six look-ups on a Pico's littlefs, ~9 ms of its time each (a
    # sync made dozens). On a heap of device/store.py's ROOMY they are
    # found once here and put there, found at once from then on
    # (docs/budgets.md#27); a smaller heap keeps its ~100 bytes (a 64K
    # board's month of results in one sync)
    import sys
    if sys.implementation.name != 'micropython':
        return
    import gc
    if gc.mem_alloc() + gc.mem_free() < 163840:   # store.ROOMY (tests/test_layout.py keeps them one)
        return
    for n in ('os', 'time', 'json', 'hashlib', 'binascii'):
        try:
            sys.modules[n] = __import__(n)
        except ImportError:
            pass      # (a build without it: its imports fail where they are)


_keep_builtins()
del _keep_builtins


def forget(name):
    # Let a module's RAM go after a rare path (a board's small heap): drop it
    # from sys.modules and from its package. CPython keeps its modules.
    import sys
    if sys.implementation.name == 'cpython':
        return
    sys.modules.pop(name, None)
    i = name.rfind('.')
    parent = sys.modules.get(name[:i])
    if parent is not None:
        try:
            delattr(parent, name[i + 1:])
        except (AttributeError, TypeError, KeyError):
            pass


def forget_since(had):
    # forget the sporadic modules loaded since `had` (a list of sys.modules'
    # names): what one request or one rare path loaded, and only that (a
    # module the loop had before stays, with the objects that use it)
    import sys
    if sys.implementation.name == 'cpython':
        return
    for name in list(sys.modules):
        if name[:9] == 'sporadic.' and name not in had:
            forget(name)
