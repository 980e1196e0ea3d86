// The unix port's standard variant with a ROM segment, as a board with a
// ROMFS partition has one (ESP8266_GENERIC FLASH_2M_ROMFS): the file named by
// the environment variable MICROPY_ROMFS is mapped read-only into memory at
// start-up (romfs_segment.c), outside the GC heap, and mounted at /rom by
// mp_init() as on the board. Built by bench/build_micropython32.sh as
// bench/.mp32/micropython-romfs (#31: bench/heap_romfs.py measures with it).
#define MICROPY_CONFIG_ROM_LEVEL (MICROPY_CONFIG_ROM_LEVEL_EXTRA_FEATURES)

#include "variants/mpconfigvariant_common.h"

#undef MICROPY_VFS_ROM_IOCTL
#define MICROPY_VFS_ROM_IOCTL (1)
