"""A board's whole filesystem, built on the desktop: a LittleFS v2 image of
exactly the board's filesystem region (board.json `fs`), holding the files of
companion.fleet.files (firmware, board module, /cfg.json) and /jobs.txt.

    geometry(board, flash_size=None) -> dict     offset, size, block_size, block_count, ...
    check_geometry(board, block_size=None, block_count=None, flash_size=None) -> dict
    image_bytes(geom, files) -> bytes            the image, len == geom["size"]
    read_image(data, geom) -> {path: bytes}      every file in an image
    build_image(board, board_id, out_path, jobs_text, secret=..., pubkey=...) -> summary

Any geometry problem raises GeometryError before a byte is written.
The verb (`companion image`) is commands/make.py.
"""

import littlefs

from companion.fleet import files as _files
from companion.fleet.atomic import atomic_write


class GeometryError(ValueError):
    """The image would not match the board's filesystem region."""


def flash_bytes(text):
    """'4MB', '4M', '4MiB', '0x400000', '4194304' -> bytes."""
    if text is None or isinstance(text, int):
        return text
    t = str(text).strip().upper().replace("IB", "B")
    for suffix, mult in (("KB", 1024), ("MB", 1 << 20), ("K", 1024), ("M", 1 << 20)):
        if t.endswith(suffix):
            return int(float(t[: -len(suffix)]) * mult)
    return int(t, 0)


def geometry(board, flash_size=None):
    """The filesystem region of a board, optionally for another flash size.

    Espressif ports put the filesystem from a fixed offset to the end of the
    (detected) flash, minus a reserved tail on the ESP8266; rp2 keeps a fixed
    size at the end of flash, so there the offset moves."""
    data = _files.board_data(board)
    fs = data["fs"]
    flash = data.get("flash_size") or (fs["offset"] + fs["size"])
    offset, size = fs["offset"], fs["size"]
    if flash_size is not None:
        flash_size = flash_bytes(flash_size)
        if data.get("port") == "rp2":
            offset = flash_size - size
        elif data.get("port") in ("esp32", "esp8266"):
            size = flash_size - fs.get("end_reserved", 0) - offset
        else:
            size = flash_size
        flash = flash_size
    bs = fs["block_size"]
    return {
        "board": data["name"],
        "flash_size": flash,
        "offset": offset,
        "size": size,
        "block_size": bs,
        "block_count": size // bs if bs else 0,
        "read_size": fs.get("read_size", 32),
        "prog_size": fs.get("prog_size", 32),
        "lookahead": fs.get("lookahead", 32),
        "name_max": fs.get("name_max", 255),
        "end_reserved": fs.get("end_reserved", 0),
        "firmware_offset": data.get("firmware_offset"),
    }


def check_geometry(board, block_size=None, block_count=None, flash_size=None):
    """geometry(...) after every consistency check; GeometryError otherwise.
    block_size/block_count, when given, must be what the board mounts."""
    g = geometry(board, flash_size)
    name, bs = g["board"], g["block_size"]
    if block_size is not None and block_size != bs:
        raise GeometryError("%s: MicroPython mounts its filesystem with %d-byte blocks, not %d"
                            % (name, bs, block_size))
    if bs <= 0 or bs % 512:
        raise GeometryError("%s: block size %d is not a multiple of 512" % (name, bs))
    if g["size"] <= 0:
        raise GeometryError("%s: a %d-byte flash leaves no room for a filesystem at 0x%x"
                            % (name, g["flash_size"], g["offset"]))
    if g["size"] % bs:
        raise GeometryError("%s: filesystem size %d is not a whole number of %d-byte blocks"
                            % (name, g["size"], bs))
    if g["offset"] % bs:
        raise GeometryError("%s: filesystem offset 0x%x is not block aligned" % (name, g["offset"]))
    if g["block_count"] < 8:
        raise GeometryError("%s: %d blocks is too small for LittleFS with the firmware"
                            % (name, g["block_count"]))
    if block_count is not None and block_count != g["block_count"]:
        raise GeometryError("%s: the filesystem has %d blocks of %d bytes (0x%x at 0x%x), not %d"
                            % (name, g["block_count"], bs, g["size"], g["offset"], block_count))
    if g["offset"] + g["size"] + g["end_reserved"] > g["flash_size"]:
        raise GeometryError("%s: filesystem 0x%x+0x%x runs past the %d-byte flash"
                            % (name, g["offset"], g["size"], g["flash_size"]))
    fw = g["firmware_offset"]
    if fw is not None and fw >= g["offset"] and g["board"] != "unix":
        raise GeometryError("%s: firmware offset 0x%x is inside the filesystem" % (name, fw))
    for k in ("read_size", "prog_size"):
        if bs % g[k]:
            raise GeometryError("%s: %s %d does not divide the block size" % (name, k, g[k]))
    return g


