// The ROM segment of bench/.mp32/micropython-romfs: the ROMFS image file
// named by $MICROPY_ROMFS, mapped read-only (mmap) outside the GC heap, as a
// board's ROMFS partition is memory-mapped flash (ports/esp8266/vfs_rom_ioctl.c
// gives the same memoryview over its partition). mp_init() mounts it at /rom
// (extmod/vfs.c mp_vfs_mount_romfs_protected); without the variable, or when
// the file cannot be mapped, there is no segment and nothing is mounted.
// Read-only: no MP_VFS_ROM_IOCTL_WRITE_* (write the file on the host).

#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "py/obj.h"
#include "py/objarray.h"
#include "py/mperrno.h"
#include "py/runtime.h"
#include "extmod/vfs.h"

#if MICROPY_VFS_ROM_IOCTL

static mp_obj_array_t romfs_obj = {{&mp_type_memoryview}, 'B', 0, 0, NULL};
static int romfs_state; // 0: not looked at yet, 1: mapped, -1: none

static int romfs_map(void) {
    if (romfs_state == 0) {
        romfs_state = -1;
        const char *path = getenv("MICROPY_ROMFS");
        if (path != NULL && *path) {
            int fd = open(path, O_RDONLY);
            if (fd >= 0) {
                struct stat st;
                if (fstat(fd, &st) == 0 && st.st_size > 0) {
                    void *p = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
                    if (p != MAP_FAILED) {
                        romfs_obj.len = st.st_size;
                        romfs_obj.items = p;
                        romfs_state = 1;
                    }
                }
                close(fd);
            }
        }
    }
    return romfs_state;
}

mp_obj_t mp_vfs_rom_ioctl(size_t n_args, const mp_obj_t *args) {
    switch (mp_obj_get_int(args[0])) {
        case MP_VFS_ROM_IOCTL_GET_NUMBER_OF_SEGMENTS:
            return MP_OBJ_NEW_SMALL_INT(romfs_map() > 0 ? 1 : 0);

        case MP_VFS_ROM_IOCTL_GET_SEGMENT:
            if (romfs_map() > 0) {
                return MP_OBJ_FROM_PTR(&romfs_obj);
            }
            return MP_OBJ_NEW_SMALL_INT(-MP_ENOENT);
    }

    return MP_OBJ_NEW_SMALL_INT(-MP_EINVAL);
}

#endif
