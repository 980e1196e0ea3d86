# The companion's side of merge.py (read as merge.NAME): parse any number
# of line sources and merge them. A board only streams already canonical
# lines through merge.compact/merge_sorted, so it never loads this module.
from sporadic.core.jobline import parse, ParseError
from sporadic.core.jobtext import fast_canonical
from sporadic.core.merge import compact


def canonical_lines(lines, name='-', errors=None, start=1):
    """Parse lines; yield canonical text of the good ones. Each bad one adds
    'NAME:LINE: reason' to errors (if given) and is skipped, never fatal."""
    n = start - 1
    fast = fast_canonical
    for raw in lines:
        n += 1
        if fast is not None:
            line = fast(raw)
            if line is not None:
                yield line
                continue
        try:
            r = parse(raw)
        except ParseError as e:
            if errors is not None:
                errors.append('%s:%d: %s' % (name, n, e))
            continue
        except Exception as e:  # a parser bug must not stop the good lines
            if errors is not None:
                errors.append('%s:%d: unreadable (%s)' % (name, n, e))
            continue
        if r is not None:
            yield r.line()


def merge(*sources, errors=None, conflicts=None):
    """Union of any number of line sources, compacted: a sorted list of lines.
    Each source is (name, iterable of lines) or an iterable of lines."""
    s = set()
    for src in sources:
        if isinstance(src, tuple):
            name, it = src
        else:
            name, it = '-', src
        for line in canonical_lines(it, name, errors):
            s.add(line)
    return list(compact(sorted(s), conflicts))
