"""What each board held when its last sync ended equal: FLEET/devices/ID.set,
the digests of its lines (desktop/reconprior.py: 8 bytes a line), so that
the next sync settles from them what the board has not changed since
instead of walking it (docs/sync.md#memory). A cache: a missing, stale or
damaged file costs the walk and nothing else; `companion init` keeps it out
of git (.gitignore)."""
import os

from sporadic.desktop.reconprior import Prior
from companion.fleet.atomic import atomic_write
from companion.fleet.folder import SET


def _path(fleet, dev_id):
    # dev_id was checked as a host id by fleet.device() before this is asked
    return fleet.path('devices', dev_id + SET)


def load(fleet, dev_id):
    """The board's remembered set, or None."""
    try:
        with open(_path(fleet, dev_id), 'rb') as f:
            return Prior.load(f.read())
    except OSError:
        return None


def save(fleet, dev_id, source):
    """Remember the board's set: the lines of `source` (a recon source), which
    the board holds now (the sync's roots agreed). Written only when it
    changed."""
    data = Prior.of(source).dump()
    path = _path(fleet, dev_id)
    try:
        with open(path, 'rb') as f:
            if f.read() == data:
                return
    except OSError:
        pass
    os.makedirs(os.path.dirname(path), exist_ok=True)
    atomic_write(path, data)
