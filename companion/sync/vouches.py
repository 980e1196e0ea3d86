"""A sync's vouch (docs/security.md#vouches): one signature of the fleet's
key over the seal records a sync brings a board, so that the board checks
one RSA signature for them instead of one a record."""
from sporadic.core import recon


def send(fleet, link, req):
    """Before the first P of a sync to a roomy board: when it and the P's
    after it bring two seal records or more of the fleet's key (records
    sort first: this P's, and the fleet's after its last one), `V` and one
    signature over them (desktop/batching.make_vouch). The board then
    checks one RSA signature instead of one a record, ~125 ms of a Pico's
    time each (docs/security.md#vouches); a board that does not know `V`
    answers '!' and checks each record, as before."""
    if fleet.insecure:
        return
    recs = [l for l in (recon.unesc(w) for w in req[2:].split('\t')) if l[:3] == '.b ']
    if not recs:
        return
    last = max(recs)
    for l in fleet.lines():
        if l[:1] != '.':
            break
        if l[:3] == '.b ' and l > last:
            recs.append(l)
    from companion.errors import UserError
    from companion.fleet import keys
    from sporadic.desktop import batching
    try:
        kid = keys.keyid(fleet.dir)
        recs = [l for l in recs if l.split(' ')[3 if l[3:4] == '@' else 2] == kid]
        if len(recs) < 2:
            return
        v = batching.make_vouch(kid, recs, lambda d: keys.sign_digest(fleet.dir, d))
    except UserError:
        return      # no private key here (a folder without keys/fleet.pem): each record checked alone
    link.call('V ' + v)
