# The sender's side of batch.py (read as batch.NAME): making .b and .k
# records, reading the digests a record covers. A board only verifies.
import binascii
import hashlib

from sporadic.core import rsa
from sporadic.core.batch import MAX_LINES, DIGEST, SEQ_W, parse_batch, line_digest, find_digest


def _b64(sig):
    return binascii.b2a_base64(sig).decode().strip()


def make_batch_record(seq, keyid, digests, sign_fn):
    """The .b line covering digests (8-byte line_digest values, any order).

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
    body = ".b %08d %s %s" % (seq, keyid, binascii.hexlify(b"".join(ds)).decode())
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
