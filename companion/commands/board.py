"""Verbs through a link to a board: deploy, sync, net, and serve (boards
that wake up sync to this companion). argparse and printing only: the
work is sync/syncer.py's over a link of link/."""
import json
import sys
import time

from sporadic.core import jobline
from companion.errors import UserError
from companion.fleet.provision import DEFAULT_SYNC_PORT
from companion.fleet.queries import duplicate_text, duplicates
from companion.commands.options import add_mqtt_args, add_network_args, add_position_args, fleet_of, mqtt_of


def board_port(args):
    """The port the user gave, or the one USB port that looks like a board."""
    if args.port:
        return args.port
    from companion.link.ports import choose_port
    from companion.link.base import LinkError
    try:
        return choose_port()
    except LinkError as e:
        raise UserError(str(e)) from e


def cmd_deploy(args):
    from companion.link import open as links
    from companion.fleet import provision
    from companion.sync import syncer
    from companion.link.base import LinkError
    f = fleet_of(args)
    if args.board:
        syncer.known_board(args.board)
    if args.id is not None:
        try:
            jobline.check_host(args.id)
        except jobline.ParseError as e:
            raise UserError(str(e)) from None
    net = provision.network_config(args.sync_port, args.peer, args.wifi, mqtt_of(args))
    pos = provision.position_config(args.lat, args.lon)
    args.port = board_port(args)
    if not links.is_serial(args.port):
        raise UserError('deploy writes files through the REPL: give the board\'s serial port '
                        '(/dev/ttyUSB0, COM3), not the network address %s' % args.port)
    try:
        info = syncer.deploy(f, args.port, args.id, board=args.board, network=net,
                             compile=not args.no_compile, progress=not args.quiet, position=pos,
                             force=args.force)
    except LinkError as e:
        raise UserError(deploy_failure(args.port, e)) from e
    print('deployed %s to %s (%d files, %d bytes%s%s%s)' % (
        info['id'], args.port, info['files'], info['bytes'],
        '; sporadic is in its firmware (frozen or ROMFS)' if info['frozen'] else '',
        '; syncs on port %d' % info['network'] if info['network'] else '',
        '; syncs through %s' % args.mqtt if args.mqtt else ''))
    if info.get('moved_from'):
        print('moved %s from its other fleet (%s): its jobs and results of that fleet were cleared'
              % (info['id'], info['moved_from']))
    if info['note']:
        print(info['note'], file=sys.stderr)
    return 0


def deploy_failure(port, e):
    """One line for a link that failed opening the board or during deploy."""
    if getattr(e, 'at_open', False):
        return str(e)
    return ('deploy to %s broke off: %s (run it again: a file is replaced whole or not at all, '
            'and the board keeps its jobs)' % (port, e))


def cmd_sync(args):
    from companion.sync import syncer
    from companion.link.base import LinkError
    f = fleet_of(args)
    if args.port and args.port.startswith(('mqtt://', 'mqtts://')):
        from companion.sync import mqtt
        args.mqtt = args.port
        known = set(duplicates(f))
        mqtt.sync(f, mqtt_of(args), log=lambda t: print(t, flush=True), now=int(args.clock()))
        for i, d in duplicates(f).items():
            if i not in known:
                print('duplicate: ' + duplicate_text(i, d))
        return 0
    for o in ('mqtt_user', 'mqtt_password', 'mqtt_ca', 'mqtt_topic'):
        if getattr(args, o, None) is not None:
            raise UserError('--%s goes with a broker: companion sync mqtt://HOST[:PORT]' % o.replace('_', '-'))
    args.port = board_port(args)
    known = set(duplicates(f))
    try:
        rep = syncer.sync(f, args.port, progress=not args.quiet, now=int(args.clock()))
    except LinkError as e:   # the link did not open (sync itself reports a break-off)
        raise UserError(str(e)) from e
    print('synced %s: sent %d line(s), received %d line(s), %d new result(s); %d bytes on the wire; clock drift %+.1f s'
          % (rep['id'], rep['lines_sent'], rep['lines_received'], rep['new_results'], rep['bytes'], rep['drift']))
    for q in rep.get('refused', []):
        print('refused by board: %s' % q)
    for q in rep.get('flagged', []):
        print('flagged: %s' % q)
    for i, d in duplicates(f).items():   # what this sync brought to light (`status` lists them all)
        if i not in known:
            print('duplicate: ' + duplicate_text(i, d))
    return 0


