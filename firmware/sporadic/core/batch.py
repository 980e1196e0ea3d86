"""Signed batches: which fleet lines the fleet's owner really wrote.

Portable core: runs unchanged on MicroPython and CPython. No I/O, no clock;
the caller passes state in (trusted keys, high-water mark, held batches) and
persists what comes out (see docs/security.md).

Records (one line each; byte order of SEQ = numeric order):

    .b SEQ KEYID DIGESTS SIG        a batch
    .b @SLOT SEQ KEYID DIGESTS SIG  a batch in a slot: a later SEQ of the
                                    same slot replaces it (merge.compact)
    .k SEQ OLDID NEWKEY SIG         a key rotation, signed by the old key

    SEQ      8 decimal digits, > 0, one counter per fleet (batches and rotations)
    KEYID    8 hex: rsa.keyid() of the key that signed
    SLOT     4 decimal digits, > 0 (the companion's seal: docs/security.md#seals)
    DIGESTS  line_digest() of each covered line, sorted, no repeats,
             1..MAX_LINES of them: 16 hex a line without separators, or in
             a slot record base64 (canonical, padded) of the 8-byte digests
    NEWKEY   the new public key text (rsa2048:<hex n>)
    SIG      base64 of the RSA-2048 PKCS#1 v1.5 SHA-256 signature over the
             record's text before " SIG" (so the kind, seq and key id are signed)

    line_digest(line) -> 8 bytes
    make_batch_record(seq, keyid, digests, sign_fn) -> str
    make_key_record(seq, old_keyid, new_pub_text, sign_fn) -> str
    parse_batch(line) -> (seq, keyid, digests, sig, body_len)   ValueError(reason)
    parse_key(line) -> (seq, old_keyid, new_pub_text, sig, body_len)
    needs_batch(line) -> bool      fleet-authored: must be covered by a batch
    digests_of(record), covers(digests, line)   for senders and GC of .b records
    ingest_key(line)               sort key: .b/.k by SEQ, then the lines
    rec_id(line), rec_seq(line), slot_of(line)   a record's kind+SEQ prefix, SEQ, slot
    held_digests(line)             the digests of a held (verified) .b record
    key_ids(pubkeys) -> {keyid: (n, e)}   the keys parsed once, for Verifier(pubkeys=)
    Verifier(pubkeys, hwm, held=(), retired=())
        .add_key(line) / .add_batch(line) / .check(line) / .take(line) -> reason or None
        .hwm .keytexts() .retired     state to persist after the ingest is committed
"""
import binascii
import hashlib

from sporadic.core import rsa
# what a check of each line needs, without the Verifier and RSA (a board's
# merge of a message with no seal in it loads that module alone)
from sporadic.core.batchid import (SEQ_W, SLOT_AT, DEVICE_KINDS, needs_batch, slot_of,  # noqa: F401
                                   rec_id, rec_seq, ingest_key, held_digests)

try:
    from micropython import const
except ImportError:  # CPython
    def const(x):
        return x

DIGEST = const(8)        # bytes of sha256 kept per line
MAX_LINES = const(128)   # lines per batch (a .b record is then <= ~2.4 KB)
WINDOW = const(512)      # digests a Verifier holds at once (4 KB)
SLOT_W = const(4)



def _b(line):
    if isinstance(line, str):
        line = line.encode()
    n = len(line)
    while n and line[n - 1] in (10, 13):
        n -= 1
    if n != len(line):
        line = line[:n]
    return line


def line_digest(line):
    """The first 8 bytes of sha256 of the line (without its newline)."""
    return hashlib.sha256(_b(line)).digest()[:DIGEST]


def _seq(s):
    if len(s) != SEQ_W or not s.isdigit():
        raise ValueError("seq is not %d digits" % SEQ_W)
    v = int(s)
    if v <= 0:
        raise ValueError("seq is 0")
    return v


def _hexid(s):
    if len(s) != 8:
        raise ValueError("key id is not 8 hex")
    try:
        binascii.unhexlify(s)
    except Exception:
        raise ValueError("key id is not 8 hex")
    return s.lower()


def _sig(s):
    try:
        sig = binascii.a2b_base64(s)
    except Exception:
        raise ValueError("signature is not base64")
    if len(sig) < 256:
        raise ValueError("signature too short")
    if binascii.b2a_base64(sig).decode().strip() != s:
        raise ValueError("signature is not canonical base64")
    return sig


