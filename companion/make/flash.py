"""Put MicroPython and a sporadic filesystem image on a real board.

Espressif chips (esp32, esp32s3, esp8266): esptool's Python API (v5 names:
detect_chip, run_stub, attach_flash, detect_flash_size, read_flash,
erase_flash, write_flash, reset_chip, merge_bin). Raspberry Pi Pico W: a UF2
file of the image (RP2040 family id, blocks at XIP 0x10000000 + filesystem
offset), optionally joined with MicroPython's UF2, copied to a mounted
RPI-RP2 drive or loaded with picotool when present.

Safety: the firmware file must be for the board's chip (header chip id, read
with esptool's image parsing; UF2 family id); the firmware must end before the
filesystem; a filesystem holding jobs (a LittleFS with a non-empty jobs.txt
or log.txt, or data that is not a LittleFS at all) is never overwritten
without --erase: it is read back from the chip first.

    firmware_chip(data) -> "esp32" | "esp32s3" | "esp8266" | "rp2040" | ... | None
    check_firmware(board, data) -> chip              raises FirmwareMismatch
    fs_state(data, geom) -> ("blank"|"micropython"|"jobs"|"unknown", detail)
    to_uf2, parse_uf2, join_uf2: make/uf2.py
    merged_image(board, firmware, fs_image, out_path) -> bytes  (esptool merge_bin)
    flash_esp(...), flash_rp2(...)    (the verb, `companion flash`: commands/make.py)
"""
import contextlib
import os
import shutil
import struct
import subprocess
import tempfile

from companion.fleet import files as _files
from companion.make import image as _image
from companion.errors import UserError
from companion.make.uf2 import (RP2040_FAMILY, UF2_FAMILIES, UF2_FLAG_FAMILY, UF2_MAGIC0, UF2_MAGIC1, join_uf2,
                                to_uf2)

ESP_IMAGE_MAGIC = 0xE9


class FirmwareMismatch(UserError, ValueError):
    """The firmware file is not for this board."""


class FilesystemInUse(UserError, RuntimeError):
    """The board's filesystem holds data and --erase was not given."""


class FlashFailed(UserError):
    """The chip or its line failed (esptool's FatalError, pyserial's
    SerialException): the message says what was written and what was not."""


# ---- what a firmware file is for -------------------------------------------

def _norm_chip(name):
    return name.lower().replace("-", "").replace("(", "").replace(")", "") if name else name


def firmware_chip(data):
    """The chip a firmware file is built for, from its header, or None."""
    if len(data) >= 512 and struct.unpack_from("<II", data, 0) == (UF2_MAGIC0, UF2_MAGIC1):
        flags, fam = struct.unpack_from("<I", data, 8)[0], struct.unpack_from("<I", data, 28)[0]
        if flags & UF2_FLAG_FAMILY:
            return UF2_FAMILIES.get(fam, "uf2-family-0x%08x" % fam)
        return "uf2"
    if len(data) < 24 or data[0] != ESP_IMAGE_MAGIC:
        return None
    from esptool.bin_image import LoadFirmwareImage
    from esptool.targets import CHIP_DEFS
    # ESP32-family images carry an extended header after the 8-byte common
    # header: WP pin (0xEE when unused), chip id at byte 12, hash flag at 23.
    if data[8] == 0xEE and data[23] in (0, 1):
        chip_id = struct.unpack_from("<H", data, 12)[0]
        for name, rom in CHIP_DEFS.items():
            if name != "esp8266" and getattr(rom, "IMAGE_CHIP_ID", None) == chip_id:
                try:
                    LoadFirmwareImage(name, data)
                except Exception:
                    return None
                return name
        return None
    try:
        LoadFirmwareImage("esp8266", data)
    except Exception:
        return None
    return "esp8266"


