# The job-line format: one record a line (docs/jobline.md). Parse a line into
# a record, write a record back as its one canonical line. Portable: runs
# unchanged on MicroPython and CPython.
try:
    from micropython import const
except ImportError:  # CPython
    def const(x):
        return x

from sporadic.core.timeutil import parse_time, parse_duration
from sporadic.core.order import ID_LEN, own_text, board_keyed, board_signed, host_of  # noqa: F401 (re-exported)

_OUTPUT_MAX = const(60)
# the longest job text (type to options) any board takes: one sync request
# (recon P) carries it whole, as it carries a .b record of ~2.4 KB
JOB_MAX = const(1024)
_HOST_MAX = const(32)
B32 = '0123456789abcdefghijklmnopqrstuv'
_HOST_CHARS = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:-'
_OPTS = ('every', 'within', 'on', 'tick', 'grace', 'retry', 'at', 'tz', 'tzr', 'waves', 'wave', 'abort', 'need')
OUTCOMES = ('run', 'err', 'miss', 'ok')  # rank order: a later one settles more
FLEET_KINDS = 'htbk'
_DEFAULT_WITHIN_ONCE = const(86400)
DEFAULT_TICK = const(60)
DEFAULT_GRACE = const(600)
P_ONE = 1 << 32  # fixed-point unit of a probability


class ParseError(ValueError):
    pass


# Rarely used code lives in jobtext.py, loaded on first use (a board's heap
# holds only the parser): the error messages, job text formatting, ids,
# assignments. Callers that need those import jobtext themselves.
_x = None


def _jx():
    global _x
    if _x is None:
        from sporadic.core import jobtext as jobx
        _x = jobx
    return _x



def unload():
    """A board lets jobtext and timefmt go again once a rare path is done (the
    loop calls this each pass); CPython keeps them."""
    global _x
    import sys
    if sys.implementation.name == 'cpython':
        return
    _x = None
    import sporadic
    sporadic.forget('sporadic.core.jobtext')
    sporadic.forget('sporadic.core.timefmt')


# jobline's error messages: each names its line of jobtext._MSG (underscored
# consts cost a board nothing at run time)
_E_HOST_LEN = const(0)
_E_HOST_CHARS = const(1)
_E_QUOTE_OPEN = const(2)
_E_QUOTE_TEXT = const(3)
_E_QUOTE_INSIDE = const(4)
_E_PROB = const(5)
_E_PROB_RANGE = const(6)
_E_OUTCOME = const(7)
_E_NUMBER = const(8)
_E_RESULT_FIELDS = const(9)
_E_MAC = const(10)
_E_NO_ARG = const(11)
_E_WHO_ARG = const(12)
_E_ANY_ARG = const(13)
_E_TYPE = const(14)
_E_NO_TIME = const(15)
_E_NO_COMMAND = const(16)
_E_OPTION_FORM = const(17)
_E_OPTION_UNKNOWN = const(18)
_E_OPTION_TWICE = const(19)
_E_OPTION_KIND = const(20)
_E_FLEET_KIND = const(21)
_E_CANCEL_ARGS = const(22)
_E_ID_ALONE = const(23)
_E_ASSIGN_FIELDS = const(24)
_E_WITHIN_EVERY = const(25)
_E_JOB_LONG = const(26)


def _err(n, a=()):
    # ParseError with message n of jobx.msg
    return ParseError(_jx().msg(n, a))


def is_id(s):
    # (all its characters base32: str.strip, not a loop over them)
    return len(s) == ID_LEN and not s.strip(B32)


def check_host(h):
    if not h or len(h) > _HOST_MAX:
        raise _err(_E_HOST_LEN, repr(h))
    for c in h:
        if c not in _HOST_CHARS:
            raise _err(_E_HOST_CHARS, repr(h))
    return h


def _split1(s):
    # first whitespace-separated word, and the rest with leading space removed
    # (without a tab, by str.find: a loop over the characters cost a Pico's
    # pass over its job file ~0.5 ms a word; docs/budgets.md#27)
    if '\t' not in s:
        i = s.find(' ')
        if i < 0:
            return s, ''
        j = i + 1
        while s[j:j + 1] == ' ':
            j += 1
        return s[:i], s[j:]
    i = 0
    n = len(s)
    while i < n and s[i] not in ' \t':
        i += 1
    j = i
    while j < n and s[j] in ' \t':
        j += 1
    return s[:i], s[j:]


