# Merge = set union, then a deterministic compaction (docs/jobline.md#merge).
# Compaction streams over lines in byte order, one group (job id) at a time,
# holding at most one pending job line and one result line: constant memory,
# so the device runs the same code over a file larger than its heap.
# result_key and merge_sorted: the part a loop's pass needs (core/order.py),
# merge.result_key and merge.merge_sorted to every caller of the compaction;
# ID_LEN from there too: a compaction never loads the parser
from sporadic.core.order import ID_LEN, result_key, merge_sorted  # noqa: F401


def assign_key(line):
    # ID a HOST K AT BY MAC: the newest decision on the highest instance wins
    f = line.split(None, 5)
    return (int(f[3]), int(f[4]), line)


def compact(lines, conflicts=None, signed=None):
    """Sorted, de-duplicated canonical lines -> compacted lines (a generator).
    `conflicts` (a list) receives a note for each job id with two texts.
    `signed` (line -> bool: a verified signature of the fleet covers it),
    when given, makes a signed job text beat an unsigned one under one id
    (rule 4, core/rivals.py); a board gives none (its store holds only
    verified lines)."""
    if signed is not None:
        from sporadic.core.rivals import signed_first
        lines = signed_first(lines, signed, conflicts)
    gid = None          # current group
    cancelled = False
    job = None          # pending job line (held until we know there is no cancel)
    host = None         # current result host
    best = None         # best result line for that host (its key made only when compared)
    asg = None          # best assignment line of the group ('ID a ...' sort first in a group)
    # Most lines are results of the group after the first: while nothing but
    # `best` is held, rp is the group's 'ID r ' and hp best's 'ID r HOST ',
    # and such a line costs two prefix tests (else both ' ', which no line
    # starts with, and the rules below run).
    rp = ' '
    hp = ' '
    host_at = ID_LEN + 3
    for line in lines:
        if line.startswith(rp):
            if line.startswith(hp):
                if result_key(line) > result_key(best):
                    best = line
            else:
                yield best
                best = line
                hp = line[:line.find(' ', host_at) + 1] or line[:-1] + ' '
            continue
        if rp != ' ':
            host = hp[host_at:-1]
            rp = ' '
        g = line[:ID_LEN] if line[0] != '.' else '.'
        if g != gid:
            if asg is not None and not cancelled:
                yield asg
            if job is not None and not cancelled:
                yield job
            if best is not None and not cancelled:
                yield best
            gid = g
            cancelled = False
            job = None
            host = None
            best = None
            asg = None
            seen_job = False
        if g == '.':
            # seal slots (`.b @SLOT SEQ ...`, docs/security.md#seals): of one
            # slot's records, sorted by SEQ, those of the last SEQ stay
            if job is not None:
                if line[:9] != job[:9] or line[:17] == job[:17]:
                    yield job
                job = None
            if line[:4] == '.b @':
                job = line
                continue
            yield line
            continue
        kind = line[ID_LEN + 1:ID_LEN + 3]
        if kind == 'a ':
            # rule 5: of the assignments of one job, the greatest by (K, AT, text)
            if asg is None or assign_key(line) > assign_key(asg):
                asg = line
            continue
        if asg is not None:
            # the first other line of the group: only an `any:` job line
            # sorts before `cancel`, so hold the assignment while a job is
            # pending and no cancel has been seen
            if line.endswith(' cancel') and len(line) == ID_LEN + 7:
                asg = None
            elif not (job is None and kind == 'an'):
                if not cancelled:
                    yield asg
                asg = None
        if kind == 'r ':
            if job is not None:
                if not cancelled:
                    yield job
                job = None
            if cancelled:
                continue
            h = line[ID_LEN + 3:line.find(' ', ID_LEN + 3)]   # 'ID r HOST ...'
            if h != host:
                if best is not None:
                    yield best
                host = h
                best = line
            elif result_key(line) > result_key(best):
                best = line
            rp = line[:host_at]
            hp = line[:host_at] + host + ' '
            continue
        if best is not None:
            if not cancelled:
                yield best
            best = None
            host = None
        if line.endswith(' cancel') and len(line) == ID_LEN + 7:
            cancelled = True
            job = None
            yield line
            continue
        # a job line
        if seen_job:
            if conflicts is not None:
                conflicts.append(g + ': two job texts under one id; kept the first in byte order')
            continue
        seen_job = True
        if cancelled:
            continue
        if job is not None:
            yield job
        job = line
    if asg is not None and not cancelled:
        yield asg
    if job is not None and not cancelled:
        yield job
    if best is not None and not cancelled:
        yield best
