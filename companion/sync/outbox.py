"""The board's outbox handed over piece by piece (`O MOST`, `A UPTO LOST`):
each piece in results.txt before the board frees it, so a cut sync loses
nothing. The sync's answer check lives here too (board_answer), and its last
request, the status (board_status)."""
import json

from sporadic.core import jobline, recon
from companion.errors import UserError
from companion.fleet.board_keys import verify_result
from companion.link.base import LinkExecError


def board_answer(resp, what):
    """A board's answer to a request, or its refusal as one line (a full
    board: recon.SyncError, which sync() says in one line)."""
    if resp.startswith('!error'):
        if 'board full' in resp:      # store.full: sync() says it in one line
            raise recon.SyncError(resp[7:])
        raise UserError('board refused %s: %s' % (what, resp[7:]))
    return resp



def board_status(call, fresh):
    """The board's status (`I`, the sync's last request), a dict. A board
    that runs out of memory in it (its heap scattered by the outbox's
    pieces: a 64K board after a month of results, docs/budgets.md#27) is
    asked again once on a fresh heap (`fresh`), as the outbox is: what the
    sync moved is already in the fleet."""
    answer = _asked(call, 'I')
    if _out_of_memory(answer):
        fresh()
        answer = call('I')
    return json.loads(board_answer(answer, 'the status'))


def outbox_bytes_for(heap):
    """Outbox bytes asked for in one `O` (the board streams its answer, so
    this is what one acknowledgement covers: what a cut sync sends again)."""
    if heap is None or heap >= 128 * 1024:
        return 32 * 1024
    return 8 * 1024


def _out_of_memory(answer):
    return answer.startswith('!error MemoryError')


def _asked(call, req):
    """call(req), where the board running out of memory around its answer
    (the request's own snippet compiled, or the answer's repr printed: a
    raise, not syncsrv.h's `!error` answer) comes back as that answer, so
    that the fresh-heap retry takes both. Which one a 64K board meets after
    a month's hand-over shifts with a few bytes of its heap (the paths it
    was started with): with one flash, the status's repr (304 bytes) from
    one checkout and nothing from another."""
    try:
        return call(req)
    except LinkExecError as e:
        if not e.raised.startswith('MemoryError'):
            raise
        return '!error ' + e.raised


def outbox(fleet, dev_id, call, plain_call, heap, flagged, fresh=None):
    """The board's own records history (its outbox), piece by piece: each
    piece's results are in results.txt before the board is told to free
    them (`A UPTO LOST`), so a cut sync loses nothing and the next one
    starts where this one stopped. The board packs them
    (sporadic.core.outpack: the companion unpacks with the same code).
    Returns {'new': new result lines, 'upto': newest file acknowledged,
    'pieces', 'records', 'lost': records the board dropped for want of flash}.
    A board that runs out of memory in an answer (its heap scattered by the
    reconciliation before it) is asked again once on a fresh heap (`fresh`:
    Link.soft_reset, where only the outbox's code is then loaded); the
    refused answer's records were not acknowledged, so they come again."""
    from sporadic.core import outpack
    most = outbox_bytes_for(heap)
    new = []
    upto = pieces = records = lost = 0
    while True:
        out = _asked(call, 'O %d' % most).replace('\r\n', '\n')
        lines = out.split('\n')
        bad = [l for l in lines if l.startswith('!error')]
        if bad and fresh is not None and _out_of_memory(bad[0]):
            fresh()
            fresh = None
            continue
        out = board_answer(out, 'the outbox')
        head = lines[0].split()
        if len(head) != 3 or not all(h.isdigit() for h in head):
            raise UserError('board refused the outbox: %s' % lines[0][:80])
        if bad:
            raise UserError('board refused the outbox: %s' % bad[0][7:])
        top, left, gone = int(head[0]), int(head[1]), int(head[2])
        res = []
        u = outpack.Unpacker()
        for s in lines[1:]:
            if not s:
                continue
            try:
                l = u.line(s)
                if l is None:
                    continue
                r = jobline.parse(l)
            except (ValueError, IndexError, jobline.ParseError):
                # not a record (a board that lies, or a torn file): reported, never kept
                flagged.append('bad line in outbox of %s: %s' % (dev_id, s[:80]))
                continue
            if isinstance(r, jobline.Result) and verify_result(fleet, r) is False:
                flagged.append('unverified result in outbox of %s: %s' % (dev_id, l[:80]))
            res.append(l)
        new += fleet.add_results(res)
        records += len(res)
        if gone:
            info = fleet.device(dev_id) or {'id': dev_id}
            info['results_dropped'] = info.get('results_dropped', 0) + gone
            fleet.save_device(info)
            flagged.append('%s dropped %d of its records for want of flash before this sync'
                           % (dev_id, gone))
            lost += gone
        if not top and not gone:
            break
        pieces += 1
        board_answer(plain_call('A %d %d' % (top, gone)), 'the acknowledgement')
        upto = max(upto, top)
        if not left:
            break
    return {'new': new, 'upto': upto, 'pieces': pieces, 'records': records, 'lost': lost}
