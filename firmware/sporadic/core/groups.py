# One streaming pass over a sorted store: per job group, what host `me` knows
# about the job. The one scanner the runtime, the leader, `companion status`
# and the simulator's cross-check use (docs/jobline.md#the-store-order).
#
#   scan(lines, me, hosts_max, visit, tally=None, cap=None)   lines sorted: '.' records, then job groups
#
# calls, at the end of each job group,
#
#   visit(jid, text, cancelled, mine, done_k, asg, hosts)
#     text       the job's line (None: results without their job)
#     cancelled  a cancel record is in the group
#     mine       me's newest result as (k, outcome, attempt), in the merge's
#                order of results, or None
#     done_k     newest instance another host started or ran (a miss does not
#                count), -1 if none; me=None: every host's results count
#     asg        the newest leader assignment (greatest K, then AT) as
#                (k, host), or None
#     hosts      the '.h' hosts (complete: they sort before every job group),
#                None when there are more than hosts_max
#
# tally (a list of three ints, optional) holds, when visit is called, what a
# rollout's later wave hears (plan.decide's `heard`): [k, ok, err] counting
# the other hosts whose newest result is an `ok` or an `err` on k, the
# greatest such instance ([-1, 0, 0]: none).
#
# cap: None, or cap(text) -> the newest instance of a single-run (`one`,
# `any`) job due now: another host's run of a later instance is no run at
# all (none can have run it yet: a forged record, docs/security.md
# #what-a-stolen-board-can-do) and does not hide the others' runs from
# done_k. Called at most once a group, only when such a result comes (the
# job's line sorts before its results).
#
# Board keys (docs/security.md#board-signatures): a host whose `.h` record
# carries a key (`ed25519:HEX`) has its results of a single-run job and its
# assignments counted only when they carry its signature (core/recsig.py; a
# board's trust.admit verified it on arrival, the scan only looks for it):
# a board holding the fleet key cannot settle an instance in its name.
#
# A callback, not a generator: a board's loop keeps the state in one frame
# and allocates nothing per group.
from sporadic.core import jobline, order

_OUTCOMES = ('run', 'err', 'miss', 'ok')   # order.result_key's outcome ranks


def _key(f):
    # order.result_key's (k, attempt, outcome rank) from a result's split fields
    tok = f[5]
    c = tok[0]
    n = 2 if c == 'o' else 3 if c != 'm' else 4
    return (int(f[3]), int(tok[n:]) if len(tok) > n else 1,
            3 if c == 'o' else 1 if c == 'e' else 2 if c == 'm' else 0)


def _tally(tally, tb):
    # one other host's newest result (k, attempt, outcome rank) into the tally
    if tb is None or tb[2] not in (1, 3):   # run and miss (aborts too) are no outcome
        return
    if tb[0] > tally[0]:
        tally[0] = tb[0]
        tally[1] = tally[2] = 0
    if tb[0] == tally[0]:
        tally[1 if tb[2] == 3 else 2] += 1


def scan(lines, me, hosts_max, visit, tally=None, cap=None):
    idl = jobline.ID_LEN
    lim = None  # cap(text) of the group, once asked
    th = None   # tally: the other host being read (its results are adjacent)
    tb = None   # and its newest result (k, attempt, outcome rank)
    if tally is not None:
        tally[0] = -1
        tally[1] = tally[2] = 0
    hosts = []
    keyed = None   # hosts with a board key (their single-run records must be signed)
    single = False
    gid = None
    text = None
    cancelled = False
    mine = None
    mkey = None
    done_k = -1
    asg = None
    akey = None
    for line in lines:
        if line[0] == '.':
            if line[:3] == '.h ' and jobline.board_keyed(line):
                if keyed is None:
                    keyed = []
                keyed.append(jobline.host_of(line))
            if line[:3] == '.h ' and hosts is not None:
                h = jobline.host_of(line)
                if hosts and hosts[-1] == h:
                    continue   # a host's records are adjacent (one a deploy that moved it)
                if hosts_max is None or len(hosts) < hosts_max:
                    hosts.append(h)
                else:
                    hosts = None
            continue
        jid = line[:idl]
        if jid != gid:
            if gid is not None:
                if tally is not None:
                    _tally(tally, tb)
                visit(gid, text, cancelled, mine, done_k, asg, hosts)
                if tally is not None:
                    tally[0] = -1
                    tally[1] = tally[2] = 0
                    th = tb = None
            gid = jid
            text = None
            cancelled = False
            mine = None
            mkey = None
            done_k = -1
            asg = None
            akey = None
            lim = None
            single = False
        kind = line[idl + 1:idl + 3]
        if kind == 'r ':
            if cancelled:
                continue
            f = line.split(None, 6)
            if len(f) < 6:
                continue
            if f[2] == me:
                key = order.result_key(line)
                if mkey is None or key > mkey:
                    mkey = key
                    mine = (key[0], _OUTCOMES[key[2]], key[1])
            elif single and f[2] in keyed and (len(f) < 7 or not jobline.board_signed(f[6])):
                pass       # not signed by a host that signs: no record of it at all
            else:
                if not f[5].startswith('miss'):
                    k = int(f[3])
                    if k > done_k:
                        if cap is not None and text is not None and text[idl + 1:idl + 4] in ('one', 'any'):
                            if lim is None:
                                lim = cap(text)
                            if k <= lim:
                                done_k = k
                        else:
                            done_k = k
                if tally is not None:
                    key = _key(f)
                    if f[2] != th:
                        _tally(tally, tb)
                        th = f[2]
                        tb = key
                    elif key > tb:
                        tb = key
        elif kind == 'a ':
            # a section leader's assignment (docs/wifi.md)
            f = line.split(None, 6)
            if len(f) >= 6 and not (keyed and f[5] in keyed and (len(f) < 7 or not jobline.board_signed(f[6]))):
                key = (int(f[3]), int(f[4]))
                if akey is None or key > akey:
                    akey = key
                    asg = (key[0], f[2])
        elif line[idl:] == ' cancel':
            cancelled = True
        elif text is None:
            text = line
            single = keyed is not None and text[idl + 1:idl + 5] in ('one ', 'any ')
    if gid is not None:
        if tally is not None:
            _tally(tally, tb)
        visit(gid, text, cancelled, mine, done_k, asg, hosts)
