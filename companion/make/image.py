"""A board's whole filesystem, built on the desktop: a LittleFS v2 image of
exactly the board's filesystem region (board.json `fs`), holding the files of
companion.fleet.files (firmware, board module, /cfg.json) and /jobs.txt.

    geometry(board, flash_size=None) -> dict     offset, size, block_size, block_count, ...
    check_geometry(board, block_size=None, block_count=None, flash_size=None) -> dict
    image_bytes(geom, files) -> bytes            the image, len == geom["size"]
    read_image(data, geom) -> {path: bytes}      every file in an image
    build_image(board, board_id, out_path, jobs_text, secret=..., pubkey=...) -> summary

Any geometry problem raises GeometryError before a byte is written.
CLI: add_image_parser(subparsers), image_command(args).
"""
import json
import os
import sys

import littlefs

from companion.fleet import files as _files
from companion.errors import UserError


class GeometryError(ValueError):
    """The image would not match the board's filesystem region."""


def _parse_size(text):
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
        flash_size = _parse_size(flash_size)
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


def _lfs(geom, data=None):
    kw = dict(
        block_size=geom["block_size"],
        block_count=geom["block_count"],
        read_size=geom["read_size"],
        prog_size=geom["prog_size"],
        lookahead_size=geom["lookahead"],
        name_max=geom["name_max"],
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
    tmp = out_path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, out_path)
    summary = dict(geom)
    summary.update({
        "id": board_id,
        "path": out_path,
        "files": [(p, len(b)) for p, b in file_list],
        "used_bytes": sum(len(b) for _, b in file_list),
    })
    return summary


# ---- CLI -------------------------------------------------------------------

def add_common_args(p):
    p.add_argument("--board", required=True, help="board name: " + ", ".join(_files.boards().names()))
    p.add_argument("--id", dest="board_id", help="the board's id (its name in the fleet)")
    p.add_argument("--jobs", help="job file to put on the board (default: the fleet's jobs.txt if any)")
    p.add_argument("--secret", help="per-device secret as the fleet keeps it (default: the fleet's, created once)")
    p.add_argument("--pubkey", help="companion public key file (default: the fleet's fleet.pub)")
    p.add_argument("--flash-size", help="flash size when it differs from board.json (e.g. 4MB, 16MB)")
    p.add_argument("--no-compile", action="store_true", help="copy .py sources instead of .mpy")
    p.add_argument("--frozen", action="store_true",
                   help="the MicroPython firmware has sporadic frozen in (boards/<name>/manifest.py): "
                        "leave /lib/sporadic out")
    from companion.fleet.queries import add_network_args, add_position_args
    add_network_args(p)
    add_position_args(p)


def add_image_parser(subparsers):
    p = subparsers.add_parser("image", help="build a board's LittleFS filesystem image on the desktop")
    add_common_args(p)
    p.add_argument("-o", "--output", required=True, help="image file to write (e.g. fs.bin)")
    p.add_argument("--romfs", metavar="FILE",
                   help="also write the firmware package as a ROMFS image to FILE, for a MicroPython with a "
                        "ROMFS partition (ESP8266_GENERIC FLASH_2M_ROMFS): its .mpy run from flash; "
                        "the filesystem image then leaves /lib/sporadic out")
    p.set_defaults(func=image_command)
    return p


def _fleet_dir(args):
    return getattr(args, "fleet", None) or os.environ.get("SPORADIC_FLEET") or "."


def provision(args, board_name):
    """(jobs_text, provision.Provision) for a board's image or flash, as
    `companion deploy` provisions it (companion/fleet/provision.py): from the
    fleet folder when there is one (its jobs.txt, the device's secret, the
    fleet's public key and fleet key, the replay floor), overridden by
    --jobs, --secret, --pubkey; the network of --sync-port, --peer, --wifi.
    Nothing of the fleet changes until the Provision's commit(), once the
    image or the chip is written. Without a fleet: only what the args give."""
    from companion.fleet import provision as _prov
    from companion.errors import UserError
    from companion.fleet.folder import Fleet, JOBS
    jobs_text, secret, pubkey = "", None, None
    f = Fleet(_fleet_dir(args))
    fleet = f if f.exists() else None
    if fleet is not None:
        jobs_path = fleet.path(JOBS)
        if os.path.isfile(jobs_path):
            with open(jobs_path) as fh:
                jobs_text = fh.read()
    if args.jobs:
        try:
            with open(args.jobs) as fh:
                jobs_text = fh.read()
        except OSError as e:
            raise UserError("job file %s: %s" % (args.jobs, e.strerror))
    if args.secret:
        secret = args.secret
    if args.pubkey:
        try:
            with open(args.pubkey) as fh:
                pubkey = fh.read().strip()
        except OSError as e:
            raise UserError("public key file %s: %s" % (args.pubkey, e.strerror))
    if fleet is None and secret is None:
        print("note: no fleet folder (%s) and no --secret: the board's results go unsigned"
              % _fleet_dir(args), file=sys.stderr)
    net = _prov.network_config(args.sync_port, args.peer, args.wifi)
    pos = _prov.position_config(args.lat, args.lon)
    return jobs_text, _prov.prepare(fleet, args.board_id, board_name, net, secret, pubkey, pos)


def image_command(args):
    if not args.board_id:
        raise UserError("companion image needs --id (the board's name in the fleet)")
    try:
        _files.board_data(args.board)
    except KeyError as e:
        raise UserError("%s" % e.args[0])
    jobs_text, prov = provision(args, args.board)
    romfs = getattr(args, "romfs", None)
    if romfs and not romfs.endswith((".img", ".romfs")):
        raise UserError("--romfs %s: name it FILE.img or FILE.romfs (what `mpremote romfs deploy` takes)" % romfs)
    try:
        if romfs:
            from companion.make.romfs import romfs_image, RomfsError
            try:
                rom = romfs_image(args.board, dict(prov.extra), compile=not args.no_compile)
            except RomfsError as e:
                raise UserError(str(e))
        s = build_image(args.board, args.board_id, args.output, prov.jobs_text(jobs_text), prov.secret, prov.pubkey,
                        prov.extra, flash_size=args.flash_size, compile=not args.no_compile,
                        frozen=args.frozen or bool(romfs))
        if romfs:
            with open(romfs + ".tmp", "wb") as f:
                f.write(rom)
            os.replace(romfs + ".tmp", romfs)
    except (GeometryError, KeyError, ValueError) as e:
        raise UserError("%s" % e)
    except OSError as e:
        raise UserError("cannot write %s: %s" % (e.filename or args.output, e.strerror or e))
    prov.commit(how="imaged")
    note = _files.small_heap_note(args.board, args.frozen or bool(romfs))
    if note:
        print(note, file=sys.stderr)
    print("%s: %d files, %d bytes, LittleFS %d x %d-byte blocks = 0x%x bytes for flash offset 0x%x"
          % (s["path"], len(s["files"]), s["used_bytes"], s["block_count"], s["block_size"],
             s["size"], s["offset"]))
    if romfs:
        part = _files.board_data(args.board).get("romfs")
        print("%s: ROMFS image, %d bytes (the firmware package; `mpremote romfs deploy %s`%s)"
              % (romfs, len(rom), romfs, ", or flash offset 0x%x" % part["offset"] if part else ""))
    return 0
