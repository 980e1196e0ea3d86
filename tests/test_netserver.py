"""The TCP sync server's one long-lived poll object (firmware/sporadic/net/server.py,
the code a board's network loop and `companion serve` run), on CPython with
real loopback sockets: the companion's TcpLink on one side, the server driven
by companion/link/tcp.py's serve() on the other (port 0, read back)."""
import threading
import time

from companion.link.tcp import TcpLink, serve
from sporadic.net import server

BIG = 4 << 20      # a response far larger than a socket's send buffer


def served(srv, done, deadline_s=30):
    """Run the server until done is set (or the deadline)."""
    end = time.time() + deadline_s
    while not done.is_set() and time.time() < end:
        serve(srv, until=time.time() + 0.05)


def call_in_thread(port, requests, out, done, fleet_key=None):
    def run():
        try:
            link = TcpLink('127.0.0.1', port, timeout=20, me='b-2', fleet_key=fleet_key)
            try:
                for r in requests:
                    out.append(link.call(r))
            finally:
                link.close()
        except Exception as e:  # the test asserts on it
            out.append(e)
        finally:
            done.set()
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def new_server(handler, key=None):
    return server.Server('b-1', handler, 0, '127.0.0.1', keyfor=lambda cid: key)


def test_a_response_larger_than_the_socket_buffer_is_drained():
    # the rest of it goes out only when the connection asks the poll for POLLOUT
    srv = new_server(lambda req: req[0] * BIG)
    try:
        out, done = [], threading.Event()
        t = call_in_thread(srv.sock.getsockname()[1], ['x', 'y'], out, done)
        served(srv, done)
        t.join(5)
        assert [len(r) if isinstance(r, str) else r for r in out] == [BIG, BIG]
        assert out[0] == 'x' * BIG and out[1] == 'y' * BIG
    finally:
        srv.close()


def test_closed_connections_leave_the_poll():
    # a closed socket still registered would wake every poll at once (POLLNVAL)
    srv = new_server(lambda req: 'ok ' + req)
    try:
        for i in range(server.MAX_CONN + 2):
            out, done = [], threading.Event()
            t = call_in_thread(srv.sock.getsockname()[1], ['r%d' % i], out, done)
            served(srv, done)
            t.join(5)
            assert out == ['ok r%d' % i]
            end = time.time() + 5
            while srv.conns and time.time() < end:      # the server sees the close
                serve(srv, until=time.time() + 0.05)
            assert srv.conns == []
        assert srv.poller.poll(0) == []
        assert srv.stats['accepted'] == server.MAX_CONN + 2
    finally:
        srv.close()


def test_an_answer_in_pieces_is_framed_and_signed_as_one():
    # syncsrv.pieces answers a G with recon's pieces, never joined on the
    # board: the companion gets one signed frame; a handler failing part-way
    # (no memory mid-G) answers an error, and the connection goes on
    key = bytes(range(32))
    lines = ['l%d caf\u00e9 \u2603' % i for i in range(500)]

    def handler(req):
        if req == 'G .':
            return iter(lines)
        if req == 'G x':
            def failing():
                yield 'one'
                raise MemoryError('memory allocation failed, allocating 3557 bytes')
            return failing()
        return 'ok ' + req
    srv = new_server(handler, key)
    try:
        out, done = [], threading.Event()
        t = call_in_thread(srv.sock.getsockname()[1], ['G .', 'G x', 'I'], out, done, key.hex())
        served(srv, done)
        t.join(5)
        assert out[0] == ''.join(lines)
        assert out[1] == '!error MemoryError: memory allocation failed, allocating 3557 bytes'
        assert out[2] == 'ok I'
    finally:
        srv.close()