def tokens(s):
    """Split a command into words; "..." keeps spaces inside one word."""
    if '"' not in s and '\t' not in s:   # by str.split (a Pico's pass: 0.3 ms a line, not 2 ms)
        out = s.split(' ')
        return out if '' not in out else [w for w in out if w]
    out = []
    i = 0
    n = len(s)
    while i < n:
        c = s[i]
        if c in ' \t':
            i += 1
            continue
        if c == '"':
            j = s.find('"', i + 1)
            if j < 0:
                raise _err(_E_QUOTE_OPEN)
            out.append(s[i:j + 1])
            i = j + 1
            if i < n and s[i] not in ' \t':
                raise _err(_E_QUOTE_TEXT)
            continue
        j = i
        while j < n and s[j] not in ' \t':
            if s[j] == '"':
                if s[j - 1] != '=':
                    raise _err(_E_QUOTE_INSIDE, repr(s[i:].split()[0]))
                # key="value with spaces" (at="0 6 * * 1-5")
                j = s.find('"', j + 1) + 1
                if j == 0:
                    raise _err(_E_QUOTE_OPEN)
                if j < n and s[j] not in ' \t':
                    raise _err(_E_QUOTE_TEXT)
                break
            j += 1
        w = s[i:j]
        out.append(w)
        i = j
    return out


def unquote(word):
    if len(word) >= 2 and word[0] == '"':
        return word[1:-1]
    return word


def parse_prob(s):
    """'0.01' -> (canonical text, threshold in units of 2**-32); exact, no floats."""
    if s.startswith('.'):
        s = '0' + s
    whole, _, frac = s.partition('.')
    if not whole.isdigit() or (frac and not frac.isdigit()) or len(frac) > 9:
        raise _err(_E_PROB, repr(s))
    frac = frac.rstrip('0')
    num = int(whole + frac) if (whole + frac) else 0
    den = 10 ** len(frac)
    if num <= 0 or num > den:
        raise _err(_E_PROB_RANGE, s)
    text = str(int(whole)) + ('.' + frac if frac else '')
    return text, (num * P_ONE) // den


class Job:
    __slots__ = ('id', 'kind', 'arg', 'threshold', 't0', 'words', 'every', 'within',
                 'on', 'tick', 'grace', 'retry', 'cal', 'roll')

    def text(self):
        """Canonical job text without the id: type time command [; options]."""
        return _jx().job_text(self)

    def line(self):
        return self.id + ' ' + self.text()

    def action(self):
        return self.words[0]

    def args(self):
        return [unquote(w) for w in self.words[1:]]


def default_within(every):
    if every:
        return every if every < 86400 else 86400
    return _DEFAULT_WITHIN_ONCE


class Result:
    __slots__ = ('id', 'host', 'k', 'at', 'outcome', 'attempt', 'mac', 'output')

    def __init__(self, jid, host, k, at, outcome, attempt=1, mac='-', output=''):
        self.id = jid
        self.host = host
        self.k = k
        self.at = at
        self.outcome = outcome
        self.attempt = attempt
        self.mac = mac
        self.output = clean_output(output)

    def outcome_token(self):
        return self.outcome + (str(self.attempt) if self.attempt > 1 else '')

    def body(self):
        """The line without MAC and output: what the HMAC covers (with output)."""
        return '%s r %s %d %d %s' % (self.id, self.host, self.k, self.at, self.outcome_token())

    def line(self):
        s = self.body() + ' ' + self.mac
        if self.output:
            s += ' ' + self.output
        return s

    def rank(self):
        return (self.k, self.attempt, OUTCOMES.index(self.outcome))

    def instance(self):
        return self.id + '.' + str(self.k)


class Cancel:
    __slots__ = ('id',)

    def __init__(self, jid):
        self.id = jid

    def line(self):
        return self.id + ' cancel'


class Fleet:
    __slots__ = ('kind', 'rest')

    def __init__(self, kind, rest):
        self.kind = kind
        self.rest = rest

    def line(self):
        return '.' + self.kind + (' ' + self.rest if self.rest else '')


