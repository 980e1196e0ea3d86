"""Options more than one verb group takes: the board a `deploy`, `image` or
`flash` provisions (its network, its position) and, for `image` and `flash`,
the board and what goes on it; the fleet folder --fleet names. argparse only."""

def fleet_of(args, require=True):
    """The fleet folder of --fleet (require: one that exists, else one line)."""
    from companion.fleet.folder import Fleet
    f = Fleet(args.fleet)
    return f.require() if require else f


def add_network_args(p):
    """--sync-port, --peer, --wifi: deploy, image and flash (docs/wifi.md)."""
    p.add_argument('--sync-port', type=int, default=None,
                   help='run the network loop: TCP sync server and UDP heartbeats on this port '
                        '(default 7370 when --peer or --wifi is given; none: no network)')
    p.add_argument('--peer', action='append', default=[], metavar='HOST:PORT',
                   help='a board (or `companion serve`) to sync with on its own; repeatable')
    p.add_argument('--wifi', metavar='SSID:KEY', help='the Wi-Fi network the board joins')
    add_mqtt_args(p, 'the MQTT broker the board syncs through (docs/mqtt.md); a board other than '
                     'the unix one needs --wifi too')
    p.add_argument('--mqtt-every', type=float, metavar='SECONDS',
                   help='how often the board visits its broker (default 5; cfg mqtt.every_ms)')


def add_mqtt_args(p, what):
    """--mqtt URL and the broker's credentials: deploy, image, flash, serve."""
    p.add_argument('--mqtt', metavar='mqtt://HOST[:PORT]', help=what)
    p.add_argument('--mqtt-user', metavar='USER', help='user name on the broker')
    p.add_argument('--mqtt-password', metavar='PASSWORD', help='password on the broker')
    p.add_argument('--mqtt-ca', metavar='FILE', help='CA certificate (PEM) the broker\'s TLS certificate is checked '
                   'with (mqtts://)')
    p.add_argument('--mqtt-topic', metavar='PREFIX', help='topic prefix (default sporadic/ + the fleet key\'s id)')


def mqtt_of(args):
    """cfg['mqtt'] from the --mqtt options, or None."""
    from companion.errors import UserError
    from companion.fleet import provision
    if not getattr(args, 'mqtt', None):
        for o in ('mqtt_user', 'mqtt_password', 'mqtt_ca', 'mqtt_topic', 'mqtt_every'):
            if getattr(args, o, None) is not None:
                raise UserError('--%s goes with --mqtt URL' % o.replace('_', '-'))
        return None
    return provision.mqtt_config(args.mqtt, args.mqtt_user, args.mqtt_password, args.mqtt_ca, args.mqtt_topic,
                                 getattr(args, 'mqtt_every', None))


def add_position_args(p):
    """--lat, --lon: deploy, image and flash (sunrise/sunset jobs, docs/jobline.md)."""
    p.add_argument('--lat', type=float, default=None, help="the board's latitude, degrees north (sunrise/sunset jobs)")
    p.add_argument('--lon', type=float, default=None, help="the board's longitude, degrees east")


def add_board_args(p):
    """image and flash: the board, its id, what goes on it."""
    from companion.fleet import files as _files
    p.add_argument("--board", required=True, help="board name: " + ", ".join(_files.boards().names()))
    p.add_argument("--id", dest="board_id", help="the board's id (its name in the fleet)")
    p.add_argument("--jobs", help="job file to put on the board (default: the fleet's jobs.txt if any)")
    p.add_argument("--secret", help="per-device secret as the fleet keeps it (default: the fleet's, created once)")
    p.add_argument("--pubkey", help="companion public key file (default: the fleet's fleet.pub)")
    p.add_argument("--flash-size", help="flash size when it differs from board.json (e.g. 4MB, 16MB)")
    p.add_argument("--no-compile", action="store_true", help="copy .py sources instead of .mpy")
    p.add_argument("--frozen", action="store_true",
                   help="the MicroPython firmware has sporadic frozen in (boards/<name>/manifest.py): "
                        "leave /lib/sporadic out")
    add_network_args(p)
    add_position_args(p)
