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
(vboard/rp2.py) is vboard/process.py BoardProcess.

Debugging: ``SPORADIC_VBOARD_TRACE=FILE`` logs every byte both ways and every
boot to FILE; ``companion vboard -v`` logs boots to stderr.

Library use::

    with VBoard('/tmp/flash', board_id='pump-1') as vb:
        port = vb.path          # '/dev/pts/7'

The relay runs in its own process (``python -m companion.commands.vboard``), so a test
can pull the cable with ``vb.kill()`` (SIGKILL) and the companion's own
process is not slowed by it. ``vb.reset()`` presses the reset button (the
interpreter is killed mid-whatever and boots again, running main.py).

The verb (``companion vboard``) and the relay's process entry are
commands/vboard.py, which picks this board or the emulated Pico (vboard/rp2.py).
"""
import os
import signal

from companion.vboard.process import BoardProcess, descendants
from companion.vboard.unixport import DEFAULT_HEAP, VBoardError, heap_arg, size_arg

__all__ = ["VBoard", "VBoardError"]


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
        size_arg(flash_size)
        if flash_dir is None and self.image is None:
            raise VBoardError("a virtual board needs a flash folder or an image")
        self.flash_dir = os.path.abspath(flash_dir) if flash_dir else os.path.dirname(self.image)
        self.board_id = board_id
        self.heap = heap_arg(heap)
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