def cmd_net(args):
    """A board's network status over TCP (its `net?` answer): the leader
    it follows, the hosts it hears, its counters, duplicates it found."""
    from companion.fleet import board_keys
    from companion.link import open as links
    from companion.link.base import LinkError
    f = fleet_of(args)
    try:
        link = links.open_link(args.address, board_keys.secret_for(f), timeout=args.timeout)
    except LinkError as e:
        raise UserError('cannot reach %s: %s' % (args.address, e))
    try:
        st = json.loads(link.call('net?'))
    except (LinkError, ValueError) as e:
        raise UserError('%s did not answer net?: %s' % (args.address, e))
    finally:
        link.close()
    if args.json:
        print(json.dumps(st, indent=1, sort_keys=True))
        return 0
    print('%s: leader %s (term %s), hears %s; syncs %d ok, %d failed%s' % (
        st.get('id'), st.get('leader') or '-', st.get('term', '-'), ', '.join(st.get('alive') or []) or 'nobody',
        st['sync']['syncs'], st['sync']['sync_fail'],
        '; last error: ' + st['last_error'] if st.get('last_error') else ''))
    for d in st.get('duplicates') or []:
        print('duplicate: %s' % d)
    return 0


def cmd_serve(args):
    """Listen so that boards that wake up sync to this companion (a sleeping
    board cannot be reached): each authenticates with its own secret."""
    from companion.sync import syncer
    from companion.link import tcp as transport_tcp
    f = fleet_of(args)
    if args.seconds is not None and args.seconds <= 0:
        raise UserError('--for %g: want a number of seconds above 0' % args.seconds)
    if args.mqtt:
        from companion.sync import mqtt
        cfg = mqtt_of(args)
        if args.every <= 0:
            raise UserError('--every %g: want a number of seconds above 0' % args.every)
        print('serving fleet %s through %s every %g s (Ctrl-C to stop)' % (f.dir, args.mqtt, args.every), flush=True)
        try:
            mqtt.serve(f, cfg, args.every, None if args.seconds is None else time.time() + args.seconds,
                       log=lambda t: print(t, flush=True))
        except KeyboardInterrupt:
            pass
        return 0
    if not 0 <= args.port < 65536:
        raise UserError('--port %d: want a port number 1..65535 (0: one the system chooses)' % args.port)
    try:
        server = syncer.fleet_server(f, args.port, args.bind, log=print)
    except OSError as e:
        raise UserError('cannot listen on %s:%d: %s' % (args.bind, args.port, e.strerror or e)) from None
    # the port bound (--port 0: one the system chose)
    print('serving fleet %s on %s:%d (Ctrl-C to stop)' % (f.dir, args.bind, server.sock.getsockname()[1]),
          flush=True)
    try:
        transport_tcp.serve(server, None if args.seconds is None else time.time() + args.seconds)
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0


def add_parsers(sub):
    s = sub.add_parser('deploy', help='put the firmware, identity and secret on a board')
    s.add_argument('port', nargs='?', help='serial port (default: the one USB port that looks like a board)')
    s.add_argument('--id', help='host id (default: derived from the board unique id)')
    s.add_argument('--board', default=None, help='board folder name (default: ask the board)')
    add_network_args(s)
    add_position_args(s)
    s.add_argument('--no-compile', action='store_true', help='copy .py sources instead of .mpy')
    s.add_argument('--force', action='store_true',
                   help='move a board deployed from another fleet into this one (clears its jobs and results)')
    s.add_argument('-q', '--quiet', action='store_true')
    s.set_defaults(func=cmd_deploy)

    s = sub.add_parser('net', help="a board's network status over TCP: leader, hosts heard, syncs, duplicates")
    s.add_argument('address', metavar='HOST:PORT')
    s.add_argument('--json', action='store_true')
    s.add_argument('--timeout', type=float, default=5.0)
    s.set_defaults(func=cmd_net)

    s = sub.add_parser('sync', help='merge both ways with a board (serial port or HOST[:PORT]) or a broker '
                       '(mqtt://HOST[:PORT])')
    s.add_argument('port', nargs='?', help='serial port, HOST[:PORT] or mqtt://HOST[:PORT] (default: the one '
                   'USB port that looks like a board)')
    s.add_argument('--mqtt-user', metavar='USER', help='user name on the broker')
    s.add_argument('--mqtt-password', metavar='PASSWORD', help='password on the broker')
    s.add_argument('--mqtt-ca', metavar='FILE', help='CA certificate (PEM) for an mqtts:// broker')
    s.add_argument('--mqtt-topic', metavar='PREFIX', help='topic prefix (default sporadic/ + the fleet key\'s id)')
    s.add_argument('-q', '--quiet', action='store_true')
    s.set_defaults(func=cmd_sync)

    s = sub.add_parser('serve', help='listen so that boards that wake up sync to this companion')
    s.add_argument('--port', type=int, default=DEFAULT_SYNC_PORT,
                   help='TCP port (default %d)' % DEFAULT_SYNC_PORT)
    s.add_argument('--bind', default='0.0.0.0', help='address to listen on (default all)')
    s.add_argument('--for', dest='seconds', type=float, default=None, help='stop after this many seconds')
    add_mqtt_args(s, 'sync through this MQTT broker instead of listening (docs/mqtt.md)')
    s.add_argument('--every', type=float, default=5.0, help='with --mqtt: seconds between two visits (default 5)')
    s.set_defaults(func=cmd_serve)
