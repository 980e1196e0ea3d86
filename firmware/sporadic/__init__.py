"""sporadic: the board firmware. core/ is portable (boards and companion), device/ and net/ run on a board, desktop/ never goes to one."""
import sys

if sys.implementation.name == 'micropython':
    # `import os` (time, json, ...) of a built-in module that a file may
    # extend looks for that file along sys.path first, at every import,
    # when the name is not in sys.modules (MicroPython keeps built-ins out
    # of it): six look-ups on a Pico's littlefs, ~9 ms of its time each
    # (a sync made dozens). Found once here and put there, the name is
    # found at once from then on (docs/budgets.md#27).
    for _n in ('os', 'time', 'json', 'hashlib', 'binascii'):
        try:
            sys.modules[_n] = __import__(_n)
        except ImportError:
            pass      # (a build without it: its imports fail where they are)
    del _n


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
