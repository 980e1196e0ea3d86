"""atomic_write: a whole file or nothing (a temporary file, fsync, rename):
the one writer of the companion's files (the fleet's records and keys, a
merge's output, a board image). Its own module, so that a verb which only
writes a file (`companion merge` as a git merge driver) imports no more
than this."""
import os


def atomic_write(path, data, mode=None):
    """Write a whole file or nothing. data: str (written as UTF-8), bytes, or
    an iterable of either written one after the other (a large file without
    one large string). mode: the file's permissions, set before any byte
    lands (a key: 0o600); None: the usual ones (0o666 less the umask)."""
    tmp = path + '.tmp'
    if mode is None:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    else:
        if os.path.exists(tmp):
            os.unlink(tmp)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, 'wb') as f:
        for part in (data,) if isinstance(data, (str, bytes, bytearray)) else data:
            f.write(part.encode('utf-8') if isinstance(part, str) else part)
        f.flush()
        os.fsync(f.fileno())
    if mode is not None:
        os.chmod(tmp, mode)   # whatever the umask took away
    os.replace(tmp, path)
