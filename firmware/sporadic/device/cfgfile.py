# /cfg.json, the board's settings (provisioning writes them): read by the
# boot to pick its loop, by a broker wake (net/broker.py main) and by the
# runtime's set-up (rtinit.py). Its own small module: the boot and a broker
# wake read the settings without loading the runtime (docs/mqtt.md#memory).
import json
import os

CFG = '/cfg.json'


def load():
    try:
        with open(CFG) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def save(cfg):
    with open(CFG + '.tmp', 'w') as f:
        json.dump(cfg, f)
    os.rename(CFG + '.tmp', CFG[1:] if CFG[0] == '/' else CFG)


def default_id(board):
    uid = board.unique_id()
    return board.NAME + '-' + uid[-8:]


def host_id(cfg, board):
    """This board's host id: cfg's, else the board's default."""
    from sporadic.core import jobline
    return jobline.check_host(cfg.get('id') or default_id(board))
