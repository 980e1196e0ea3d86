# The companion's side of merge.py (read as merge.NAME): parse any number
# of line sources and merge them. A board only streams already canonical
# lines through merge.compact/merge_sorted, so it never loads this module.
from sporadic.core.jobline import parse, ParseError, JOB_MAX, ID_LEN
from sporadic.core.jobtext import fast_canonical, fast_match
from sporadic.core.merge import compact

# A job line in the shape parse() writes, split where the command's words are:
# ID TYPE TIME WORDS [; OPTIONS]. Words here are plain (ASCII, no quote, not
# ';', one space apart); whether the rest is canonical is parse()'s answer for
# the same line with one word 'x' in their place (_skeleton), since the words
# only pass through: one parse per distinct TYPE TIME OPTIONS, not per job.
_JOB = None
_SWAP01 = b'\x01\x00' + bytes(254)
if fast_match is not None:
    import re
    _W = r'(?:[!#-:<-~][!#-~]*|;[!#-~]+)'
    _JOB = re.compile(r'[0-9a-v]{8} ((?:each|one|who:[!-~]+|any:[!-~]+) [0-9]{4}-[0-9]{2}-[0-9]{2}T'
                      r'[0-9]{2}:[0-9]{2}(?::[0-9]{2}|)Z) %s(?: %s)*( ; [ -~]+|)' % (_W, _W)).fullmatch


def _skeleton(known, head, tail, zone_rule=None):
    """Is '00000000 HEAD x TAIL' canonical? (HEAD, TAIL: a _JOB match's groups;
    known: the answers so far; any valid id will do, given it is not derived)"""
    key = (head, tail)
    ok = known.get(key)
    if ok is None:
        line = '00000000 ' + head + ' x' + tail
        ok = known[key] = parsed(line, zone_rule)[0] == line
    return ok


def canonical(raw, zone_rule=None):
    """(canonical text or None, reason or None) for one raw line: None and
    no reason for a blank or comment line. zone_rule: jobline.parse_job's
    (the companion passes its own: a tz= zone name resolves with it only)."""
    if fast_canonical is not None:
        line = fast_canonical(raw)
        if line is not None:
            return line, None
    return parsed(raw, zone_rule)


# git's conflict markers (a merge left unfinished, docs/git.md)
MARKERS = ('<<<<<<<', '|||||||', '=======', '>>>>>>>')
# no record is longer (a .b record, the longest, is ~2.4 KB): a longer line
# is refused before it is parsed
LINE_MAX = 8192


def line_problem(raw):
    """Why a raw line of a job-line file is not a record to parse, or None:
    a git conflict marker, bytes that are not UTF-8 (read with
    errors='surrogateescape', companion/fleet/mergefiles.read_lines), a control
    character (where a file would break the line), a line longer than any
    record."""
    if raw.startswith(MARKERS):
        return ('a git conflict marker (%s): a merge was left unfinished (docs/git.md: companion merge '
                'as the merge driver)' % raw[:7])
    if len(raw) > LINE_MAX:
        return ('a line of %d characters: longer than a board takes (a job line at most %d, any record '
                'at most %d)' % (len(raw), JOB_MAX, LINE_MAX))
    if _FAST and raw.isascii() and raw.isprintable():
        return None
    for i, c in enumerate(raw):
        if '\udc80' <= c <= '\udcff':
            return 'byte 0x%02x at column %d is not UTF-8' % (ord(c) - 0xdc00, i + 1)
        if c < ' ' and c != '\t' or c in _BREAKS:
            # a file would break the line there (str.splitlines): no record holds one
            return 'a control character (U+%04X) at column %d' % (ord(c), i + 1)
    return None


_BREAKS = '\x7f\x85\u2028\u2029'
# CPython's one-call test of a plain line; MicroPython's str has neither method
_FAST = hasattr(str, 'isascii') and hasattr(str, 'isprintable')


def is_result(line, host=None):
    """A canonical line is a result record ('ID r HOST ...'), of `host` when
    given; told from its text without parsing it (the companion's sync; here,
    not in jobline, since every byte there is on every board's heap)."""
    if host is None:
        return line[ID_LEN:ID_LEN + 3] == ' r '
    return line.startswith(' r ' + host + ' ', ID_LEN)


