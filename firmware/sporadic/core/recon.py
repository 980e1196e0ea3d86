# Set reconciliation for sync (docs/sync.md). Portable: runs unchanged on
# MicroPython and CPython, compiles with mpy-cross.
"""Hash-prefix set reconciliation: move only the lines the other side lacks.

Each side holds a set of canonical lines. digest(line) = the first 8 bytes of
sha256(line); a *node* is a hex prefix of digests ('' = the root, written '.'
on the wire) and stands for the lines whose digest starts with it. A node's
summary (count, XOR of digests) is order-independent and computed for any
batch of nodes in one streaming pass over the lines, with memory that depends
on the batch (at most MAXQ nodes), never on the number of lines.

API
---
    r = Responder(source, receive)     # the side that answers (device, peer)
    resp = r.handle(request)           # str -> str, never raises
    for piece in r.handle_iter(request): out.write(piece)   # same, streamed

    stats = reconcile(local_source, local_receive, call, ...)   # initiator

- source / local_source: a callable returning a fresh iterator of lines (str;
  a trailing newline and blank lines are ignored). It is re-streamed once per
  request, so it must not be a one-shot iterator. It should yield a *set*: a
  line repeated inside one source is harmless (nothing is lost) but makes that
  node look different on every sync.
- receive(lines) / local_receive(lines): store new lines (a list of str);
  return the refused ones as a list of (line, reason), or None/[] when all
  were taken. Validation (parse, signatures, quarantine) is the store's job.
  Lines received must show up in the next pass of the source (verification).
- call(request) -> response: whatever carries one request line and brings
  back one response line (serial raw REPL, TCP, or Responder.handle itself).
- reconcile returns a dict: rounds, bytes_out, bytes_in, lines_out,
  lines_in, refused_remote [(line, reason)], refused_local [(line, reason)],
  equal (both roots equal after sync; None when verify=False).
- serve_stream(responder, inp, out): answer one request per input line until
  EOF (used by tests over a pipe; a TCP or REPL server can do the same).
- file_source(*paths): a source streaming the lines of some files in turn.

The request language (S, N, D, G, P; one line each way, printable ASCII)
and the rounds: docs/sync.md#the-request-language and #rounds.

Lines travel escaped: '%', '!', control and non-ASCII bytes become %XX
(UTF-8), so a line never holds a tab or a newline on the wire.
"""
import hashlib
from array import array

import binascii

try:
    from micropython import const
except ImportError:  # CPython
    def const(x):
        return x

VERSION = const(1)
LEAF = const(8)        # a node of <= LEAF lines is answered with its digests
MAXQ = const(32)       # nodes in one S or N request (bounds the responder's heap)
MAXD = const(64)       # nodes in one D request (digests only: smaller state)
MAXDEPTH = const(7)    # prefix digits (7 x 4 = 28 bits: small ints everywhere)
DIGLEN = const(12)     # hex digits naming one line in N answers and G requests
MAXG = const(256)      # items in one G request
REQ_MAX = const(2048)  # request characters a driver sends at most
REC = const(12)        # one record of a digest index: digest (8 bytes), the line's offset (u32, little-endian)
_HEX = '0123456789abcdef'


class SyncError(Exception):
    pass


def digest(line):
    """8-byte digest of one line (str)."""
    return hashlib.sha256(line.encode()).digest()[:8]


def hexd(b):
    return binascii.hexlify(b).decode()


def clean(line):
    # a line from a source -> the line without its newline, or None if blank
    if line and line[-1] == '\n':
        line = line[:-1]
        if line and line[-1] == '\r':
            line = line[:-1]
    return line or None


def esc(s):
    """Line -> wire form: no tab, newline, '%', '!' or non-ASCII inside."""
    # the common case (a canonical line is printable ASCII) without a loop
    # over its characters: min/max/in run in C on both interpreters
    if s and min(s) >= ' ' and max(s) <= '~' and '%' not in s and '!' not in s:
        return s
    b = s.encode()
    for c in b:
        if c < 32 or c > 126 or c == 37 or c == 33:
            break
    else:
        return s
    out = []
    for c in b:
        if c < 32 or c > 126 or c == 37 or c == 33:
            out.append('%%%02X' % c)
        else:
            out.append(chr(c))
    return ''.join(out)


