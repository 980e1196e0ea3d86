"""Fleet keys on the desktop: the RSA key pair, signing batches, rotation,
per-device secrets and the MACs boards put on what they write.

The signing side lives here (cryptography); every check is the portable core
(`sporadic.rsa`, `sporadic.batch`, `sporadic.hmac`), the same code the boards
run, so the companion never accepts what a board would refuse.

Files under FLEET/keys/:

    fleet.pem       private key, PKCS#8 PEM, mode 0600; never leaves this folder
    fleet.pub       public key text, one line: rsa2048:<hex n>  (put on boards)
    seq             the last SEQ used for a .b/.k record (one counter per fleet)
    old/KEYID.pem   retired private keys (0600), kept so old batches can be explained

    init_keys(fleet_dir) -> pub_text
    load_pub(fleet_dir) -> pub_text        keyid(fleet_dir) -> 8 hex
    sign_digest(fleet_dir, digest32) -> signature bytes
    next_seq(fleet_dir) -> int             reserve the next SEQ (persisted)
    sign_batch(lines, seq, fleet_dir) -> ".b ..." record
    sign_lines(fleet_dir, lines) -> [".b ...", ...]   needs_batch lines, <= MAX_LINES a batch
    seal(fleet_dir, held, lines) -> [".b @SLOT ...", ...]   what the fleet file does not cover yet,
                                    into its newest slot, then new ones (docs/security.md#seals)
    reseal(fleet_dir, lines) -> slot records 1..n over every line afresh (after a rotation)
    rotate(fleet_dir) -> ".k ..." record   (then re-sign the live lines: sign_lines)
    new_device_secret() -> 64 hex
    mac_result(secret, line_without_mac) -> 16 hex      check_result(secret, line, mac) -> bool
"""
import os
import secrets
import sys

_FW = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "firmware")
try:
    import sporadic.core.rsa  # noqa: F401
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, _FW)

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa as crsa
from cryptography.hazmat.primitives.asymmetric.utils import Prehashed

from sporadic.core import batch, rsa
from sporadic.desktop import batching
from companion.fleet.atomic import atomic_write
from sporadic.core import hmac as shmac
from companion.errors import UserError

BITS = 2048
E = 65537


def _dir(fleet_dir):
    return os.path.join(fleet_dir, "keys")


def _write(path, data, mode=0o644):
    """Atomic write with the mode set before any byte lands."""
    atomic_write(path, data, mode)


def _new_key():
    return crsa.generate_private_key(public_exponent=E, key_size=BITS)


def _pem(key):
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def pub_text_of(key):
    nums = key.public_key().public_numbers()
    return rsa.format_pubkey(nums.n, nums.e)


def init_keys(fleet_dir, force=False):
    """Make the fleet key pair; refuses to replace an existing one unless force."""
    d = _dir(fleet_dir)
    os.makedirs(d, exist_ok=True)
    os.chmod(d, 0o700)
    pem = os.path.join(d, "fleet.pem")
    if os.path.exists(pem) and not force:
        raise FileExistsError("%s exists: a fleet has one key (use rotate)" % pem)
    key = _new_key()
    _write(pem, _pem(key), 0o600)
    text = pub_text_of(key)
    _write(os.path.join(d, "fleet.pub"), (text + "\n").encode())
    if not os.path.exists(os.path.join(d, "seq")):
        _write(os.path.join(d, "seq"), b"0\n")
    return text


# what to do about a fleet's key file that is gone or damaged
_RESTORE = "restore it from your backup of the fleet folder (docs/security.md)"


def load_private(fleet_dir):
    path = os.path.join(_dir(fleet_dir), "fleet.pem")
    try:
        st = os.stat(path)
        if st.st_mode & 0o077:
            raise UserError("%s is readable by others (mode %o): chmod 600 it" % (path, st.st_mode & 0o777))
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise UserError("%s: %s: %s" % (path, e.strerror or e, _RESTORE))
    try:
        # the fleet's own key, made by `companion init` (mode 0600): the RSA
        # consistency checks (~50 ms a load, every `add`) guard keys from elsewhere
        key = serialization.load_pem_private_key(data, password=None, unsafe_skip_rsa_key_validation=True)
    except (ValueError, TypeError):
        key = None
    if not isinstance(key, crsa.RSAPrivateKey):
        raise UserError("%s is not an RSA private key in PEM (cut or damaged?): %s" % (path, _RESTORE))
    return key


