# A board's flash region as MicroPython's flashbdev sees it, backed by a host
# file (readblocks/writeblocks/ioctl), on the unix port: the flash of a
# virtual board booted from a LittleFS image (vboard_boot.py), and of the
# tests and benches that mount desktop-built images (tests/lfsboot.py,
# test_boards_image.py, bench/heap_boards.py). MicroPython code.


class FileBlockDevice:
    def __init__(self, path, block_size, count):
        self.f = open(path, "r+b")
        self.bs = block_size
        self.count = count

    def readblocks(self, n, buf, off=0):
        self.f.seek(n * self.bs + off)
        self.f.readinto(buf)

    def writeblocks(self, n, buf, off=None):
        self.f.seek(n * self.bs + (off or 0))
        self.f.write(buf)

    def ioctl(self, op, arg):
        if op == 4:
            return self.count
        if op == 5:
            return self.bs
        if op == 3:
            self.f.flush()
        return 0