IMAGE_METADATA_MAX = 2048


def _metadata_max(geom):
    m = min(geom["block_size"], IMAGE_METADATA_MAX)
    ok = geom["block_size"] % m == 0 and m % geom["prog_size"] == 0 and m % geom["read_size"] == 0
    return m if ok else 0       # 0: littlefs's own (the whole block)


def _lfs(geom, data=None):
    kw = dict(
        block_size=geom["block_size"],
        block_count=geom["block_count"],
        read_size=geom["read_size"],
        prog_size=geom["prog_size"],
        lookahead_size=geom["lookahead"],
        name_max=geom["name_max"],
        # MicroPython's own (extmod/vfs_lfsx.c): the cache bounds the inline
        # files a board writes, and a smaller one reads them as corrupt (an
        # rp2 board's 306-byte wake.idx: LFS_ERR_CORRUPT with 256)
        cache_size=min(geom["block_size"], 4 * max(geom["read_size"], geom["prog_size"])),
        # each directory's log bounded at half a block while the image is
        # written (a board reads any log up to a block and writes its own
        # with the whole block): a look-up on the board CRCs the whole log of
        # each folder on the path, and an import makes four of them (the
        # folder, .py, .mpy, the open), so an rp2 image's module imports,
        # 256-byte commits two a file, cost ~25% fewer instructions
        # (docs/budgets.md#27)
        metadata_max=_metadata_max(geom),
    )
    # mount=False: littlefs-python would otherwise format what fails to mount
    if data is None:
        fs = littlefs.LittleFS(context=littlefs.UserContext(buffsize=geom["size"]), mount=False, **kw)
        fs.format()
    else:
        fs = littlefs.LittleFS(context=littlefs.UserContext(buffer=bytearray(data)), mount=False, **kw)
    fs.mount()
    return fs


def image_bytes(geom, file_list):
    """A formatted LittleFS holding file_list [(path, bytes)], exactly
    geom["size"] bytes, erased (0xff) where unused."""
    fs = _lfs(geom)
    try:
        for path, body in file_list:
            parent = path.rsplit("/", 1)[0]
            if parent:
                fs.makedirs(parent, exist_ok=True)
            with fs.open(path, "wb") as f:
                f.write(body)
    except littlefs.LittleFSError as e:
        need = sum(len(b) for _, b in file_list)
        raise GeometryError("%s: %d bytes of files do not fit in %d blocks of %d (%s)"
                            % (geom["board"], need, geom["block_count"], geom["block_size"], e))
    fs.unmount()
    data = bytes(fs.context.buffer)
    if len(data) != geom["size"]:
        raise GeometryError("image is %d bytes, the region %d" % (len(data), geom["size"]))
    return data


def read_image(data, geom):
    """{path: bytes} of every file in a LittleFS image (raises LittleFSError
    if it is not one)."""
    fs = _lfs(geom, data)
    out = {}
    for root, dirs, names in fs.walk("/"):
        for n in names:
            path = (root.rstrip("/") + "/" + n) if root != "/" else "/" + n
            with fs.open(path, "rb") as f:
                out[path] = f.read()
    return out


def looks_empty(data):
    return data.count(0xFF) == len(data)


def build_image(board, board_id, out_path, jobs_text="", secret=None, pubkey=None,
                extra=None, flash_size=None, block_size=None, block_count=None, compile=True,
                frozen=False):
    """Write the board's filesystem image to out_path; returns a summary
    {board, id, offset, size, block_size, block_count, files: [(path, len)],
    used_bytes}. Refuses a wrong geometry or files that do not fit before
    writing anything."""
    geom = check_geometry(board, block_size, block_count, flash_size)
    file_list = _files.all_files(board, board_id, jobs_text, secret, pubkey, extra, compile, frozen)
    data = image_bytes(geom, file_list)
    back = read_image(data, geom)
    for path, body in file_list:
        if back.get(path) != body:
            raise RuntimeError("image check failed: %s reads back wrong" % path)
    atomic_write(out_path, data)
    summary = dict(geom)
    summary.update({
        "id": board_id,
        "path": out_path,
        "files": [(p, len(b)) for p, b in file_list],
        "used_bytes": sum(len(b) for _, b in file_list),
    })
    return summary
