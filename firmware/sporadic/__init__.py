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