def load_pub(fleet_dir):
    path = os.path.join(_dir(fleet_dir), "fleet.pub")
    try:
        with open(path) as f:
            text = f.read().strip()
        rsa.parse_pubkey(text)
    except (OSError, UnicodeDecodeError, ValueError):
        raise UserError("%s is not the fleet's public key (rsa2048:<hex n>; cut or damaged?): %s, "
                        "or write it again from keys/fleet.pem" % (path, _RESTORE)) from None
    return text


def trusted_pubs(fleet_dir):
    """The fleet's public key and those of its retired keys (keys/old/): what
    the companion checks a batch from a board against (it signed them all)."""
    out = [load_pub(fleet_dir)]
    old = os.path.join(_dir(fleet_dir), "old")
    for name in sorted(os.listdir(old)) if os.path.isdir(old) else ():
        if name.endswith(".pem"):
            path = os.path.join(old, name)
            try:
                with open(path, "rb") as f:
                    out.append(pub_text_of(serialization.load_pem_private_key(f.read(), password=None)))
            except (OSError, ValueError, TypeError, AttributeError):
                raise UserError("%s is not a retired RSA private key in PEM (cut or damaged?): %s"
                                % (path, _RESTORE)) from None
    return out


def keyid(fleet_dir):
    return rsa.keyid(load_pub(fleet_dir))


def _sign(key, digest):
    return key.sign(bytes(digest), padding.PKCS1v15(), Prehashed(hashes.SHA256()))


def sign_digest(fleet_dir, digest):
    """PKCS#1 v1.5 signature of a 32-byte SHA-256 digest with the fleet key."""
    if len(digest) != 32:
        raise ValueError("digest is not 32 bytes")
    return _sign(load_private(fleet_dir), digest)


def current_seq(fleet_dir):
    path = os.path.join(_dir(fleet_dir), "seq")
    try:
        with open(path, "rb") as f:
            text = f.read().strip()
    except FileNotFoundError:
        return 0
    if not text:
        return 0
    if not text.isdigit() or len(text) > batch.SEQ_W:
        raise UserError("%s holds %r, not the last SEQ used: write %d into it (the highest SEQ of the "
                        ".b and .k records in jobs.txt)" % (path, text.decode("utf-8", "replace")[:20],
                                                            highest_seq(fleet_dir)))
    return int(text)


def highest_seq(fleet_dir):
    """The highest SEQ of the .b/.k records in the fleet's jobs.txt (0: none)."""
    best = 0
    try:
        with open(os.path.join(fleet_dir, "jobs.txt"), "rb") as f:
            for line in f:
                if line[:3] in (b".b ", b".k "):     # a slot record's SEQ after its slot
                    best = max(best, batch.rec_seq(line[:batch.SLOT_AT + batch.SEQ_W].decode("latin-1")))
    except OSError:
        pass
    return best


def next_seq(fleet_dir):
    """Reserve and persist the next SEQ (a SEQ is never used twice)."""
    seq = current_seq(fleet_dir) + 1
    _write(os.path.join(_dir(fleet_dir), "seq"), b"%d\n" % seq)
    return seq


def sign_batch(lines, seq, fleet_dir):
    """The .b record covering lines (1..MAX_LINES of them) under SEQ."""
    key = load_private(fleet_dir)
    return batching.make_batch_record(
        seq, rsa.keyid(pub_text_of(key)),
        [batch.line_digest(ln) for ln in lines],
        lambda dg: _sign(key, dg),
    )


def sign_lines(fleet_dir, lines):
    """Batch records covering every fleet-authored line of lines, in order."""
    todo = []
    seen = set()
    for ln in lines:
        ln = ln.rstrip("\r\n")
        if batch.needs_batch(ln) and ln not in seen:
            seen.add(ln)
            todo.append(ln)
    out = []
    if todo:     # a damaged key file is refused before a SEQ is reserved
        trusted_pubs(fleet_dir)
        load_private(fleet_dir)
    for i in range(0, len(todo), batch.MAX_LINES):
        out.append(sign_batch(todo[i:i + batch.MAX_LINES], next_seq(fleet_dir), fleet_dir))
    return out


def _slots(held):
    """{slot: (seq, keyid, digests)} of the slot records among held lines (the
    latest version of each), and the set of digests any .b record covers."""
    slots = {}
    covered = set()
    for ln in held:
        if ln[:3] != '.b ':
            continue
        try:
            seq, kid, ds, _, _ = batch.parse_batch(ln)
        except ValueError:
            continue
        covered.update(ds[i:i + batch.DIGEST] for i in range(0, len(ds), batch.DIGEST))
        sl = batch.slot_of(ln)
        if sl:
            n = int(sl[4:8])
            if n not in slots or slots[n][0] < seq:
                slots[n] = (seq, kid, ds)
    return slots, covered


