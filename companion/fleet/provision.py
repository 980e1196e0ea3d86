"""What a board is given, in one place: `companion deploy` (serial),
`companion image` (a filesystem image) and `companion flash` (a chip) all
provision a board through here, so every board of a fleet holds the same
/cfg.json keys however it was set up.

Two phases, so that a board that was never written leaves the fleet as it
was (a refused or failed flash, an image that does not fit):

    p = prepare(fleet, dev_id, board, network=network_config(...))   # changes nothing
    ... write p.files() (or p.extra/p.secret/p.pubkey) to the board ...
    p.commit(port)      # the device secret, the fleet key, the host line, devices/ID

/cfg.json (files.config_files): id, secret (per device), pubkey (the
fleet's public key; signed fleets), sign and sign_pub (the board's own Ed25519
key pair, 64 hex each; signed fleets: its public key goes into the board's signed host record,
docs/security.md#board-signatures), fleet_key (board-to-board
authentication, keys/peer), hwm (replay floor: docs/security.md), board,
fleet, mode, and the network keys when one was asked for: sync_port, peers,
wifi (docs/wifi.md).
"""
import secrets
import time

from sporadic.core import jobline
from companion.fleet import board_keys, files, host_list
from companion.errors import UserError

DEFAULT_SYNC_PORT = 7370


def parse_url(url):
    """mqtt://[USER[:PASSWORD]@]HOST[:PORT] or mqtts://... -> dict of the
    cfg keys (host, port, tls, user, password), or ValueError(reason). The
    board reads the dict (net/broker.py), never the URL: this code stays on
    the desktop (a board's broker loop is ~0.5 KB of heap lighter)."""
    scheme, sep, rest = url.partition('://')
    if not sep or scheme not in ('mqtt', 'mqtts'):
        raise ValueError('want mqtt://HOST[:PORT] or mqtts://HOST[:PORT]')
    rest = rest.rstrip('/')
    d = {'tls': scheme == 'mqtts'}
    auth, sep, hp = rest.rpartition('@')
    if sep:
        u, sep, p = auth.partition(':')
        d['user'] = u
        if sep:
            d['password'] = p
    host, sep, port = hp.rpartition(':')
    if not sep:
        host, port = hp, ''
    if not host:
        raise ValueError('no host')
    if port:
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError('port %r: want 1..65535' % port)
        d['port'] = int(port)
    else:
        d['port'] = 8883 if d['tls'] else 1883
    d['host'] = host
    return d


def mqtt_config(url, user=None, password=None, ca_file=None, topic=None, every=None):
    """cfg['mqtt'] for `--mqtt URL` (docs/mqtt.md): host, port, tls, user,
    password (options or the URL's), the CA a TLS board checks the broker
    with (PEM text), a topic prefix (default: the fleet's, set by prepare),
    every_ms (--mqtt-every SECONDS: how often the board visits the broker;
    default net/broker.py's EVERY_MS)."""
    try:
        m = parse_url(url)
    except ValueError as e:
        raise UserError('--mqtt %r: %s' % (url, e)) from None
    if user is not None:
        m['user'] = user
    if password is not None:
        m['password'] = password
    if ca_file is not None:
        try:
            with open(ca_file) as f:
                m['ca'] = f.read()
        except OSError as e:
            raise UserError('--mqtt-ca %s: %s' % (ca_file, e.strerror or e)) from None
        if not m['tls']:
            raise UserError('--mqtt-ca goes with an mqtts:// broker')
    if topic is not None:
        if not topic or '#' in topic or '+' in topic or topic.endswith('/'):
            raise UserError('--mqtt-topic %r: want a topic prefix such as sporadic/home' % topic)
        m['topic'] = topic
    if every is not None:
        if not every > 0 or every > 86400:
            raise UserError('--mqtt-every %g: want a number of seconds above 0 (at most a day)' % every)
        m['every_ms'] = max(1, int(every * 1000))
    return m


def fleet_topic(fleet_key):
    """The topic prefix of a fleet on a broker: sporadic/ + the id of its
    fleet key (the same in every clone of the fleet folder)."""
    from sporadic.core import hmac
    return 'sporadic/' + hmac.key_id(fleet_key)


