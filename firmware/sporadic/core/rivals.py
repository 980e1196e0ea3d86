# Rule 4 of the merge (docs/jobline.md#merge), its first half: of two job
# texts under one id, one a signature of the fleet covers beats one no
# signature covers (a hand-cut line in the fleet folder never replaces the
# text the owner signed). merge.compact applies it when given `signed`; the
# second half (the smaller text) is compact's own. A board never loads
# this module: every fleet line its store holds was verified on the way in
# (device/trust.py), so there it has nothing to decide.
from sporadic.core.jobline import ID_LEN


def is_job(line):
    """A canonical line is a job line (not a fleet record, result,
    assignment or cancel)."""
    if not line or line[0] == '.':
        return False
    k = line[ID_LEN + 1:ID_LEN + 3]
    return k != 'r ' and k != 'a ' and not (len(line) == ID_LEN + 7 and line.endswith(' cancel'))


def signed_first(lines, signed, conflicts=None):
    """Sorted lines -> the same lines less every job text that `signed`
    (line -> bool) refuses in a group (job id) where it vouches for another
    job text. A group is held from its first unsigned job text on, to the
    group's end or its first signed job text (the group's results sort
    between an `each` and a `who:` line); any other group streams through.
    `conflicts` (a list) gets a note for each text dropped."""
    held = None     # the lines of group `gid` from its first unsigned job text on
    gid = None
    good = None     # the group known to hold a signed job text
    for line in lines:
        g = line[:ID_LEN]
        if held is not None:
            if g == gid:
                if is_job(line) and signed(line):
                    for h in held:
                        if is_job(h):
                            _note(conflicts, h)
                        else:
                            yield h
                    held = None
                    good = g
                    yield line
                else:
                    held.append(line)
                continue
            for h in held:
                yield h
            held = None
        if is_job(line):
            if signed(line):
                good = g
            elif good == g:
                _note(conflicts, line)
                continue
            else:
                held = [line]
                gid = g
                continue
        yield line
    if held is not None:
        for h in held:
            yield h


def _note(conflicts, line):
    if conflicts is not None:
        conflicts.append('%s: a job text no signature of the fleet covers lost to the signed one: %s'
                         % (line[:ID_LEN], line[:120]))
