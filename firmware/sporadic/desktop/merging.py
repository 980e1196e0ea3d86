# The companion's side of merge.py (read as merge.NAME): parse any number
# of line sources and merge them. A board only streams already canonical
# lines through merge.compact/merge_sorted, so it never loads this module.
from sporadic.core.jobline import parse, ParseError
from sporadic.core.jobtext import fast_canonical, fast_match
from sporadic.core.merge import compact


def _canonical(raw):
    """(canonical text or None, reason or None) for one raw line: None and
    no reason for a blank or comment line."""
    if fast_canonical is not None:
        line = fast_canonical(raw)
        if line is not None:
            return line, None
    try:
        r = parse(raw)
    except ParseError as e:
        return None, str(e)
    except Exception as e:  # a parser bug must not stop the good lines
        return None, 'unreadable (%s)' % e
    return (None if r is None else r.line()), None


def canonical_lines(lines, name='-', errors=None, start=1):
    """Parse lines; yield canonical text of the good ones. Each bad one adds
    'NAME:LINE: reason' to errors (if given) and is skipped, never fatal."""
    n = start - 1
    for raw in lines:
        n += 1
        line, why = _canonical(raw)
        if line is not None:
            yield line
        elif why is not None and errors is not None:
            errors.append('%s:%d: %s' % (name, n, why))


def merge(*sources, errors=None, conflicts=None):
    """Union of any number of line sources, compacted: a sorted list of lines.
    Each source is (name, iterable of lines) or an iterable of lines."""
    # Canonical text depends on the raw line alone, so each distinct raw line
    # is parsed once however often it recurs (a git merge's base, ours and
    # theirs share most lines); only bad lines are looked up again, to report
    # each at its line number.
    out = set()
    known = set()       # raw lines already read good (or blank) from a source
    for src in sources:
        if isinstance(src, tuple):
            name, it = src
        else:
            name, it = '-', src
        lines = it if isinstance(it, list) else list(it)
        fresh = set(lines)
        fresh.difference_update(known)
        if fast_match is not None:
            # CPython: most lines are canonical results; take them at C speed
            good = set(filter(fast_match, fresh))
            out.update(good)
            fresh.difference_update(good)
            known.update(good)
        bad = {}
        for raw in fresh:
            line, why = _canonical(raw)
            if line is not None:
                out.add(line)
            elif why is not None:
                bad[raw] = why
        for raw in bad:
            fresh.discard(raw)
        known.update(fresh)
        if bad and errors is not None:
            n = 0
            for raw in lines:
                n += 1
                why = bad.get(raw)
                if why is not None:
                    errors.append('%s:%d: %s' % (name, n, why))
    out = sorted(out)
    return list(compact(out, conflicts))
