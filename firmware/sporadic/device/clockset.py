# What a sync does with the device clock (clockset.set, clockset.info,
# called by the sync server): set it from a trusted source, report it. The loop
# only reads the clock, so it never loads this module.
import board
from sporadic.device import clock


def set(unix_epoch, src='companion'):
    """Set the clock from a trusted source ('companion', 'signed', ...)."""
    t = int(unix_epoch)
    if t < clock.FLOOR:
        raise ValueError('refused time %d: before 2024' % t)
    if clock.state == 'trusted':
        d = t - clock.raw()
        if d > clock.JUMP_S or d < -clock.JUMP_S:
            clock.note_jump(t, d, src)
    board.set_time(t)
    clock.init(src, t)   # the clock's state is the clock's: trusted from src at t
    return t


def info():
    d = {'clock': clock.state, 'source': clock.source, 'raw': clock.raw()}
    if clock.set_at is not None:
        d['set_at'] = clock.set_at
    if clock.jumps:
        d['jumps'] = [list(j) for j in clock.jumps]
    if clock.state != 'trusted':
        d['note'] = 'clock unknown: no dated job runs until a trusted time is set'
    return d
