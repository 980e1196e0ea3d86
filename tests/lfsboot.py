# Boot a board's desktop-built LittleFS image on the MicroPython unix port,
# as the board boots it:
#   micropython -X heapsize=H tests/lfsboot.py IMAGE BLOCK_SIZE BLOCK_COUNT PROGSIZE HOSTDIR|- [STEPS]
# The image file is the board's flash region behind a block device
# (readblocks/writeblocks/ioctl, as flashbdev / rp2.Flash), mounted at / with
# vfs.VfsLfs2; HOSTDIR (compiled stand-ins for `machine`...) at /host.
# Then, in firmware/main.py's order, the store is opened, the runtime loads
# /cfg.json, runs STEPS passes of its loop and returns.
import os, sys, vfs
from fileblockdev import FileBlockDevice  # beside this script (sys.path[0])

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
    from sporadic import store
    store.open_store()   # as firmware/main.py: recovery before the runtime is imported
    from sporadic import runtime
    print("ID", runtime.get().id)
    runtime.main(max_steps=steps)  # an esp32 may deep-sleep out of it (SystemExit)
    print("LOOP DONE")
finally:
    vfs.umount("/")
    dev.f.close()