def check_firmware(board, data, name="firmware"):
    """The chip of `data` when it suits `board`; FirmwareMismatch otherwise,
    also when it would run into the filesystem."""
    b = _files.board_data(board)
    want = b["chip"]
    got = firmware_chip(data)
    if got is None:
        raise FirmwareMismatch("%s is not a MicroPython image esptool or UF2 can read "
                               "(board %s wants %s for %s)" % (name, b["name"], _kind(b), want))
    if got != want:
        raise FirmwareMismatch("%s is built for %s, but board %s is %s: get MicroPython's %s %s"
                               % (name, got, b["name"], want, b.get("micropython_board", want), _kind(b)))
    if b.get("firmware_format") != "uf2":
        end = b["firmware_offset"] + len(data)
        if end > b["fs"]["offset"]:
            raise FirmwareMismatch("%s ends at 0x%x, inside the filesystem at 0x%x (wrong board or flash size?)"
                                   % (name, end, b["fs"]["offset"]))
    return got


def _kind(b):
    return ".uf2" if b.get("firmware_format") == "uf2" else ".bin"


# ---- what a filesystem region holds ------------------------------------------

def fs_state(data, geom):
    """Classify a filesystem region read back from a board:
    blank (all 0xff), micropython (a LittleFS without jobs), jobs (a
    LittleFS with a non-empty jobs.txt or log.txt) or unknown."""
    if _image.looks_empty(data):
        return "blank", "erased"
    try:
        found = _image.read_image(data, geom)
    except Exception as e:
        return "unknown", "not a LittleFS of this geometry (%s)" % e
    busy = [p for p in ("/jobs.txt", "/log.txt") if found.get(p)]
    if busy:
        lines = sum(found[p].count(b"\n") for p in busy)
        return "jobs", "%s (%d lines)" % (" and ".join(busy), lines)
    return "micropython", "%d files, no jobs" % len(found)


def _guard(state, detail, where):
    if state in ("jobs", "unknown"):
        raise FilesystemInUse(
            "the filesystem at %s holds %s: not overwritten. Sync it first "
            "(companion sync PORT) so its results reach the fleet, then run again with --erase."
            % (where, detail))


# ---- Espressif ----------------------------------------------------------------

def merged_image(board, firmware, fs_image, out_path):
    """One file to write at 0x0 holding MicroPython at its offset and the
    filesystem image at its offset (esptool merge_bin, raw)."""
    import esptool.cmds as ec
    b = _files.board_data(board)
    parts = []
    if firmware is not None:
        parts.append((b["firmware_offset"], firmware))
    if fs_image is not None:
        parts.append((b["fs"]["offset"], fs_image))
    ec.merge_bin(parts, chip=b["chip"], output=out_path)
    with open(out_path, "rb") as f:
        return f.read()


def _size_text(nbytes):
    return "%dMB" % (nbytes >> 20)


# Refusals after the chip answered: it is reset into the firmware it had.
_REFUSALS = (FirmwareMismatch, FilesystemInUse, ValueError)  # GeometryError is a ValueError


def _line_errors():
    """What esptool and pyserial raise when the chip or its line fails."""
    import serial
    from esptool.util import FatalError
    return (FatalError, serial.SerialException, OSError)


def _first_line(e):
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0]


