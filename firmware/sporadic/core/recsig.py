# A board's signature on the records that settle a single-run decision for
# the others (docs/security.md#board-signatures): its results of `one` and
# `any` jobs (run, ok, err, miss) and a leader's assignments. The MAC field
# of such a record carries, after the board's HMAC, its Ed25519 signature:
#
#     ID r HOST K AT OUTCOME HMAC.SIG [OUTPUT]      ID a HOST K AT BY HMAC.SIG
#
# HMAC the 16 hex the companion checks (as before), SIG the base64 (88
# characters, canonical, padded) of ed25519.sign over the same text: the
# record with its MAC field written as '-'. The key is the board's own
# (cfg.json "sign"); its public key is in its signed host record (`.h HOST
# SINCE [LAT LON] ed25519:HEX`, hostrec.py), so any peer checks it. Loaded
# only when such a record is written or arrives: `each` results stay HMAC
# alone (docs/budgets.md#31's bytes per completion do not move).
import binascii
from sporadic.core.order import board_signed

SIG_LEN = 88
MAC_LEN = 105   # 16 hex, '.', SIG_LEN


def signed(mac):
    """True when a record's MAC field carries a signature (its form: the
    check is verify())."""
    return len(mac) == MAC_LEN and board_signed(mac)


def single(text):
    """True when a job line (canonical, `ID KIND ...`) is of a single-run job."""
    return text[9:13] in ('one ', 'any ')


def _fields(line):
    # ID r HOST K AT OUTCOME MAC [OUTPUT] / ID a HOST K AT BY MAC: the MAC is field 6
    return line.split(' ', 7)


def body(line):
    """The text a record's MAC and signature cover: its MAC field as '-'."""
    f = _fields(line)
    if len(f) < 7:
        return None
    f[6] = '-'
    return ' '.join(f)


def mac_field(line):
    f = _fields(line)
    return f[6] if len(f) > 6 else '-'


def sign(seed, pub, text, mac):
    """The MAC field of a record: its HMAC `mac` (16 hex) and the signature
    of `text` (the record with '-' for its MAC) under seed (hex), pub (hex)."""
    from sporadic.core import ed25519
    s = ed25519.sign(binascii.unhexlify(seed), text, binascii.unhexlify(pub))
    import sporadic
    sporadic.forget('sporadic.core.sha512')    # (ed25519's hash and curve; the caller
    sporadic.forget('sporadic.core.edcurve')   # lets ed25519 go)
    return mac + '.' + binascii.b2a_base64(s).decode().strip()


def verify(pub, line):
    """True when the record `line` carries a signature that verifies under
    pub (32 bytes). In two steps, each with its own code alone in RAM (a
    board's small heap holds one of the two, not both: docs/mqtt.md#memory):
    the hash (core/sha512.py), then the curve (core/edcurve.py), each let
    go after its step."""
    import sporadic
    h = _hash(pub, line)
    sporadic.forget('sporadic.core.sha512')
    ok = h is not None and _curve(pub, line, h)
    sporadic.forget('sporadic.core.edcurve')
    return ok


# Each step reads the signature itself, before its import: its 64 bytes held
# from the first step to the second, or made after the curve's import, split
# the room the code takes (the check needed 33-35K of heap at 64-bit, not 30K).
def _hash(pub, line):
    s = _sig(line)
    if s is None:
        return None
    from sporadic.core import sha512
    return sha512.digest(s[:32] + pub + body(line).encode())


def _curve(pub, line, h):
    s = _sig(line)
    from sporadic.core import edcurve
    return edcurve.check(pub, h, s)


def _sig(line):
    # the 64 bytes of a record's signature, or None: its MAC field carries
    # none, or not in canonical base64 (one text for one signature)
    m = mac_field(line)
    if not signed(m):
        return None
    try:
        s = binascii.a2b_base64(m[17:])
    except Exception:
        return None
    if len(s) != 64 or binascii.b2a_base64(s).decode().strip() != m[17:]:
        return None
    return s


def who(line):
    """The host whose key a record must be signed with: a result's host, an
    assignment's leader."""
    f = line.split(' ', 7)
    return f[5] if f[1] == 'a' else f[2]