def unesc(s):
    """Wire form -> line; ValueError on a bad escape or bad UTF-8."""
    if '%' not in s:
        return s
    b = bytearray()
    i = 0
    n = len(s)
    while i < n:
        c = s[i]
        if c == '%':
            if i + 3 > n:
                raise ValueError('bad escape')
            b.append(int(s[i + 1:i + 3], 16))
            i += 3
        else:
            b.extend(c.encode())
            i += 1
    return bytes(b).decode()


def _is_hex(s, maxlen):
    if len(s) > maxlen:
        return False
    for c in s:
        if c not in _HEX:
            return False
    return True


def file_source(*paths):
    """A source streaming the lines of files in turn (missing files skipped)."""
    def src():
        for p in paths:
            try:
                f = open(p)
            except OSError:
                continue
            try:
                for line in f:
                    yield line
            finally:
                f.close()
    return src


class Nodes:
    """Accumulators for a batch of nodes over one pass.
    mode 'S': count and 64-bit XOR of each node.
    mode 'D': count and the first LEAF digests of each node.
    mode 'N': count, the 16 children's counts and 32-bit XORs, and (if leaf)
    the first LEAF digests of each node."""

    def __init__(self, nodes, mode, leaf=True):
        # nodes: a list of (digits, key) pairs, key = int of the hex prefix
        n = len(nodes)
        groups = {}
        plen = bytearray(n)
        for j in range(n):
            L, k = nodes[j]
            plen[j] = L
            t = groups.get(L)
            if t is None:
                t = {}
                groups[L] = t
            t[k] = j
        self.groups = list(groups.items())
        self.first = None if 0 in groups else bytearray(256)   # first bytes a record may match
        for L, k in nodes if self.first else ():
            _first(self.first, L, k)
        self.n = n
        self.plen = plen
        self.s = mode == 'S'
        self.cnt = array('I', bytes(4 * n))
        self.d = mode == 'D'
        if self.s:
            self.x = bytearray(8 * n)
        elif self.d:
            self.lf = bytearray(LEAF * 8 * n)
        else:
            self.cc = array('I', bytes(64 * n))  # 32-bit counts, no pointers
            self.cx = bytearray(64 * n)
            self.lf = bytearray(LEAF * 8 * n) if leaf else None

    def add(self, d, o=0):
        # d: a digest at offset o of a buffer (no slice made of it)
        for L, tab in self.groups:
            h = L >> 1
            k = 0
            i = 0
            while i < h:
                k = (k << 8) | d[o + i]
                i += 1
            if L & 1:
                k = (k << 4) | (d[o + h] >> 4)
            j = tab.get(k)
            if j is None:
                continue
            c = self.cnt[j]
            self.cnt[j] = c + 1
            if self.s:
                x = self.x
                p = j * 8
                for i in range(8):
                    x[p + i] ^= d[o + i]
                continue
            lf = self.lf
            if lf is not None and c < LEAF:
                p = (j * LEAF + c) * 8
                for i in range(8):
                    lf[p + i] = d[o + i]
            if self.d:
                continue
            nib = (d[o + h] & 15) if (L & 1) else (d[o + h] >> 4)
            ci = j * 16 + nib
            self.cc[ci] += 1
            x = self.cx
            p = ci * 4
            x[p] ^= d[o + 4]
            x[p + 1] ^= d[o + 5]
            x[p + 2] ^= d[o + 6]
            x[p + 3] ^= d[o + 7]

    def run(self, source):
        for line in source():
            line = clean(line)
            if line is not None:
                self.add(digest(line))
        return self

    def run_index(self, idx):
        # the digests of an index (Responder's `index`), REC bytes a record; one whose first byte
        # no node starts with gets no call (below the root most do not: ~4,000 instructions a Pico)
        first = self.first
        for buf, n in idx.chunks():
            for o in range(0, n, REC):
                if first is None or first[buf[o]]:
                    self.add(buf, o)
        return self

    def summary(self, j):
        # 'S' mode: '<count>.<xor16>'
        return '%x.%s' % (self.cnt[j], hexd(self.x[j * 8:j * 8 + 8]))

    def child(self, j, c):
        # 'N' mode: (count, xor32 hex) of child c of node j
        ci = j * 16 + c
        return self.cc[ci], hexd(self.cx[ci * 4:ci * 4 + 4])

    def answer(self, j):
        # 'N' mode: leaf digests, '*' or the 16 children
        n = self.cnt[j]
        L = self.plen[j]
        if self.d and n > LEAF:
            return '+'
        if n <= LEAF:
            out = []
            lf = self.lf
            for c in range(n):
                o = (j * LEAF + c) * 8
                out.append(hexd(lf[o:o + 8])[L:DIGLEN])
            return '=' + ','.join(out)
        if L >= MAXDEPTH:
            return '*'
        out = []
        for c in range(16):
            k, x = self.child(j, c)
            out.append('%x%s' % (k, x) if k else '')
        return ','.join(out)


