"""`companion demo`: its options; the demo itself is companion/demo.py."""
from companion.demo import run_demo


def cmd_demo(args):
    from companion.errors import UserError
    if args.scale < 1 or args.seconds < 1:
        raise UserError('--scale and --seconds want 1 or more (got %d and %d)' % (args.scale, args.seconds))
    run_demo(workdir=args.dir, scale=args.scale, run_seconds=args.seconds, insecure=args.insecure,
             keep=args.keep)
    return 0


def add_parsers(sub):
    s = sub.add_parser('demo', help='three virtual boards: deploy, add jobs, sync, run, sync, show who ran what')
    s.add_argument('--dir', help='keep everything in this folder (default: a temporary one, removed)')
    s.add_argument('--keep', action='store_true', help='keep the temporary folder')
    s.add_argument('--scale', type=int, default=600, help='board clock speed-up (default 600: 10 min a second)')
    s.add_argument('--seconds', type=int, default=12, help='real seconds the boards run between syncs')
    s.add_argument('--insecure', action='store_true')
    s.set_defaults(func=cmd_demo)
