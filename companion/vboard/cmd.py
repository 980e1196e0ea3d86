"""The `companion vboard` verb and the virtual board's process entry
(``python -m companion.vboard.cmd``): the unix port on a pseudo-terminal
(vboard_relay.py) or, with --board rp2-pico, the real rp2 firmware emulated
(vboard_rp2.py)."""
import argparse
import os
import sys
import time

from companion.errors import UserError
from companion.vboard.process import take_signals
from companion.vboard.relay import DEFAULT_HEAP, Relay, VBoardError


def add_vboard_parser(subparsers):
    """Add ``vboard`` to an argparse subparsers object; returns the parser."""
    p = subparsers.add_parser(
        "vboard",
        help="start a virtual board (MicroPython unix port on a pseudo-terminal)",
        description="Start a virtual board: the MicroPython unix port on a pseudo-terminal "
        "with its own flash folder mounted at '/'. Prints the device path and runs "
        "until Ctrl-C. main.py runs at boot; Ctrl-C, raw REPL and soft reboot work as "
        "on a board.",
    )
    _add_arguments(p)
    p.set_defaults(func=_run_args)
    return p


def _add_arguments(p):
    p.add_argument("--id", dest="board_id", help="board id (SPORADIC_ID in the board's environment)")
    p.add_argument("--flash", help="flash folder mounted at / (default ./vboard-ID, or ./vboard)")
    p.add_argument("--image", help="a LittleFS v2 image file as the flash instead of a folder "
                   "(made blank and formatted if missing)")
    p.add_argument("--flash-size", default="2M", help="size of a new --image (default 2M)")
    p.add_argument("--heap", default=DEFAULT_HEAP,
                   help="MicroPython heap size (default %s: an ESP32-class board on this 64-bit port; "
                        "64K runs the loop but not a signed sync)" % DEFAULT_HEAP)
    p.add_argument("--clock-scale", type=float, help="board clock speed-up (SPORADIC_CLOCK_SCALE)")
    p.add_argument("--romfs", metavar="FILE",
                   help="a ROMFS image (companion image --romfs) as the board's ROMFS partition, mounted at "
                        "/rom; the unix port holds its bytes in the heap: add its size to --heap")
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                   help="more environment for the board's interpreter")
    p.add_argument("--raw-output", action="store_true",
                   help="do not turn a bare \\n of the board's output into \\r\\n")
    p.add_argument("--with-parent", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("-v", "--verbose", action="store_true", help="log boots to stderr")
    from companion.vboard.rp2 import add_arguments as add_rp2_arguments

    add_rp2_arguments(p)  # --board rp2-pico: the real rp2 firmware, emulated


def _run_args(args):
    if args.clock_scale is not None and not args.clock_scale > 0:
        raise UserError("--clock-scale %g: want a speed-up above 0 (1: real time)" % args.clock_scale)
    if args.board != "unix":
        from companion.vboard.rp2 import run_args

        return run_args(args)
    env = {}  # added to the relay's own environment
    for kv in args.env:
        k, sep, v = kv.partition("=")
        if not sep:
            raise UserError("--env wants KEY=VALUE, got %r" % kv)
        env[k] = v
    if args.board_id:
        env["SPORADIC_ID"] = args.board_id
    if args.clock_scale is not None:
        env["SPORADIC_CLOCK_SCALE"] = "%g" % args.clock_scale
    if args.romfs:
        if not os.path.isfile(args.romfs):
            raise UserError("--romfs %s: no such file" % args.romfs)
        env["SPORADIC_VBOARD_ROMFS"] = os.path.abspath(args.romfs)
    flash = args.flash or (None if args.image else ("vboard-" + args.board_id if args.board_id else "vboard"))

    trace = os.environ.get("SPORADIC_VBOARD_TRACE")  # debugging: a file to log every byte to

    def log(msg):
        if args.verbose:
            sys.stderr.write("vboard: %s\n" % msg)
            sys.stderr.flush()
        if trace:
            with open(trace, "a") as f:
                f.write("%.4f %s\n" % (time.monotonic(), msg))

    try:
        relay = Relay(flash, heap=args.heap, env=env, cooked=not args.raw_output, log=log,
                      image=args.image, flash_size=args.flash_size)
    except VBoardError as e:
        raise UserError(str(e)) from e
    except OSError as e:   # a flash folder or image that cannot be made
        raise UserError("vboard flash %s: %s" % (e.filename or flash or args.image, e.strerror or e)) from e
    relay.trace = bool(trace)
    if args.with_parent:
        relay.parent_pid = os.getppid()
    path = relay.open()
    take_signals(relay)
    sys.stdout.write(path + "\n")
    sys.stdout.flush()
    if not args.with_parent and sys.stderr.isatty():
        sys.stderr.write("virtual board%s on %s, flash %s (Ctrl-C to stop)\n"
                         % (" " + args.board_id if args.board_id else "", path, relay.image or relay.flash_dir))
        sys.stderr.flush()
    try:
        relay.run()
    finally:
        relay.close()
    return 0


def main(argv=None):
    """``companion vboard ...``: print the device path, run until Ctrl-C/SIGTERM."""
    p = argparse.ArgumentParser(prog="companion vboard", description=add_vboard_parser.__doc__)
    _add_arguments(p)
    args = p.parse_args(argv)
    try:
        return _run_args(args)
    except UserError as e:
        print("companion vboard: %s" % e, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