def network_config(sync_port=None, peers=(), wifi=None, mqtt=None):
    """The cfg keys of a network the user asked for (--sync-port, --peer,
    --wifi, --mqtt: mqtt_config's dict), or {}: a board without them runs
    the plain loop and never imports the network code. A broker alone
    opens no sync port (the unix board syncs through it only)."""
    net = {}
    for p in peers or ():
        host, sep, port = p.rpartition(':')
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise UserError('--peer %r: want HOST:PORT (e.g. 192.168.4.8:7370)' % p)
    if wifi is not None:
        ssid, sep, key = wifi.partition(':')
        if not ssid:
            raise UserError('--wifi %r: want SSID:KEY' % wifi)
        net['wifi'] = {'ssid': ssid, 'key': key}
    if peers:
        net['peers'] = list(peers)
    if sync_port is not None and not 0 < sync_port < 65536:
        raise UserError('--sync-port %d: want a port number 1..65535' % sync_port)
    if net or sync_port is not None:
        net['sync_port'] = sync_port or DEFAULT_SYNC_PORT
    if mqtt:
        net['mqtt'] = dict(mqtt)
    return net


def position_config(lat=None, lon=None):
    """The cfg keys of a board's position (--lat, --lon: sunrise/sunset jobs), or {}."""
    if (lat is None) != (lon is None):
        raise UserError('--lat and --lon go together')
    if lat is None:
        return {}
    if not -90 <= lat <= 90 or not -180 <= lon <= 180:
        raise UserError('--lat %s --lon %s: want -90..90 and -180..180 degrees' % (lat, lon))
    return {'lat': lat, 'lon': lon}


def check_network(board_name, net):
    """A board other than the unix port (which is on its host's network)
    reaches a network only through its Wi-Fi."""
    if net and 'wifi' not in net and files.board_data(board_name).get('port') != 'unix':
        raise UserError('a %s board reaches its %s over Wi-Fi: add --wifi SSID:KEY'
                        % (board_name, 'broker' if 'mqtt' in net else 'peers'))


def replay_floor(fleet):
    """The board's first high-water mark: below the oldest batch the fleet
    still holds, so batches compacted away before it was provisioned are
    refused as replays (docs/security.md)."""
    from companion.fleet import keys
    from sporadic.core import batch
    live = [batch.rec_seq(l) for l in fleet.lines() if l[:3] in ('.b ', '.k ')]
    return (min(live) - 1) if live else keys.current_seq(fleet.dir)


class Provision:
    """One board's provisioning, prepared: nothing of the fleet has changed
    until commit()."""

    def __init__(self, fleet, dev_id, board, extra, secret, pubkey, new_secret, new_fleet_key,
                 host_lines=(), host_seq=None, sign_key=None, new_sign=False):
        self.fleet = fleet
        self.host_lines = list(host_lines)   # '.h ID [SINCE LAT LON]' and its batch, when the fleet lacks them
        self._host_seq = host_seq
        self.id = dev_id
        self.board = board
        self.extra = extra
        self.secret = secret
        self.pubkey = pubkey
        self._new_secret = new_secret
        self._new_fleet_key = new_fleet_key
        self.sign_key = sign_key        # the board's public key text (ed25519:HEX), or None
        self._new_sign = new_sign

    def jobs_text(self, text):
        """A job file for the board's image: text and the board's own host
        line (signed as the commit will add it to the fleet)."""
        if not self.host_lines:
            return text
        return (text if not text or text.endswith('\n') else text + '\n') + ''.join(
            l + '\n' for l in self.host_lines)

    def position(self):
        """(lat, lon) the board is given, or None."""
        return (self.extra['lat'], self.extra['lon']) if 'lat' in self.extra else None

    def config_files(self):
        return files.config_files(self.id, self.secret, self.pubkey, self.extra)

    def commit(self, port=None, how='deployed'):
        """The board holds its files: record it in the fleet (the device
        secret, the fleet key if it was new, the signed host line, devices/ID)."""
        fleet = self.fleet
        if fleet is None:
            return
        if self._new_secret:
            kept = board_keys.write_new(board_keys.secret_path(fleet, self.id), self.secret)
            if kept != self.secret:
                raise UserError('another command gave %s a secret while this one ran: provision it again'
                                % self.id)
            fleet.__dict__.setdefault('_secrets', {})[self.id] = kept
        if self._new_fleet_key:
            board_keys.write_new(board_keys.fleet_key_path(fleet), self.extra['fleet_key'])
        if self._new_sign:
            kept = board_keys.write_new(board_keys.sign_path(fleet, self.id), self.extra['sign'])
            if kept != self.extra['sign']:
                raise UserError('another command gave %s a board key while this one ran: provision it again'
                                % self.id)
        if self.host_lines and self._host_seq is not None:
            from companion.fleet import keys
            if keys.current_seq(fleet.dir) == self._host_seq - 1:
                # the batch the image holds: its SEQ is still free, reserve it
                keys.next_seq(fleet.dir)
                fleet.merge_in(self.host_lines, 'host')
            # else another command signed meanwhile: add_host signs anew (the
            # board holds a batch the fleet does not; its next sync brings the
            # fleet's)
        elif self.host_lines:
            fleet.merge_in(self.host_lines, 'host')
        host_list.add_host(fleet, self.id, self.position(), key=self.sign_key)
        info = fleet.device(self.id) or {'id': self.id}
        info.update({'board': self.board, how: int(time.time())})
        for k in ('lat', 'lon'):   # where the board is (companion plan of sun jobs)
            if k in self.extra:
                info[k] = self.extra[k]
            else:
                info.pop(k, None)
        if port is not None:
            info['port'] = port
        fleet.save_device(info)


