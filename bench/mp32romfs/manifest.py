# bench/mp32romfs's frozen modules: the standard variant's, and the virtual
# board's boot shim (companion/vboard/onboard), frozen as a board's own boot
# code is (the ESP8266's _boot.py, flashbdev, inisetup): its names and
# bytecode stay out of the heap. The relay runs it with `-m vboard_boot`
# (companion/vboard/relay.py) when the interpreter has it frozen; rebuild
# (bash bench/build_micropython32.sh romfs) after changing the shim.
include("$(PORT_DIR)/variants/standard/manifest.py")
module("vboard_boot.py", base_path="../../companion/vboard/onboard")
module("vboard_blockdev.py", base_path="../../companion/vboard/onboard")
