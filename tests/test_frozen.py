"""Freezing sporadic into a board's MicroPython firmware (docs/hardware.md#frozen-firmware):
the manifests name what exists, and a --frozen image or deploy leaves the
package out of the flash. The heap a frozen firmware needs is measured by
bench/heap_boards.py and bench/heap_sync.py on a 32-bit build."""
import os

from companion.fleet import files
from companion.make import image

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_manifest(path, seen):
    """Execute a MicroPython manifest with its API stubbed (as
    tools/manifestfile.py does: relative paths from the manifest's folder);
    $(PORT_DIR)/$(MPY_DIR) paths belong to the MicroPython checkout and are
    only noted."""
    here = os.path.dirname(os.path.abspath(path))

    def include(p, **kw):
        if p.startswith("$("):
            seen["external"].append(p)
            return
        full = os.path.normpath(os.path.join(here, p))
        assert os.path.isfile(full), "%s includes %s: missing" % (path, full)
        run_manifest(full, seen)

    def package(name, files=None, base_path=".", opt=None):
        seen["packages"].append((os.path.normpath(os.path.join(here, base_path, name)), opt))
        seen["files"] = files

    def module(name, base_path=".", opt=None):
        seen["modules"].append((os.path.normpath(os.path.join(here, base_path, name)), opt))

    def require(*a, **kw):
        seen["external"].append(a[0])

    with open(path) as f:
        code = compile(f.read(), path, "exec")
    cwd = os.getcwd()
    os.chdir(here)
    try:
        exec(code, {"include": include, "package": package, "module": module, "require": require,
                    "freeze": require, "options": None})
    finally:
        os.chdir(cwd)


def test_esp8266_manifest_freezes_the_package_and_the_board_module():
    seen = {"external": [], "packages": [], "modules": [], "files": None}
    run_manifest(os.path.join(ROOT, "boards", "esp8266", "manifest.py"), seen)
    pkg = os.path.join(ROOT, "firmware", "sporadic")
    assert seen["packages"] == [(pkg, 3)]
    assert os.path.isfile(os.path.join(pkg, "__init__.py")) and os.path.isfile(os.path.join(pkg, "device", "runtime.py"))
    # what a board carries, and never the desktop-only part
    assert sorted(seen["files"]) == sorted(p[len("sporadic/"):] for p in files.board_modules())
    assert "device/runtime.py" in seen["files"] and not any(f.startswith("desktop") for f in seen["files"])
    assert seen["modules"] == [(os.path.join(ROOT, "boards", "esp8266", "board.py"), 3)]
    # MicroPython's own ESP8266 modules stay in (flashbdev, _boot, networking)
    assert seen["external"] == ["$(PORT_DIR)/boards/ESP8266_GENERIC/manifest_2MiB.py"]


def test_frozen_image_leaves_the_package_out(tmp_path):
    full = dict(files.all_files("esp8266", "pump-1", ""))
    frozen = dict(files.all_files("esp8266", "pump-1", "", frozen=True))
    assert any(p.startswith("/lib/sporadic/") for p in full)
    assert not any(p.startswith("/lib/sporadic/") for p in frozen)
    assert set(frozen) == set(full) - {p for p in full if p.startswith("/lib/sporadic/")}
    assert {"/main.py", "/lib/board.mpy", "/cfg.json", "/jobs.txt"} <= set(frozen)
    out = tmp_path / "fs.bin"
    s = image.build_image("esp8266", "pump-1", str(out), frozen=True)
    with open(out, "rb") as f:
        found = image.read_image(f.read(), image.geometry("esp8266"))
    assert set(found) == set(frozen) and s["used_bytes"] < 20000


def test_image_cli_takes_frozen(tmp_path, monkeypatch, capsys):
    from companion import cli
    monkeypatch.chdir(tmp_path)   # no fleet folder here
    out = tmp_path / "fs.bin"
    assert cli.main(["image", "--board", "esp8266", "--id", "pump-1", "--frozen", "--secret", "00" * 16,
                     "-o", str(out)]) == 0
    with open(out, "rb") as f:
        found = image.read_image(f.read(), image.geometry("esp8266"))
    assert "/lib/board.mpy" in found and not any(p.startswith("/lib/sporadic") for p in found)


def test_a_small_heap_board_is_told_to_run_sporadic_from_its_firmware_rom_or_frozen():
    from companion.sync import syncer
    note = files.small_heap_note("esp8266", frozen=False)
    assert "38 KiB heap" in note and "companion image --romfs" in note, note
    assert "hardware.md#a-stock-esp8266-the-romfs-download" in note and "hardware.md#frozen-firmware" in note
    assert files.small_heap_note("esp8266", frozen=True) == ""
    assert files.small_heap_note("esp32", frozen=False) == ""
    # a sync that runs out of memory on such a board says what to do
    hint = syncer.memory_hint("board raised: MemoryError: memory allocation failed", 38 * 1024)
    assert "38 KiB heap" in hint and "--romfs" in hint and "frozen" in hint, hint
    # and on one whose deploy found sporadic in its firmware, not to put it there
    hint = syncer.memory_hint("out of memory (on P .h b-1)", 33 * 1024, in_firmware=True)
    assert "33 KiB heap: sporadic is in its firmware already" in hint and "romfs-download" in hint, hint
    assert "--romfs" not in hint and "frozen" not in hint, hint
    assert syncer.memory_hint("out of memory (on P .h b-1)", 128 * 1024) == ""
    assert syncer.memory_hint("no answer for 20 s", 38 * 1024) == ""
