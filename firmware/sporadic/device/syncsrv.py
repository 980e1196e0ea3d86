# The device end of sync: one request in, one response out, whatever the
# link (raw REPL over serial: the companion runs `syncsrv.h(...)`; TCP: net/server.py
# frames the same strings). Set reconciliation is recon.py's; this adds the
# few requests around it (docs/sync.md):
#
#   I            -> JSON status (id, clock, counts, store health)
#   F            -> "KEYID PEERID ID": the fleet this board belongs to (the
#                   keyid of its public key, hmac.key_id of its fleet key,
#                   '-' where it has none), asked before anything is exchanged
#   T EPOCH      -> "ID BEFORE HEAP" : the companion's clock over its own
#                   line; BEFORE is this board's clock before (or '-' if
#                   unknown), HEAP its heap in bytes (the companion sizes its
#                   requests to it)
#   O MOST       -> "UPTO LEFT LOST" + the oldest outbox files within MOST
#                   bytes, one line each (device/outbox.py answer: packed,
#                   core/outpack.py); streamed, never joined but by h()
#   A UPTO [LOST]-> "n" outbox files removed: the companion holds them (and
#                   has counted LOST records the board dropped for want of flash)
#   C            -> "1" after folding received lines into jobs.txt
#   V VOUCH      -> "1": the companion's one signature over the seal records
#                   this sync brings, checked (storesync.vouch), else "!why"
#   anything else: recon.Responder (S, N, G, P ...)
#
# Memory: a sync runs after a soft reset (the companion's link does one), so
# only the store and recon are loaded; the runtime (planner, actions) is
# imported for `I` alone, after recon is let go.
import gc
import sys
from sporadic.device import clock

try:
    from micropython import const
except ImportError:
    def const(x):
        return x

# characters gathered before one write of a streamed answer: few writes,
# and small joins (a 1 KB join found no room in a 112K unix board's heap
# mid-way through a month's outbox); a longer piece is written alone
OUT_CHUNK = const(256)
OUT_MOST = const(8192)    # outbox bytes in one `O` answer when the request names none
_responder = None
_store = None


def store():
    # the store of this boot: the loop's own when it runs (TCP sync); the
    # runtime is never imported for this (a sync session after a soft reset
    # has no loop)
    global _store
    if _store is None:
        from sporadic.device.store import open_store
        _store = open_store()
    return _store


def _refusals(lines):
    # store.receive quarantines what it refuses (with the reason, reported in
    # status); here the refusals travel back to the peer as well. On a tight
    # heap (store.tight) the digest index's code goes first (a P reads no
    # index; a compaction or the next S, N or G loads it again): the parser
    # and the signature check take its room on a 128K unix board
    # (docs/budgets.md#27)
    from sporadic.device import store as s
    tight = s.tight()
    if tight:
        import sporadic
        sporadic.forget('sporadic.device.splice')
        gc.collect()
    from sporadic.device import storesync
    refused = []
    # a session with no loop (serial, after the soft reset; a reset ends
    # it) keeps the held seals' digests for its next P, and on a tight heap
    # compacts after the P's lines are in, the signature check let go first
    # (an ESP8266's signed batch of 30 ran out of memory compacting in the
    # middle of a P, docs/budgets.md#31); a loop's heap does neither
    alone = 'sporadic.device.runtime' not in sys.modules
    defer = alone and tight
    st = store()
    storesync.receive(st, lines, 'sync', refused, keep=alone, defer=defer)
    if defer and st.needs_compaction():
        _drop_trust(st)
        st.compact()
    return refused


def _lines(st):
    # the compacted view (recon answers from the lines where there is no index)
    from sporadic.device import storesync
    return storesync.lines(st)


def _index(st):
    # jobs.txt's digest index (splice.index), loaded with the first request
    # that reads it. On a tight heap the signature check's code (trust,
    # batch, rsa: ~13 KB on a 32-bit port) goes first: the deliveries so
    # far are committed (trust.json), the next P loads it again, and the
    # index's compaction of what they brought takes its room
    # (docs/budgets.md#31)
    _drop_trust(st)
    from sporadic.device import splice
    return splice.index(st)


def _drop_trust(st):
    from sporadic.device import store as s
    tr = st._tr
    if tr and s.tight() and not tr.refused and not tr.clock_note:
        # (a check that refused something keeps its count and note for
        # the status: a fresh load would report none)
        tr = None
        from sporadic.device import storesync
        storesync.let_go(st)
        import sporadic
        for name in ('sporadic.device.trust', 'sporadic.core.batch', 'sporadic.core.rsa',
                     'sporadic.device.seals'):
            sporadic.forget(name)
        gc.collect()


