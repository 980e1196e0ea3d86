# Board side of SerialLink.put_file, exec'd once per boot at the raw prompt.
# A file is written to PATH.part (parent folders made) and renamed over PATH
# once complete, then its size printed for the companion to check: a pulled
# cable leaves the old file whole.
import os
try:
    from binascii import a2b_base64 as _sp_d
except ImportError:
    pass
def _sp_mk(p):
    i = p.rfind('/')
    if i <= 0:
        return
    d = p[:i]
    try:
        os.stat(d)
        return
    except OSError:
        pass
    _sp_mk(d)
    os.mkdir(d)
def _sp_open(p):
    _sp_mk(p)
    return open(p + '.part', 'wb')
def _sp_done(p):
    t = p + '.part'
    try:
        os.rename(t, p)
    except OSError:
        # FAT renames over no file
        os.remove(p)
        os.rename(t, p)
    print(os.stat(p)[6])
# A small file in one execution; b is its literal.
def _sp_put(p, b):
    f = _sp_open(p)
    try:
        f.write(b)
    finally:
        f.close()
    _sp_done(p)
# A big file streamed through _sp_in (stream_in.py): n bytes, window w, SHA-256 d.
def _sp_put_in(p, n, w, d):
    f = _sp_open(p)
    try:
        _sp_in(n, w, d, f.write)
    finally:
        f.close()
    _sp_done(p)
