# The device end of sync: one request in, one response out, whatever the
# link (raw REPL over serial: the companion runs `syncsrv.h(...)`; TCP: net.py
# frames the same strings). Set reconciliation is recon.py's; this adds the
# few requests around it (docs/sync.md):
#
#   I            -> JSON status (id, clock, counts, store health)
#   T EPOCH      -> "ID BEFORE" : the companion's clock over its own line;
#                   BEFORE is this board's clock before (or '-' if unknown)
#   O            -> "SEG\n" + own records not yet acknowledged (outbox)
#   A SEG        -> "n" segments removed: the companion holds them
#   C            -> "1" after folding received lines into jobs.txt
#   anything else: recon.Responder (S, N, G, P ...)
#
# Memory: a sync runs after a soft reset (the companion's link does one), so
# only the store and recon are loaded; the runtime (planner, actions) is
# imported for `I` alone, after recon is let go.
import gc
import sys
from sporadic import clock

_responder = None
_store = None


def store():
    global _store
    if _store is None:
        # the loop is running (TCP sync): share its store; never import the
        # runtime for this (a sync session after a soft reset has no loop)
        runtime = sys.modules.get('sporadic.runtime')
        if runtime is not None and runtime._rt is not None:
            _store = runtime._rt.store
        if _store is None:
            from sporadic.store import Store
            _store = Store()
    return _store


def _refusals(lines):
    # store.receive quarantines what it refuses (with the reason, reported in
    # status); here the refusals travel back to the peer as well.
    refused = []
    store().receive(lines, 'sync', refused)
    return refused


def responder():
    global _responder
    if _responder is None:
        from sporadic import recon
        _responder = recon.Responder(store().lines, _refusals)
    return _responder


def _host_id():
    import json
    try:
        with open('/cfg.json') as f:
            return json.load(f).get('id') or '-'
    except (OSError, ValueError):
        return '-'


def _status():
    global _responder
    import json
    if 'sporadic.runtime' not in sys.modules:
        _responder = None
        sys.modules.pop('sporadic.recon', None)
        gc.collect()
    from sporadic import runtime
    return json.dumps(runtime.status())


def h(req):
    """Answer one request (str -> str). Never raises: errors are answers."""
    try:
        c = req[:2]
        if req == 'I':
            return _status()
        if c == 'T ':
            if clock.state == 'unknown' and clock.source == '':
                clock.init()
            before = clock.now()
            clock.set(int(req[2:]), 'companion')
            return '%s %s' % (_host_id(), '-' if before is None else before)
        if req == 'O':
            st = store()
            seg = st.seal()
            return str(seg) + '\n' + '\n'.join(st.outbox(seg))
        if c == 'A ':
            return str(store().ack(int(req[2:])))
        if req == 'C':
            store().compact()
            return '1'
        return responder().handle(req)
    except Exception as e:
        return '!error %s: %s' % (type(e).__name__, e)
