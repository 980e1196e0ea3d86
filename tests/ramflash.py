# A board's flash in RAM for tests/devboot.py (MicroPython): LittleFS on N
# blocks of 512 bytes, which fills up as a board's does (OSError 28,
# ENOSPC) where the host folder never would. The board's folder is copied
# onto it at boot and back when the code ends, so that a test reads the
# flash as the board left it. -X heapsize= must hold the N blocks too.
import os

_DIR = 0x4000


class RAMFlash:
    # os.AbstractBlockDev's extended interface, as LittleFS uses it
    def __init__(self, n):
        self.data = bytearray(b'\xff' * (n * 512))
        self.n = n

    def readblocks(self, b, buf, off=0):
        a = b * 512 + off
        buf[:] = self.data[a:a + len(buf)]

    def writeblocks(self, b, buf, off=0):
        a = b * 512 + off
        self.data[a:a + len(buf)] = buf

    def ioctl(self, op, arg):
        if op == 4:      # block count
            return self.n
        if op == 5:      # block size
            return 512
        if op == 6:      # erase
            self.data[arg * 512:(arg + 1) * 512] = b'\xff' * 512
        return 0


def mount(blocks):
    """Put what is mounted at / (the board's folder) on a RAM LittleFS of
    `blocks` blocks and mount that at / instead."""
    dev = RAMFlash(blocks)
    os.VfsLfs2.mkfs(dev)
    os.mount(os.VfsLfs2(dev), '/ram')
    _copy('/', '/ram/', '/ram')
    os.umount('/ram')
    os.umount('/')
    os.mount(os.VfsLfs2(dev), '/')


def run(code, g, folder):
    """exec(code, g), then the flash back into the host's `folder` (its old
    files gone: what the board removed is removed there too)."""
    try:
        exec(code, g)
    finally:
        os.mount(os.VfsPosix(folder), '/host')
        for n, t, *_ in os.ilistdir('/host'):
            _remove('/host/' + n, t)
        _copy('/', '/host/', '/host')


def _copy(src, dst, skip):
    for n, t, *_ in os.ilistdir(src):
        s = src.rstrip('/') + '/' + n
        if s == skip:
            continue
        if t == _DIR:
            os.mkdir(dst + n)
            _copy(s, dst + n + '/', skip)
        else:
            with open(s, 'rb') as a, open(dst + n, 'wb') as b:
                while True:
                    c = a.read(4096)
                    if not c:
                        break
                    b.write(c)


def _remove(p, t):
    if t == _DIR:
        for n, t2, *_ in os.ilistdir(p):
            _remove(p + '/' + n, t2)
        os.rmdir(p)
    else:
        os.remove(p)
