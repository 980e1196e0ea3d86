"""Boards, desktop-built images and flashing, without hardware.

- every board's facts match what the issue and MicroPython's sources say;
- every board module compiles with mpy-cross and runs on the unix port
  against a stand-in `machine`;
- every board's image mounts in the MicroPython unix port through
  vfs.VfsLfs2 on a file-backed block device of the board's geometry, and
  MicroPython reads every file back byte for byte (and writes to it);
- a wrong geometry is refused before anything is written;
- esptool runs for real: image-info of crafted ESP images, merge-bin
  layout of firmware + image; the chip check refuses a wrong firmware;
- the Pico W UF2 parses and its blocks land at the filesystem offset;
- the esptool flow (guard, erase, offsets) against an in-memory chip.
"""
import contextlib
import hashlib
import io
import json
import os
import subprocess
import sys

import pytest

import esptool.cmds as ec
from esptool.bin_image import (ESP32FirmwareImage, ESP32S3FirmwareImage,
                               ESP8266ROMFirmwareImage, ImageSegment)

from companion.fleet import files
from companion.make import flash, image, uf2
from tests.mpy import MICROPYTHON, ROOT
from sporadic.core import jobline

BOARDS = ["esp32", "esp32s3", "esp8266", "rp2-pico", "rp2-pico-w", "unix"]
DEVICE_BOARDS = ["esp32", "esp32s3", "esp8266", "rp2-pico", "rp2-pico-w"]
JOBS = "each 2026-12-01T06:00Z led blink 3 ; every=1d within=2h\n"
# what a board's store keeps of it: the machine line the image carries
JOBS_FILE = files.jobs_file(JOBS)[0][1]