def clean_output(s):
    """An action's text as its record carries it: control characters as
    spaces, no blanks at either end, at most _OUTPUT_MAX characters. Only
    the part kept is copied: an action may return kilobytes (a sensor dump)
    to a board whose heap holds one copy of them, not a list of their
    characters. Blank is a control character, a space or DEL on every
    port (CPython's strip() would also drop Unicode spaces)."""
    i = 0
    j = len(s)
    while i < j and _blank(s[i]):
        i += 1
    while j > i and _blank(s[j - 1]):
        j -= 1
    out = []
    for c in s[i:min(j, i + _OUTPUT_MAX)]:
        out.append(' ' if _blank(c) else c)
    return ''.join(out)


def _blank(c):
    return c <= ' ' or c == '\x7f'


def parse_int(s, what):
    # what: 0 instance number, 1 time, 2 retry count (jobx.msg 8)
    if not s.isdigit():
        raise _err(_E_NUMBER, (what, repr(s)))
    return int(s)


def parse_job(s, jid=None, salt=None, zone_rule=None, words=None):
    """A job line (type time command [; options]) -> Job. jid given for
    machine lines; otherwise derived from the canonical text (and salt).
    zone_rule: zone name -> POSIX rule, the companion's (a tz= zone name
    without tzr= needs it; a board has none, and its lines carry tzr=).
    words: s's words (parse has split them), s None."""
    if words is None:
        if len(s) > JOB_MAX:
            raise _err(_E_JOB_LONG, (len(s), JOB_MAX))
        words = tokens(s)       # one split (a leading space: an empty type, as before)
        if s.startswith(' '):
            words.insert(0, '')
    typ = words[0] if words else ''
    j = Job()
    j.arg = ''
    j.threshold = 0
    kind, colon, arg = typ.partition(':')
    if kind == 'each' or kind == 'one':
        if colon:
            raise _err(_E_NO_ARG, kind)
    elif kind == 'who':
        if not arg:
            raise _err(_E_WHO_ARG)
        check_host(arg)
        j.arg = arg
    elif kind == 'any':
        if not arg:
            raise _err(_E_ANY_ARG)
        j.arg, j.threshold = parse_prob(arg)
    else:
        raise _err(_E_TYPE, repr(typ))
    j.kind = kind
    if len(words) < 2:
        raise _err(_E_NO_TIME)
    try:
        j.t0 = parse_time(words[1])
    except ValueError as e:
        raise ParseError(str(e))
    words = words[2:]
    opts = []
    if ';' in words:
        i = words.index(';')
        opts = words[i + 1:]
        words = words[:i]
    if not words:
        raise _err(_E_NO_COMMAND)
    j.words = words
    j.every = 0
    j.on = ''
    j.tick = DEFAULT_TICK
    j.grace = DEFAULT_GRACE
    j.retry = 0
    j.cal = None   # a calendar job's sporadic.core.calendar.Series
    j.roll = None  # a staged rollout's sporadic.core.rollout.Rollout
    cal = None
    roll = None
    within = None
    seen = []
    for o in opts:
        key, eq, val = o.partition('=')
        if not eq or not val:
            raise _err(_E_OPTION_FORM, repr(o))
        if key not in _OPTS:   # (a tuple: no new string a test, each is looked up in the qstr pools)
            raise _err(_E_OPTION_UNKNOWN, repr(key))
        if key in seen:
            raise _err(_E_OPTION_TWICE, key)
        seen.append(key)
        need = 'each' if key == 'on' else 'any' if key == 'tick' else 'one' if key == 'grace' else None
        if need and need != kind:
            raise _err(_E_OPTION_KIND, (key, need))
        if key in ('waves', 'wave', 'abort', 'need') and kind not in ('each', 'who'):
            raise _err(_E_OPTION_KIND, (key, 'each and who:'))
        try:
            if key == 'every':
                j.every = parse_duration(val)
            elif key == 'within':
                within = parse_duration(val)
            elif key == 'tick':
                j.tick = parse_duration(val)
            elif key == 'grace':
                j.grace = parse_duration(val)
            elif key == 'on':
                j.on = check_host(val)
            elif key == 'retry':
                j.retry = parse_int(val, 2)
            elif key in ('at', 'tz', 'tzr'):   # calendar.Series checks them
                if cal is None:
                    cal = {}
                cal[key] = unquote(val)
            elif key in ('waves', 'wave', 'abort', 'need'):   # rollout.parse checks them
                if roll is None:
                    roll = {}
                roll[key] = val
        except ValueError as e:
            raise ParseError(str(e))
    if cal is not None:   # a calendar job (docs/jobline.md): its module loaded for it only
        from sporadic.core import calendar
        try:
            j.cal = calendar.Series(j, cal, zone_rule)
        except ValueError as e:
            raise ParseError(str(e))
    j.within = within if within is not None else default_within(j.every)
    if roll is not None:   # a staged rollout (docs/jobline.md): its module loaded for it only
        from sporadic.core import rollout
        try:
            j.roll = rollout.parse(roll)
        except ValueError as e:
            raise ParseError(str(e))
        last = j.roll.starts(len(j.roll.waves) - 1)
        if last >= j.within:
            fd = _jx().format_duration
            raise ParseError('the last wave starts at due+%s, outside within=%s: widen within= or '
                             'shorten wave=' % (fd(last), fd(j.within)))
    if j.every and j.within > j.every:
        raise _err(_E_WITHIN_EVERY, (_jx().format_duration(j.within), _jx().format_duration(j.every)))
    if jid is None:
        t = j.text()
        jid = _jx().make_id(t if salt is None else t + '\n' + salt)
    j.id = jid
    return j


