"""`companion ui`: its options; the page and its server are companion/ui/."""
from companion.errors import UserError


def add_parsers(sub):
    s = sub.add_parser('ui', help='the fleet as a read-only page in your browser (http://127.0.0.1:8370/)')
    s.add_argument('--port', type=int, default=8370, help='TCP port (default 8370; 0: one the system chooses)')
    s.add_argument('--host', default='127.0.0.1',
                   help='address to listen on (default 127.0.0.1: this machine only; another one on purpose only)')
    s.add_argument('--for', dest='seconds', type=float, default=None, help='stop after this many seconds')
    s.set_defaults(func=cmd_ui)


def cmd_ui(args):
    """The fleet folder as a read-only local web page (companion/ui/)."""
    from companion.fleet.folder import Fleet
    from companion.ui import server
    f = Fleet(args.fleet).require()
    if not 0 <= args.port < 65536:
        raise UserError('--port %d: want a port number 1..65535 (0: one the system chooses)' % args.port)
    if args.seconds is not None and args.seconds <= 0:
        raise UserError('--for %g: want a number of seconds above 0' % args.seconds)
    try:
        return server.serve(f.dir, args.host, args.port, args.seconds)
    except OSError as e:
        raise UserError('cannot listen on %s:%d: %s' % (args.host, args.port, e.strerror or e)) from None