@contextlib.contextmanager
def _esptool_on_stdout():
    """esptool's messages (its warnings too) go to stdout while we flash:
    stderr carries only companion's own one-line error (esptool's "Custom
    Logger" recipe: log.set_logger with a TemplateLogger)."""
    from esptool.logger import TemplateLogger, log
    from esp_pylib.logger import EspLog

    class ToStdout(TemplateLogger):
        def print(self, *args, **kwargs):
            print(*args, sep=kwargs.get("sep", " "), end=kwargs.get("end", "\n"), flush=True)

        def note(self, message):
            print("Note: %s" % message)

        def warning(self, message):
            print("Warning: %s" % message)

        def error(self, message):
            print("Error: %s" % message)

        def stage(self, finish=False):
            pass

        def progress_bar(self, cur_iter, total_iters, prefix="", suffix="", bar_length=30):
            pct = 100 * cur_iter // max(1, total_iters)
            print("\r%s%3d%%%s" % (prefix, pct, suffix), end="\n" if cur_iter >= total_iters else "", flush=True)

        def set_verbosity(self, verbosity):
            pass

    before = EspLog.instance
    mine = ToStdout()
    log.set_logger(mine)
    # esptool's reset warning ("Chip was NOT reset", on a port without
    # RTS/DTR) is bound to the logger of its import time
    from esptool import reset
    once = getattr(reset.ResetStrategy, "print_once", None)
    callback = getattr(once, "print_callback", None)
    if callback is not None:
        once.print_callback = mine.warning
    try:
        yield
    finally:
        EspLog.instance = before
        if callback is not None:
            once.print_callback = callback


def _connect_esp(ec, port):
    """esptool's detect_chip; a port that does not open, or nothing that
    answers as an Espressif ROM loader, is one FlashFailed line."""
    from esptool.util import FatalError
    from companion.link.ports import open_failure
    try:
        return ec.detect_chip(port, baud=115200)
    except _line_errors() as e:
        if isinstance(e, FatalError) and not _first_line(e).startswith("Could not open"):
            raise FlashFailed("no Espressif chip answers on %s (esptool: %s): hold the board's BOOT button "
                              "while pressing RESET (or while plugging it in) and run again; nothing was written"
                              % (port, _first_line(e))) from e
        # esptool's words wrap pyserial's: ask the port why, as the serial link does
        raise FlashFailed(str(open_failure(port, None if isinstance(e, FatalError) else e))) from e


def _reset(ec, esp, log):
    """Hard reset (esptool's RTS pulse): the chip leaves its ROM loader or the
    flasher stub and boots what its flash holds."""
    try:
        ec.reset_chip(esp, "hard-reset")
    except Exception as e:  # the line is gone too: it boots at its next power-up
        log("note: the chip could not be reset (%s): press its RESET button" % _first_line(e))


def _regions_text(regions):
    return "; ".join("%s at 0x%x (%d bytes)" % (label, addr, len(data)) for label, addr, data in regions) \
        or "nothing"


def _cut_message(port, regions, done, erased, current, e):
    """What a write cut short left on the chip, in one line. current: the
    region being written (None: the erase)."""
    todo = [r for r in regions if r not in done]
    where = ("while erasing the flash" if current is None else
             "while writing %s at 0x%x" % (current[0], current[1]))
    msg = "flashing %s failed %s (%s: %s): " % (port, where, type(e).__name__, _first_line(e))
    if current is None:
        msg += "the flash may be partly erased; "
    elif erased:
        msg += "the whole flash was erased first; "
    msg += "written and verified: %s; not written: %s" % (_regions_text(done), _regions_text(todo))
    if current is not None:
        msg += " (0x%x may be partly written)" % current[1]
    return msg + "; the board may not boot until a flash completes: run the same `companion flash` again"


def flash_esp(port, board, firmware=None, board_id=None, erase=False, baud=460800,
              jobs_text="", secret=None, pubkey=None, compile=True, log=print, extra=None, frozen=False):
    """Write MicroPython and/or the sporadic image to an Espressif board on
    `port`. Returns a summary dict. Raises FirmwareMismatch, FilesystemInUse
    (after resetting the chip into the firmware it had), FlashFailed (the
    port, the chip or the line failed: it says which regions were written
    and verified and which not; each region is one esptool write_flash,
    checked by its MD5 before the next)."""
    import esptool.cmds as ec
    b = _files.board_data(board)
    if firmware is not None:
        check_firmware(b, firmware)
    if firmware is None and board_id is None:
        raise ValueError("nothing to do: give --firmware and/or --id")
    if erase and firmware is None:
        raise ValueError("--erase erases MicroPython too: give --firmware as well")
    with _esptool_on_stdout():
        return _flash_esp(ec, b, port, firmware, board_id, erase, baud, jobs_text, secret, pubkey, compile,
                          log, extra, frozen)


