# The broker spool's merge (docs/mqtt.md): what a wake's network phase
# (net/exchange.py) wrote to mq/NAME and acknowledged, merged message by
# message in name order (batches by SEQ first) through the store's trust
# checks, each file removed once merged. Its own module: a board that
# restarts between a wake's phases (net/broker.py, board.PHASE_RESET)
# merges at its next boot (device/boot.py) in a fresh heap, without the
# broker loop's code, the runtime or the network phase's names in RAM.
try:
    from micropython import const
except ImportError:  # CPython
    def const(x):
        return x
import os

REPORT_MAX = const(8)      # refusals kept for the report of one wake
# A wake's phases across restarts (net/broker.py main, device/boot.py):
# 'm' merge the spool at the next boot, 'r' the wake's step is taken: run
# the loop, 's' the loop restarted for its broker step
MARK = 'mq.go'


def seal(name):
    """A snapshot message that carries a signed batch (f + SEQ): its check
    is RSA's (core/batch.py); the others' (u buckets, other boards'
    records) the parser's and Ed25519's."""
    return name[0] == 'f' and name[1:].isdigit()


def merge(st, refused, done=None, kind=None):
    """The spooled messages through the store's checks, in name order;
    returns the lines taken. refused(line, why): each refusal (it
    quarantines and reports the line). A message the merge could not
    finish (out of memory in a signature check) stays spooled, merged at a
    later wake (the exception goes up). done: [n], n counts the messages
    merged; kind: only the messages whose seal() is kind, up to the first
    of the other kind."""
    spool = st.root + 'mq'
    try:
        names = os.listdir(spool)
    except OSError:
        return 0
    if not names:
        return 0        # nothing came: the trust checks are not even loaded
    names.sort()
    import gc
    import sys
    import sporadic
    had = list(sys.modules)
    taken = 0
    for name in names:
        p = spool + '/' + name
        if name == 'tmp':
            os.remove(p)        # a message cut short: it comes again
            continue
        if kind is not None and seal(name) != kind:
            break
        # each message with only the code its check needs, loaded after
        # a collection: the trust checks first, the batch check (and
        # RSA) for a snapshot message (f + SEQ: a seal), in the emptiest
        # heap of the message, not between its lines (a 2048-bit
        # signature check then finds its runs of 512 bytes); all of it
        # goes after the message: another board's records (an Ed25519
        # check each) never share the heap with the RSA code
        gc.collect()
        from sporadic.device import storesync
        from sporadic.device.store import read_lines
        try:
            storesync.trust(st)
            if seal(name):
                gc.collect()
                from sporadic.core import batch
                batch = None
            # out of memory (a signature check in a full heap): the file
            # stays, merged at the next wake; nothing is refused for it
            gc.collect()
            ref = []
            acc, _ = storesync.receive(st, read_lines(p), 'mqtt', ref)
            taken += acc
            for line, why in ref:
                refused(line, why)
            ref = None
            os.remove(p)
            if done is not None:
                done[0] += 1
        finally:
            storesync.let_go(st)
            storesync = read_lines = None
            sporadic.forget_since(had)
    return taken


def keep_report(st, refusals):
    """The merge's refusals (REASON<TAB>LINE), kept for the next wake's
    report on PRE/q/ID (mq.q: the merge runs after the disconnect), at most
    REPORT_MAX a wake."""
    if not refusals:
        return
    f = open(st.root + 'mq.q', 'a')
    try:
        f.write('\n'.join(refusals[:REPORT_MAX]) + '\n')
    finally:
        f.close()


def after_reset(st):
    """A wake's second phase, at the boot after its network phase (MARK
    'm', net/broker.py): the spool merged before the parser, the broker
    loop or the runtime is loaded, one kind of message a boot (the signed
    batches' messages, RSA, then the others, the parser and Ed25519: each
    kind with its own names alone in the heap). Then MARK says 'r' (the
    next boot runs the loop, the wake's step taken), or 'm' again: messages
    of the other kind are left, or one ran out of memory after others were
    merged in this boot (the next boot merges the rest in a fresh heap;
    each boot merges one message at least or gives up: what is left stays
    spooled, merged by a later step or wake)."""
    # first: a merge that crashes the board is not tried again at every boot
    mark(st, 'r')
    try:
        names = [n for n in os.listdir(st.root + 'mq') if n != 'tmp']
    except OSError:
        names = None
    if not names:
        return
    names.sort()
    kind = seal(names[0])
    if not kind and st.in_size:
        # the signed batches' lines merged at the boot before wait in in.txt,
        # which a board signature's check reads whole (store.pending(): the
        # job lines of the records' jobs): folded into jobs.txt first, in a
        # boot of its own, the records at the next
        try:
            st.compact()
            mark(st, 'm')
            return
        except Exception:
            pass        # (the records' merge then reads in.txt as it is)
    _names(kind)
    refusals = []

    def refused(line, why):
        st.quarantine(line, why, 'mqtt')
        refusals.append('%s\t%s' % (why, line[:200]))
    done = [0]
    again = False
    try:
        merge(st, refused, done, kind)
        again = len(names) > done[0]        # the other kind's messages
    except MemoryError:
        again = done[0] > 0
    except Exception:
        pass            # what is left stays spooled: a later step merges it
    keep_report(st, refusals)
    if again:
        mark(st, 'm')


def _names(seals):
    # The merge's modules imported once, each let go at once: what stays is
    # their names (MicroPython interns a module's identifiers for good, in
    # pieces and in pool blocks of up to 4.5 KB allocated whole), packed at
    # the bottom of the fresh heap instead of strewn between a message's
    # garbage, where a board signature's check then found no run of 640
    # bytes in 29 KB free (as rtinit.names() for the loop's modules)
    import gc
    import sys
    import sporadic
    mods = ['sporadic.device.storesync', 'sporadic.device.trust', 'sporadic.core.batchid']
    if seals:
        mods += ['sporadic.core.batch', 'sporadic.device.seals']
    else:
        mods += ['sporadic.core.jobline', 'sporadic.core.hostrec', 'sporadic.device.boardsig',
                 'sporadic.core.sha512', 'sporadic.core.edcurve', 'sporadic.core.hmac']
    had = list(sys.modules)
    for m in mods:
        try:
            __import__(m)
        except ImportError:
            pass        # (a firmware without it: the merge does not need it either)
        sporadic.forget_since(had)
        gc.collect()


def mark(st, what):
    f = open(st.root + MARK, 'w')
    try:
        f.write(what)
    finally:
        f.close()
