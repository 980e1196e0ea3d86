# Boot a virtual board on the MicroPython unix port, as a board boots:
#   micropython -X heapsize=64K tests/devboot.py FLASH_DIR [-c CODE | SCRIPT]
# mounts FLASH_DIR at /, chdir('/'), sys.path as a board has it, then runs
# /main.py (or CODE / SCRIPT, read before the mount) like boot would.
# SPORADIC_RAM_FLASH=N: the flash is LittleFS on N blocks in RAM, a board's
# that fills up (tests/ramflash.py).
# Not companion/vboard/onboard/vboard_boot.py: that shim hands over to a REPL after main.py
# and holds more heap when main.py starts (7,328 bytes allocated against this
# one's 1,952 on a 64K heap), which the 64K budgets of the tests booting
# through here do not have; this one runs once and exits with the status.
import os
import sys

args = sys.argv[1:]
if not args:
    print('usage: devboot.py FLASH_DIR [-c CODE | SCRIPT]')
    sys.exit(2)
flash = args[0]
code = None
if len(args) >= 3 and args[1] == '-c':
    code = bytes(args[2], 'utf-8').decode()  # a heap copy: argv text is not safe across gc
elif len(args) >= 2:
    with open(args[1]) as f:
        code = f.read()
ramflash = None
if os.getenv('SPORADIC_RAM_FLASH'):
    import ramflash   # beside this file: imported before the mount hides it
os.mount(os.VfsPosix(flash), '/')
if ramflash:
    ramflash.mount(int(os.getenv('SPORADIC_RAM_FLASH')))
os.chdir('/')
sys.path[:] = ['', '.frozen', '/lib']
if code is None:
    with open('/main.py') as f:
        code = f.read()
g = {'__name__': '__main__'}
if ramflash:
    ramflash.run(code, g, flash)
else:
    exec(code, g)
