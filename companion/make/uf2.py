"""UF2 files (the Raspberry Pi Pico's drag-and-drop format): made by esptool's
UF2Writer, read and joined here. make/flash.py writes a Pico W's image as one."""
import os
import struct
import tempfile

UF2_MAGIC0 = 0x0A324655  # "UF2\n"
UF2_MAGIC1 = 0x9E5D5157
UF2_MAGIC_END = 0x0AB16F30
UF2_FLAG_FAMILY = 0x00002000
UF2_PAYLOAD = 256
RP2040_FAMILY = 0xE48BFF56
UF2_FAMILIES = {RP2040_FAMILY: "rp2040", 0xE48BFF59: "rp2350-arm-s", 0xE48BFF5B: "rp2350-arm-ns",
                0xE48BFF5A: "rp2350-riscv", 0xE48BFF57: "rp2040-absolute", 0xE48BFF58: "rp2040-data",
                0x1C5F21B0: "esp32", 0xC47E5767: "esp32s3", 0x7EAB61ED: "esp8266"}


def to_uf2(data, address, family_id=RP2040_FAMILY):
    """UF2 blocks for data at a flash address, written by esptool's UF2Writer:
    256-byte payloads (what the RP2040 boot ROM takes: the last one padded
    with erased flash, 0xff), the family id, no MD5 extension."""
    from esptool.uf2_writer import UF2Writer
    pad = (-len(data)) % UF2_PAYLOAD
    with tempfile.TemporaryDirectory(prefix="sporadic-uf2-") as d:
        path = os.path.join(d, "part.uf2")
        with UF2Writer(family_id, path, UF2_PAYLOAD, md5_enabled=False) as w:
            w.add_file(address, bytes(data) + b"\xff" * pad)
        with open(path, "rb") as f:
            return f.read()


def parse_uf2(data):
    """[(address, payload, family_id)] of a UF2 file; ValueError on a bad block."""
    if len(data) % 512:
        raise ValueError("UF2 length %d is not a multiple of 512" % len(data))
    blocks = []
    for off in range(0, len(data), 512):
        m0, m1, flags, addr, size, no, count, fam = struct.unpack_from("<8I", data, off)
        end = struct.unpack_from("<I", data, off + 508)[0]
        if (m0, m1, end) != (UF2_MAGIC0, UF2_MAGIC1, UF2_MAGIC_END) or size > 476:
            raise ValueError("bad UF2 block at byte %d" % off)
        if no >= count:
            raise ValueError("UF2 block number %d of %d at byte %d" % (no, count, off))
        blocks.append((addr, bytes(data[off + 32: off + 32 + size]), fam if flags & UF2_FLAG_FAMILY else None))
    return blocks


def join_uf2(*files):
    """One UF2 from several (renumbered), e.g. MicroPython + a filesystem."""
    blocks = [b for f in files for b in parse_uf2(f)]
    out = bytearray()
    for i, (addr, payload, fam) in enumerate(blocks):
        out += struct.pack("<8I", UF2_MAGIC0, UF2_MAGIC1, UF2_FLAG_FAMILY if fam is not None else 0,
                           addr, len(payload), i, len(blocks), fam or 0)
        out += payload.ljust(476, b"\x00") + struct.pack("<I", UF2_MAGIC_END)
    return bytes(out)
