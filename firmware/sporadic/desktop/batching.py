# The sender's side of batch.py (read as batch.NAME): making .b and .k
# records, reading the digests a record covers. A board only verifies.
import binascii
import hashlib

from sporadic.core import rsa
from sporadic.core.batch import MAX_LINES, DIGEST, SEQ_W, SLOT_W, parse_batch, line_digest, find_digest


# lines a seal puts in one slot record (docs/security.md#seals): a record of
# 64 is about 1 KB, no longer than the P request a 128K board is sent (one
# of 128, 1.7 KB, broke a 128K unix board's compaction now and then: its
# store reads a line whole, and a heap fragmented by a sync had no block
# that large); 13.6 -> 16.4 bytes a line
SLOT_LINES = 64


def _b64(sig):
    return binascii.b2a_base64(sig).decode().strip()


def make_batch_record(seq, keyid, digests, sign_fn, slot=None):
    """The .b line covering digests (8-byte line_digest values, any order);
    with slot (1..9999) a slot record (`.b @SLOT SEQ ...`, base64 digests),
    which a later SEQ of the same slot replaces.

    sign_fn(sha256_digest_bytes) -> signature bytes (the desktop holds the key).
    """
    ds = sorted(set(bytes(d) for d in digests))
    if not ds or len(ds) > MAX_LINES:
        raise ValueError("a batch covers 1..%d lines, not %d" % (MAX_LINES, len(ds)))
    for d in ds:
        if len(d) != DIGEST:
            raise ValueError("digest is not %d bytes" % DIGEST)
    if seq <= 0 or seq >= 10 ** SEQ_W:
        raise ValueError("seq out of range")
    if slot is None:
        body = ".b %08d %s %s" % (seq, keyid, binascii.hexlify(b"".join(ds)).decode())
    else:
        if not 0 < slot < 10 ** SLOT_W:
            raise ValueError("slot out of range")
        body = ".b @%04d %08d %s %s" % (slot, seq, keyid, _b64(b"".join(ds)))
    sig = sign_fn(hashlib.sha256(body.encode()).digest())
    return body + " " + _b64(sig)


def make_key_record(seq, old_keyid, new_pub_text, sign_fn):
    """The .k line announcing new_pub_text, signed with the old key by sign_fn."""
    rsa.parse_pubkey(new_pub_text)
    if seq <= 0 or seq >= 10 ** SEQ_W:
        raise ValueError("seq out of range")
    body = ".k %08d %s %s" % (seq, old_keyid, new_pub_text.strip())
    sig = sign_fn(hashlib.sha256(body.encode()).digest())
    return body + " " + _b64(sig)


def digests_of(record):
    """The covered digests (bytes, 8 a line) of a .b record, without checking its signature."""
    return parse_batch(record)[2]


def covers(digests, line):
    """True when line's digest is among digests (from digests_of / parse_batch)."""
    return find_digest(digests, line_digest(line))


def make_vouch(keyid, records, sign_fn):
    """`.v KEYID DIGESTS SIG`: one signature over the .b records a sync
    brings a board (device/vouch.py checks it there; docs/security.md#vouches):
    DIGESTS is base64 of the sha256 of each whole record line, sorted;
    sign_fn(sha256 digest) -> signature bytes."""
    d = b"".join(sorted(hashlib.sha256(r.encode()).digest() for r in records))
    body = ".v %s %s" % (keyid, _b64(d))
    return body + " " + _b64(sign_fn(hashlib.sha256(body.encode()).digest()))
