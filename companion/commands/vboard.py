"""The `companion vboard` verb, and the virtual board's process entry
(``python -m companion.commands.vboard``, started by vboard/process.py): the
unix port on a pseudo-terminal (vboard/relay.py) or, with --board rp2-pico,
the real rp2 firmware emulated (vboard/rp2.py). Options and messages only;
the boards are vboard/'s."""
import argparse
import os
import sys

from companion.errors import UserError
from companion.vboard.process import relay_log, take_signals
from companion.vboard.relay import Relay
from companion.vboard.unixport import DEFAULT_HEAP, VBoardError

RP2_BOARD = "rp2-pico"   # vboard/rp2.py BOARD (imported only when asked for)


def add_parsers(subparsers):
    """Add ``vboard`` to an argparse subparsers object; returns the parser."""
    p = subparsers.add_parser(
        "vboard",
        help="start a virtual board (MicroPython unix port on a pseudo-terminal)",
        description="Start a virtual board: the MicroPython unix port on a pseudo-terminal "
        "with its own flash folder mounted at '/'. Prints the device path and runs "
        "until Ctrl-C. main.py runs at boot; Ctrl-C, raw REPL and soft reboot work as "
        "on a board.",
    )
    add_arguments(p)
    p.set_defaults(func=run)
    return p


def add_arguments(p):
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
                        "/rom; a unix port with a ROM segment (bench/build_micropython32.sh's "
                        "micropython-romfs, as $SPORADIC_MICROPYTHON) maps it outside the heap as a board; "
                        "another holds its bytes in the heap: add its size to --heap")
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                   help="more environment for the board's interpreter")
    p.add_argument("--raw-output", action="store_true",
                   help="do not turn a bare \\n of the board's output into \\r\\n")
    p.add_argument("--with-parent", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("-v", "--verbose", action="store_true", help="log boots to stderr")
    # --board rp2-pico: the real rp2 firmware, emulated; the options only it has
    p.add_argument("--board", default="unix", choices=["unix", RP2_BOARD],
                   help="unix: the MicroPython unix port (default); rp2-pico: the real rp2 firmware "
                        "on an emulated Raspberry Pi Pico (needs Node.js, see docs/hardware.md)")
    p.add_argument("--firmware", help="rp2-pico: a MicroPython RPI_PICO .uf2 to write into the flash "
                   "(default $SPORADIC_RP2_UF2; needed when the flash file is new)")
    p.add_argument("--bootrom", help="rp2-pico: the RP2040 boot ROM, 16 KiB (default $SPORADIC_RP2_BOOTROM)")
    p.add_argument("--unpaced", action="store_true",
                   help="rp2-pico: skip idle time instead of running at the wall clock's pace")
    p.add_argument("--stats", help=argparse.SUPPRESS)


def _log(args):
    # SPORADIC_VBOARD_TRACE: debugging, a file to log every byte to
    trace = os.environ.get("SPORADIC_VBOARD_TRACE")
    return relay_log(args.verbose, trace), bool(trace)


def run(args):
    if args.clock_scale is not None and not args.clock_scale > 0:
        raise UserError("--clock-scale %g: want a speed-up above 0 (1: real time)" % args.clock_scale)
    if args.board != "unix":
        return run_rp2(args)
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
    log, trace = _log(args)
    try:
        relay = Relay(flash, heap=args.heap, env=env, cooked=not args.raw_output, log=log,
                      image=args.image, flash_size=args.flash_size)
    except VBoardError as e:
        raise UserError(str(e)) from e
    except OSError as e:   # a flash folder or image that cannot be made
        raise UserError("vboard flash %s: %s" % (e.filename or flash or args.image, e.strerror or e)) from e
    relay.trace = trace
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


def run_rp2(args):
    """--board rp2-pico: the emulated Pico's relay, in this process."""
    from companion.vboard.rp2 import RP2Relay, RP2VBoardError, emulator_argv, missing
    flash = args.flash or ("vboard-%s.flash" % (args.board_id or RP2_BOARD))
    firmware = args.firmware or os.environ.get("SPORADIC_RP2_UF2")
    if firmware is None and not os.path.exists(flash):
        raise UserError("the flash file %s is new: give the firmware, --firmware RPI_PICO.uf2 "
                        "(micropython.org/download/RPI_PICO) or SPORADIC_RP2_UF2" % flash)
    why = missing(firmware, args.bootrom)
    if why:
        raise UserError(why)
    if args.image and not os.path.isfile(args.image):
        raise UserError("image %s not found" % args.image)
    log, trace = _log(args)
    try:
        argv = emulator_argv(flash, firmware, args.bootrom, args.image, args.unpaced, args.stats, args.verbose)
    except (RP2VBoardError, OSError) as e:
        raise UserError(str(e))
    relay = RP2Relay(argv, log=log)
    relay.trace = trace
    if args.with_parent:
        relay.parent_pid = os.getppid()
    path = relay.open()
    if not relay.power_on():
        relay.close()
        raise SystemExit(2)  # the emulator said why, in one line (a user error: exit 2, README)
    take_signals(relay, stats=True)
    sys.stdout.write(path + "\n")
    sys.stdout.flush()
    if not args.with_parent and sys.stderr.isatty():
        sys.stderr.write("emulated Raspberry Pi Pico on %s, flash %s (Ctrl-C to stop)\n" % (path, flash))
        sys.stderr.flush()
    return relay.run()


def main(argv=None):
    """``python -m companion.commands.vboard ...``: print the device path, run
    until Ctrl-C/SIGTERM (the board process vboard/process.py starts)."""
    p = argparse.ArgumentParser(prog="companion vboard", description=add_parsers.__doc__)
    add_arguments(p)
    args = p.parse_args(argv)
    try:
        return run(args)
    except UserError as e:
        print("companion vboard: %s" % e, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
