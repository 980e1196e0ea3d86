# bench/mp32romfs: the standard variant plus a ROM segment read from the file
# $MICROPY_ROMFS (romfs_segment.c). Used as VARIANT_DIR by
# bench/build_micropython32.sh.
FROZEN_MANIFEST ?= $(VARIANT_DIR)/manifest.py

# main.c defines an empty ROM segment under MICROPY_VFS_ROM_IOCTL (for the
# coverage variant): rename it there, romfs_segment.c's is the one used.
$(BUILD)/main.o: CFLAGS += -Dmp_vfs_rom_ioctl=mp_vfs_rom_ioctl_main_unused