def run_micropython(code, *argv, heap="256K"):
    p = subprocess.run([MICROPYTHON, "-X", "heapsize=" + heap, "-c", code] + list(argv),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    return p.stdout


# ---- board data ------------------------------------------------------------

def test_board_facts_match_the_issue_and_micropython():
    b = {n: files.boards().load(n) for n in BOARDS}
    assert sorted(files.boards().names()) == sorted(BOARDS)
    assert b["esp32"]["firmware_offset"] == 0x1000
    assert b["esp32s3"]["firmware_offset"] == 0x0
    for n in ("esp32", "esp32s3"):
        fs = b[n]["fs"]
        assert fs["offset"] == 0x200000 and fs["offset"] + fs["size"] == b[n]["flash_size"]
        assert fs["block_size"] == 4096 and fs["type"] == "littlefs2"
    e = b["esp8266"]
    assert e["fs"]["offset"] == 0x100000
    assert e["fs"]["offset"] + e["fs"]["size"] == e["flash_size"] - 20 * 1024
    assert e["heap_bytes"] == 38 * 1024
    p = b["rp2-pico-w"]
    assert (p["fs"]["offset"], p["fs"]["size"]) == (0x12C000, 848 * 1024)
    assert p["fs"]["offset"] + p["fs"]["size"] == p["flash_size"]
    assert p["uf2_family_id"] == 0xE48BFF56
    for n, d in b.items():
        assert d["name"] == n
        for key in ("chip", "fs", "heap_bytes", "sleep", "rtc_memory_bytes", "watchdog", "led", "sources"):
            assert key in d, (n, key)
        assert d["sources"] and all("micropython" in s or "uf2" in s for s in d["sources"])
        image.check_geometry(n)


def test_esp8266_geometry_follows_flashbdev_for_4mb():
    g = image.geometry("esp8266", "4MB")
    # flashbdev.py: (size - 20480) // 4096 - 256 blocks
    assert g["block_count"] == (4 * 1024 * 1024 - 20480) // 4096 - 256 == 763
    g = image.geometry("rp2-pico-w", "4MB")
    assert g["offset"] == 4 * 1024 * 1024 - 848 * 1024


@pytest.mark.parametrize("name", DEVICE_BOARDS)
def test_board_module_compiles_for_its_arch(name, tmp_path):
    data = files.boards().load(name)
    src = os.path.join(files.boards().folder(name), "board.py")
    mpy = files.compile_mpy(src, data["mpy_arch"], "board.py")
    assert mpy[0:1] == b"M"


FAKE_MACHINE = r'''
log = []
_mem = bytearray()
_dt = [None]
class Pin:
    OUT = 1
    def __init__(self, n, mode=None):
        self.n = n; self.v = 0
    def value(self, v=None):
        if v is None:
            return self.v
        self.v = v; log.append(("pin", self.n, v))
class WDT:
    def __init__(self, timeout=5000):
        log.append(("wdt", timeout))
    def feed(self):
        log.append(("feed",))
class RTC:
    def datetime(self, t=None):
        _dt[0] = t
    def memory(self, data=None):
        global _mem
        if data is None:
            return bytes(_mem)
        _mem = bytearray(data)
def unique_id():
    return b"\x01\x02\xab"
def lightsleep(ms):
    log.append(("light", ms))
def deepsleep(ms):
    log.append(("deep", ms)); raise SystemExit
def reset():
    log.append(("reset",))
class _Mem:
    def __init__(self):
        self.d = {}
    def __getitem__(self, a):
        return self.d.get(a, 0)
    def __setitem__(self, a, v):
        self.d[a] = v & 0xffffffff
mem32 = _Mem()
'''

FAKE_NEOPIXEL = r'''
import machine
class NeoPixel:
    def __init__(self, pin, n):
        self.pin = pin; self.px = [None] * n
    def __setitem__(self, i, v):
        self.px[i] = v
    def write(self):
        machine.log.append(("np", self.pin.n, self.px[0]))
'''

BOARD_DRIVE = r'''
import sys
sys.path.insert(0, sys.argv[3])   # the firmware (board modules use sporadic.mboard)
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[2])
import machine, board, json
out = {"name": board.NAME, "led": board.LED_PIN, "uid": board.unique_id()}
board.set_time(1796104800)  # 2026-12-01T06:00:00Z
out["dt"] = list(machine._dt[0])
board.led(True); board.led(False)
board.pin(5, 1); board.pin_toggle(5)
board.sleep_ms(1500)
board.wdt_feed()
board.pin(5, 0)                   # work since the feed, then a sleep (an action's)
board.sleep_ms(20000)
out["rtc"] = str(board.rtc_memory(b"abc"), "ascii")
if hasattr(board, "keep_time"):
    import time
    board.wdt_feed()                              # leaves the time in the scratch registers
    t = int(time.time())
    machine.mem32[board.WDT_SCRATCH - 4] = 1   # REASON: TIMER, as after a watchdog timeout
    machine._dt[0] = None
    board.keep_time()
    first = machine._dt[0]
    machine._dt[0] = None
    board.keep_time()                             # once: the registers were cleared
    out["kept"] = [t, list(first) if first else None, machine._dt[0]]
out["log"] = [list(x) for x in machine.log]
print(json.dumps(out))
'''


@pytest.mark.needs("micropython")
@pytest.mark.parametrize("name", DEVICE_BOARDS)
def test_board_module_runs_on_the_unix_port(name, tmp_path):
    (tmp_path / "machine.py").write_text(FAKE_MACHINE)
    (tmp_path / "neopixel.py").write_text(FAKE_NEOPIXEL)
    out = json.loads(run_micropython(BOARD_DRIVE, str(tmp_path), files.boards().folder(name),
                                     os.path.join(ROOT, "firmware")))
    data = files.boards().load(name)
    log = [tuple(x) for x in out["log"]]
    assert out["name"] == name and out["uid"] == "0102ab"
    assert out["led"] == data["led"]["pin"]
    # RTC gets the UTC date in the port's epoch (the unix port counts from 1970)
    assert out["dt"][:3] == [2026, 12, 1] and out["dt"][4:7] == [6, 0, 0]
    assert ("light", 1500) in log
    wdt = [x for x in log if x[0] == "wdt"]
    assert wdt == [("wdt", data["watchdog"]["timeout_ms"])]
    # with the watchdog running, sleeps are cut into pieces it survives
    after = log[log.index(wdt[0]):]
    pieces = [x[1] for x in after if x[0] == "light"]
    # each piece starts at a feed, whatever ran since the last one
    assert all(after[i - 1] == ("feed",) for i, x in enumerate(after) if x[0] == "light")
    feed_ms = data["watchdog"].get("feed_ms", data["watchdog"]["timeout_ms"] // 2)
    assert sum(pieces) == 20000 and max(pieces) == min(20000, feed_ms) and feed_ms < data["watchdog"]["timeout_ms"]
    if "kept" in out:
        # an RP2040: the time of the last feed, in the watchdog's scratch
        # registers, gives the time after its reset (once); the unix port's
        # ticks_ms does not start at the boot, so only a lower bound here
        now, kept, again = out["kept"]
        assert kept is not None and again is None, out["kept"]
    if data["led"]["kind"] == "neopixel":
        assert ("np", 48, [0, 12, 0]) in log
    else:
        on = 0 if data["led"]["active_low"] else 1
        assert log[0] == ("pin", data["led"]["pin"], on)
    assert ("pin", 5, 1) in log and ("pin", 5, 0) in log
    assert out["rtc"] == ("abc" if data["rtc_memory_bytes"] else "")


# ---- images ----------------------------------------------------------------

MOUNT = r'''
import os, sys, vfs, hashlib, binascii

sys.path.insert(0, sys.argv[5])
from vboard_blockdev import FileBlockDevice

path, bs, count, prog = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
dev = FileBlockDevice(path, bs, count)
vfs.mount(vfs.VfsLfs2(dev, progsize=prog), "/flash")

def walk(d):
    for e in os.ilistdir(d):
        p = d + "/" + e[0]
        if e[1] == 0x4000:
            walk(p)
        else:
            with open(p, "rb") as f:
                h = hashlib.sha256(f.read()).digest()
            print("F", p[6:], os.stat(p)[6], binascii.hexlify(h).decode())
walk("/flash")
st = os.statvfs("/flash")
print("S", st[0], st[2], st[3])
with open("/flash/log.txt", "w") as f:
    f.write("written on the unix port\n")
vfs.umount("/flash")
dev.f.close()
'''


@pytest.mark.needs("micropython")
@pytest.mark.parametrize("name", BOARDS)
def test_image_mounts_in_the_unix_port(name, tmp_path):
    out = str(tmp_path / "fs.bin")
    s = image.build_image(name, "pump-1", out, JOBS, secret=b"\x11" * 16,
                          pubkey={"n": "c0ffee", "e": 65537}, extra={"wifi": None})
    g = image.geometry(name)
    assert os.path.getsize(out) == g["size"] == s["block_count"] * s["block_size"]
    expect = dict(files.all_files(name, "pump-1", JOBS, b"\x11" * 16, {"n": "c0ffee", "e": 65537},
                                  {"wifi": None}))
    assert "/main.py" in expect and "/cfg.json" in expect and "/jobs.txt" in expect
    assert any(p.endswith(".mpy") for p in expect)
    if name != "unix":
        assert "/lib/board.mpy" in expect
    text = run_micropython(MOUNT, out, str(g["block_size"]), str(g["block_count"]), str(g["prog_size"]),
                           os.path.join(ROOT, "companion", "vboard", "onboard"))
    seen = {}
    for line in text.splitlines():
        if line.startswith("F "):
            _, path, size, digest = line.split()
            seen[path] = (int(size), digest)
        elif line.startswith("S "):
            _, bsize, blocks, free = line.split()
            assert (int(bsize), int(blocks)) == (g["block_size"], g["block_count"])
            assert 0 < int(free) < int(blocks)
    assert seen == {p: (len(b), hashlib.sha256(b).hexdigest()) for p, b in expect.items()}
    cfg = json.loads(expect["/cfg.json"])
    assert cfg["id"] == "pump-1" and cfg["secret"] == "11" * 16
    # and what MicroPython wrote, the desktop reads
    with open(out, "rb") as f:
        back = image.read_image(f.read(), g)
    assert back["/log.txt"] == b"written on the unix port\n"


LFS_BOOT = os.path.join(ROOT, "tests", "lfsboot.py")
STANDIN = os.path.join(ROOT, "tests", "standin")


def standins(folder):
    """tests/standin/*.py compiled into folder (.mpy only: compiling on the
    unix port would take the runtime's heap); returns folder."""
    for n in os.listdir(STANDIN):
        if n.endswith(".py"):
            with open(os.path.join(str(folder), n[:-3] + ".mpy"), "wb") as f:
                f.write(files.compile_mpy(os.path.join(STANDIN, n)))
    return str(folder)


@pytest.mark.needs("micropython")
@pytest.mark.parametrize("name", BOARDS)
def test_firmware_boots_from_the_image_and_runs_a_job(name, tmp_path):
    """The board's image, mounted as its root in the unix port,
    boots /lib/sporadic + /lib/board.mpy + /cfg.json and runs a due job."""
    import time as _time
    env = dict(os.environ)
    if name == "unix":
        due = 1796083200  # the unix board's virtual clock starts one minute later
        env.update(SPORADIC_CLOCK="step", SPORADIC_CLOCK_START=str(due + 60))
        host = "-"
    else:  # esp/rp2 board modules read the port's time.time(): the host's clock
        due = int(_time.time()) - 60
        host = standins(tmp_path)
    when = _time.strftime("%Y-%m-%dT%H:%MZ", _time.gmtime(due))
    out = str(tmp_path / "fs.bin")
    image.build_image(name, "pump-1", out, "each %s log hello ; within=1d\n" % when, secret=b"\x22" * 16)
    g = image.geometry(name)
    # 96K: this boot script, the LittleFS mount and the stand-ins are compiled
    # and held in the same heap; bench/heap_boards.py measures the runtime's own
    p = subprocess.run([MICROPYTHON, "-X", "heapsize=96K", LFS_BOOT, out, str(g["block_size"]),
                        str(g["block_count"]), str(g["prog_size"]), host],
                       capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert "ID pump-1" in p.stdout
    assert "MemoryError" not in p.stdout   # boot.main's last resort: printed, then a restart
    with open(out, "rb") as f:
        found = image.read_image(f.read(), g)
    records = b"".join(found.get(n, b"") for n in ("/log.txt", "/jobs.txt")).decode()
    assert any(" r pump-1 0 " in l and " ok " in l and l.endswith("hello") for l in records.splitlines()), records


def test_wrong_geometry_is_refused_before_writing(tmp_path):
    out = tmp_path / "fs.bin"
    with pytest.raises(image.GeometryError, match="4096-byte blocks"):
        image.build_image("esp32", "x", str(out), block_size=512)
    with pytest.raises(image.GeometryError, match="512 blocks"):
        image.build_image("esp32", "x", str(out), block_count=1024)
    with pytest.raises(image.GeometryError, match="do not fit"):
        image.build_image("esp8266", "x", str(out),
                          "".join("each 2026-12-01T06:00Z log x%d\n" % i for i in range(40000)))
    bad = dict(files.boards().load("esp32"))
    bad["fs"] = dict(bad["fs"], size=0x200000 + 4096)
    with pytest.raises(image.GeometryError, match="runs past"):
        image.build_image(bad, "x", str(out))
    bad["fs"] = dict(bad["fs"], size=0x1FF800)
    with pytest.raises(image.GeometryError, match="whole number"):
        image.build_image(bad, "x", str(out))
    assert not out.exists() and not os.path.exists(str(out) + ".tmp")
    with pytest.raises(ValueError, match="board id"):
        image.build_image("esp32", "has space", str(out))
    assert not out.exists()


# ---- esptool, without a chip -----------------------------------------------

def crafted_image(cls, tmp_path):
    """A minimal but valid ESP application image made by esptool itself."""
    im = cls()
    im.entrypoint = 0x40100000 if cls is ESP8266ROMFirmwareImage else 0x40080000
    seg = ImageSegment(0x3FFE8000 if cls is ESP8266ROMFirmwareImage else 0x3FFB0000, bytes(range(64)))
    seg.name = ".dram0.data"
    im.segments = [seg]
    base = str(tmp_path / cls.__name__)
    im.save(base)
    path = base if os.path.exists(base) else base + "0x00000.bin"
    with open(path, "rb") as f:
        return f.read()


@pytest.mark.parametrize("cls,chip", [(ESP32FirmwareImage, "esp32"), (ESP32S3FirmwareImage, "esp32s3"),
                                      (ESP8266ROMFirmwareImage, "esp8266")])
def test_firmware_chip_from_header(cls, chip, tmp_path, capsys):
    data = crafted_image(cls, tmp_path)
    assert flash.firmware_chip(data) == chip
    assert flash.check_firmware(chip, data) == chip
    ec.image_info(data)  # esptool's own reading agrees
    assert "Detected image type: %s" % chip.upper().replace("ESP32S3", "ESP32-S3") in capsys.readouterr().out
    others = [b for b in DEVICE_BOARDS if b != chip]
    for other in others:
        with pytest.raises(flash.FirmwareMismatch, match="built for %s" % chip):
            flash.check_firmware(other, data)


def test_firmware_that_runs_into_the_filesystem_is_refused(tmp_path):
    data = crafted_image(ESP32FirmwareImage, tmp_path)
    with pytest.raises(flash.FirmwareMismatch, match="inside the filesystem"):
        flash.check_firmware("esp32", data + b"\xff" * 0x200000)
    with pytest.raises(flash.FirmwareMismatch, match="not a MicroPython image"):
        flash.check_firmware("esp32", b"\x7fELF" + b"\0" * 100)


def test_merge_bin_layout_and_image_info(tmp_path, capsys):
    fw = crafted_image(ESP32FirmwareImage, tmp_path)
    g = image.geometry("esp32")
    fs = image.image_bytes(g, files.all_files("esp32", "pump-1", JOBS))
    out = str(tmp_path / "merged.bin")
    merged = flash.merged_image("esp32", fw, fs, out)
    assert len(merged) == 0x200000 + len(fs) == 0x400000
    assert merged[:0x1000] == b"\xff" * 0x1000
    assert merged[0x1000:0x1000 + len(fw)] == fw
    assert merged[0x1000 + len(fw):0x200000].count(0xFF) == 0x200000 - 0x1000 - len(fw)
    assert merged[0x200000:] == fs
    assert "/jobs.txt" in image.read_image(merged[0x200000:], g)
    capsys.readouterr()
    ec.image_info([(0x1000, merged[0x1000:0x1000 + len(fw)]), (0x200000, merged[0x200000:])])
    text = capsys.readouterr()
    assert "Detected image type: ESP32" in text.out
    assert "Chip ID: 0 (ESP32)" in text.out


def test_flash_cli_writes_a_merged_image_without_a_chip(tmp_path):
    fw = crafted_image(ESP32S3FirmwareImage, tmp_path)
    (tmp_path / "mp.bin").write_bytes(fw)
    jobs = tmp_path / "jobs.txt"
    jobs.write_text(JOBS)
    out = tmp_path / "all.bin"
    p = subprocess.run([sys.executable, "-m", "companion.cli", "flash", "-", "--board", "esp32s3",
                        "--firmware", str(tmp_path / "mp.bin"), "--id", "s3-1", "--jobs", str(jobs),
                        "-o", str(out)], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    data = out.read_bytes()
    assert data[:len(fw)] == fw and len(data) == 0x800000
    assert image.read_image(data[0x200000:], image.geometry("esp32s3"))["/jobs.txt"] == JOBS_FILE
    p = subprocess.run([sys.executable, "-m", "companion.cli", "flash", "-", "--board", "esp32",
                        "--firmware", str(tmp_path / "mp.bin"), "-o", str(out)],
                       capture_output=True, text=True, cwd=ROOT)
    assert p.returncode != 0 and "built for esp32s3" in p.stderr


# ---- Pico W: UF2 -----------------------------------------------------------

def test_pico_uf2_blocks_land_at_the_filesystem_offset(tmp_path):
    out = str(tmp_path / "fs.uf2")
    r = flash.flash_rp2(None, "rp2-pico-w", None, "pico-1", erase=True, out_path=out, jobs_text=JOBS,
                        log=lambda *a: None)
    assert r["uf2"] == out and not r["loaded"]
    with open(out, "rb") as f:
        blocks = uf2.parse_uf2(f.read())
    g = image.geometry("rp2-pico-w")
    base = 0x10000000 + 0x12C000
    assert len(blocks) == g["size"] // 256
    assert [a for a, _, _ in blocks] == [base + 256 * i for i in range(len(blocks))]
    assert {fam for _, _, fam in blocks} == {0xE48BFF56}
    assert blocks[-1][0] + 256 == 0x10000000 + 2 * 1024 * 1024  # ends with the flash
    fs = b"".join(p for _, p, _ in blocks)
    assert image.read_image(fs, g)["/jobs.txt"] == JOBS_FILE


def test_pico_uf2_joins_micropython_and_checks_the_family(tmp_path):
    mp = uf2.to_uf2(b"\x00\x01" * 1000, 0x10000000)
    out = str(tmp_path / "all.uf2")
    flash.flash_rp2(None, "rp2-pico-w", mp, "pico-2", erase=True, out_path=out, log=lambda *a: None)
    with open(out, "rb") as f:
        raw = f.read()
    blocks = uf2.parse_uf2(raw)
    nums = [(raw[i * 512 + 20:i * 512 + 28]) for i in range(len(blocks))]
    import struct
    assert [struct.unpack("<II", n) for n in nums] == [(i, len(blocks)) for i in range(len(blocks))]
    assert blocks[0][0] == 0x10000000 and blocks[8][0] == 0x1012C000
    rp2350 = uf2.to_uf2(b"\x00" * 512, 0x10000000, 0xE48BFF59)
    with pytest.raises(flash.FirmwareMismatch, match="rp2350"):
        flash.flash_rp2(None, "rp2-pico-w", rp2350, None, out_path=out, log=lambda *a: None)
    with pytest.raises(flash.FirmwareMismatch, match="built for rp2040"):
        flash.check_firmware("esp32", mp)


def test_pico_without_readback_does_not_load(tmp_path, monkeypatch):
    monkeypatch.setattr(flash.shutil, "which", lambda name: None)
    drive = tmp_path / "RPI-RP2"
    drive.mkdir()
    (drive / "INFO_UF2.TXT").write_text("UF2 Bootloader v3.0\n")
    out = str(tmp_path / "fs.uf2")
    r = flash.flash_rp2(str(drive), "rp2-pico-w", None, "pico-3", out_path=out, log=lambda *a: None)
    assert not r["loaded"] and os.listdir(drive) == ["INFO_UF2.TXT"]
    r = flash.flash_rp2(str(drive), "rp2-pico-w", None, "pico-3", erase=True, out_path=out, log=lambda *a: None)
    assert r["loaded"] and "fs.uf2" in os.listdir(drive)


# ---- the esptool flow against an in-memory chip ----------------------------

class FakeChip:
    CHIP_NAME = "ESP32"

    def __init__(self, flash_bytes):
        self.flash = bytearray(flash_bytes)
        self.ops = []
        self._port = io.BytesIO()

    def change_baud(self, baud):
        self.ops.append(("baud", baud))


@pytest.fixture
def fake_esptool(monkeypatch):
    chips = {}

    def detect_chip(port, baud=115200, **kw):
        return chips[port]

    def read_flash(esp, address, size, output=None, **kw):
        esp.ops.append(("read", address, size))
        return bytes(esp.flash[address:address + size])

    def write_flash(esp, addr_data, **kw):
        for addr, data in addr_data:
            esp.ops.append(("write", addr, len(data)))
            esp.flash[addr:addr + len(data)] = data

    def erase_flash(esp, **kw):
        esp.ops.append(("erase",))
        esp.flash[:] = b"\xff" * len(esp.flash)

    monkeypatch.setattr(ec, "detect_chip", detect_chip)
    monkeypatch.setattr(ec, "run_stub", lambda esp: esp)
    monkeypatch.setattr(ec, "attach_flash", lambda esp: None)
    monkeypatch.setattr(ec, "detect_flash_size", lambda esp: "%dMB" % (len(esp.flash) >> 20))
    monkeypatch.setattr(ec, "read_flash", read_flash)
    monkeypatch.setattr(ec, "write_flash", write_flash)
    monkeypatch.setattr(ec, "erase_flash", erase_flash)
    monkeypatch.setattr(ec, "reset_chip", lambda esp, mode="hard-reset": esp.ops.append(("reset",)))
    return chips


def test_flash_esp_guards_a_filesystem_with_jobs(fake_esptool, tmp_path):
    fw = crafted_image(ESP32FirmwareImage, tmp_path)
    chip = fake_esptool["/dev/ttyUSB0"] = FakeChip(b"\xff" * 0x400000)
    quiet = dict(log=lambda *a: None)
    # blank flash: firmware and image go to their offsets
    s = flash.flash_esp("/dev/ttyUSB0", "esp32", fw, "pump-1", jobs_text=JOBS, **quiet)
    assert s["previous"] == "blank"
    assert ("write", 0x1000, len(fw)) in chip.ops and ("write", 0x200000, 0x200000) in chip.ops
    assert bytes(chip.flash[0x1000:0x1000 + len(fw)]) == fw
    g = image.geometry("esp32")
    assert image.read_image(bytes(chip.flash[0x200000:]), g)["/jobs.txt"] == JOBS_FILE
    # now it holds jobs: refused without --erase, nothing written
    chip.ops.clear()
    with pytest.raises(flash.FilesystemInUse, match="jobs.txt"):
        flash.flash_esp("/dev/ttyUSB0", "esp32", fw, "pump-1", jobs_text="", **quiet)
    assert not [op for op in chip.ops if op[0] in ("write", "erase")]
    # firmware only never touches the filesystem
    flash.flash_esp("/dev/ttyUSB0", "esp32", fw, None, **quiet)
    assert image.read_image(bytes(chip.flash[0x200000:]), g)["/jobs.txt"] == JOBS_FILE
    # --erase replaces it
    s = flash.flash_esp("/dev/ttyUSB0", "esp32", fw, "pump-2", erase=True, jobs_text="", **quiet)
    assert ("erase",) in chip.ops
    assert json.loads(image.read_image(bytes(chip.flash[0x200000:]), g)["/cfg.json"])["id"] == "pump-2"
    # MicroPython's own fresh filesystem (boot.py only) may be replaced
    fresh = image.image_bytes(g, [("/boot.py", b"# boot\n")])
    chip.flash[0x200000:] = fresh
    s = flash.flash_esp("/dev/ttyUSB0", "esp32", None, "pump-3", **quiet)
    assert s["previous"] == "micropython"
    # garbage that is not a LittleFS is kept
    chip.flash[0x200000:0x202000] = b"\x00" * 0x2000  # both superblocks
    with pytest.raises(flash.FilesystemInUse, match="not a LittleFS"):
        flash.flash_esp("/dev/ttyUSB0", "esp32", None, "pump-4", **quiet)


def test_flash_esp_refuses_the_wrong_chip_and_sizes_for_the_detected_flash(fake_esptool, tmp_path):
    with pytest.raises(ValueError, match="erases MicroPython too"):
        flash.flash_esp("p8", "esp32", None, "x", erase=True, log=lambda *a: None)
    fake_esptool["p8"] = FakeChip(b"\xff" * 0x800000)
    fake_esptool["p8"].CHIP_NAME = "ESP32-S3"
    with pytest.raises(flash.FirmwareMismatch, match="ESP32-S3"):
        flash.flash_esp("p8", "esp32", None, "x", log=lambda *a: None)
    # an ESP32 with 8 MB: the filesystem grows to the end of flash, as MicroPython does
    chip = fake_esptool["p8b"] = FakeChip(b"\xff" * 0x800000)
    notes = []
    s = flash.flash_esp("p8b", "esp32", None, "big", log=notes.append)
    assert s["flash_size"] == 0x800000 and ("write", 0x200000, 0x600000) in chip.ops
    assert any("8MB" in n for n in notes)


# ---- mip --------------------------------------------------------------------

def test_mip_package_json_installs_every_firmware_file():
    """firmware/package.json lists every firmware module, and mpremote's own
    mip installer (driven with a stand-in board) puts each at /lib/sporadic."""
    path = os.path.join(ROOT, "firmware", "package.json")
    with open(path) as f:
        text = f.read()
    listed = [dest for dest, _ in json.loads(text)["urls"]]
    # exactly what a board carries (run `python -m companion.fleet.files --package-json`
    # after adding a module), and never the desktop-only part
    assert sorted(listed) == files.board_modules(), "firmware/package.json is stale: python -m companion.fleet.files --package-json"
    assert {"sporadic/device/runtime.py", "sporadic/device/store.py", "sporadic/core/jobline.py"} <= set(listed)
    assert not any(p.startswith("sporadic/desktop/") for p in listed)
    from mpremote import mip

    class Board:
        def __init__(self):
            self.files, self.dirs = {}, set()

        def fs_exists(self, p):
            return p in self.dirs

        def fs_mkdir(self, p):
            self.dirs.add(p)

        def fs_writefile(self, p, data, progress_callback=None):
            self.files[p] = data

    b = Board()
    with contextlib.redirect_stdout(io.StringIO()):
        mip._install_json(b, path, None, "/lib", None, False)
    want = {"/lib/" + d: open(os.path.join(ROOT, "firmware", d), "rb").read() for d in listed}
    assert b.files == want and "/lib/sporadic" in b.dirs


# ---- the CLI verbs with a fleet --------------------------------------------

def companion(*argv, cwd=None):
    p = subprocess.run([sys.executable, "-m", "companion.cli"] + list(argv), capture_output=True,
                       text=True, cwd=cwd, timeout=120)
    return p


@pytest.mark.slow
def test_image_verb_provisions_from_the_fleet(tmp_path):
    fleet = str(tmp_path / "fleet")
    assert companion("--fleet", fleet, "init").returncode == 0
    p = companion("--fleet", fleet, "add", "each 2026-12-01T06:00Z led blink 3 ; every=1d")
    assert p.returncode == 0, p.stderr
    out = str(tmp_path / "fs.bin")
    p = companion("--fleet", fleet, "image", "--board", "rp2-pico-w", "--id", "pico-9", "-o", out)
    assert p.returncode == 0, p.stderr
    assert "212 x 4096-byte blocks" in p.stdout and "0x12c000" in p.stdout
    found = image.read_image(open(out, "rb").read(), image.geometry("rp2-pico-w"))
    cfg = json.loads(found["/cfg.json"])
    from companion.fleet import board_keys, folder as fleet_mod, keys
    f = fleet_mod.Fleet(fleet)
    assert cfg["id"] == "pico-9" and cfg["board"] == "rp2-pico-w"
    assert cfg["secret"] == board_keys.device_secret(f, "pico-9")
    assert cfg["pubkey"] == keys.load_pub(fleet)
    # the image's host is known to the fleet, with its board key (docs/security.md#board-signatures)
    (hrec,) = [l for l in f.lines() if l.split()[:2] == [".h", "pico-9"]]
    assert hrec.rsplit(" ", 1)[1] == board_keys.sign_pub(cfg["sign"]) and cfg["sign_pub"] == hrec[-64:]
    jobs = found["/jobs.txt"].decode()
    assert "led blink 3" in jobs and ".h pico-9" in jobs
    # a wrong geometry or an unknown board: a clear error, no file
    bad = str(tmp_path / "bad.bin")
    p = companion("--fleet", fleet, "image", "--board", "esp9000", "--id", "x", "-o", bad)
    assert p.returncode != 0 and "unknown board" in p.stderr and not os.path.exists(bad)
    p = companion("--fleet", fleet, "image", "--board", "esp32", "--id", "x", "--flash-size", "1MB", "-o", bad)
    assert p.returncode == 2 and p.stderr.startswith("companion: ") and "no room" in p.stderr
    assert not os.path.exists(bad)


def test_job_file_goes_in_as_the_store_keeps_it(tmp_path):
    """The image holds the job file canonical, sorted and stamped (jobs.ok),
    so a fresh board opens it without re-importing; a bad line is refused
    with its line number before any image is written."""
    text = "# pump\none 2026-12-02T00:00Z log b\neach 2026-12-01T06:00Z log a ; every=1d\n"
    (path, body), (stamp, size), (rxp, rx) = files.jobs_file(text)
    lines = body.decode().splitlines()
    assert (path, stamp, rxp) == ("/jobs.txt", "/jobs.ok", "/jobs.rx")
    # its digest index: a record a line (digest, offset), then count, XOR and jobs.ok's stamp
    count, _, rx_stamp = rx[-64:].decode().split(None, 2)
    assert int(count, 16) == 2 and len(rx) == 2 * 12 + 64 and rx_stamp.strip() == size.decode()
    assert lines == sorted(lines) and len(lines) == 2 and int(size.split()[0]) == len(body)
    assert all(jobline.canonical(l) == l for l in lines)
    out = tmp_path / "fs.bin"
    with pytest.raises(ValueError, match=r"jobs:2: unknown type 'eech'"):
        image.build_image("esp32", "x", str(out), "each 2026-12-01T06:00Z log a\neech 2026-12-01 log b\n")
    assert not out.exists()


def fleet_bytes(folder):
    """Every file of a fleet folder: {relative path: bytes}."""
    out = {}
    for root, _, names in os.walk(folder):
        for n in names:
            p = os.path.join(root, n)
            with open(p, "rb") as f:
                out[os.path.relpath(p, folder)] = f.read()
    return out


@pytest.mark.slow
def test_flash_changes_the_fleet_only_once_the_board_is_written(tmp_path):
    """A refused or failed `companion flash` leaves the fleet folder byte for
    byte as it was (no secret, no host line, no devices/ID); one that wrote
    its output commits the board."""
    fleet = str(tmp_path / "fleet")
    assert companion("--fleet", fleet, "init").returncode == 0
    assert companion("--fleet", fleet, "add", "each 2026-12-01T06:00Z log x ; every=1d").returncode == 0
    s3 = tmp_path / "s3.bin"
    s3.write_bytes(crafted_image(ESP32S3FirmwareImage, tmp_path))
    before = fleet_bytes(fleet)
    # a port that does not exist (esptool cannot open it)
    p = companion("--fleet", fleet, "flash", str(tmp_path / "no-such-port"), "--board", "esp32", "--id", "e1")
    assert p.returncode != 0
    assert fleet_bytes(fleet) == before
    # a firmware for another chip
    p = companion("--fleet", fleet, "flash", str(tmp_path / "no-such-port"), "--board", "esp32", "--id", "e1",
                  "--firmware", str(s3))
    assert p.returncode != 0 and "built for esp32s3" in p.stderr
    assert fleet_bytes(fleet) == before
    # an image that does not fit the flash
    p = companion("--fleet", fleet, "image", "--board", "esp32", "--id", "e1", "--flash-size", "1MB",
                  "-o", str(tmp_path / "bad.bin"))
    assert p.returncode != 0 and fleet_bytes(fleet) == before
    # written (a merged image for 0x0): now the fleet knows the board
    out = str(tmp_path / "all.bin")
    p = companion("--fleet", fleet, "flash", "-", "--board", "esp32s3", "--id", "s3-1", "--firmware", str(s3),
                  "-o", out, "--wifi", "home:pw", "--peer", "192.168.4.8:7370")
    assert p.returncode == 0, p.stderr
    after = fleet_bytes(fleet)
    assert "devices/s3-1.json" in after and "keys/devices/s3-1" in after
    from companion.fleet.folder import Fleet
    assert any(l.split()[:2] == [".h", "s3-1"] for l in Fleet(fleet).lines())
    cfg = json.loads(image.read_image(open(out, "rb").read()[0x200000:], image.geometry("esp32s3"))["/cfg.json"])
    assert cfg["secret"] == after["keys/devices/s3-1"].decode().strip()
    assert cfg["fleet_key"] == after["keys/peer"].decode().strip()
    assert cfg["peers"] == ["192.168.4.8:7370"] and cfg["wifi"] == {"ssid": "home", "key": "pw"}
    assert "hwm" in cfg and cfg["sync_port"] == 7370


@pytest.mark.needs("micropython")
def test_a_whole_file_due_at_once_runs_once_each_in_a_small_heap(tmp_path):
    """An ESP32 image holding 100 jobs, all due when it boots (a board
    whose clock was set a day late): they run over several passes, each
    exactly once, and every boot ends cleanly. A pass that ran them all at
    once logged 200 records, more than the store holds in RAM to merge: the
    board ran out of memory on that boot and every one after."""
    import time as _time
    host = standins(tmp_path)
    when = _time.strftime("%Y-%m-%dT%H:%MZ", _time.gmtime(int(_time.time()) - 60))
    out = str(tmp_path / "fs.bin")
    image.build_image("esp32", "pump-1", out,
                      "".join("each %s log job%d ; within=1d\n" % (when, i) for i in range(100)),
                      secret=b"\x22" * 16)
    g = image.geometry("esp32")
    for boot in range(6):
        p = subprocess.run([MICROPYTHON, "-X", "heapsize=96K", LFS_BOOT, out, str(g["block_size"]),
                            str(g["block_count"]), str(g["prog_size"]), host],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, "boot %d: %s" % (boot, p.stdout[-1000:] + p.stderr[-2000:])
    with open(out, "rb") as f:
        found = image.read_image(f.read(), g)
    records = b"".join(found.get(n, b"") for n in ("/log.txt", "/jobs.txt")).decode()
    ran = [l.split()[0] for l in records.splitlines() if " r pump-1 0 " in l and " ok " in l]
    assert len(ran) == 100 and len(set(ran)) == 100, (len(ran), len(set(ran)))


def test_an_image_carries_only_the_modules_its_configuration_uses(tmp_path):
    # #31: without a network the board never imports net/ nor the leader
    # (device/boot.py): its image leaves them out; --wifi puts them in
    fleet = str(tmp_path / "fleet")
    assert companion("--fleet", fleet, "init").returncode == 0
    g = image.geometry("esp8266")
    found = {}
    for name, extra in (("plain", ()), ("wifi", ("--wifi", "home:secret", "--peer", "192.168.4.8:7370"))):
        out = str(tmp_path / (name + ".bin"))
        p = companion("--fleet", fleet, "image", "--board", "esp8266", "--id", "e-" + name, "-o", out, *extra)
        assert p.returncode == 0, p.stderr
        found[name] = image.read_image(open(out, "rb").read(), g)
    plain = sorted(p for p in found["plain"] if p.startswith("/lib/sporadic/"))
    wifi = sorted(p for p in found["wifi"] if p.startswith("/lib/sporadic/"))
    left_out = sorted(set(wifi) - set(plain))
    assert left_out == ["/lib/sporadic/core/leader.mpy", "/lib/sporadic/net/__init__.mpy",
                        "/lib/sporadic/net/node.mpy", "/lib/sporadic/net/peer.mpy",
                        "/lib/sporadic/net/server.mpy", "/lib/sporadic/net/ticks.mpy",
                        "/lib/sporadic/net/wifi.mpy", "/lib/sporadic/net/wire.mpy"]
    assert set(plain) < set(wifi)
    assert json.loads(found["wifi"]["/cfg.json"])["wifi"]["ssid"] == "home"


class _Answers:
    """What a board's raw REPL prints for syncer.BOARD_PROBE (sys.platform,
    os.uname().machine, sys.implementation._mpy)."""

    def __init__(self, text):
        self.text = text

    def exec(self, code):
        return self.text


def test_deploy_board_esp8266_knows_a_stock_esp8266_and_refuses_a_1mb_build():
    # #31: what the stock ESP8266_GENERIC 2 MiB+ firmware answers (board.json:
    # sys_platform, machine, mpy_arch xtensa: _mpy = 6 | 3 << 8 | 9 << 10)
    from companion.sync import syncer
    from companion.errors import UserError
    data = files.board_data("esp8266")
    mpy = 6 | 3 << 8 | 9 << 10
    stock = "%s|%s|%d" % (data["sys_platform"], data["machine"], mpy)
    assert syncer.check_board(_Answers(stock), "esp8266", "/dev/ttyUSB0") == "esp8266"
    assert syncer.detect_board(_Answers(stock)) == "esp8266"
    with pytest.raises(UserError) as e:
        syncer.check_board(_Answers("esp8266|ESP module (1M) with ESP8266|%d" % mpy), "esp8266", "/dev/ttyUSB0")
    assert "ESP module (1M)" in str(e.value) and "nothing was written" in str(e.value)


def test_image_romfs_puts_the_package_in_a_romfs_image_and_leaves_it_off_the_filesystem(tmp_path):
    # #31: for a MicroPython with a ROMFS partition (ESP8266 FLASH_2M_ROMFS)
    fleet = str(tmp_path / "fleet")
    assert companion("--fleet", fleet, "init").returncode == 0
    out, rom = str(tmp_path / "fs.bin"), str(tmp_path / "rom.img")
    p = companion("--fleet", fleet, "image", "--board", "esp8266", "--id", "e-r", "-o", out, "--romfs", rom)
    assert p.returncode == 0, p.stderr
    found = image.read_image(open(out, "rb").read(), image.geometry("esp8266"))
    assert not any(n.startswith("/lib/sporadic/") for n in found) and "/lib/board.mpy" in found
    data = open(rom, "rb").read()
    assert data[:3] == b"\xd2\xcd\x31"    # ROMFS magic
    for name in (b"sporadic", b"runtime.mpy", b"jobline.mpy"):
        assert name in data
    assert b"node.mpy" not in data        # no network configured: no net/ (needed_modules)
    # each .mpy named by the path the board imports it from (/rom/lib/...): its
    # __file__ and source name one qstr, not two (docs/budgets.md#31)
    assert b"/rom/lib/sporadic/device/runtime.mpy" in data
    # the board module too, as boards/<name>/manifest.py freezes it: /rom/lib
    # precedes /lib on the board's sys.path, so the ROM's is the one imported
    assert b"/rom/lib/board.mpy" in data
    assert "ROMFS image" in p.stdout and "flash offset 0xb0000" in p.stdout   # board.json romfs
    assert len(data) <= files.board_data("esp8266")["romfs"]["size"]
    bad = companion("--fleet", fleet, "image", "--board", "esp8266", "--id", "e-s", "-o", out, "--romfs",
                    str(tmp_path / "rom.bin"))
    assert bad.returncode == 2 and bad.stderr.startswith("companion: ") and ".img" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_the_broker_link_goes_only_to_a_board_given_a_broker(tmp_path):
    # #31: net/mqtt.py, net/broker.py, net/exchange.py and net/spool.py (#32) only with --mqtt; the rest of
    # net/ with any network; nothing of net/ without one (a firmware tree
    # laid out with those modules)
    fw = tmp_path / "fw"
    for rel in ("sporadic/__init__.py", "sporadic/core/leader.py", "sporadic/core/plan.py",
                "sporadic/net/__init__.py", "sporadic/net/node.py", "sporadic/net/mqtt.py",
                "sporadic/net/broker.py", "sporadic/net/exchange.py", "sporadic/net/spool.py"):
        (fw / rel).parent.mkdir(parents=True, exist_ok=True)
        (fw / rel).write_text("")
    net = lambda cfg: sorted(m for m in files.needed_modules("esp8266", cfg, str(fw))
                             if m.startswith(("sporadic/net/", "sporadic/core/leader")))
    assert net({}) == []
    wifi = {"wifi": {"ssid": "home", "key": "k"}}
    assert net(wifi) == ["sporadic/core/leader.py", "sporadic/net/__init__.py", "sporadic/net/node.py"]
    assert net(dict(wifi, mqtt={"url": "mqtt://h"})) == ["sporadic/core/leader.py", "sporadic/net/__init__.py",
                                                          "sporadic/net/broker.py", "sporadic/net/exchange.py",
                                                          "sporadic/net/mqtt.py", "sporadic/net/node.py",
                                                          "sporadic/net/spool.py"]
    assert "sporadic/core/plan.py" in files.needed_modules("esp8266", {}, str(fw))



def test_a_board_modules_own_helper_goes_only_to_the_boards_that_import_it():
    # #31: device/keeptime.py (an RP2040's clock after a watchdog reset) is
    # imported by the rp2 board modules alone: no other board's image carries it
    has = lambda b: "sporadic/device/keeptime.py" in files.needed_modules(b, {})
    assert [b for b in BOARDS if has(b)] == ["rp2-pico", "rp2-pico-w"]
    paths = [p for p, _ in files.firmware_files("esp8266", compile=False, cfg={})]
    assert "/lib/sporadic/device/mboard.py" in paths and "/lib/sporadic/device/keeptime.py" not in paths
    assert "/lib/sporadic/device/keeptime.py" in [p for p, _ in files.firmware_files("rp2-pico", compile=False,
                                                                                       cfg={})]


def test_a_picos_own_filesystem_reads_back():
    """The filesystem of an emulated Pico (the real rp2 firmware) after a sync
    of 400 jobs and a burst of runs (tests/test_rp2_awake.py), gzipped. Its
    littlefs caches 4 x max(read, prog) = 1,024 bytes (MicroPython's
    extmod/vfs_lfsx.c), so it keeps its 306-byte wake.idx inline; read with
    a 256-byte cache that file was LFS_ERR_CORRUPT."""
    import gzip
    g = image.geometry('rp2-pico')
    with gzip.open(os.path.join(os.path.dirname(__file__), 'data', 'pico-400-jobs-fs.bin.gz')) as f:
        data = f.read()
    files = image.read_image(data, g)
    assert len(files['/wake.idx']) == 306 and files['/wake.idx'].startswith(b'w2 ')
    assert files['/jobs.txt'].count(b'\n') > 400