def _fields(line, kind):
    if isinstance(line, (bytes, bytearray)):
        line = line.decode()
    line = line.rstrip("\r\n")
    f = line.split(" ")
    if kind == ".b" and len(f) == 6 and f[1][:1] == "@":
        s = f.pop(1)[1:]
        if len(s) != SLOT_W or not s.isdigit() or int(s) <= 0:
            raise ValueError("slot is not %d digits" % SLOT_W)
        f.append(s)
    elif len(f) != 5:
        raise ValueError("malformed %s record" % kind)
    if f[0] != kind:
        raise ValueError("malformed %s record" % kind)
    return line, f


def parse_batch(line):
    """(seq, keyid, digests, sig, body_len) of a .b record; ValueError(reason).

    digests: bytes, 8 per line, sorted; body_len: how many leading characters
    of the line the signature covers.
    """
    line, f = _fields(line, ".b")
    seq = _seq(f[1])
    kid = _hexid(f[2])
    h = f[3]
    if len(f) == 6:      # a slot record: base64 digests
        try:
            d = binascii.a2b_base64(h)
        except Exception:
            raise ValueError("digest list is not base64")
        if not d or len(d) % DIGEST:
            raise ValueError("digest list is not 8 bytes a line")
        if binascii.b2a_base64(d).decode().strip() != h:
            raise ValueError("digest list is not canonical base64")
        n = len(d) // DIGEST
    else:
        if not h or len(h) % (2 * DIGEST):
            raise ValueError("digest list is not 16 hex a line")
        n = len(h) // (2 * DIGEST)
        try:
            d = binascii.unhexlify(h)
        except Exception:
            raise ValueError("digest list is not hex")
        if h != h.lower():
            raise ValueError("digest list is not lower-case hex")
    if n > MAX_LINES:
        raise ValueError("batch of %d lines (max %d)" % (n, MAX_LINES))
    prev = None
    for i in range(n):
        x = d[i * DIGEST:(i + 1) * DIGEST]
        if prev is not None and x <= prev:
            raise ValueError("digests not sorted")
        prev = x
    sig = _sig(f[4])
    return seq, kid, d, sig, len(line) - len(f[4]) - 1


def parse_key(line):
    """(seq, old_keyid, new_pub_text, sig, body_len) of a .k record; ValueError(reason)."""
    line, f = _fields(line, ".k")
    seq = _seq(f[1])
    kid = _hexid(f[2])
    rsa.parse_pubkey(f[3])
    sig = _sig(f[4])
    return seq, kid, f[3], sig, len(line) - len(f[4]) - 1


def body_digest(line, body_len):
    if isinstance(line, str):
        line = line.encode()
    h = hashlib.sha256(memoryview(line)[:body_len])
    return h.digest()


def find_digest(seg, d):
    lo = 0
    hi = len(seg) // DIGEST
    while lo < hi:
        mid = (lo + hi) >> 1
        x = seg[mid * DIGEST:(mid + 1) * DIGEST]
        if x == d:
            return True
        if x < d:
            lo = mid + 1
        else:
            hi = mid
    return False


def key_ids(pubkeys):
    """{keyid: (n, e)} of key texts or (n, e) tuples: what a Verifier
    trusts (a board parses its keys once, not at every delivery)."""
    d = {}
    for k in pubkeys:
        if isinstance(k, tuple):
            n, e = k
        else:
            n, e = rsa.parse_pubkey(k)
        d[rsa.keyid((n, e))] = (n, e)
    return d


