# Joining the Wi-Fi of cfg['wifi'] at boot (net/node.py main, net/broker.py
# main): its own module, loaded for the join and let go after it, so that a
# broker wake does not load wire.py and hmac for it (docs/mqtt.md#memory).
import time
from sporadic.net.ticks import ticks_ms, ticks_diff


def wifi_join(cfg, board=None):
    """Join the Wi-Fi in cfg['wifi'] ("SSID:KEY" or {"ssid","key"}); True when
    connected (or no Wi-Fi is needed: the unix port)."""
    w = cfg.get('wifi')
    if not w:
        return True
    if board is not None and hasattr(board, 'wifi_connect'):
        return board.wifi_connect(w)
    if isinstance(w, str):
        ssid, _, pw = w.partition(':')
    else:
        ssid, pw = w.get('ssid'), w.get('key', '')
    try:
        import network
    except ImportError:
        return True
    sta = network.WLAN(network.STA_IF)
    sta.active(True)
    if not sta.isconnected():
        sta.connect(ssid, pw)
        t = ticks_ms()
        while not sta.isconnected() and ticks_diff(ticks_ms(), t) < 15000:
            time.sleep_ms(100)
    return sta.isconnected()
