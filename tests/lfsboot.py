# Boot a board's desktop-built LittleFS image on the MicroPython unix port,
# as the board boots it:
#   micropython -X heapsize=H tests/lfsboot.py IMAGE BLOCK_SIZE BLOCK_COUNT PROGSIZE HOSTDIR|- [STEPS]
# The image file is the board's flash region behind a block device
# (readblocks/writeblocks/ioctl, as flashbdev / rp2.Flash), mounted at / with
# vfs.VfsLfs2; HOSTDIR (compiled stand-ins for `machine`...) at /host.
# Then sporadic.boot starts it as firmware/main.py does: the store opened,
# the runtime's loop run for STEPS passes. The block device is a virtual
# board's (companion/vboard/onboard/vboard_blockdev.py); the boot is not vboard_boot.py's:
# this one runs boot.main for STEPS passes on the image's own geometry and
# exits, the smallest boot whose heap bench/heap_boards.py gates.
import os, sys, vfs
sys.path.append(sys.path[0] + "/../companion/vboard/onboard")  # run as a script from tests/
from vboard_blockdev import FileBlockDevice  # companion/vboard/onboard/vboard_blockdev.py (bench/heap_boards.py: MICROPYPATH)

a = sys.argv[1:]
dev = FileBlockDevice(a[0], int(a[1]), int(a[2]))
steps = int(a[5]) if len(a) > 5 else 3
vfs.mount(vfs.VfsLfs2(dev, progsize=int(a[3])), "/")
if a[4] != "-":
    vfs.mount(vfs.VfsPosix(a[4]), "/host")
os.chdir("/")
sys.path[:] = ["", ".frozen", "/lib", "/host"]
del a
try:
    from sporadic.device import boot
    try:
        boot.main(max_steps=steps)  # as firmware/main.py; an esp32 may deep-sleep out of it (SystemExit)
        print("LOOP DONE")
    finally:
        from sporadic.device import runtime
        print("ID", runtime.get().id)
finally:
    vfs.umount("/")
    dev.f.close()
