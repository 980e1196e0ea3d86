# A sync's vouch checked (docs/security.md#vouches): one signature of the
# fleet's key over the seal records a sync brings (desktop/batching.make_vouch
# makes it). storesync.vouch loads this for a `V` request alone, which a
# companion sends only to a board with a roomy heap.
import binascii
from sporadic.core import batch, rsa


def check(line, keys, retired=()):
    """(keyid, digests) of `.v KEYID DIGESTS SIG` signed by a key of `keys`
    (a batch.key_ids() dict): DIGESTS, the sha256 of each whole record line
    it lists, for batch.Verifier.vouch; ValueError(reason) otherwise."""
    f = line.split(' ')
    if len(f) != 4 or f[0] != '.v':
        raise ValueError('malformed vouch')
    try:
        d = binascii.a2b_base64(f[2])
        sig = binascii.a2b_base64(f[3])
    except Exception:
        raise ValueError('vouch is not base64')
    if not d or len(d) % 32:
        raise ValueError('vouch digests are not 32 bytes a record')
    k = keys.get(f[1])
    if k is None:
        raise ValueError(('retired key %s' if f[1] in retired else 'unknown key %s (another fleet?)') % f[1][:8])
    if not rsa.verify(k[0], k[1], batch.body_digest(line, len(line) - len(f[3]) - 1), sig):
        raise ValueError('bad signature on vouch')
    return f[1], d
