# The flash store (docs/device.md): jobs.txt (sorted, compacted, canonical)
# + log.txt (append-only own records) + in.txt (append-only received lines)
# + quar.txt (refused lines with reasons) + out/N, out/pN (outbox: own
# records the companion has not acknowledged yet, device/outbox.py).
#
# Compaction (device/fold.py): the small logs are sorted in RAM and stream-merged with
# jobs.txt (merge.merge_sorted + merge.compact) into jobs.tmp, whose stamp
# (size and sha256, taken as it is written) goes to jobs.nok; jobs.tmp is
# renamed to jobs.new (its existence means "complete"); log.txt is renamed
# into the outbox, in.txt removed, jobs.new renamed over jobs.txt, jobs.nok
# over jobs.ok. Every crash point is recovered on open (recover()), and a
# file that does not match its stamp there was changed behind the store's
# back (docs/device.md#stamps). jobs.txt is never loaded into memory:
# everything streams, one line at a time.
try:
    from micropython import const
except ImportError:  # CPython (tools that read a board's flash)
    def const(x):
        return x
import binascii
import os
import sys
from sporadic.core import order

LOG_MAX = const(2048)     # own log bytes that trigger a compaction
# own log bytes past which the loop's pass leaves its other due jobs to the
# next pass, after the compaction (runtime._visit): pending() holds the log
# in RAM, and a pass that ran a whole file's jobs at once (a clock set a day
# late) ran a 56K board out of memory here, on every boot after it too
PASS_LOG_MAX = const(4096)
IN_MAX = const(1024)      # received bytes that trigger a compaction
QUAR_MAX = const(8192)    # quar.txt bytes before it is rotated to quar.old
CHUNK = const(256)        # bytes gathered before one write while compacting
READ_BLOCK = const(512)   # bytes read_lines reads at a time on a roomy heap
CRASH_EXIT = const(77)
ENOSPC = const(28)
FEED_LINES = const(64)    # lines read between two calls of `feed`
WAKE_INDEX = True         # the loop keeps a wake index (wake.py); False: bench/wake.py's baseline
PACK = True               # the outbox is packed (outbox.py); False: bench/scale_outbox.py's baseline
OUT_MARGIN = const(4)     # flash blocks kept free beyond what the next compaction needs
PACK_FREE = const(32768)  # free heap the loop needs to pack the outbox itself (else the sync does)
# free heap under which a sync lets the code of one part go before the next
# (splice after a compaction, the parser's rare modules after a delivery):
# a 128K unix board's; a Pico (~190 KB free) keeps them, no import again
SYNC_TIGHT = const(65536)

# The watchdog: every long read calls feed() each FEED_LINES lines (set to
# board.wdt_feed by the runtime and the sync server). A board's watchdog,
# once started, keeps running across Ctrl-C and soft resets (ESP8266 5 s,
# Pico W 8 s, ESP32 60 s), so a pass, a compaction or a sync answer over a
# large file must feed it as it goes (docs/hardware.md#the-watchdog).
feed = None

# Test hook (unix port only): SPORADIC_CRASH_AFTER=N ends the process at the
# N-th flash mutation (a write is cut short at a point derived from N).
try:
    _CRASH = int(os.getenv('SPORADIC_CRASH_AFTER') or 0)
except Exception:
    _CRASH = 0
ops = 0              # flash mutations so far (writes, renames, removes)
bytes_written = 0    # bytes this store wrote (writes only)


def crashpoint(f=None, data=None):
    """Count one flash mutation; the crash hook fires here."""
    global ops
    ops += 1
    if ops == _CRASH:
        if f is not None and data:
            cut = (ops * 7919) % len(data)
            f.write(data[:cut])
            f.close()
        raise SystemExit(CRASH_EXIT)


def write(f, data, h=None):
    # h: a hashlib object fed what is written (the stamp of a compaction;
    # MicroPython's hashlib takes the str: compaction runs on boards only)
    global bytes_written
    crashpoint(f, data)
    f.write(data)
    bytes_written += len(data)
    if h is not None:
        h.update(data)


def exists(path):
    try:
        os.stat(path)
        return True
    except OSError:
        return False


def size(path):
    try:
        return os.stat(path)[6]
    except OSError:
        return 0


