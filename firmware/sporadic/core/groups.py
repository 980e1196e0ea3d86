# One streaming pass over a sorted store: per job group, what host `me` knows
# about the job (the one scanner the runtime, the leader, `companion status`
# and the simulator's cross-check use; docs/jobline.md#groups).
#
#   for g in scan(lines, me):       # lines sorted: '.' records, then job groups
#       g.id, g.text                # the job's line (None: results without a job)
#       g.cancelled
#       g.mine                      # me's newest result as (k, outcome, attempt), or None
#       g.done_k                    # newest instance another host started or ran (misses
#                                   # do not count), -1 if none
#       g.asg, g.asg_at             # newest leader assignment: (k, host) and when, or None
#       g.hosts                     # the '.h' hosts (all of them before the first group),
#                                   # None when more than hosts_max
#
# The same Group object is refilled for every group: copy what you keep.
from sporadic.core import jobline, merge

_OUTCOMES = ('run', 'err', 'miss', 'ok')   # merge.result_key's outcome ranks


class Group:
    __slots__ = ('id', 'text', 'cancelled', 'mine', 'done_k', 'asg', 'asg_at', 'hosts', '_mkey')

    def _reset(self, gid):
        self.id = gid
        self.text = None
        self.cancelled = False
        self.mine = None
        self._mkey = None
        self.done_k = -1
        self.asg = None
        self.asg_at = -1


def scan(lines, me=None, hosts_max=None):
    """Yield a Group for each job group of the sorted `lines`. me=None: every
    host's results count in done_k (the leader's view)."""
    g = Group()
    g._reset(None)
    hosts = []
    g.hosts = hosts
    idl = jobline.ID_LEN
    gid = None
    for line in lines:
        if line[0] == '.':
            if line[:3] == '.h ' and hosts is not None:
                if hosts_max is None or len(hosts) < hosts_max:
                    hosts.append(line[3:])
                else:
                    hosts = None
                    g.hosts = None
            continue
        jid = line[:idl]
        if jid != gid:
            if gid is not None:
                yield g
            gid = jid
            g._reset(jid)
        kind = line[idl + 1:idl + 3]
        if kind == 'r ':
            if g.cancelled:
                continue
            f = line.split(None, 6)
            if len(f) < 6:
                continue
            if f[2] == me:
                key = merge.result_key(line)   # the merge's own order of results
                if g._mkey is None or key > g._mkey:
                    g._mkey = key
                    g.mine = (key[0], _OUTCOMES[key[2]], key[1])
            elif not f[5].startswith('miss'):
                k = int(f[3])
                if k > g.done_k:
                    g.done_k = k
        elif kind == 'a ':
            # a section leader's assignment (docs/wifi.md): the newest (K, AT)
            f = line.split(None, 6)
            if len(f) >= 6:
                k = int(f[3])
                at = int(f[4])
                if g.asg is None or (k, at) > (g.asg[0], g.asg_at):
                    g.asg = (k, f[2])
                    g.asg_at = at
        elif line[idl:] == ' cancel':
            g.cancelled = True
        elif g.text is None:
            g.text = line
    if gid is not None:
        yield g