def prepare(fleet, dev_id, board, network=None, secret=None, pubkey=None, position=None):
    """Everything board dev_id (a `board` such as "esp32") is given, from the
    fleet folder (None: only what is passed), without changing the fleet.
    secret/pubkey override the fleet's (image/flash --secret, --pubkey)."""
    try:
        jobline.check_host(dev_id)
    except jobline.ParseError as e:
        raise UserError(str(e))
    network = dict(network or {})
    check_network(board, network)
    extra = {'board': board}
    new_secret = new_key = new_sign = False
    sign_key = None
    if fleet is not None:
        extra.update({'fleet': fleet.meta['name'], 'mode': fleet.meta.get('mode', 'signed')})
        key = board_keys.read_fleet_key(fleet)
        if key is None:        # a fleet made before `init` made the key
            key, new_key = secrets.token_hex(32), True
        extra['fleet_key'] = key
        if 'mqtt' in network and 'topic' not in network['mqtt']:
            network['mqtt'] = dict(network['mqtt'], topic=fleet_topic(key))
        if secret is None:
            secret = board_keys.device_secret(fleet, dev_id)
            if secret is None:
                from companion.fleet import keys
                secret, new_secret = keys.new_device_secret(), True
        if not fleet.insecure:
            from companion.fleet import keys
            if pubkey is None:
                pubkey = keys.load_pub(fleet.dir)
            extra['hwm'] = replay_floor(fleet)
            # the board's own key pair: kept across deploys (its records
            # already on other boards stay checkable), made at the first
            seed = board_keys.sign_seed(fleet, dev_id)
            if seed is None:
                seed, new_sign = board_keys.sign_seed(fleet, dev_id, create=True), True
            extra['sign'] = seed
            sign_key = board_keys.sign_pub(seed)
            extra['sign_pub'] = sign_key[8:]
    extra.update(network)
    extra.update(position or {})
    host_lines, host_seq = [], None
    pos = (position['lat'], position['lon']) if position else None
    line = host_list.host_line(fleet, dev_id, pos, key=sign_key) if fleet is not None else None
    if line is not None:   # the board's record (with its position) is new to the fleet
        host_lines = [line]
        if not fleet.insecure:
            from companion.fleet import keys
            host_seq = keys.current_seq(fleet.dir) + 1
            host_lines += keys.seal(fleet.dir, fleet.lines(), [line], seq=host_seq)
    return Provision(fleet, dev_id, board, extra, secret, pubkey, new_secret, new_key,
                     host_lines, host_seq, sign_key, new_sign)
