"""A virtual board: the MicroPython unix port on a pseudo-terminal.

A virtual board behaves on its serial line as a real board does, so that
``companion sync /dev/pts/N`` (or ``mpremote connect /dev/pts/N``) talks to
it exactly as to ``/dev/ttyUSB0``:

* at boot the flash folder is mounted at ``/`` (``os.VfsPosix``), ``sys.path``
  is ``['', '.frozen', '/lib']``, ``/boot.py`` then ``/main.py`` run; an
  exception in main.py prints its traceback and falls to the friendly REPL;
* Ctrl-C interrupts main.py (also inside ``time.sleep``);
* raw REPL (Ctrl-A) and raw-paste work (the unix port implements them);
* Ctrl-D in the raw REPL soft-reboots: ``OK``, ``MPY: soft reboot``, then
  the raw REPL again *without* running main.py; Ctrl-D in the friendly REPL
  (and ``sys.exit()`` in main.py) soft-reboots and runs main.py again.

How it does so (two pseudo-terminals and a relay, and what the relay hides)
is told in vboard_relay.py; the life cycle it shares with the emulated Pico
(vboard_rp2.py) is vboard_process.BoardProcess.

Debugging: ``SPORADIC_VBOARD_TRACE=FILE`` logs every byte both ways and every
boot to FILE; ``companion vboard -v`` logs boots to stderr.

Library use::

    with VBoard('/tmp/flash', board_id='pump-1') as vb:
        port = vb.path          # '/dev/pts/7'

The relay runs in its own process (``python -m companion.vboard``), so a test
can pull the cable with ``vb.kill()`` (SIGKILL) and the companion's own
process is not slowed by it. ``vb.reset()`` presses the reset button (the
interpreter is killed mid-whatever and boots again, running main.py).

CLI: ``main(argv)`` runs ``companion vboard [--id ID] [--flash DIR | --image FILE] [--heap
64K] [--clock-scale N]``; ``add_vboard_parser(subparsers)`` adds the verb to
an argparse parser (its ``func`` default takes the parsed args).
"""
import argparse
import os
import signal
import sys
import time

from companion.errors import UserError
from companion.vboard_process import BoardProcess, descendants
from companion.vboard_relay import DEFAULT_HEAP, Relay, VBoardError, _heap_arg, _size_arg

__all__ = ["VBoard", "VBoardError", "main", "add_vboard_parser"]


class VBoard(BoardProcess):
    """A virtual board in its own process; ``start()`` returns its device path.

    flash_dir: host folder mounted at ``/`` on the board (created if missing).
    image:     instead of a folder, a LittleFS v2 image file as the flash (4 KiB
               blocks, read/prog size 32, as ``companion image`` builds them);
               a missing one is made blank (``flash_size`` bytes) and
               formatted by the board at its first boot.
    board_id:  passed as ``SPORADIC_ID`` in the board's environment.
    heap:      ``-X heapsize=`` of the unix port. The default, ``128K``, stands
               for an ESP32-class board: this 64-bit port needs about twice a
               32-bit board's heap for the same objects (docs/device.md#memory).
    env:       more environment for the interpreter (``SPORADIC_CLOCK_SCALE``...).
    """

    error = VBoardError

    def __init__(self, flash_dir=None, board_id=None, heap=DEFAULT_HEAP, env=None, clock_scale=None, cooked=True,
                 image=None, flash_size="2M"):
        self.image = os.path.abspath(image) if image else None
        self.flash_size = flash_size
        _size_arg(flash_size)
        if flash_dir is None and self.image is None:
            raise VBoardError("a virtual board needs a flash folder or an image")
        self.flash_dir = os.path.abspath(flash_dir) if flash_dir else os.path.dirname(self.image)
        self.board_id = board_id
        self.heap = _heap_arg(heap)
        self.env = dict(env or {})
        if board_id is not None:
            self.env.setdefault("SPORADIC_ID", str(board_id))
        if clock_scale is not None:
            self.env.setdefault("SPORADIC_CLOCK_SCALE", str(clock_scale))
        self.cooked = cooked

    def start(self, timeout=15.0):
        os.makedirs(self.flash_dir, exist_ok=True)
        argv = ["--flash", self.flash_dir, "--heap", self.heap]
        if self.image:
            argv += ["--image", self.image, "--flash-size", str(self.flash_size)]
        if not self.cooked:
            argv.append("--raw-output")
        env = dict(os.environ)
        env.update(self.env)
        return self._launch(argv, env, timeout, "virtual board")

    def interpreter_pids(self):
        """Pids of the processes below the board's relay (its interpreter),
        for tests that look at what the board is doing (Linux /proc)."""
        return descendants(self.pid) if self.pid else []

    def reset(self):
        """Press the reset button: the interpreter dies and boots (main.py runs)."""
        if self.alive():
            self.proc.send_signal(signal.SIGUSR1)

    def kill(self):
        """Pull the cable: the board's process dies at once (SIGKILL)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def __repr__(self):
        return "VBoard(%r, id=%r, path=%r)" % (self.flash_dir, self.board_id, self.path)


# --------------------------------------------------------------------------
# CLI


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
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                   help="more environment for the board's interpreter")
    p.add_argument("--raw-output", action="store_true",
                   help="do not turn a bare \\n of the board's output into \\r\\n")
    p.add_argument("--with-parent", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("-v", "--verbose", action="store_true", help="log boots to stderr")
    from companion.vboard_rp2 import add_arguments as add_rp2_arguments

    add_rp2_arguments(p)  # --board rp2-pico: the real rp2 firmware, emulated


def _run_args(args):
    if args.board != "unix":
        from companion.vboard_rp2 import run_args

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
    relay.trace = bool(trace)
    if args.with_parent:
        relay.parent_pid = os.getppid()
    path = relay.open()
    signal.signal(signal.SIGTERM, relay.request_stop)
    signal.signal(signal.SIGINT, relay.request_stop)
    signal.signal(signal.SIGHUP, relay.request_stop)
    signal.signal(signal.SIGUSR1, relay.request_reset)
    rfd, wfd = os.pipe()
    os.set_blocking(rfd, False)
    os.set_blocking(wfd, False)
    signal.set_wakeup_fd(wfd)
    relay.wakeup_fd = rfd
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