def put(path, text):
    """Write a small file whole (a stamp)."""
    f = open(path, 'w')
    try:
        write(f, text)
    finally:
        f.close()


def stamp_text(n, h):
    """A file's stamp: its size in bytes and the first 8 bytes of its
    sha256 `h` (a hashlib object fed with the whole file), in hex. The same
    text for the store (stamp.file_stamp) and the companion's image."""
    return '%d %s' % (n, binascii.hexlify(h.digest()[:8]).decode())


def rename(a, b):
    crashpoint()
    os.rename(a, b)


def remove(path):
    crashpoint()
    os.remove(path)


def read_lines(path, torn=False):
    """Stream the lines of a file (without '\\n'); a last line without its
    newline (torn) is yielded only when `torn` (imports), else dropped.
    A roomy heap (a Pico's) reads READ_BLOCK bytes at a time and cuts them
    (readline reads a byte at a time through the file system: about 1.4 ms
    a line on a Pico, docs/budgets.md#27); a smaller one reads line by
    line: the blocks fragment a 64K heap, whose loop then failed a
    20,000-line compaction (bench/device_heap.py)."""
    big = roomy()
    try:
        f = open(path, 'rb' if big else 'r')
    except OSError:
        return
    n = 0
    rest = b''
    try:
        while big:
            # whole lines of each block decoded at once
            b = f.read(READ_BLOCK)
            if not b:
                if rest and torn:
                    yield rest.decode()
                return
            k = b.rfind(b'\n')
            if k < 0:
                rest += b
                continue
            b = (rest + b[:k] if rest else b[:k]).decode(), b[k + 1:]
            rest = b[1]
            for line in b[0].split('\n'):
                n += 1
                if n == FEED_LINES:
                    n = 0
                    if feed is not None:
                        feed()
                yield line
            b = None
        while True:
            line = f.readline()
            if not line:
                break
            n += 1
            if n == FEED_LINES:
                n = 0
                if feed is not None:
                    feed()
            if line[-1] != '\n':
                if torn:
                    yield line
                break
            yield line[:-1]
    finally:
        f.close()


