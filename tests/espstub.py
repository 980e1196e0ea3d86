"""A chip for esptool on a pty: an ESP32 whose flasher stub already runs.

esptool has no emulator. This speaks the part of esptool's serial protocol
(SLIP frames; docs.espressif.com/projects/esptool, "Serial Protocol") that
`companion flash` uses, with the flash held in memory: SYNC (answered with
value 0, as the stub does, so esptool uploads no stub), READ_REG (the chip
magic at 0x40001000; 0 elsewhere), WRITE_REG, SPI_ATTACH, SPI_SET_PARAMS,
CHANGE_BAUDRATE, READ_FLASH (frames acknowledged one by one, then the MD5),
FLASH_DEFL_BEGIN / DATA / END (zlib, as esptool compresses for the stub),
SPI_FLASH_MD5, ERASE_FLASH. Anything else is "unsupported", as a ROM says.

``cut_after=(address, n)``: after n data blocks of the write that starts at
``address`` the pty is closed, as a pulled USB cable closes the port.
"""
import hashlib
import os
import select
import struct
import threading
import tty
import zlib

ESP32_MAGIC = 0x00F01D83   # esptool.targets.esp32.ESP32ROM.MAGIC_VALUE
SECTOR = 0x1000


class EspStub:
    def __init__(self, flash_size=0x400000, magic=ESP32_MAGIC, cut_after=None):
        self.flash = bytearray(b'\xff' * flash_size)
        self.magic = magic
        self.cut_after = cut_after
        self.written = []       # (address, bytes) of every completed FLASH_DEFL write
        self.commands = []      # every opcode received
        self.master, slave = os.openpty()
        tty.setraw(slave)
        self.path = os.ttyname(slave)
        self._slave = slave
        self._buf = bytearray()
        self._write = None      # [address, decompressor, bytes written, blocks]
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    # -- SLIP ----------------------------------------------------------------------
    def _frames(self):
        while not self._stop:
            try:
                if not select.select([self.master], [], [], 0.05)[0]:
                    continue
                data = os.read(self.master, 4096)
            except (OSError, ValueError):
                return
            if not data:
                return
            self._buf += data
            while True:
                start = self._buf.find(b'\xc0')
                if start < 0:
                    self._buf.clear()
                    break
                end = self._buf.find(b'\xc0', start + 1)
                if end < 0:
                    del self._buf[:start]
                    break
                raw = bytes(self._buf[start + 1:end])
                del self._buf[:end]     # the closing C0 may open the next frame
                if raw:
                    yield raw.replace(b'\xdb\xdc', b'\xc0').replace(b'\xdb\xdd', b'\xdb')

    def _send(self, payload):
        body = payload.replace(b'\xdb', b'\xdb\xdd').replace(b'\xc0', b'\xdb\xdc')
        os.write(self.master, b'\xc0' + body + b'\xc0')

    def _reply(self, op, value=0, data=b'', status=b'\x00\x00'):
        self._send(struct.pack('<BBHI', 1, op, len(data) + len(status), value) + data + status)

    # -- the chip ------------------------------------------------------------------
    def _run(self):
        frames = self._frames()
        for frame in frames:
            if len(frame) < 8 or frame[0] != 0:
                continue
            op, size = frame[1], struct.unpack_from('<H', frame, 2)[0]
            data = frame[8:8 + size]
            self.commands.append(op)
            if op == 0x08:                              # SYNC: the stub answers 0, eight times
                for _ in range(8):
                    self._reply(op)
            elif op == 0x0A:                            # READ_REG
                addr = struct.unpack_from('<I', data)[0]
                self._reply(op, self.magic if addr == 0x40001000 else 0)
            elif op in (0x09, 0x0B, 0x0D, 0x0F):        # WRITE_REG, SPI_SET_PARAMS, SPI_ATTACH, CHANGE_BAUDRATE
                self._reply(op)
            elif op == 0xD0:                            # ERASE_FLASH
                self.flash[:] = b'\xff' * len(self.flash)
                self._reply(op)
            elif op == 0x13:                            # SPI_FLASH_MD5
                addr, n = struct.unpack_from('<II', data)
                self._reply(op, data=hashlib.md5(self.flash[addr:addr + n]).digest())
            elif op == 0xD2:                            # READ_FLASH
                addr, n, block = struct.unpack_from('<III', data)
                self._reply(op)
                for off in range(addr, addr + n, block):
                    self._send(bytes(self.flash[off:min(off + block, addr + n)]))
                    next(frames, None)                  # the host's acknowledgement
                self._send(hashlib.md5(self.flash[addr:addr + n]).digest())
            elif op == 0x10:                            # FLASH_DEFL_BEGIN: size, blocks, block size, address
                size, _, _, addr = struct.unpack_from('<IIII', data)
                self.flash[addr:addr + size] = b'\xff' * size
                self._write = [addr, zlib.decompressobj(), 0, 0]
                self._reply(op)
            elif op == 0x11:                            # FLASH_DEFL_DATA: len, seq, 0, 0, data
                n = struct.unpack_from('<I', data)[0]
                w = self._write
                plain = w[1].decompress(data[16:16 + n])
                self.flash[w[0] + w[2]:w[0] + w[2] + len(plain)] = plain
                w[2] += len(plain)
                w[3] += 1
                if self.cut_after and self.cut_after == (w[0], w[3]):
                    self.pull_cable()
                    return
                self._reply(op)
            elif op == 0x12:                            # FLASH_DEFL_END
                if self._write:
                    self.written.append((self._write[0], self._write[2]))
                    self._write = None
                self._reply(op)
            else:
                self._reply(op, status=b'\x01\x05')     # "invalid command", as the ROM says

    def pull_cable(self):
        """The USB cable goes: the port's other end closes. (Our own fd on
        the port stays open until close(), so that the pty's number is not
        given to another program's new pty while esptool tries to reopen
        it.)"""
        self._stop = True
        try:
            os.close(self.master)
        except OSError:
            pass

    def close(self):
        self._stop = True
        self._thread.join(5)
        self.pull_cable()
        try:
            os.close(self._slave)
        except OSError:
            pass
