# The driving side of recon.py (recondrv.reconcile): the companion, or
# a board driving a sync over the network (net/node.py). A board answering a
# sync (syncsrv) holds only recon.Responder and never loads this module.
from array import array
from sporadic.core.recon import (MAXQ, MAXD, MAXG, REQ_MAX, LEAF, DIGLEN, SyncError, Nodes, clean,
                            digest, hexd, esc, unesc)


def summaries(source, prefixes):
    """[(count, xor16 hex)] of some nodes of a source (one pass)."""
    # prefixes ['', '3f', ...] as Nodes takes them: [(digits, key)]
    a = Nodes([(len(p), int(p, 16) if p else 0) for p in prefixes], 'S').run(source)
    return [(a.cnt[j], hexd(a.x[j * 8:j * 8 + 8])) for j in range(len(prefixes))]


def parse_summary(w):
    c, x = w.split('.')
    return int(c, 16), x


def _pfx(L, k):
    # (digits, key) -> hex prefix
    if not L:
        return ''
    h = '%x' % k
    return '0' * (L - len(h)) + h


def _ask(rpc, verb, chunk, fl, fk):
    # one D or N request for the nodes `chunk`: its answers, one a node
    ans = rpc(verb + ' ' + ' '.join([_pfx(fl[x], fk[x]) or '.' for x in chunk])).split(' ')
    if len(ans) != len(chunk):
        raise SyncError('%s: %d answers for %d nodes' % (verb, len(ans), len(chunk)))
    return ans


WHOLE = 1000000   # get_lines from a link whose answers stream (no RAM bound on the answering side)


def _take(r, st, local_receive):
    # one G answer: tab-separated escaped lines, in-band '!' errors
    if not r:
        return
    lines = []
    for w in r.split('\t'):
        if w[:1] == '!':
            raise SyncError('G: ' + unesc(w[1:]))
        lines.append(unesc(w))
    st['lines_in'] += len(lines)
    ref = local_receive(lines)
    if ref:
        st['refused_local'].extend(ref)