class Store:
    def __init__(self, root=''):
        r = root
        self.root = r
        self.jobs = r + 'jobs.txt'
        self.tmp = r + 'jobs.tmp'
        self.new = r + 'jobs.new'
        self.bad = r + 'jobs.bad'
        self.log = r + 'log.txt'
        self.inp = r + 'in.txt'
        self.quar = r + 'quar.txt'
        self.out = r + 'out'
        self.run = r + 'run.txt'
        self.notes = []          # what recovery did at open
        self.quarantined = 0     # lines in quar.txt (and rotated away)
        self.compactions = 0
        self.conflicts = 0
        self._pend = None
        self._tr = 0             # storesync.trust: 0 not loaded yet, None insecure
        self.unverified = False  # jobs.txt's stamp taken unhashed at open (recover.py)
        self.full_at = 0         # log and in.txt bytes when a compaction last met a full flash
        self.rx = False          # compactions write jobs.rx and splice with it: set by a sync
                                 # (splice.index); the loop's own leave splice.py unloaded
        self.recover()

    def recover(self):
        # the recovery code is loaded for the open only, then dropped from
        # RAM before a re-import of a changed file (reimport.reimport_all;
        # what that loads is dropped after it)
        import gc
        had = list(sys.modules)
        if roomy():
            # what the open loaded that a sync loads again (the stamps, the
            # wake index) stays on a roomy heap: an import is ~2-4 M
            # instructions on a Pico (docs/budgets.md#27)
            had += ('sporadic.device.stamp', 'sporadic.device.wake')
        try:
            from sporadic.device import recover
            todo, signed = recover.recover(self)
            recover = None
            _drop(had)
            gc.collect()
            if todo:
                from sporadic.device import reimport
                reimport.reimport_all(self, todo, signed)
        finally:
            self._tr = 0
            _drop(had)
            # a re-import may have needed jobx/timex: the parser's rare
            # halves go (the parser itself only where the open loaded it:
            # _drop above; a store's reads never parse)
            jl = sys.modules.get('sporadic.core.jobline')
            if jl is not None:
                jl.unload()

    # ---- reading ----

    def jobs_lines(self):
        return read_lines(self.jobs)

    def pending(self):
        """The not-yet-compacted lines (log.txt + in.txt), sorted, in RAM
        (bounded by PASS_LOG_MAX and one job's records, and by
        storesync's in.txt limit)."""
        if self._pend is None:
            p = []
            last = ''
            up = True    # in order as read: a sync's in.txt (each P is sorted)
            for path in (self.log, self.inp):
                for line in read_lines(path):
                    if up and line < last:
                        up = False
                    last = line
                    p.append(line)
            if not up:
                # (MicroPython's sort takes its last element as the pivot:
                # lines already in order cost it n*n/2 comparisons, 0.35 s
                # of a Pico's first sync of 300 jobs, docs/budgets.md#27)
                p.sort()
            last = None
            self._pend = p
        return self._pend

    def stream(self):
        """All lines, sorted, not compacted: jobs.txt merged with the logs."""
        return order.merge_sorted(self.jobs_lines(), self.pending())

    # ---- writing ----

    def append(self, line):
        """Append one own record (a canonical line) to the log, durably."""
        data = line + '\n'
        f = open(self.log, 'a')
        try:
            write(f, data)
        finally:
            f.close()
        self.log_size += len(data)
        self._pend = None

    def started(self, jid, k, at, attempt, host='', single=False):
        """Before an action, durably: the instance it runs (run.txt: `ID K
        AT ATTEMPT KIND[ HOST]` and a newline, KIND `s` for a single-run job
        (its records are signed) else `e`, HOST when it is not cfg.json's id;
        about 27 bytes). recover.py makes it the `run` record, under the board's MAC
        (and its signature for `s`), of a board cut before the outcome; ended()
        once the outcome is in the log. docs/device.md#crash-safety"""
        put(self.run, '%s %d %d %d %s%s\n' % (jid, k, at, attempt, 's' if single else 'e', host and ' ' + host))

    def ended(self):
        remove(self.run)

    def quarantine(self, line, reason, src=''):
        line = line.rstrip('\n')
        if len(line) > 200:
            line = line[:200] + '...'
        data = '%s: %s: %s\n' % (src or '-', reason, line)
        if size(self.quar) + len(data) > QUAR_MAX:
            if exists(self.quar):
                rename(self.quar, self.quar[:-4] + '.old')
        f = open(self.quar, 'a')
        try:
            write(f, data)
        finally:
            f.close()
        self.quarantined += 1

    def release(self):
        """Drop the in-RAM copy of the logs (between passes)."""
        self._pend = None

    def needs_compaction(self):
        # in.txt of a sync that broke off (storesync.receive may have let it
        # pass IN_MAX) is folded in at the loop's next step; after a
        # compaction the flash could not take, the next try waits for
        # another LOG_MAX of the logs (each try writes until the flash is full)
        n = self.log_size + self.in_size
        if self.full_at and n < self.full_at + LOG_MAX:
            return False
        return self.log_size > LOG_MAX or self.in_size > IN_MAX

    def compact(self, extra=None):
        """Fold the logs (and `extra`, a sorted stream of canonical lines)
        into jobs.txt (see the top of this file): device/fold.py, loaded
        for a compaction only and let go after it on a tight heap (a sync's
        `O` seals the log with one, then wants a 640-byte run for the outbox).
        Nothing to fold loads nothing (a sync's `C` after its `G` compacted)."""
        if extra is None and not self.pending():
            return False
        from sporadic.device import fold
        try:
            return fold.compact(self, extra)
        finally:
            fold = None
            if tight():
                import gc
                import sporadic
                sporadic.forget('sporadic.device.fold')
                gc.collect()

    def finish(self):
        # jobs.new is complete: fold.finish (recovery's last step too)
        from sporadic.device import fold
        fold.finish(self)

    # ---- outbox: own records until the companion acknowledges them ----

    def _seg(self, n):
        return self.out + '/' + str(n)

    def out_due(self):
        """(raw, short): the raw outbox segments' bytes and whether the flash
        has less free than they, the next compaction (jobs.txt and a log)
        and OUT_MARGIN blocks need; not None when outbox.tidy has work: the
        flash short (packing is a rewrite: while the flash has room the
        segments stay as the log was, and the sync's answer packs them as
        it streams, outbox.answer)."""
        raw = 0
        for name in self.out_names():
            if name.isdigit():
                raw += size(self.out + '/' + name)
        short = False
        try:
            v = os.statvfs(self.root or '/')
            short = v[0] * v[4] < size(self.jobs) + PASS_LOG_MAX + raw + OUT_MARGIN * v[0]
        except (AttributeError, OSError):
            pass
        return (raw, short) if short else None

    def out_lost(self):
        """Own records dropped for want of flash the companion has not
        counted yet (device/outbox.py make_room)."""
        try:
            with open(self.out + '/lost') as f:
                return int(f.read().strip() or 0)
        except (OSError, ValueError):
            return 0

    def out_names(self):
        """The outbox folder's names, one at a time (a month without a sync
        is hundreds of files: never a list of them all on the heap)."""
        try:
            it = os.ilistdir(self.out)
        except AttributeError:      # CPython
            it = os.listdir(self.out)
        for e in it:
            yield e if isinstance(e, str) else e[0]

    def out_top(self):
        """(files, newest number) of the outbox (0, 0 when empty), in one
        pass over its folder."""
        n = top = 0
        for name in self.out_names():
            if name[:1] == 'p':
                name = name[1:]
            if name.isdigit():
                n += 1
                k = int(name)
                if k > top:
                    top = k
        return n, top

    def out_seqs(self, upto=None):
        """The numbers of the outbox files (raw `N`, packed `pN`: outbox.py),
        oldest first; those <= upto when given (what one `O` answer sent:
        never a list of a month's hundreds)."""
        s = []
        for name in self.out_names():
            if name[:1] == 'p':
                name = name[1:]
            if name.isdigit():
                n = int(name)
                if upto is None or n <= upto:
                    s.append(n)
        s.sort()
        return s


