# The boot shim of a virtual board (runs on the MicroPython unix port).
#
# companion/vboard/relay.py starts the interpreter as
#     micropython -X heapsize=64K vboard_boot.py
# on a pseudo-terminal. This shim does what a board's firmware does before
# its REPL: mount the flash at '/', set sys.path, run /boot.py and (unless
# the board soft-rebooted from the raw REPL) /main.py, then fall into the
# friendly REPL. It is MicroPython code: no f-strings, no typing.
#
# Environment (set by the relay, vboard_relay.py):
#   SPORADIC_VBOARD_FLASH  absolute host path of the flash folder, or
#   SPORADIC_VBOARD_IMAGE  a LittleFS v2 image file (a board's flash region;
#                          SPORADIC_VBOARD_BLOCK bytes a block, default 4096),
#                          behind vboard_blockdev.FileBlockDevice
#   SPORADIC_VBOARD_WDT    the file descriptor of the relay's watchdog pipe:
#                          machine.WDT here (_vboard_wdt) writes to it
#   SPORADIC_VBOARD_ROMFS  a ROMFS image file (mpremote's format): mounted at
#                          /rom, /rom and /rom/lib before /lib on sys.path,
#                          as a firmware with a ROMFS partition does (ESP8266
#                          FLASH_2M_ROMFS: mp_init() mounts it and appends
#                          both, the port's main() then /lib). A port with a
#                          ROM segment (bench/build_micropython32.sh's
#                          micropython-romfs: the relay names the file in
#                          MICROPY_ROMFS) has mapped it outside the heap and
#                          mounted it already, as a board; on another port
#                          its bytes are read first and stay in the heap (#31)
#   SPORADIC_VBOARD_BOOT   'main' (power-on / soft reboot from the friendly
#                          REPL: boot.py then main.py), 'raw' (soft reboot
#                          from the raw REPL: boot.py only) or 'interrupted'
#                          (the relay restarted an interpreter that a Ctrl-C
#                          deadlocked: as a board after Ctrl-C, the REPL only)


# Mounting the flash must not be interrupted (a Ctrl-C would leave the host's
# file system at '/'), so Ctrl-C is off until main.py starts: the relay keeps
# the byte meanwhile. The unix port turns it on as this script starts, so a
# Ctrl-C may land before it is off again: remember it, and act on it as a
# board interrupted at boot does (no main.py, the REPL).
_vboard_ki = False
while True:
    try:
        import micropython
        micropython.kbd_intr(-1)
        for _vboard_i in range(3):  # let a pending KeyboardInterrupt land here
            pass
        break
    except KeyboardInterrupt:
        _vboard_ki = True


def _vboard_boot(g, interrupted):
    import micropython
    import os
    import sys

    # Leave the REPL's globals as a board has them: only what main.py defines.
    for name in ('_vboard_boot', '__file__', '_vboard_ki', '_vboard_i', 'micropython'):
        g.pop(name, None)

    flash = os.getenv('SPORADIC_VBOARD_FLASH')
    image = os.getenv('SPORADIC_VBOARD_IMAGE')
    kind = os.getenv('SPORADIC_VBOARD_BOOT') or 'main'
    rom = os.getenv('SPORADIC_VBOARD_ROMFS')
    if rom:
        import vfs
        if getattr(vfs, 'rom_ioctl', None) and vfs.rom_ioctl(1) > 0:
            rom = 1   # the port's ROM segment, mounted at /rom by mp_init()
        else:   # first: one block at the start of the heap, for the whole run
            f = open(rom, 'rb')
            rom = f.read()
            f.close()
    _vboard_wdt(os, sys)   # a host path: before the flash hides the host's files
    if image:
        os.mount(_vboard_lfs(os, image), '/')
        os.chdir('/')
    elif flash:
        os.mount(os.VfsPosix(flash), '/')
        os.chdir('/')
        sys.modules['os'] = _vboard_os(os)
    sys.path[:] = ['', '.frozen', '/lib']
    if rom:
        if rom != 1:
            os.mount(vfs.VfsRom(rom), '/rom')
        sys.path[2:2] = ['/rom', '/rom/lib']
    rom = None
    # The unix port enters its REPL after the script when this is set; a
    # SystemExit from main.py clears it, so the process ends and the relay
    # soft-reboots the board as a real one would.
    os.putenv('MICROPYINSPECT', '1')

    _vboard_board(sys)
    names = ['boot.py']
    if kind != 'raw':
        names.append('main.py')
    if interrupted or kind == 'interrupted':
        print('KeyboardInterrupt: ')
        names = []
    micropython.kbd_intr(3)
    for name in names:
        try:
            try:
                os.stat(name)
            except OSError:
                continue
            g['__file__'] = name
            execfile(name, g)
        except SystemExit:
            os.unsetenv('MICROPYINSPECT')
            raise
        except BaseException as e:  # KeyboardInterrupt included, as a board
            _vboard_traceback(e)
            if name == 'main.py' or isinstance(e, KeyboardInterrupt):
                break
        finally:
            g.pop('__file__', None)