def reconcile(local_source, local_receive, call, maxq=MAXQ, maxd=MAXD, put_bytes=REQ_MAX,
              get_lines=100000, verify=True, known=None):
    """Drive one sync: afterwards both sides hold the union of their lines
    (less refusals). Returns stats (see the module docstring).
    put_bytes: the most request characters in one P; get_lines: the most
    lines expected in one G answer (lower them on a small board).
    known: None, or known(node, count, xor hex) -> the other side's digests
    there as D gives them ({node: ',d,..,'}) when it still holds what it
    held at the last sync, else None (desktop/reconprior.py): such a node
    is settled without walking it."""
    st = {'rounds': 0, 'bytes_out': 0, 'bytes_in': 0, 'lines_out': 0,
          'lines_in': 0, 'refused_remote': [], 'refused_local': [], 'equal': None}

    def rpc(req):
        resp = call(req)
        st['rounds'] += 1
        st['bytes_out'] += len(req)
        st['bytes_in'] += len(resp)
        if resp[:1] == '!':
            raise SyncError(unesc(resp[1:]) + ' (on ' + req[:12] + ')')
        return resp

    lroot = summaries(local_source, [''])[0]
    if lroot[0] == 0 and get_lines >= WHOLE:
        # an empty side takes everything in one streamed pass (a first sync):
        # no summaries; the next sync's first S checks the result
        _take(rpc('G .'), st, local_receive)
        return st
    rroot = parse_summary(rpc('S'))
    if rroot == lroot:
        st['equal'] = True
        return st

    terms = {}      # node -> None (push all its local lines) or ',d,d,' its remote
                    # digests (after the prefix): one string a node
    gets = []       # (item, expected lines)
    # the frontier (nodes known to differ) lives in flat arrays, not in a
    # tuple and a string per node: a board driving a sync keeps its heap
    # unfragmented
    fk = array('I', [0])        # node keys
    fl = bytearray(1)           # node digits
    fr = array('I', [rroot[0]])  # remote counts
    fc = array('I', [lroot[0]])  # local counts
    k = known and known('', rroot[0], rroot[1])
    if k:
        terms.update(k)
        fk = array('I')
    while len(fk):
        nq = []     # indexes: ask for children
        dq = []     # indexes: small remote node, ask its digests
        for i in range(len(fk)):
            rc = fr[i]
            if rc == 0:
                terms[_pfx(fl[i], fk[i])] = None
            elif fc[i] == 0 and rc <= get_lines:
                # (a bigger node is split first: the responder builds one G
                # answer in RAM, and a board's heap bounds it)
                gets.append((_pfx(fl[i], fk[i]), rc))
            elif rc <= LEAF:
                dq.append(i)
            else:
                nq.append(i)
        nk = array('I')
        nl = bytearray()
        nr = array('I')
        nc = array('I')
        i = 0
        while i < len(dq):
            chunk = dq[i:i + maxd]
            i += maxd
            ans = _ask(rpc, 'D', chunk, fl, fk)
            for j in range(len(chunk)):
                x = chunk[j]
                a = ans[j]
                if a == '+':  # grew since we asked: descend instead
                    fr[x] = LEAF + 1
                    nq.append(x)
                elif a[:1] == '=':
                    terms[_pfx(fl[x], fk[x])] = ',' + a[1:] + ','
                else:
                    raise SyncError('D: bad answer')
            ans = None
        i = 0
        while i < len(nq):
            chunk = nq[i:i + maxq]
            i += maxq
            ans = _ask(rpc, 'N', chunk, fl, fk)
            loc = Nodes([(fl[x], fk[x]) for x in chunk], 'N', leaf=False).run(local_source)
            for j in range(len(chunk)):
                x = chunk[j]
                a = ans[j]
                if a[:1] == '=':
                    terms[_pfx(fl[x], fk[x])] = ',' + a[1:] + ','
                elif a == '*':
                    p = _pfx(fl[x], fk[x])
                    terms[p] = None
                    gets.append((p, fr[x]))
                else:
                    es = a.split(',')
                    if len(es) != 16:
                        raise SyncError('N: bad answer')
                    for c in range(16):
                        e = es[c]
                        if e:
                            rc, rx = int(e[:-8], 16), e[-8:]
                        else:
                            rc, rx = 0, '00000000'
                        lc, lx = loc.child(j, c)
                        if rc != lc or rx != lx:
                            k = known and known(_pfx(fl[x] + 1, (fk[x] << 4) | c), rc, rx)
                            if k:
                                terms.update(k)
                                continue
                            nk.append((fk[x] << 4) | c)
                            nl.append(fl[x] + 1)
                            nr.append(rc)
                            nc.append(lc)
            loc = None
            ans = None
        fk, fl, fr, fc = nk, nl, nr, nc

    # one pass over the local lines: push what the other side lacks, note
    # which of its leaf digests we hold
    if terms:
        tg = {}
        for p, t in terms.items():
            d = tg.get(len(p))
            if d is None:
                d = {}
                tg[len(p)] = d
            d[p] = t
        terms = None
        tg = list(tg.items())
        buf = []
        size = [2]
        miss = 0  # marker

        def flush():
            r = rpc('P ' + '\t'.join(buf))
            st['lines_out'] += len(buf)
            ws = r.split('\t')
            if len(ws) > 1:
                byd = {}
                for w in buf:
                    line = unesc(w)
                    byd[hexd(digest(line))[:DIGLEN]] = line
                for w in ws[1:]:
                    d, _, why = w.partition(' ')
                    st['refused_remote'].append((byd.get(d, d), unesc(why)))
            del buf[:]
            size[0] = 2

        for line in local_source():
            line = clean(line)
            if line is None:
                continue
            hx = hexd(digest(line))
            for L, d in tg:
                t = d.get(hx[:L], miss)
                if t is miss:
                    continue
                w = ',' + hx[L:DIGLEN] + ','
                if t is not None and w in t:
                    d[hx[:L]] = t.replace(w, ',')  # held: strike it off
                else:
                    w = esc(line)
                    if buf and size[0] + len(w) + 1 > put_bytes:
                        flush()
                    buf.append(w)
                    size[0] += len(w) + 1
                break
        if buf:
            flush()
        # leaf digests not struck off: lines we lack
        for L, d in tg:
            for p, t in d.items():
                if t:
                    for w in t.split(','):
                        if w:
                            gets.append((p + w, 1))

    # fetch what we lack, in requests of bounded size and answer length
    i = 0
    while i < len(gets):
        items = []
        n = 0
        size = 2
        while i < len(gets):
            it, c = gets[i]
            if items and (n + c > get_lines or size + len(it) + 1 > REQ_MAX or len(items) >= MAXG):
                break
            items.append(it or '.')
            n += c
            size += len(it) + 1
            i += 1
        _take(rpc('G ' + ' '.join(items)), st, local_receive)

    if verify:
        lnow = summaries(local_source, [''])[0]
        if not st['lines_out'] and lnow == rroot:
            # nothing pushed: the other side is as it was at the first S, and
            # we now hold exactly that set (one pass over its file saved)
            st['equal'] = True
        else:
            st['equal'] = parse_summary(rpc('S')) == lnow
    return st