def _first(t, L, k):
    # mark in t (256 bytes) the first digest bytes a prefix of L >= 1 digits, k, starts
    if L > 1:
        t[k >> (4 * (L - 2))] = 1
    for b in range(16 if L == 1 else 0):
        t[(k << 4) | b] = 1


def _scan_nodes(body, maxn):
    """'. 3f 07' -> [(digits, key)], without a string per node (the device
    keeps small ints only). ValueError on a bad or excess node."""
    out = []
    L = -1      # digits in the current token, -1 = between tokens
    k = 0
    for c in body + ' ':
        if c == ' ':
            if L != -1:
                if len(out) >= maxn:
                    raise ValueError('too many nodes (max %d)' % maxn)
                out.append((L, k))
                L = -1
            continue
        if L == -2:
            raise ValueError('bad node')
        if L == -1:
            L = 0
            k = 0
            if c == '.':
                L = -2   # the root: must stand alone
                continue
        v = _HEX.find(c)
        if v < 0 or L >= MAXDEPTH:
            raise ValueError('bad node')
        k = (k << 4) | v
        L += 1
    for i in range(len(out)):
        if out[i][0] == -2:
            out[i] = (0, 0)
    return out


class Responder:
    """The answering end: Responder(source, receive).handle(request) -> str.

    index: None, or a callable returning None (answer from the lines) or a
    digest index of the source as it is: an object with `count`, `xor` (the
    root's summary: count and 8-byte XOR of every digest), `chunks()` (an
    iterator of (buffer, nbytes): records of REC bytes, the line's digest
    first, then its offset) and `lines(offsets)` (the lines at those
    offsets, sorted). A store keeps one beside its file (8+4 bytes a line):
    S of the root then reads no line at all, and N, D and G read the
    records instead of reading and hashing every line."""

    def __init__(self, source, receive, maxq=MAXQ, index=None):
        self.source = source
        self.receive = receive
        self.maxq = maxq
        self.index = index

    def _idx(self):
        return self.index() if self.index is not None else None

    def _run(self, a):
        idx = self._idx()
        return a.run_index(idx) if idx is not None else a.run(self.source)

    def handle(self, request):
        return ''.join(self.handle_iter(request))

    def handle_iter(self, request):
        """The response in pieces (a G answer can be long: write each piece
        out as it comes and the responder never holds it whole)."""
        try:
            if request[-1:] == '\n':
                request = request.rstrip('\r\n')
            verb = request[:1]
            if request[1:2] not in ('', ' '):
                return iter(('!bad request',))
            body = request[2:]
            if verb == 'S':
                nodes = _scan_nodes(body, self.maxq) if body else [(0, 0)]
                if not body:
                    idx = self._idx()
                    if idx is not None:
                        return iter(('%x.%s' % (idx.count, hexd(idx.xor)),))
                a = self._run(Nodes(nodes, 'S'))
                return iter((' '.join([a.summary(j) for j in range(a.n)]),))
            if verb == 'N':
                nodes = _scan_nodes(body, self.maxq)
                if not nodes:
                    return iter(('!no nodes',))
                return self._answers(self._run(Nodes(nodes, 'N')))
            if verb == 'D':
                nodes = _scan_nodes(body, MAXD)
                if not nodes:
                    return iter(('!no nodes',))
                return self._answers(self._run(Nodes(nodes, 'D')))
            if verb == 'G':
                return self._get(body)
            if verb == 'P':
                return iter((self._put(body),))
            return iter(('!unknown request',))
        except MemoryError:
            return iter(('!out of memory',))
        except Exception as e:
            return iter(('!' + esc(str(e))[:80],))

    def _answers(self, a):
        # one piece per node: a long answer is never joined on the device
        for j in range(a.n):
            yield (' ' if j else '') + a.answer(j)

    def _get(self, body):
        # items are matched by substring search in the request itself: no
        # object per item, so a long G costs the device one string
        words = body.split()
        if len(words) > MAXG:
            raise ValueError('too many items (max %d)' % MAXG)
        lens = []
        root = False
        first = bytearray(256)     # the first digest bytes the items start with
        for w in words:
            if w == '.':
                root = True
            elif not _is_hex(w, 16):
                raise ValueError('bad item ' + w[:20])
            else:
                if len(w) not in lens:
                    lens.append(len(w))
                _first(first, min(len(w), 2), int(w[:2], 16))
        words = None
        first = None if root else first
        pad = ' ' + body + ' '
        idx = None if root else self._idx()
        if idx is not None:
            return self._get_gen(root, lens, pad, idx.lines(self._offsets(idx, lens, pad, first)))
        return self._get_gen(root, lens, pad, self.source())

    def _offsets(self, idx, lens, pad, first):
        # the offsets of the index's records whose digest an item names
        offs = []
        for buf, n in idx.chunks():
            o = 0
            while o < n:
                if first is not None and not first[buf[o]]:
                    o += REC     # no item starts with its first byte
                    continue
                hx = hexd(buf[o:o + 8])
                for L in lens:
                    if (' ' + hx[:L] + ' ') in pad:
                        offs.append(buf[o + 8] | (buf[o + 9] << 8) | (buf[o + 10] << 16) | (buf[o + 11] << 24))
                        break
                o += REC
        return offs      # in the file's order, as the index is (no sort: MicroPython's is n*n/2 on sorted input)

    def _get_gen(self, root, lens, pad, lines):
        first = True
        try:
            for line in lines:
                line = clean(line)
                if line is None:
                    continue
                hit = root
                if not hit:
                    hx = hexd(digest(line))
                    for L in lens:
                        if (' ' + hx[:L] + ' ') in pad:
                            hit = True
                            break
                if hit:
                    if first:
                        first = False
                        yield esc(line)
                    else:
                        yield '\t' + esc(line)
        except Exception as e:  # a source failing mid-stream: say so, in band
            yield ('\t' if not first else '') + '!' + esc(str(e))[:80]

    def _put(self, body):
        lines = []
        refused = []
        if body:
            for w in body.split('\t'):
                try:
                    lines.append(unesc(w))
                except Exception:
                    refused.append((w, 'bad escape'))
        try:
            r = self.receive(lines) if lines else None
        except MemoryError:
            return '!out of memory'
        except Exception as e:
            return '!receive failed: ' + esc(str(e))[:80]
        if r:
            refused.extend(r)
        out = ['%d' % (len(lines) - (len(r) if r else 0))]
        for line, why in refused:
            out.append('\t%s %s' % (hexd(digest(line))[:DIGLEN], esc(str(why))))
        return ''.join(out)


def serve_stream(responder, inp, out):
    """Answer one request per line of `inp` (a text stream) on `out`, until
    EOF or an empty line. Each response ends with a newline."""
    while True:
        req = inp.readline()
        if not req or req in ('\n', '\r\n'):
            return
        for piece in responder.handle_iter(req):
            out.write(piece)
        out.write('\n')
        try:
            out.flush()
        except AttributeError:
            pass