class Verifier:
    """Streaming check of one ingest (a sync, a file).

    pubkeys: key texts or (n, e) tuples the store trusts now.
    hwm:     the highest SEQ the store has accepted (0: none yet).
    held:    SEQs of .b/.k records the store holds (accepted earlier): these
             may be seen again even though they are <= hwm.
    retired: key ids retired by a rotation (refused with that reason).

    Feed .b and .k records in SEQ order, each .b followed by the lines it
    covers (ingest_key() sorts a small ingest into that order; a large one is
    sent batch by batch). The Verifier holds the digests of the last WINDOW
    lines' worth of batches only, never the whole file. Freshness is judged
    against the hwm given at the start; .hwm is the new high-water mark, to
    persist once the accepted lines are safely stored.
    """

    # (keyid, digests) of a sync's vouch (device/vouch.py; docs/security.md#vouches):
    # a .b record of that key whose whole text it lists needs no RSA check of its own
    vouch = None

    def __init__(self, pubkeys, hwm, held=(), retired=(), window=WINDOW):
        # pubkeys: a dict of key_ids() is taken as it is (copied)
        self.keys = dict(pubkeys) if isinstance(pubkeys, dict) else key_ids(pubkeys)
        self.rotated = False   # a .k of this ingest changed the keys (keytexts() to persist)
        self.base = hwm
        self.hwm = hwm
        self.held = held
        self.retired = list(retired)
        self.window = window
        self.seen = []      # SEQs accepted in this ingest
        self.segs = []      # [(seq, digests)] in arrival order
        self.used = 0

    def keytexts(self):
        return [rsa.format_pubkey(n, e) for n, e in self.keys.values()]

    def clear(self):
        self.segs = []
        self.used = 0

    def _key(self, kid):
        k = self.keys.get(kid)
        if k is None:
            if kid in self.retired:
                return None, "retired key %s" % kid
            return None, "unknown key %s (another fleet?)" % kid
        return k, None

    def _fresh(self, seq):
        if seq > self.base or seq in self.seen:
            return None
        if seq in self.held:
            return None
        return "replay: seq %d <= high-water mark %d" % (seq, self.base)

    def add_key(self, line):
        """A .k rotation: the old key must be trusted now and have signed it."""
        try:
            seq, kid, newtext, sig, blen = parse_key(line)
            n2, e2 = rsa.parse_pubkey(newtext)
        except ValueError as ex:
            return "bad key record: %s" % ex
        newid = rsa.keyid((n2, e2))
        if newid in self.keys:
            return None                     # already applied: nothing changes
        k, why = self._key(kid)
        if why:
            return why
        if not rsa.verify(k[0], k[1], body_digest(line, blen), sig):
            return "bad signature on key record %08d" % seq
        why = self._fresh(seq)
        if why:
            return why
        del self.keys[kid]
        self.retired.append(kid)
        self.keys[newid] = (n2, e2)
        self.rotated = True
        self.seen.append(seq)
        if seq > self.hwm:
            self.hwm = seq
        return None

    def add_batch(self, line):
        """Check a .b record; on success its lines are accepted by check()."""
        try:
            seq, kid, digests, sig, blen = parse_batch(line)
        except ValueError as ex:
            return "bad batch record: %s" % ex
        k, why = self._key(kid)
        if why:
            return why
        if not self._vouched(kid, line) and not rsa.verify(k[0], k[1], body_digest(line, blen), sig):
            return "bad signature on batch %08d" % seq
        why = self._fresh(seq)
        if why:
            return why
        if seq not in self.seen:
            self.seen.append(seq)
        if seq > self.hwm:
            self.hwm = seq
        for sg in self.segs:
            if sg[0] == seq:
                return None
        n = len(digests) // DIGEST
        while self.segs and self.used + n > self.window:
            self.used -= len(self.segs.pop(0)[1]) // DIGEST
        self.segs.append((seq, digests))
        self.used += n
        return None

    def _vouched(self, kid, line):
        # the vouch's key signed this record's text (it is still trusted:
        # _key above; a record of another key is checked alone)
        v = self.vouch
        if v is None or v[0] != kid:
            return False
        d = hashlib.sha256(_b(line)).digest()
        s = v[1]
        for i in range(0, len(s), 32):
            if s[i:i + 32] == d:
                return True
        return False

    def check(self, line):
        """None when a verified batch in the window covers the line."""
        d = line_digest(line)
        for seg in self.segs:
            if find_digest(seg[1], d):
                return None
        return "not signed: no verified batch covers this line"

    def take(self, line):
        """One call for any line of an ingest stream, in ingest order."""
        if isinstance(line, (bytes, bytearray)):
            line = line.decode()
        if line[:3] == ".k ":
            return self.add_key(line)
        if line[:3] == ".b ":
            return self.add_batch(line)
        if needs_batch(line):
            return self.check(line)
        return None
