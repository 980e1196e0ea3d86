# timeutil.py's error messages, loaded only when a time or a duration is bad
# and let go again at once (a board's heap holds none of them otherwise).
# One a line, in the order of timeutil's _E_ names.
_MSG = ('bad time: %s\n'
        'bad time: %s out of range\n'
        'bad time: expected YYYY-MM-DDTHH:MM[:SS]Z (UTC), got %s\n'
        'bad time: no such date %s\n'
        'bad duration: %s (use 30s 10m 2h 1d 1w)\n'
        'bad duration: %s must be positive')


def msg(n, a=()):
    import sporadic
    sporadic.forget('sporadic.core.timemsg')
    return _MSG.split('\n')[n] % a