def responder():
    global _responder
    if _responder is None:
        # the store opened first (its recovery checks the log line by line:
        # the parser and the MAC, let go after), what is pending folded in
        # (the digest index's compaction), then the reconciliation's code:
        # each part's peak without the others' code (a 64K board's month)
        st = store()
        _index(st)
        from sporadic.core import recon
        _responder = recon.Responder(lambda: _lines(st), _refusals, index=lambda: _index(st))
    return _responder


def _host_id():
    import json
    try:
        with open('/cfg.json') as f:
            return json.load(f).get('id') or '-'
    except (OSError, ValueError):
        return '-'


def fleet_ids():
    import json
    try:
        with open('/cfg.json') as f:
            c = json.load(f)
    except (OSError, ValueError):
        return '- - -'
    from sporadic.core import hmac
    return hmac.fleet_ids(c)


def _clock_info():
    from sporadic.device import clockset
    return clockset.info()


def status():
    """The board's status for the companion (a dict; `I` sends it as JSON).
    In a sync session (no loop running) it is built from the store, clock
    and trust state alone: the runtime is not loaded for it (the companion
    computes what is pending from its own copy with the same planner). A
    running loop adds its own figures (pending, next wake, last results)."""
    global _responder
    st = store()
    # the outbox hand-over is over when the status is asked for: its code
    # goes, and the reconciliation's (the next S, N, G or P loads it again):
    # the trust state's reading takes its room (docs/budgets.md#31); and
    # the compaction's merge, on a heap under ROOMY
    _responder = None
    import sporadic
    for name in ('sporadic.device.outbox', 'sporadic.core.outpack', 'sporadic.core.recon',
                 'sporadic.device.splice'):
        sporadic.forget(name)
    from sporadic.device import store as s
    if not s.roomy():
        sporadic.forget('sporadic.core.merge')
    gc.collect()
    if clock.state == 'unknown' and clock.source == '':
        clock.init()      # an RTC that kept its time across the reset
    d = _once(_clock_info)
    d['id'] = _host_id()
    try:
        import board
        d['board'] = board.NAME
    except ImportError:
        pass
    from sporadic.device import storesync
    d['store'] = storesync.health(st)
    d['quarantined'] = st.quarantined
    tr = storesync.trust(st)
    d['trust'] = tr.info() if tr else {'mode': 'insecure or no key'}
    runtime = sys.modules.get('sporadic.device.runtime')
    rt = runtime._rt if runtime is not None else None
    if rt is not None:
        d.update({'pending': rt.pending, 'jobs': rt.jobs, 'bad_jobs': rt.bad_jobs,
                  'next_wake': rt.next_wake, 'last': rt.last, 'error': rt.error,
                  'steps': rt.steps, 'loop': True})
    else:
        d['loop'] = False
    return d


KEEPALIVE = '\x06'   # written by w() while a request works: never inside an answer
_dog = None          # board.wdt_feed, once a request has started the watchdog
_out = None          # the stream of the w() answer being made


def _fed():
    # store.feed during a sync: called every FEED_LINES lines of any read
    # (a pass, a compaction, a re-import), so about every 15 ms of a Pico's
    # time. Feeds the watchdog and, inside w(), tells the companion the
    # board is at work: its answer timeout counts silence, and one pass of a
    # 5,000-line file takes longer than that (bench/rp2_requests.py).
    if _dog is not None:
        _dog()
    if _out is not None:
        _out.write(KEEPALIVE)


def _watchdog():
    # Each request feeds the board's watchdog, and so starts it: a board left
    # in the raw REPL by a cable pulled mid-sync then resets into its loop
    # within WDT_MS instead of waiting there. Long answers feed it as they
    # read the store (store.feed). docs/hardware.md#the-watchdog
    global _dog
    from sporadic.device import store as s
    s.feed = _fed
    try:
        import board
        _dog = board.wdt_feed
        _dog()
    except Exception:
        pass   # a board module without a watchdog: nothing to feed


def _set_clock(t):
    from sporadic.device import clockset
    clockset.set(t, 'companion')


