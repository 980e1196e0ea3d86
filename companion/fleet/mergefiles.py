"""Job-line files read and merged: `companion merge`, `check` and `plan`
read them with read_lines; merged_text merges whole files on two cores.

Compaction works one group (job id) at a time (sporadic.core.merge), so the
lines split in two halves with nothing to tell each other: those before 'g'
(ids 0-f, the fleet's '.' records, and whatever is not canonical) and those
from 'g' on (ids g-v). A forked process merges the second half with
merging.merge, the one implementation of the rule, while this one merges the
first; the two results joined are the whole merge, in byte order.

That holds while every line's canonical text stays in its raw line's half.
A line that leaves it (a job written without its id, an id after a space)
is found afterwards: compaction yields at least one line for every group it
sees, so such a line shows as a result line outside its half. Then, or where
a half has a bad line (whose message must carry its number in the whole
file), the files are merged again in this process, as without a fork.
"""
import os
import threading

from sporadic.desktop import merging

from companion.cpus import usable_cpus
from companion.errors import UserError
from companion.fleet.zonerule import zone_rule

SPLIT = 'g'          # the first line of the second half, in byte order
_HALF_FAILED = 3     # the child's exit status when its half cannot stand alone
# the characters str.splitlines() ends a line at, once universal newlines made
# every '\r\n' and '\r' a '\n'
_LINE_ENDS = '\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029'


# The most a job-line file may hold: the companion reads one whole, and a
# file beyond this is no file it wrote for a fleet of 1,000s of jobs
# (docs/security.md#the-fleet-folder)
FILE_MAX = 64 << 20


def too_large(path, size, name=None):
    """The one line refusing a file of size bytes, or None when it is not too large."""
    if size <= FILE_MAX:
        return None
    name = name or path
    return ('%s is %.1f MB, more than a job-line file holds (at most %d MB): not a file the companion wrote; '
            'restore it from git (git checkout -- %s) or a backup' % (name, size / 1e6, FILE_MAX >> 20, name))


def read_lines(path, chunk=1 << 16, name=None, limit=True):
    """The file's text (UTF-8; a byte that is not stays a lone surrogate,
    which merging.line_problem reports) as f.read().splitlines()
    gives it, read chunk characters at a time: a large file never sits in memory
    whole beside its lines (a 12 MB job file cost ~6,000 page faults), and a
    chunk this size is reused where it was rather than mapped anew each time
    (1 MiB chunks: ~3,400 more faults for two 6 MB files)."""
    lines = []
    try:
        with open(path, encoding='utf-8', errors='surrogateescape') as f:
            why = too_large(path, os.fstat(f.fileno()).st_size, name) if limit else None
            if why is not None:
                raise UserError(why)
            rest = ''
            while True:
                text = f.read(chunk)
                if not text:
                    break
                part = (rest + text).splitlines()
                rest = part.pop() if text[-1] not in _LINE_ENDS else ''
                lines += part
            if rest:
                lines.append(rest)
    except OSError as e:
        raise UserError('%s: %s' % (path, e.strerror or e))
    return lines


def text_chunks(lines, n=2000):
    """'\n'.join(lines) + '\n', n lines at a time (none for no lines)."""
    for i in range(0, len(lines), n):
        yield '\n'.join(lines[i:i + n]) + '\n'


def batch_records(paths):
    """The .b records at the head of each file (a job-line file is sorted:
    fleet records first), for merge's `signed` test."""
    out = []
    for p in paths:
        try:
            with open(p, encoding='utf-8', errors='surrogateescape') as f:
                for line in f:
                    if line[:1] != '.':
                        break
                    if line[:3] == '.b ':
                        out.append(line.rstrip('\r\n'))
        except OSError:
            pass
    return out


def merged_text(paths, errors, conflicts, workers=None, signed=None):
    """Merge the job-line files at paths: the result's text, in pieces
    (each ends with a newline; no piece for no line). Bad lines go to
    errors, job-id conflicts to conflicts. workers: 1 merges in this
    process; by default the two halves run side by side where there is a
    fork and a second CPU. signed: merging.merge's (rule 4: a job text a
    verified batch covers beats one none covers)."""
    if workers is None:
        workers = 2 if usable_cpus() >= 2 else 1
    # a fork copies this thread alone: with others running (a caller's
    # threads holding a lock the child would need), stay in one process
    if workers >= 2 and hasattr(os, 'fork') and threading.active_count() == 1:
        halves = _merge_halves(paths, signed)
        if halves is not None:
            first, second_text, first_conflicts, second_conflicts = halves
            conflicts += first_conflicts + second_conflicts
            return list(text_chunks(first)) + ([second_text] if second_text else [])
    lines = merging.merge(*[(p, read_lines(p)) for p in paths], errors=errors, conflicts=conflicts, signed=signed,
                          zone_rule=zone_rule)
    return list(text_chunks(lines))



def _merge_half(paths, second, signed=None):
    """(merged lines, conflicts) of one half, or None where it cannot stand
    alone: a bad line, or a line whose canonical text is in the other half."""
    sources = [(p, read_lines(p)) for p in paths]
    if second:
        part = [(p, [line for line in lines if line >= SPLIT]) for p, lines in sources]
    else:
        part = [(p, [line for line in lines if line < SPLIT]) for p, lines in sources]
    errors, conflicts = [], []
    out = merging.merge(*part, errors=errors, conflicts=conflicts, signed=signed, zone_rule=zone_rule)
    if errors or (out and ((out[0] < SPLIT) if second else (out[-1] >= SPLIT))):
        return None
    return out, conflicts


def _merge_halves(paths, signed=None):
    """(first half's lines, second half's text, their conflicts), or None where
    the halves would not give the whole merge. Each process reads the files
    itself: lines read before the fork would be copied page by page as both
    processes touched them."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:   # the child: the second half, sent back through the pipe
        status = _HALF_FAILED
        try:
            os.close(r)
            half = _merge_half(paths, True, signed)
            if half is not None:
                out, notes = half
                head = '\n'.join(notes)
                body = '\n'.join(out) + '\n' if out else ''
                data = ('%d %d\n' % (len(head), len(notes)) + head + body).encode()
                view = memoryview(data)
                while view:
                    view = view[os.write(w, view):]
                status = 0
        finally:
            os._exit(status)
    os.close(w)
    try:
        first = _merge_half(paths, False, signed)
        chunks = []
        while True:
            chunk = os.read(r, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(r)
        _, status = os.waitpid(pid, 0)
    if first is None or status != 0:
        return None
    sizes, data = b''.join(chunks).decode().split('\n', 1)
    head_len, n_notes = map(int, sizes.split())
    second_conflicts = data[:head_len].split('\n') if n_notes else []
    return first[0], data[head_len:], first[1], second_conflicts
