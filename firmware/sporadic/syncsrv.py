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
import json
from sporadic import recon, runtime, clock

_responder = None


def _refusals(lines):
    # store.receive quarantines what it refuses (with the reason, reported in
    # status); here the refusals travel back to the peer as well.
    rt = runtime.get()
    refused = []
    rt.store.receive(lines, 'sync', refused)
    return refused


def responder():
    global _responder
    if _responder is None:
        _responder = recon.Responder(runtime.get().store.lines, _refusals)
    return _responder


def h(req):
    """Answer one request (str -> str). Never raises: errors are answers."""
    try:
        c = req[:2]
        if req == 'I':
            return json.dumps(runtime.status())
        if c == 'T ':
            rt = runtime.get()
            before = clock.now()
            clock.set(int(req[2:]), 'companion')
            return '%s %s' % (rt.id, '-' if before is None else before)
        if req == 'O':
            st = runtime.get().store
            seg = st.seal()
            return str(seg) + '\n' + '\n'.join(st.outbox(seg))
        if c == 'A ':
            return str(runtime.get().store.ack(int(req[2:])))
        if req == 'C':
            runtime.get().store.compact()
            return '1'
        return responder().handle(req)
    except Exception as e:
        return '!error %s: %s' % (type(e).__name__, e)
