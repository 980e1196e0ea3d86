# Board manifest for an ESP8266 firmware with sporadic frozen in (docs/hardware.md#frozen-firmware):
# MicroPython's own ESP8266_GENERIC modules, the sporadic package, and this
# board's module as `board`. In a MicroPython checkout:
#   make -C ports/esp8266 BOARD=ESP8266_GENERIC FROZEN_MANIFEST=/path/to/sporadic/boards/esp8266/manifest.py
# Relative paths are resolved from this file's folder.
include("$(PORT_DIR)/boards/ESP8266_GENERIC/manifest_2MiB.py")
include("../../firmware/manifest.py")
module("board.py", opt=3)
