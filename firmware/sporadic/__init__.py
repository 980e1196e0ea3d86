"""sporadic: the board firmware. core/ is portable (boards and companion), device/ and net/ run on a board, desktop/ never goes to one."""


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
