# Board side of SerialLink.get_file, exec'd once per boot at the raw prompt.
# _sp_get(p, n) prints '#SIZE', then the file in pieces of n bytes, each on a
# line of its own as b'...' (repr, for text) or ':BASE64' (binary), whichever
# is shorter, then '=SHA256HEX' when the board has hashlib. One piece at a
# time: a repr of binary is up to 4x its size.
def _sp_get(p, n):
    import os
    try:
        import hashlib
        h = hashlib.sha256()
    except (ImportError, AttributeError):
        h = None
    try:
        from binascii import b2a_base64 as e
    except ImportError:
        e = None
    f = open(p, 'rb')
    print('#%d' % os.stat(p)[6])
    while 1:
        b = f.read(n)
        if not b:
            break
        if h:
            h.update(b)
        if e:
            r = b':' + e(b)[:-1]
            # text (no NUL) as repr when shorter
            if b.find(b'\0') < 0:
                t = repr(b)
                if len(t) < len(r):
                    r = t
                t = 0
            print(r if type(r) is str else r.decode())
        else:
            print(repr(b))
    f.close()
    if h:
        print('=' + ''.join('%02x' % x for x in h.digest()))
