"""The keys the fleet folder holds (FLEET/keys/): each board's own secret
(keys/devices/ID), the fleet's board-to-board key (keys/peer), and the check of
the MAC a board puts on what it writes (verify_result). The fleet's RSA key
pair and signing are companion/fleet/keys.py."""
import os

from sporadic.core import jobline
from companion.errors import UserError


def _hex_key(path, text, fix):
    """text (a secret or key read from path) when it is hex, else a UserError."""
    try:
        ok = bool(text) and len(text) % 2 == 0 and bytes.fromhex(text).hex() == text.lower()
    except ValueError:
        ok = False
    if not ok:
        raise UserError('%s is not a hex secret (cut or edited?): %s' % (path, fix))
    return text


def secret_path(fleet, dev_id):
    return fleet.path('keys', 'devices', dev_id)


def device_secret(fleet, dev_id, create=False):
    cache = fleet.__dict__.setdefault('_secrets', {})
    if dev_id in cache:
        return cache[dev_id]
    if not dev_id.strip('.'):
        # a host id of dots ('.', '..') names a folder, never a board's secret
        if create:
            raise UserError('board id %r names no file for its secret: give another --id' % dev_id)
        return None
    p = secret_path(fleet, dev_id)
    try:
        with open(p, 'rb') as f:
            text = f.read().strip().decode('ascii', 'replace')
        cache[dev_id] = _hex_key(p, text, 'restore it from your backup of the fleet folder, or remove it and '
                                          'deploy the board again (companion deploy PORT --id %s: a new secret)'
                                 % dev_id)
        return cache[dev_id]
    except FileNotFoundError:
        if not create:
            return None
    from companion.fleet import keys
    return write_new(p, keys.new_device_secret())


def secret_for(fleet):
    """board_id -> the secret this fleet keeps for it (hex), or None: what a
    link proves itself with (links.open_link)."""
    return lambda board_id: device_secret(fleet, board_id)


def secret_or_none(fleet, host):
    try:
        return device_secret(fleet, host)
    except (OSError, ValueError):   # an id that names no file this fleet could hold
        return None


def verify_result(fleet, r):
    """True: the board's MAC checks; False: it does not (forged or from a
    board that lies); None: nothing to check (insecure fleet, or no MAC
    expected)."""
    if fleet.insecure:
        return None
    # a result carries its board's MAC; an assignment (jobtext.Assign), its leader's
    secret = secret_or_none(fleet, r.host if isinstance(r, jobline.Result) else r.by)
    if secret is None or r.mac == '-':
        return False
    from sporadic.core import hmac
    mac = r.mac
    r.mac = '-'
    try:
        line = r.line()
        seen = fleet.__dict__.setdefault('_verified', {})   # (secret, line, mac): checked once per Fleet
        key = (secret, line, mac)
        ok = seen.get(key)
        if ok is None:
            # the MAC covers the line with '-' in its place; a single-run
            # record's board signature follows it (core/recsig.py: Fleet.receive checks it)
            ok = seen[key] = hmac.check_result(secret, line, mac[:16] if mac[16:17] == '.' else mac)
        return ok
    finally:
        r.mac = mac


def fleet_key_path(fleet):
    return fleet.path('keys', 'peer')


def read_fleet_key(fleet):
    p = fleet_key_path(fleet)
    try:
        with open(p, 'rb') as f:
            text = f.read().strip().decode('ascii', 'replace')
    except FileNotFoundError:
        return None
    if not text:
        return None
    return _hex_key(p, text, 'restore it from your backup of the fleet folder (every board holds it: '
                             'a new key means deploying every board again)')


def write_new(path, text):
    """Create a 0600 file holding text; an existing one is kept (and returned)."""
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        with open(path) as f:
            return f.read().strip()
    with os.fdopen(fd, 'w') as f:
        f.write(text + '\n')
    return text


def make_fleet_key(fleet):
    """keys/peer: the fleet's shared board-to-board key (hex), made by
    `companion init`; kept when it exists."""
    import secrets
    return write_new(fleet_key_path(fleet), secrets.token_hex(32))


# ---- board signatures (core/recsig.py, docs/security.md#board-signatures) ----

def sign_path(fleet, dev_id):
    """A board's own Ed25519 key (its 32-byte seed, hex), next to its secret."""
    return fleet.path('keys', 'devices', dev_id + '.sign')


def sign_seed(fleet, dev_id, create=False):
    """The board's signing seed (64 hex), or None; create: a new one when it has none
    (written 0600 at the commit of its provisioning, write_new)."""
    if not dev_id.strip('.'):
        return None
    p = sign_path(fleet, dev_id)
    try:
        with open(p, 'rb') as f:
            text = f.read().strip().decode('ascii', 'replace')
    except FileNotFoundError:
        if not create:
            return None
        import secrets
        return secrets.token_hex(32)
    return _hex_key(p, text, 'restore it from your backup of the fleet folder, or remove it and deploy the '
                             'board again (companion deploy PORT --id %s: a new key)' % dev_id)


def sign_pub(seed):
    """The public key text (ed25519:<64 hex>) of a seed (hex)."""
    from cryptography.hazmat.primitives.asymmetric import ed25519 as ced
    from cryptography.hazmat.primitives import serialization
    pub = ced.Ed25519PrivateKey.from_private_bytes(bytes.fromhex(seed)).public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return 'ed25519:' + pub.hex()


class Signatures:
    """The companion's check of a board's signature on a single-run record
    (after its MAC): the same rule as a board's (device/trust.py), with the
    board keys of the fleet's host list and the jobs of the fleet and of the
    delivery."""

    def __init__(self, lines, new_lines=()):
        from sporadic.core import hostrec, recsig
        self.keys = {}
        self.single = set()
        best = {}
        for src in (lines, new_lines):
            for l in src:
                if l.startswith('.h '):
                    h = jobline.host_of(l)
                    if h not in best or hostrec.key(l) > hostrec.key(best[h]):
                        best[h] = l
                elif l[8:9] == ' ' and recsig.single(l):
                    self.single.add(l[:8])
        for h, l in best.items():
            k = hostrec.pubkey(l)
            if k is not None:
                self.keys[h] = k

    def problem(self, line, who, result):
        """None, or why a result (result=True) or assignment of `who` is refused."""
        from sporadic.core import recsig
        key = self.keys.get(who)
        mac = recsig.mac_field(line)
        if recsig.signed(mac):
            if key is None:
                return 'signed, but %s has no board key in the host list' % who
            return None if recsig.verify(key, line) else 'its board signature does not verify'
        if key is not None and (not result or line[:8] in self.single):
            return 'a single-run record without the board signature of %s' % who
        return None
