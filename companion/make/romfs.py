"""A ROMFS image of the firmware package, for a MicroPython firmware with a
ROMFS partition (the stock ESP8266_GENERIC FLASH_2M_ROMFS download,
MicroPython 1.25+): its `.mpy` files run in place from flash, so their
bytecode costs no heap, as frozen code (#31; docs/hardware.md#frozen-firmware).

    romfs_image(board, cfg=None) -> bytes

The package files `companion.fleet.files` gives the board (the modules its
/cfg.json settings use), under /lib/sporadic/ in the image, which the
firmware mounts at /rom: /rom/lib is on its sys.path after /lib, so the
filesystem image goes without /lib/sporadic (as with --frozen) and
`companion deploy` finds the package in ROM and writes none either. The
image is built by mpremote's ROMFS builder; `mpremote romfs deploy` writes
it to a board (or esptool at the partition's flash offset, board.json
`romfs`: 0xB0000 on an ESP8266).
"""
import contextlib
import io
import os
import tempfile

from companion.fleet import files as _files


class RomfsError(ValueError):
    """The image would not fit the board's ROMFS partition."""


def romfs_image(board, cfg=None, compile=True):
    """Bytes of the ROMFS image of the board's package files (see the top);
    RomfsError when the board's partition (board.json `romfs`) is smaller."""
    data = _files.board_data(board)
    img = _build(board, cfg, compile)
    part = data.get("romfs")
    if part and len(img) > part["size"]:
        raise RomfsError("the ROMFS image is %d bytes, the %s's partition %d"
                         % (len(img), data["name"], part["size"]))
    return img


def _build(board, cfg, compile):
    from mpremote import romfs
    held = {p for p, _ in _files.firmware_files(board, compile, frozen=True, cfg=cfg)}
    with tempfile.TemporaryDirectory() as tmp:
        for path, body in _files.firmware_files(board, compile, cfg=cfg, under="/rom"):
            if path in held:
                continue
            dest = os.path.join(tmp, path.lstrip("/"))
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with open(dest, "wb") as f:
                f.write(body)
        with contextlib.redirect_stdout(io.StringIO()):   # the builder prints the tree
            return romfs.make_romfs(tmp, mpy_cross=False)