def _flash_esp(ec, b, port, firmware, board_id, erase, baud, jobs_text, secret, pubkey, compile, log, extra,
               frozen):
    esp = _connect_esp(ec, port)
    regions, done, erased, current = [], [], False, None
    try:
        try:
            chip = _norm_chip(esp.CHIP_NAME)
            if chip != b["chip"]:
                raise FirmwareMismatch("the chip on %s is %s, but board %s is %s: choose --board for this chip"
                                       % (port, esp.CHIP_NAME, b["name"], b["chip"]))
            esp = ec.run_stub(esp)
            if baud and baud != 115200:
                esp.change_baud(baud)
            ec.attach_flash(esp)
            detected = ec.detect_flash_size(esp)
            flash_size = _image.flash_bytes(detected) if detected else None
            if flash_size and flash_size != b.get("flash_size"):
                log("note: %s has %s of flash (board.json says %s): filesystem sized for %s"
                    % (port, detected, _size_text(b["flash_size"]), detected))
            geom = _image.check_geometry(b, flash_size=flash_size)
            fs = None
            if board_id is not None:
                fs = _image.image_bytes(geom, _files.all_files(b, board_id, jobs_text, secret, pubkey, extra,
                                                               compile, frozen))
            state = None
            if fs is not None and not erase:
                head = ec.read_flash(esp, geom["offset"], 2 * geom["block_size"], no_progress=True)
                state, detail = ("blank", "erased") if _image.looks_empty(head) else (None, None)
                if state is None:
                    whole = ec.read_flash(esp, geom["offset"], geom["size"])
                    state, detail = fs_state(whole, geom)
                _guard(state, detail, "%s 0x%x" % (port, geom["offset"]))
                log("filesystem at 0x%x: %s (%s), replacing it" % (geom["offset"], state, detail))
        except _REFUSALS:
            _reset(ec, esp, log)  # back into the firmware it had, not left in the stub
            raise
        except _line_errors() as e:
            _reset(ec, esp, log)
            raise FlashFailed("flashing %s stopped before anything was written (%s: %s): the board keeps "
                              "its old firmware; check the cable and run again"
                              % (port, type(e).__name__, _first_line(e))) from e
        if firmware is not None:
            regions.append(("MicroPython", b["firmware_offset"], firmware))
        if fs is not None:
            regions.append(("the filesystem", geom["offset"], fs))
        try:
            if erase:
                log("erasing the whole flash")
                ec.erase_flash(esp)
                erased = True
            for region in regions:
                current = region
                ec.write_flash(esp, [(region[1], region[2])], flash_size="keep")
                done.append(region)
        except _line_errors() as e:
            raise FlashFailed(_cut_message(port, regions, done, erased, current, e)) from e
        _reset(ec, esp, log)
    finally:
        try:
            esp._port.close()
        except Exception:
            pass
    return {"port": port, "chip": chip, "flash_size": geom["flash_size"], "previous": state,
            "written": [(hex(a), len(d)) for _, a, d in regions]}


# ---- Raspberry Pi Pico W -------------------------------------------------------

def _is_uf2_drive(path):
    return os.path.isdir(path) and os.path.isfile(os.path.join(path, "INFO_UF2.TXT"))


def _picotool_read(geom, xip_base):
    exe = shutil.which("picotool")
    if not exe:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "fs.bin")
        start = xip_base + geom["offset"]
        cmd = [exe, "save", "-r", "0x%x" % start, "0x%x" % (start + geom["size"]), out]
        if subprocess.run(cmd, capture_output=True).returncode != 0:
            return None
        with open(out, "rb") as f:
            return f.read()


