# The fleet's host records ('.h', first in the store's order) streamed from
# the store, for a pass that holds none in RAM: more than runtime.HOSTS_MAX
# of them, or a due pass (the wake index's groups alone, no '.h' read).
# Loaded by such a pass for a `one` job's rank or a rollout's wave only.
from sporadic.core import jobline, plan


def hosts(st):
    """The hosts of the store's '.h' records, in order (a host with several
    records more than once)."""
    for line in st.stream():
        if line[0] != '.':
            break
        if line[:3] == '.h ':
            yield jobline.host_of(line)


def rank(st, jid, me):
    """plan.rank(jid, me, hosts) over the streamed hosts: None when `me`
    has no record."""
    mine = plan.score(jid, me)
    r = 0
    found = False
    last = None
    for h in hosts(st):
        if h == last:
            continue   # the same host's next record (groups.scan)
        last = h
        if h == me:
            found = True
        elif plan.score(jid, h) > mine:
            r += 1
    return r if found else None
