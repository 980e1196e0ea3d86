# The action registry: what a job's command does. Built-ins below; user
# actions are the public functions of /actions.py on the flash (see
# docs/device.md#actions). run() never raises (except SystemExit): an
# action's return value or exception becomes the text of its result record.
from micropython import const
import board
from sporadic.device import store

ACTLOG = '/actlog.txt'
_BLINK_MS = const(150)
RESET = 'reset requested'    # returned by the `reset` action: the runtime
                             # records `ok` first, then resets the board
context = ''                 # 'JOBID.K' of the instance running (runtime sets it)
_user = None                 # the user module, False when absent
_user_err = ''


def _int(s, what):
    try:
        return int(s)
    except ValueError:
        raise ValueError('%s must be a number, got %r' % (what, s))


def a_log(*words):
    text = ' '.join(words)
    line = '%s %s\n' % (context or '-', text)
    store.crashpoint()
    f = open(ACTLOG, 'a')
    try:
        f.write(line)
    finally:
        f.close()
    print('log:', text)
    return text


def a_pin(n=None, how=None):
    if n is None or how not in ('on', 'off', 'toggle'):
        raise ValueError('usage: pin N on|off|toggle')
    n = _int(n, 'pin')
    if how == 'toggle':
        board.pin_toggle(n)
    else:
        board.pin(n, how == 'on')
    return 'pin %d %s' % (n, how)


def a_pulse(n=None, ms=None):
    if ms is None:
        raise ValueError('usage: pulse N MS')
    n = _int(n, 'pin')
    ms = _int(ms, 'MS')
    board.pin(n, 1)
    try:
        board.sleep_ms(ms)
    finally:
        board.pin(n, 0)
    return 'pulsed %d for %dms' % (n, ms)


def a_led(how=None, count=None):
    if how == 'on' or how == 'off':
        board.led(how == 'on')
        return 'led ' + how
    if how == 'blink':
        c = _int(count or '1', 'N')
        for _ in range(c):
            board.led(1)
            board.sleep_ms(_BLINK_MS)
            board.led(0)
            board.sleep_ms(_BLINK_MS)
        return 'blinked %d' % c
    raise ValueError('usage: led on|off|blink N')


def a_sleep(ms=None):
    if ms is None:
        raise ValueError('usage: sleep MS')
    board.sleep_ms(_int(ms, 'MS'))
    return 'slept ' + ms + 'ms'


def a_reset():
    return RESET


BUILTIN = {'log': a_log, 'pin': a_pin, 'pulse': a_pulse, 'led': a_led,
           'sleep': a_sleep, 'reset': a_reset}


def user():
    """The user module /actions.py (loaded once), or None."""
    global _user, _user_err
    if _user is None:
        _user = False
        try:
            import actions as m   # /actions.py: '' (the flash root) is on sys.path
            _user = m
        except ImportError as e:
            if 'actions' not in str(e):
                _user_err = 'actions.py: ImportError: ' + str(e)
        except Exception as e:
            _user_err = 'actions.py: %s: %s' % (type(e).__name__, e)
    return _user or None


def find(name):
    fn = BUILTIN.get(name)
    if fn is not None:
        return fn
    if name[:1] == '_':
        return None
    m = user()
    if m is not None:
        fn = getattr(m, name, None)
        if callable(fn):
            return fn
    return None


def run(name, args):
    """-> (ok, text). Unknown action, bad arguments or an exception: ok False."""
    fn = find(name)
    if fn is None:
        if _user_err:
            return False, 'unknown action %s (%s)' % (name, _user_err)
        return False, 'unknown action ' + name
    try:
        r = fn(*args)
        if r is None:
            return True, ''
        if r is RESET:
            return True, r
        return True, str(r)   # a str() that raises is the action's error
    except Exception as e:
        return False, '%s: %s' % (type(e).__name__, e)