def _todo(lines, covered=()):
    out = []
    seen = set(covered)
    for ln in lines:
        ln = ln.rstrip('\r\n')
        if batch.needs_batch(ln):
            d = batch.line_digest(ln)
            if d not in seen:
                seen.add(d)
                out.append(d)
    return out


def seal(fleet_dir, held, lines, seq=None):
    """The seal (docs/security.md#seals): slot records covering the
    fleet-authored lines among `lines` that no .b record among `held` (the
    fleet file) covers yet. The newest slot, when it has room and is signed
    by the current key, takes them first as a new version of itself (a
    later SEQ: merge.compact keeps it and drops the old one, on the
    companion and on every board), the rest go to new slots of SLOT_LINES.
    So N jobs added one `add` each cost ceil(N / SLOT_LINES) records, not N.
    seq: the SEQ to sign a single record with (reserved by the caller)."""
    slots, covered = _slots(held)
    new = _todo(lines, covered)
    if not new:
        return []
    trusted_pubs(fleet_dir)         # a damaged key file is refused before a SEQ is reserved
    key = load_private(fleet_dir)
    kid = rsa.keyid(pub_text_of(key))
    top = max(slots) if slots else 0
    groups = []
    per = batching.SLOT_LINES
    if top and slots[top][1] == kid and len(slots[top][2]) // batch.DIGEST < per:
        ds = slots[top][2]
        have = [ds[i:i + batch.DIGEST] for i in range(0, len(ds), batch.DIGEST)]
        room = per - len(have)
        groups.append((top, have + new[:room]))
        new = new[room:]
    for i in range(0, len(new), per):
        top += 1
        groups.append((top, new[i:i + per]))
    if seq is not None and len(groups) != 1:
        raise ValueError('a reserved SEQ signs one record, not %d' % len(groups))
    return [batching.make_batch_record(seq if seq is not None else next_seq(fleet_dir), kid, ds,
                                       lambda dg: _sign(key, dg), slot=sl)
            for sl, ds in groups]


def reseal(fleet_dir, lines):
    """Slot records 1..n covering every fleet-authored line of lines afresh
    under the current key (after a rotation; or to drop the digests of
    lines gone from the fleet): each replaces the slot's older version."""
    trusted_pubs(fleet_dir)
    key = load_private(fleet_dir)
    kid = rsa.keyid(pub_text_of(key))
    todo = _todo(lines)
    per = batching.SLOT_LINES
    return [batching.make_batch_record(next_seq(fleet_dir), kid, todo[i:i + per],
                                       lambda dg: _sign(key, dg), slot=i // per + 1)
            for i in range(0, len(todo), per)]


def rotate(fleet_dir):
    """Move the fleet to a new key: returns the .k record signed by the old key.

    The old private key moves to keys/old/KEYID.pem. Boards that take the .k
    record refuse the old key from then on, so the caller must re-sign the
    live fleet lines under the new key (sign_lines) and sync both.
    """
    d = _dir(fleet_dir)
    old = load_private(fleet_dir)
    old_text = pub_text_of(old)
    old_id = rsa.keyid(old_text)
    new = _new_key()
    new_text = pub_text_of(new)
    rec = batching.make_key_record(next_seq(fleet_dir), old_id, new_text, lambda dg: _sign(old, dg))
    os.makedirs(os.path.join(d, "old"), exist_ok=True)
    os.chmod(os.path.join(d, "old"), 0o700)
    _write(os.path.join(d, "old", old_id + ".pem"), _pem(old), 0o600)
    _write(os.path.join(d, "fleet.pem"), _pem(new), 0o600)
    _write(os.path.join(d, "fleet.pub"), (new_text + "\n").encode())
    return rec


def new_device_secret():
    """A fresh per-device secret: 32 random bytes as 64 hex digits."""
    return secrets.token_hex(32)


def mac_result(secret, line_without_mac):
    """16 hex: HMAC-SHA256 under the device secret, truncated (core sporadic.hmac)."""
    return shmac.mac_result(secret, line_without_mac)


def check_result(secret, line_without_mac, mac):
    return shmac.check_result(secret, line_without_mac, mac)