def parse(line, salt=None, zone_rule=None):
    """One line -> Job | Result | Assign | Cancel | Fleet, or None for blank/comment.
    Raises ParseError(reason). zone_rule: see parse_job."""
    s = line.strip()
    if not s or s.startswith('#'):   # (not s[0]: a board looks each new string up, docs/budgets.md#27)
        return None
    if s.startswith(' ', ID_LEN) and not s.startswith('r ', ID_LEN + 1) and not s.startswith('.') \
            and '"' not in s and '\t' not in s:   # an id and a job (jobs.txt's lines): one split
        w = s.split(' ')
        if '' not in w and is_id(w[0]) and w[1] not in ('cancel', 'a', 'r'):
            if len(s) - ID_LEN - 1 > JOB_MAX:
                raise _err(_E_JOB_LONG, (len(s) - ID_LEN - 1, JOB_MAX))
            return parse_job(None, w[0], None, zone_rule, w[1:])
    first, rest = _split1(s)
    if first.startswith('.'):
        if len(first) != 2 or first[1] not in FLEET_KINDS:
            raise _err(_E_FLEET_KIND, repr(first))
        if first[1] == 'h':
            if ' ' in rest:   # .h HOST SINCE [LAT LON]
                from sporadic.core import hostrec
                check_host(rest[:rest.find(' ')])
                if hostrec.parse(rest) is None:
                    raise ParseError(hostrec.bad(rest))
            else:
                check_host(rest)
        return Fleet(first[1], rest)
    if is_id(first):
        kind, rest2 = _split1(rest)
        if kind == 'cancel':
            if rest2:
                raise _err(_E_CANCEL_ARGS)
            return Cancel(first)
        if kind == 'r':   # a result: the loop writes them, never parses one (jobtext.py)
            return _jx().parse_result(first, rest2)
        if kind == 'a':
            return _jx().parse_assign(first, rest2)
        if not kind:
            raise _err(_E_ID_ALONE)
        return parse_job(rest, first, None, zone_rule)
    return parse_job(s, None, salt, zone_rule)


def canonical(line, salt=None, zone_rule=None):
    """The canonical text of a line, or None for blank/comment."""
    if own_text(line):
        # a batch or key record is its own text (parse keeps a '.' record
        # word for word; batch.parse_batch checks its fields): no copies of
        # a ~1 KB seal record in a small heap (docs/budgets.md#27)
        return line
    r = parse(line, salt, zone_rule)
    return None if r is None else r.line()


def group(line):
    """The group a canonical line belongs to: a job id, or '.' for fleet records."""
    return line[:ID_LEN] if line[0] != '.' else '.'

