"""`companion image` and `companion flash`: their options, reading the files
they name, provisioning from the fleet folder, and what they print. The
image and the chip are make/image.py's and make/flash.py's."""
import os
import sys

from companion.errors import UserError
from companion.fleet import files as _files
from companion.make import image as _image
from companion.make.flash import check_firmware, flash_esp, flash_rp2, merged_image
from companion.make.image import GeometryError, build_image
from companion.commands.options import add_board_args, mqtt_of


def add_parsers(subparsers):
    add_image_parser(subparsers)
    add_flash_parser(subparsers)


def add_image_parser(subparsers):
    p = subparsers.add_parser("image", help="build a board's LittleFS filesystem image on the desktop")
    add_board_args(p)
    p.add_argument("-o", "--output", required=True, help="image file to write (e.g. fs.bin)")
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
    net = _prov.network_config(args.sync_port, args.peer, args.wifi, mqtt_of(args))
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
    try:
        s = build_image(args.board, args.board_id, args.output, prov.jobs_text(jobs_text), prov.secret, prov.pubkey,
                        prov.extra, flash_size=args.flash_size, compile=not args.no_compile,
                        frozen=args.frozen)
    except (GeometryError, KeyError, ValueError) as e:
        raise UserError("%s" % e)
    except OSError as e:
        raise UserError("cannot write %s: %s" % (args.output, e.strerror or e))
    prov.commit(how="imaged")
    note = _files.small_heap_note(args.board, args.frozen)
    if note:
        print(note, file=sys.stderr)
    print("%s: %d files, %d bytes, LittleFS %d x %d-byte blocks = 0x%x bytes for flash offset 0x%x"
          % (s["path"], len(s["files"]), s["used_bytes"], s["block_count"], s["block_size"],
             s["size"], s["offset"]))
    return 0


def read_firmware(path):
    """The bytes of a --firmware file; UserError when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise UserError("cannot read the firmware file %s: %s" % (path, e.strerror or e)) from e


def add_flash_parser(subparsers):
    p = subparsers.add_parser("flash", help="write MicroPython and a sporadic image to a board")
    p.add_argument("port", help="serial port (/dev/ttyUSB0, COM3); for the Pico W the RPI-RP2 drive folder or '-'")
    add_board_args(p)
    p.add_argument("--firmware", help="MicroPython firmware for the board (.bin; .uf2 for the Pico W)")
    p.add_argument("--erase", action="store_true",
                   help="erase the whole flash first; needed to replace a filesystem that holds jobs")
    p.add_argument("--baud", type=int, default=460800, help="esptool baud rate (default 460800)")
    p.add_argument("-o", "--output", help="Pico W: UF2 file to write; Espressif: write one merged "
                   "image for 0x0 here instead of flashing")
    p.set_defaults(func=flash_command)
    return p


def flash_command(args):
    b = _files.board_data(args.board) if args.board in _files.boards().names() else None
    if b is None:
        raise UserError("unknown board %r (known: %s)" % (args.board, ", ".join(_files.boards().names())))
    firmware = None
    if args.firmware:
        firmware = read_firmware(args.firmware)
    if firmware is not None:  # before provisioning touches the fleet
        check_firmware(b, firmware, os.path.basename(args.firmware))
    # the fleet changes only once the chip (or the output file) is written:
    # prepared here, committed at the end
    jobs_text, secret, pubkey, extra, prov = ("", None, None, None, None)
    if args.board_id:
        jobs_text, prov = provision(args, b["name"])
        jobs_text, secret, pubkey, extra = prov.jobs_text(jobs_text), prov.secret, prov.pubkey, prov.extra
    compile = not args.no_compile
    note = _files.small_heap_note(b, args.frozen) if args.board_id else ""
    if note:
        print(note, file=sys.stderr)
    try:
        if b["chip"] == "unix":
            raise UserError("the unix board has no flash: use `companion image --board unix` "
                            "or a virtual board")
        if b.get("firmware_format") == "uf2":
            flash_rp2(args.port, b, firmware, args.board_id, args.erase, args.output,
                      jobs_text, secret, pubkey, compile, extra=extra, frozen=args.frozen)
        elif args.output:
            if firmware is not None:
                check_firmware(b, firmware, args.firmware)
            fs = None
            if args.board_id:
                geom = _image.check_geometry(b, flash_size=args.flash_size)
                fs = _image.image_bytes(geom, _files.all_files(b, args.board_id, jobs_text, secret,
                                                               pubkey, extra, compile, args.frozen))
            merged_image(b, firmware, fs, args.output)
            print("wrote %s: write it at 0x0 with esptool write-flash 0x0 %s" % (args.output, args.output))
        else:
            s = flash_esp(args.port, b, firmware, args.board_id, args.erase, args.baud,
                          jobs_text, secret, pubkey, compile, extra=extra, frozen=args.frozen)
            print("flashed %s (%s): %s" % (s["port"], s["chip"],
                                           ", ".join("%d bytes at %s" % (n, a) for a, n in s["written"])))
    except ValueError as e:  # GeometryError, "nothing to do" (FirmwareMismatch is a UserError already)
        if isinstance(e, UserError):
            raise
        raise UserError(str(e)) from e
    if prov is not None:   # written: the chip, the UF2 or the merged image holds the board's secret
        prov.commit(None if args.port == "-" else args.port, how="flashed")
    return 0
