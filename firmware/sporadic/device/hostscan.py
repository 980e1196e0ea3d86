# The fleet's host records ('.h', first in the store's order) streamed from
# the store, for a pass that holds none in RAM: more than runtime.HOSTS_MAX
# of them, or a due pass (the wake index's groups alone, no '.h' read).
# Loaded by such a pass for a `one` job's rank (plan.rank over the stream)
# or a rollout's wave only.
from sporadic.core import jobline


def hosts(st):
    """The hosts of the store's '.h' records, in order (a host with several
    records more than once)."""
    for line in st.stream():
        if line[0] != '.':
            break
        if line[:3] == '.h ':
            yield jobline.host_of(line)

