#!/usr/bin/env bash
# Build MicroPython's unix port as a 32-bit (i386) program, the interpreter
# bench/heap_boards.py uses to measure heap the way a 32-bit board (ESP8266,
# ESP32, RP2040: 4-byte pointers, 16-byte GC blocks) spends it. The PyPI
# `micropython` command is 64-bit, which roughly doubles every object.
#
#   bash bench/build_micropython32.sh   -> bench/.mp32/micropython
#                                          bench/.mp32/micropython-frozen
#
# The second has firmware/manifest.py frozen in (sporadic as frozen
# bytecode, run from flash as on a board built with boards/esp8266/manifest.py).
# A third, bench/.mp32/micropython-float32, has single-precision floats as the
# rp2 and esp8266 ports do (tests/test_calendar.py runs the sun's equations on it).
# A fourth, bench/.mp32/micropython-romfs, has a ROM segment as a board with a
# ROMFS partition does (the stock ESP8266_GENERIC FLASH_2M_ROMFS firmware): the
# ROMFS image file named by $MICROPY_ROMFS is mapped read-only outside the GC
# heap and mounted at /rom at start-up (variant bench/mp32romfs/), so a heap
# measured on it is the board's, not the image's (bench/heap_romfs.py, #31).
#
#   bash bench/build_micropython32.sh romfs   -> that one alone (needs the
#                                                checkout a full run leaves)
#
# MP32_OUT names another folder than bench/.mp32 (its src/ the checkout).
#
# Needs git, make and a 32-bit C toolchain (Debian/Ubuntu: apt-get install
# gcc-multilib). Takes a few minutes; nothing is installed system-wide.
# -m32 goes through CFLAGS_EXTRA/LDFLAGS_EXTRA (MICROPY_FORCE_32BIT is gone
# from the unix Makefile); FFI and btree are off, as in the PyPI build, and
# ssl too (no mbedtls to fetch; the firmware does not use it).
# MICROPYTHON_GIT and MICROPYTHON_LIB_GIT name other clones (mirrors) of
# micropython and micropython-lib.
set -euo pipefail
COMMIT=${MICROPYTHON_COMMIT:-1c3c201149f37fe8d81246191b3127bb198d6306}  # v1.29.0-preview-731
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="${MP32_OUT:-$HERE/.mp32}"
ONLY="${1:-all}"
SRC="$OUT/src"
mkdir -p "$OUT"
if [ ! -d "$SRC/.git" ]; then
    git clone --no-checkout "${MICROPYTHON_GIT:-https://github.com/micropython/micropython}" "$SRC"
fi
git -C "$SRC" checkout -q "$COMMIT"
git -C "$SRC" -c protocol.file.allow=always -c "submodule.lib/micropython-lib.url=${MICROPYTHON_LIB_GIT:-https://github.com/micropython/micropython-lib.git}" \
    submodule update --init lib/micropython-lib
make -C "$SRC/mpy-cross" -j2 >/dev/null
if [ "$ONLY" = all ] || [ "$ONLY" = romfs ]; then
    make -C "$SRC/ports/unix" VARIANT_DIR="$HERE/mp32romfs" BUILD=build-romfs MICROPY_PY_FFI=0 MICROPY_PY_BTREE=0 \
         MICROPY_PY_SSL=0 CFLAGS_EXTRA=-m32 LDFLAGS_EXTRA=-m32 -j2 >/dev/null
    cp "$SRC/ports/unix/build-romfs/micropython" "$OUT/micropython-romfs"
    "$OUT/micropython-romfs" -c "import vfs; print('romfs build, segments:', vfs.rom_ioctl(1))"
fi
[ "$ONLY" = romfs ] && exit 0
make -C "$SRC/ports/unix" VARIANT=standard MICROPY_PY_FFI=0 MICROPY_PY_BTREE=0 MICROPY_PY_SSL=0 \
     CFLAGS_EXTRA=-m32 LDFLAGS_EXTRA=-m32 -j2 >/dev/null
cp "$SRC/ports/unix/build-standard/micropython" "$OUT/micropython"
make -C "$SRC/ports/unix" VARIANT=standard BUILD=build-float32 MICROPY_PY_FFI=0 MICROPY_PY_BTREE=0 MICROPY_PY_SSL=0 \
     CFLAGS_EXTRA=-DMICROPY_FLOAT_IMPL=MICROPY_FLOAT_IMPL_FLOAT -j2 >/dev/null
cp "$SRC/ports/unix/build-float32/micropython" "$OUT/micropython-float32"
printf 'include("$(PORT_DIR)/variants/standard/manifest.py")\ninclude("%s")\n' \
    "$(cd "$HERE/.." && pwd)/firmware/manifest.py" > "$OUT/frozen-manifest.py"
make -C "$SRC/ports/unix" VARIANT=standard BUILD=build-frozen FROZEN_MANIFEST="$OUT/frozen-manifest.py" \
     MICROPY_PY_FFI=0 MICROPY_PY_BTREE=0 MICROPY_PY_SSL=0 CFLAGS_EXTRA=-m32 LDFLAGS_EXTRA=-m32 -j2 >/dev/null
cp "$SRC/ports/unix/build-frozen/micropython" "$OUT/micropython-frozen"
"$OUT/micropython" -c "import sys; print('built', sys.implementation.version, 'maxsize', sys.maxsize)"
"$OUT/micropython-frozen" -c "import sporadic.core.jobline as m; print('frozen', m.__file__)"