def _picotool_reboot(log):
    """Leave BOOTSEL: the board runs the firmware it holds."""
    try:
        subprocess.run(["picotool", "reboot"], capture_output=True, check=False)
    except OSError as e:
        log("note: the board could not be rebooted (%s): unplug it and plug it in again" % e)


def flash_rp2(port, board, firmware=None, board_id=None, erase=False, out_path=None,
              jobs_text="", secret=None, pubkey=None, compile=True, log=print, extra=None, frozen=False):
    """Make the UF2 for a Pico W (MicroPython's UF2 joined with the
    filesystem's when both are given) and put it on the board: copy it to
    `port` when that is the mounted RPI-RP2 drive, or `picotool load` it.
    Without --erase the old filesystem is read back with picotool first; with
    no way to read it back the UF2 is written to a file and not loaded."""
    b = _files.board_data(board)
    xip = b.get("xip_base", 0x10000000)
    family = b.get("uf2_family_id", RP2040_FAMILY)
    if firmware is not None:
        check_firmware(b, firmware)
    geom = _image.check_geometry(b)
    parts = []
    if firmware is not None:
        parts.append(firmware)
    if board_id is not None:
        fs = _image.image_bytes(geom, _files.all_files(b, board_id, jobs_text, secret, pubkey, extra, compile,
                                                                         frozen))
        parts.append(to_uf2(fs, xip + geom["offset"], family))
    if not parts:
        raise ValueError("nothing to do: give --firmware and/or --id")
    uf2 = join_uf2(*parts) if len(parts) > 1 else parts[0]
    out_path = out_path or "%s-%s.uf2" % (board_id or "micropython", b["name"])
    with open(out_path, "wb") as f:
        f.write(uf2)
    log("wrote %s (%d UF2 blocks)" % (out_path, len(uf2) // 512))
    result = {"uf2": out_path, "loaded": False, "previous": None}
    if board_id is not None and not erase:
        old = _picotool_read(geom, xip)
        if old is None:
            log("the filesystem cannot be read back (no picotool, or the board is not in BOOTSEL mode):\n"
                "  not loading. If the board holds no jobs you need, copy %s to the RPI-RP2 drive\n"
                "  yourself, or run again with --erase." % out_path)
            return result
        state, detail = fs_state(old, geom)
        result["previous"] = state
        try:
            _guard(state, detail, "the Pico W at 0x%x" % (xip + geom["offset"]))
        except FilesystemInUse:
            _picotool_reboot(log)  # out of BOOTSEL, back into the firmware it had
            raise
    what = "%s (%s)" % (out_path, " and ".join(
        (["MicroPython"] if firmware is not None else []) +
        (["the filesystem at 0x%x" % (xip + geom["offset"])] if board_id is not None else [])))
    if port and _is_uf2_drive(port):
        try:
            shutil.copyfile(out_path, os.path.join(port, os.path.basename(out_path)))
        except OSError as e:
            raise FlashFailed("copying %s to %s failed (%s): the board takes a UF2 only when it is whole, "
                              "so it may hold part of it; it may not boot until a copy completes: run again"
                              % (what, port, e.strerror or e)) from e
        log("copied to %s: the board reboots into MicroPython and sporadic" % port)
        result["loaded"] = True
    elif shutil.which("picotool"):
        p = subprocess.run(["picotool", "load", "-v", out_path], capture_output=True, text=True)
        if p.returncode != 0:
            why = (p.stderr or p.stdout).strip().splitlines()[-1:] or ["exit status %d" % p.returncode]
            raise FlashFailed("picotool load of %s failed (%s): part of it may be written; the board may "
                              "not boot until a load completes: run again with the board in BOOTSEL mode"
                              % (what, why[0])) from None
        subprocess.run(["picotool", "reboot"], check=False)
        result["loaded"] = True
    else:
        log("to flash: hold BOOTSEL while plugging the board in, then copy %s to the RPI-RP2 drive\n"
            "  (or give that drive's folder as PORT)" % out_path)
    return result