ROOMY = const(163840)   # a heap this large (a Pico's 240 KB) carries the wake index across a sync (carry.py)
_heap = 0
_shared = False         # the TCP network loop shares the heap (share())


def share():
    """The board-to-board network loop (net/node.py) shares this heap from
    now on (boot.py): its server, peers and requests take the room that
    roomy()'s extras (code kept loaded, bigger buffers, held indexes)
    assume, so roomy() is False after this. A 224K mesh board on the
    64-bit port whose loop held ~1 KB more code failed its peer syncs
    (MemoryError in trust.admit) and its single-run records' signatures:
    its peers never got its records (docs/budgets.md#27). What the open
    kept for a sync goes."""
    global _shared
    _shared = True
    import sporadic
    sporadic.forget('sporadic.device.wake')


def roomy():
    """The heap is ROOMY or more in all (its size, not what is free now: a
    sync's garbage made the answer change from request to request)."""
    global _heap
    if not _heap:
        import gc
        _heap = gc.mem_alloc() + gc.mem_free() if hasattr(gc, 'mem_free') else 1
    return _heap >= ROOMY and not _shared


def tight():
    """The heap has less than SYNC_TIGHT free (garbage counted as used: no
    collection for the question): a sync lets go of what one part loaded.
    A roomy heap collects before it answers yes: a Pico's sync found itself
    tight of garbage alone, let its signature check's code go in the `G`
    and loaded it again for the `I` (~5 M instructions, docs/budgets.md#27)."""
    import gc
    if not hasattr(gc, 'mem_free') or gc.mem_free() >= SYNC_TIGHT:
        return False
    if roomy():
        gc.collect()
        return gc.mem_free() < SYNC_TIGHT
    return True


def _drop(had):
    # forget the sporadic modules loaded since `had` (a list of sys.modules)
    import sporadic
    for name in list(sys.modules):
        if name[:9] == 'sporadic.' and name not in had:
            sporadic.forget(name)


opened = None    # the store open_store() opened (read-only elsewhere: rtinit asks whether it is)


def open_store(root=''):
    """The store of this boot, opened (and recovered) once and shared by the
    loop and a sync. sporadic.boot opens it before importing the runtime, so that
    recovery (the heaviest moment of a boot) runs in the emptiest heap."""
    global opened
    if opened is None or opened.root != root:
        opened = Store(root)
    return opened