def parsed(raw, zone_rule=None):
    # canonical without the pattern (for a line it refused)
    why = line_problem(raw)
    if why is not None:
        return None, why
    try:
        r = parse(raw, None, zone_rule)
    except ParseError as e:
        return None, str(e)
    except Exception as e:  # a parser bug must not stop the good lines
        return None, 'unreadable (%s)' % e
    return (None if r is None else r.line()), None


def canonical_lines(lines, name='-', errors=None, start=1, zone_rule=None):
    """Parse lines; yield canonical text of the good ones. Each bad one adds
    'NAME:LINE: reason' to errors (if given) and is skipped, never fatal.
    zone_rule: see canonical."""
    n = start - 1
    for raw in lines:
        n += 1
        line, why = canonical(raw, zone_rule)
        if line is not None:
            yield line
        elif why is not None and errors is not None:
            errors.append('%s:%d: %s' % (name, n, why))


def merge(*sources, errors=None, conflicts=None, signed=None, zone_rule=None):
    """Union of any number of line sources, compacted: a sorted list of lines.
    Each source is (name, iterable of lines) or an iterable of lines.
    signed: see merge.compact (rule 4: a signed job text beats an unsigned one).
    zone_rule: see canonical."""
    # Canonical text depends on the raw line alone, so each distinct raw line
    # is read once however often it recurs (a git merge's base, ours and
    # theirs share most lines); only bad lines are looked up again, to report
    # each at its line number. The distinct lines are a dict, not a set: it
    # keeps them in the order they were read, which is the order CPython
    # allocated them in, so the pattern check and the sort walk memory in
    # order rather than at random (each about twice as fast, 190,000 lines).
    named = []
    for src in sources:
        if isinstance(src, tuple):
            name, it = src
        else:
            name, it = '-', src
        named.append((name, it if isinstance(it, list) else list(it)))
    if fast_match is not None:
        # CPython: most lines are canonical results; take them at C speed
        # (one pass of the pattern, a byte a line: no set of the rest; at
        # this size every megabyte touched is ~256 page faults)
        from itertools import chain, compress
        raw = dict.fromkeys(chain.from_iterable(lines for _, lines in named))
        took = bytes(map(bool, map(fast_match, raw)))
        out = list(compress(raw, took))
        # the other lines: took's 0s and 1s swapped by one translate
        rest = compress(raw, took.translate(_SWAP01)) if len(out) < len(raw) else ()
    else:
        everything = []
        for _, lines in named:
            everything += lines
        raw = dict.fromkeys(everything)
        out = []
        rest = raw
    fixed = set()       # canonical text of the other good lines, from parse()
    jobs = set()        # canonical job lines _skeleton vouched for
    bad = {}
    known = {}
    for r in rest:
        if _JOB is not None:
            m = _JOB(r)
            if m is not None and len(r) <= JOB_MAX + ID_LEN + 1 and _skeleton(known, *m.groups(), zone_rule):
                jobs.add(r)
                continue
        line, why = parsed(r, zone_rule)   # the pattern, where there is one, refused r
        if line is not None:
            fixed.add(line)
        elif why is not None:
            bad[r] = why
    if fast_match is not None:
        # a line parse() made canonical may be one already taken as it was
        fixed = [line for line in fixed if line not in raw or (line not in jobs and fast_match(line) is None)]
    out += jobs
    out += fixed
    out.sort()
    if bad and errors is not None:
        for name, lines in named:
            n = 0
            for r in lines:
                n += 1
                why = bad.get(r)
                if why is not None:
                    errors.append('%s:%d: %s' % (name, n, why))
    if signed is None:
        return list(compact(out, conflicts))
    # rule 4 asks `signed` only where an id holds two job texts: merged
    # without it first, and again with it where that found any
    first = []
    done = list(compact(out, first))
    if first:
        first = []
        done = list(compact(out, first, signed))
    if conflicts is not None:
        conflicts += first
    return done
