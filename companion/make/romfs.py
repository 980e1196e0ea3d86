"""A ROMFS image of the firmware package, for a MicroPython firmware with a
ROMFS partition (the stock ESP8266_GENERIC FLASH_2M_ROMFS download,
MicroPython 1.25+): its `.mpy` files run in place from flash, so their
bytecode costs no heap, as frozen code (#31; docs/hardware.md#frozen-firmware).

    romfs_image(board, cfg=None) -> bytes

The package files `companion.fleet.files` gives the board (the modules its
/cfg.json settings use), under /lib/sporadic/ in the image, and the board
module as /lib/board.mpy (as boards/<name>/manifest.py freezes it), which
the firmware mounts at /rom: /rom and /rom/lib come before /lib on its
sys.path (mp_init() mounts the partition and appends both, the ESP8266
port's main() then /lib), so the filesystem image goes without
/lib/sporadic (as with --frozen) and `companion deploy` finds the package
in ROM and writes none either. The board module's copy that both still
write to /lib (`--frozen`'s file list) is the one a firmware without this
image imports; with it, the ROM's comes first: its bytecode and names
stay in flash (#31: 2-3 KB of a 32-bit heap, docs/budgets.md#31). The
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
    # what the filesystem holds beside a firmware with the package, less
    # the board module: the image carries it too
    held = {p for p, _ in _files.firmware_files(board, compile, frozen=True, cfg=cfg)} - {"/lib/board.mpy"}
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
