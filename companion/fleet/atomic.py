"""atomic_write: a whole file or nothing (a temporary file, fsync, rename).
Its own module, so that a verb which only writes a file (`companion merge`
as a git merge driver) imports no more than this."""
import os


def atomic_write(path, text):
    """Write a whole file or nothing. text: a str, or an iterable of str
    written one after the other (a large file without one large string)."""
    tmp = path + '.tmp'
    with open(tmp, 'w', encoding='utf-8') as f:
        if isinstance(text, str):
            f.write(text)
        else:
            for part in text:
                f.write(part)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