def _once(f, *a):
    # F and T, once a sync: the code they load (the public key's id, the
    # fleet key's MAC, the clock setter) goes after them, the reconciliation
    # and the outbox take its room (a 64K board: docs/budgets.md#27). A
    # roomy heap keeps it: the signature check loads rsa again, the status
    # the clock's code (each import ~2-4 M instructions on a Pico: its
    # path looked up on the flash, docs/budgets.md#27)
    from sporadic.device import store as s
    if s.roomy():
        return f(*a)
    had = list(sys.modules)
    try:
        return f(*a)
    finally:
        import sporadic
        sporadic.forget_since(had)
        gc.collect()


def h(req):
    """Answer one request (str -> str). Never raises: errors are answers."""
    _watchdog()
    try:
        c = req[:2]
        if req == 'I':
            import json
            return json.dumps(status())
        if req == 'F':
            return _once(fleet_ids)
        if c == 'T ':
            if clock.state == 'unknown' and clock.source == '':
                clock.init()
            before = clock.now()
            _once(_set_clock, int(req[2:]))
            return '%s %s %d' % (_host_id(), '-' if before is None else before,
                                 gc.mem_alloc() + gc.mem_free())
        if req[:1] == 'O':
            return ''.join(_outbox(req))
        if c == 'A ':
            from sporadic.device import storesync
            a = req[2:].split()
            return str(storesync.ack(store(), int(a[0]), int(a[1]) if len(a) > 1 else 0))
        if req == 'C':
            store().compact()
            return '1'
        if c == 'V ':
            from sporadic.device import storesync
            return storesync.vouch(store(), req[2:])
        return responder().handle(req)
    except Exception as e:
        return '!error %s: %s' % (type(e).__name__, e)


def _outbox(req):
    # `O MOST`: the log sealed into the outbox, then its oldest files within
    # MOST bytes, in pieces (device/outbox.py answer)
    # the reconciliation is over when the outbox is asked for: its answerer
    # (and what it holds) goes first, the heaviest part of a sync session
    # (a 128K unix board's `O` then could not grow the name pool: `allocating
    # 640 bytes`, 640 entries, a 7 KB block), and on a heap
    # under ROOMY its code (recon, the digest index's splice: 14 KB of a
    # 64-bit heap; a compaction loads splice for itself)
    global _responder
    _responder = None
    from sporadic.device import store as s
    if not s.roomy():
        import sporadic
        sporadic.forget('sporadic.core.recon')
        sporadic.forget('sporadic.device.splice')
    gc.collect()
    from sporadic.device import storesync, outbox
    st = store()
    storesync.seal(st)
    outbox.tidy(st)     # what the loop's heap left raw is packed here
    return outbox.answer(st, int(req[2:] or OUT_MOST))


def _is_recon(req):
    return req[:1] in 'SNDGP' and req[1:2] in (' ', '')


def pieces(req):
    """h(req), in the pieces recon.Responder makes them where it is a recon
    request: a long G answer over TCP is then framed piece by piece and
    never joined in RAM (net/server.py)."""
    if _is_recon(req):
        _watchdog()
        return responder().handle_iter(req)
    if req[:1] == 'O':
        _watchdog()
        try:
            return _outbox(req)
        except Exception as e:
            return '!error %s: %s' % (type(e).__name__, e)
    return h(req)


def w(req):
    """Answer one request by writing it out as it is made: STX, the answer
    in pieces, ETX (the serial link reads between the two). A long G answer
    (a first sync) then streams in one pass over the store instead of being
    built in RAM, so its size is not bounded by the heap. While the board
    works (a pass, a compaction) KEEPALIVE bytes come between the pieces:
    the companion drops them, and waits as long as they come."""
    global _out
    out = sys.stdout
    out.write('\x02')
    _out = out
    try:
        if _is_recon(req) or req[:1] == 'O':
            _watchdog()
            buf = []
            n = 0
            some = False
            try:
                for piece in (_outbox(req) if req[:1] == 'O' else responder().handle_iter(req)):
                    some = True
                    k = len(piece)
                    if buf and n + k > OUT_CHUNK:
                        out.write(''.join(buf))
                        buf = []
                        n = 0
                    if k >= OUT_CHUNK:
                        out.write(piece)
                        continue
                    buf.append(piece)
                    n += k
            except Exception as e:
                # in band, as a word of its own: an outbox line of its own
                # (the companion then acknowledges nothing of this answer;
                # glued to the last record it was taken for one, and the
                # records after it were freed unread), a G answer's item
                buf.append(('' if not some else '\n' if req[:1] == 'O' else '\t')
                           + '!error %s: %s' % (type(e).__name__, e))
            out.write(''.join(buf))
        else:
            out.write(h(req))
    finally:
        _out = None
    out.write('\x03')
