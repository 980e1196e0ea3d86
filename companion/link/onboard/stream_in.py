# Board side of a stream (SerialLink: big requests and big files), exec'd
# once per boot at the raw prompt. _sp_in(n, w, d, f) reads n raw bytes from
# stdin and hands each piece to f: it runs only through raw-paste (the unix
# port keeps its terminal raw then) and with Ctrl-C off, so every byte value
# is data. Flow control as raw-paste's: it writes 0x01 to grant a window of
# w bytes, first two (one at the start, one as the first is consumed), then
# one per window consumed, so no UART buffer overflows. A companion gone
# mid-stream: after _IDLE_MS of silence it gives up, back at the raw prompt.
# d is the SHA-256 of the stream, checked before the data is used, so neither
# a cut nor the filler a reconnecting companion sends to unstick it is taken
# for data.
from micropython import const
_IDLE_MS = const(1500)
def _sp_in(n, w, d, f):
    import sys, micropython, select, hashlib
    r = sys.stdin.buffer
    q = select.poll()
    q.register(r, select.POLLIN)
    h = hashlib.sha256()
    b = bytearray(w)
    m = memoryview(b)
    micropython.kbd_intr(-1)
    try:
        sys.stdout.write('\x01')
        k = 0
        while n:
            if not q.poll(_IDLE_MS):
                raise OSError(116)
            j = r.readinto(b, min(n, w))
            if not j:
                raise OSError(5)
            c = m[:j]
            h.update(c)
            f(c)
            n -= j
            k += j
            if k >= w:
                k -= w
                sys.stdout.write('\x01')
    finally:
        micropython.kbd_intr(3)
    if h.digest() != d:
        raise ValueError('stream corrupted')
# A streamed request: its n bytes as text.
def _sp_req(n, w, d):
    b = bytearray(n)
    p = [0]
    def f(c):
        b[p[0]:p[0] + len(c)] = c
        p[0] += len(c)
    _sp_in(n, w, d, f)
    return str(b, 'utf-8')
# Fails here, not mid-stream, on a board without SHA-256 (files go in chunks).
import hashlib
hashlib.sha256
