# The outbox on flash (docs/device.md#the-outbox): own records the companion
# has not confirmed yet. A compaction renames log.txt to out/N (a raw
# segment, full lines: costs no write). The sync's answer to `O` packs raw
# segments as it streams them (core/outpack.py: an `each` run is one short
# line), writing nothing. On flash they are packed only when the flash runs
# short (packing is a rewrite: a write of every record again, which is what
# #31 counts per completion): together into out/pN, N the newest segment it
# holds: written to out/p.tmp, renamed, then the raw segments go
# (recover.py finishes either step after a power cut).
# Nothing is dropped while the flash has room; when it has none (less free
# than the next compaction and packing need), the oldest outbox file goes
# and its records are counted in out/lost, which the board reports (status,
# and the answer to `O`) until the companion has counted it.
#
# Loaded by a compaction only when it has something to do here, and by a
# sync; the loop never keeps it.
import os
from sporadic.device.store import size, read_lines, write, rename, remove, PASS_LOG_MAX, OUT_MARGIN



OUT_FILES = 16    # outbox files one `O` answer sends at most


def _num(name):
    if name.isdigit():
        return int(name)
    if name[:1] == 'p' and name[1:].isdigit():
        return int(name[1:])
    return None


def oldest(st, most):
    """([(N, name)] of the `most` oldest outbox files, oldest first; how
    many files there are): one pass over the folder, holding `most` names
    (raw `N`, packed `pN`; a month without a sync is hundreds of files)."""
    best = []
    count = 0
    for name in st.out_names():
        k = _num(name)
        if k is None:
            continue
        count += 1
        if len(best) == most and k > best[-1][0]:
            continue
        i = len(best)
        while i and best[i - 1][0] > k:
            i -= 1
        best.insert(i, (k, name))
        if len(best) > most:
            best.pop()
    return best, count


def files(st):
    """The outbox's raw segments as (N, name), oldest first (packing: the
    flash is short)."""
    s = []
    for name in st.out_names():
        if name.isdigit():
            s.append((int(name), name))
    s.sort()
    return s


def _host(paths):
    # the board's id, as its own results name it (the log holds own records)
    for p in paths:
        for line in read_lines(p):
            if line[8:11] == ' r ':
                return line.split(' ', 3)[2]
    return ''


def pack(st):
    """Pack every raw segment into one file (see the top)."""
    from sporadic.core import outpack
    raw = [(k, st.out + '/' + name) for k, name in files(st)]
    if not raw:
        return
    paths = [p for k, p in raw]
    host = _host(paths)
    tmp = st.out + '/p.tmp'

    def src():
        if not host:
            yield '@'      # no own result to name the board by: the lines as they are
        for p in paths:
            for line in read_lines(p):
                yield line
    f = open(tmp, 'w')
    try:
        buf = []
        n = 0
        for s in (outpack.pack(src(), host) if host else src()):
            buf.append(s)
            n += len(s) + 1
            if n >= 256:
                buf.append('')
                write(f, '\n'.join(buf))
                buf = []
                n = 0
        if buf:
            buf.append('')
            write(f, '\n'.join(buf))
    finally:
        f.close()
    rename(tmp, st.out + '/p' + str(raw[-1][0]))
    for k, p in raw:
        remove(p)


def free(st):
    """Free bytes on the store's flash (None: the port cannot say)."""
    try:
        v = os.statvfs(st.root or '/')
    except (AttributeError, OSError):
        return None
    return v[0] * v[4], v[0]


def _count(path):
    n = 0
    for line in read_lines(path):
        if line[:1] != '@':
            n += 1
    return n


def make_room(st, need):
    """Drop the oldest outbox files while the flash has less than `need`
    bytes (+ OUT_MARGIN blocks) free; each dropped record is counted."""
    while True:
        fr = free(st)
        if fr is None or fr[0] >= need + OUT_MARGIN * fr[1]:
            return
        fs, n = oldest(st, 1)
        if n < 2:    # the newest stays: it is what the next sync hands over
            return
        p = st.out + '/' + fs[0][1]
        n = st.out_lost() + _count(p)
        from sporadic.device.store import put
        put(st.out + '/lost.tmp', str(n))
        rename(st.out + '/lost.tmp', st.out + '/lost')
        remove(p)


def tidy(st):
    """After a compaction that sealed a segment (or a sync's `O`): the raw
    segments packed when the flash runs short (packing frees about 2/3 of
    them; an `O` answer packs as it streams), then room for the next
    compaction (a copy of jobs.txt and a log): Store.out_due says when."""
    import gc
    gc.collect()
    due = st.out_due()
    if due is None:
        return
    raw = due[0]
    if raw:
        make_room(st, raw >> 1)       # the pack is written before the segments go
        try:
            pack(st)
        except (MemoryError, OSError):
            # nothing lost: the raw segments are all there, and the next
            # pack writes p.tmp again
            if _exists(st.out + '/p.tmp'):
                remove(st.out + '/p.tmp')
    make_room(st, size(st.jobs) + PASS_LOG_MAX)


def _exists(p):
    try:
        os.stat(p)
        return True
    except OSError:
        return False


def answer(st, most):
    """The answer to `O MOST`: "UPTO LEFT LOST" then whole outbox files from
    the oldest while their bytes on flash stay within MOST (at least one),
    packed (core/outpack.py: a packed file as it is on flash, a raw segment
    packed as it streams; one naming no result of this board under a header
    `@`, its lines as they are). UPTO: the newest file sent (0: none), LEFT:
    the files after it. Yields pieces."""
    fs, count = oldest(st, OUT_FILES)
    n = 0
    i = 0
    while i < len(fs):
        s = size(st.out + '/' + fs[i][1])
        if i and n + s > most:
            break
        n += s
        i += 1
    yield '%d %d %d' % (fs[i - 1][0] if i else 0, count - i, st.out_lost())
    for k, name in fs[:i]:
        p = st.out + '/' + name
        src = read_lines(p)
        if name[0] != 'p':
            host = _host((p,))
            if host:
                try:
                    from sporadic.core import outpack
                    src = outpack.pack(src, host)
                except MemoryError:
                    # no room for the names its import interns (the name
                    # pool's next block: 14 KB on a 64-bit port) in a heap a
                    # loop has scattered (a TCP board's): the lines as they are
                    host = ''
            if not host:
                yield '\n@'
        for line in src:
            yield '\n' + line
