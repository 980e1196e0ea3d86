"""The companion's sync library on its own (no board): what a board is sent."""
from companion.fleet.folder import Fleet
from companion.sync import syncer
from companion.fleet.jobs_file import add_job
from tests.test_git_merge import board_reports


def test_board_view_leaves_out_other_boards_each_results(tmp_path):
    """A board is sent its own results and every single-run result, not the
    other boards' results of each/who jobs (the companion keeps all)."""
    f = Fleet(tmp_path)
    f.init('v', insecure=True)
    each = add_job(f, 'each 2026-12-01T06:00Z log hi ; every=1h', now=1796000000)
    one = add_job(f, 'one 2026-12-01T06:00Z log backup ; every=1h', now=1796000001)
    for host in ('pump-1', 'pump-2'):
        board_reports(f, host, each.id, [0])
        board_reports(f, host, one.id, [1])
    view = list(syncer.board_view(f, 'pump-1')())
    assert any(l.startswith('%s r pump-1 ' % each.id) for l in view)
    assert not any(l.startswith('%s r pump-2 ' % each.id) for l in view)
    assert any(l.startswith('%s r pump-2 ' % one.id) for l in view)
    assert len(view) == len(f.lines()) - 1


def test_push_requests_follow_the_board_heap():
    """A P request is compiled on the board from source text, so it is held
    about three times over: a small heap gets small requests."""
    from sporadic.core import recon
    assert syncer.put_bytes_for(38 * 1024) == 512          # an ESP8266
    assert syncer.put_bytes_for(100 * 1024) == 1024
    assert syncer.put_bytes_for(128 * 1024) == recon.REQ_MAX
    assert syncer.put_bytes_for(2 * 1024 * 1024) == syncer.PUT_ROOMY > recon.REQ_MAX   # a Pico's ~190K too
    assert syncer.put_bytes_for(None) == recon.REQ_MAX    # firmware that does not say
    # a serial sync has the board's heap to itself after its soft reset (no
    # loop beside it): a roomy one takes twice as much a P; a TCP board's
    # loop shares its heap, and a small heap gets what it got
    from companion.link.serial import SerialLink
    from companion.link.tcp import TcpLink
    assert SerialLink.own_heap and not TcpLink.own_heap
    assert syncer.put_bytes_for(2 * 1024 * 1024, SerialLink.own_heap) == syncer.PUT_OWN_HEAP == 2 * syncer.PUT_ROOMY
    assert syncer.put_bytes_for(2 * 1024 * 1024, TcpLink.own_heap) == syncer.PUT_ROOMY
    assert syncer.put_bytes_for(38 * 1024, True) == 512 and syncer.put_bytes_for(None, True) == recon.REQ_MAX