def _vboard_wdt(os, sys):
    # A board's machine.WDT: its hardware is the relay (vboard_relay.py),
    # told through a pipe that the watchdog starts ("S MS") and is fed ("F").
    # `import machine` gets the unix port's machine with WDT added.
    fd = os.getenv('SPORADIC_VBOARD_WDT')
    if not fd:
        return
    import machine
    pipe = open('/proc/self/fd/' + fd, 'wb')

    class WDT:
        def __init__(self, id=0, timeout=5000):
            pipe.write(('S %d\n' % timeout).encode())

        def feed(self):
            pipe.write(b'F\n')

    class Machine:
        # the port's machine, WDT added (delegated: no copy of its names in RAM)
        def __getattr__(self, name):
            return getattr(machine, name)

    Machine.WDT = WDT
    sys.modules['machine'] = Machine()


def _vboard_board(sys):
    # The unix board module (/lib/board.py) has no watchdog of its own (its
    # wdt_feed does nothing, as under tests/devboot.py): on a virtual board
    # the relay is one. `import board` gets the board this builds: the unix
    # board module, with a wdt_feed that reaches machine.WDT and a sleep_ms
    # cut into pieces that feed a running watchdog (as mboard's on a board).
    # The module itself is left as tests/devboot.py boots it.
    try:
        import board
    except ImportError:
        return      # nothing deployed yet
    if getattr(board, 'NAME', '') != 'unix':
        return
    import machine
    dog = []
    sleep = board.sleep_ms

    def wdt_feed():
        if not dog:
            dog.append(machine.WDT(timeout=8000))
        dog[0].feed()

    # on the step clock a sleep takes no real time (the relay's watchdog
    # counts real time): one piece, one feed
    piece = 0 if getattr(board, 'STEP', False) else 4000 * board.SCALE

    def sleep_ms(ms):
        ms = int(ms)
        while ms > 0:
            step = min(ms, piece) if dog and piece else ms
            sleep(step)
            if dog:
                dog[0].feed()
            ms -= step

    class Board:
        # the unix board module, the watchdog's two functions its own
        # (delegated: no copy of its names in RAM)
        def __getattr__(self, name):
            return getattr(board, name)

    b = Board()
    b.wdt_feed = wdt_feed
    b.sleep_ms = sleep_ms
    sys.modules['board'] = b


def _vboard_os(os):
    # The flash folder is os.VfsPosix(root), mounted as it is: its
    # VfsPosix.rename builds both host paths in one buffer, so with two
    # absolute paths it renames the new name onto itself (ENOENT); a board's
    # FAT or LittleFS has no such bug. `import os` gets os with that one
    # call mended. (Not a Python VFS over VfsPosix: the import machinery calls
    # a VFS's stat inside a handler that takes any exception for "no such
    # file", so a Ctrl-C landing in a Python stat while main.py imported its
    # modules was lost; nor a subclass, which mount refuses.)
    class OS:
        pass

    m = OS()
    for name in dir(os):
        setattr(m, name, getattr(os, name))

    def rename(old, new):
        if old[:1] == '/' and new[:1] == '/':
            cwd = os.getcwd()
            os.chdir('/')
            try:
                os.rename(old, new[1:])
            finally:
                os.chdir('/' + cwd.lstrip('/'))
        else:
            os.rename(old, new)

    m.rename = rename
    return m


def _vboard_lfs(os, path):
    # The flash as a board has it: LittleFS v2 on a block device, here the
    # host file `path` (its size / block size blocks), formatted if blank.
    import sys
    from vboard_blockdev import FileBlockDevice  # beside this shim (sys.path[0])
    del sys.modules['vboard_blockdev']  # a board has no such module
    bs = int(os.getenv('SPORADIC_VBOARD_BLOCK') or '4096')
    dev = FileBlockDevice(path, bs, os.stat(path)[6] // bs)
    try:
        return os.VfsLfs2(dev, readsize=32, progsize=32, lookahead=32)
    except OSError:
        os.VfsLfs2.mkfs(dev, readsize=32, progsize=32, lookahead=32)
        return os.VfsLfs2(dev, readsize=32, progsize=32, lookahead=32)


def _vboard_traceback(e):
    # Print the traceback a board prints: without this shim's own frames.
    import io
    import sys
    buf = io.StringIO()
    sys.print_exception(e, buf)
    for line in buf.getvalue().split('\n'):
        if line and 'vboard_boot' not in line:
            print(line)


_vboard_boot(globals(), _vboard_ki)
del _vboard_traceback, _vboard_os, _vboard_lfs, _vboard_wdt, _vboard_board
