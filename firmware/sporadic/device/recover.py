# Opening the flash store: bring any interrupted operation to a consistent
# end (docs/device.md#crash-safety). Loaded by Store.recover() for the open
# only, then dropped from RAM.
import gc
import sys
import sporadic
from sporadic.device import stamp, store
from sporadic.device.store import exists, size, read_lines, crashpoint, put as _put, write, rename, remove
import os


# A file that does not match its stamp (size and sha256: store.stamp_text)
# was not written by this store: in a signed fleet its lines are re-checked
# as an untrusted delivery (storesync.reimport), the ones refused are
# quarantined as "edited FILE" and never run.


def _read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _cfg(root):
    try:
        import json
        with open(root + 'cfg.json') as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def _outbox(st):
    # a packing of the outbox cut short (device/outbox.py): a partial pack
    # goes (its raw segments are all there), a complete one (renamed to pN)
    # holds every raw segment <= N, which go
    # (the folder read a name at a time: a month without a sync is hundreds)
    if exists(st.out + '/p.tmp'):
        remove(st.out + '/p.tmp')
        st.notes.append('removed partial outbox pack')
    top = 0
    for name in st.out_names():
        if name[:1] == 'p' and name[1:].isdigit():
            top = max(top, int(name[1:]))
    if not top:
        return
    gone = [int(name) for name in st.out_names() if name.isdigit() and int(name) <= top]
    for n in gone:
        remove(st.out + '/' + str(n))


def recover(st):
    st.log_size = size(st.log)
    st.in_size = size(st.inp)
    if not exists(st.out):
        crashpoint()
        try:
            os.mkdir(st.out)
        except OSError:   # LittleFS after a power cut: stat failed, the folder is there
            pass
    _outbox(st)
    cfg = _cfg(st.root)
    signed = stamp.signed(cfg)
    file_stamp = stamp.file_stamp
    ok = st.root + 'jobs.ok'      # the stamp of jobs.txt
    nokp = st.root + 'jobs.nok'   # the stamp of a compaction's jobs.new
    newbad = st.root + 'new.bad'
    inbad = st.root + 'in.bad'
    if exists(st.new):
        if file_stamp(st.new) == _read(nokp):
            st.finish()
            st.notes.append('finished an interrupted compaction')
        else:   # not what a compaction of this store wrote
            rename(st.new, newbad)
    for p in (st.tmp, st.log[:-4] + '.tmp', st.inp[:-4] + '.tmp', st.root + 'jobs.chk',
              st.root + 'jobs.dig', st.root + 'jobs.rxn'):
        if exists(p):
            try:
                remove(p)
            except OSError:     # a full flash may refuse even that: the next open
                continue
            st.notes.append('removed partial ' + p)
    had = list(sys.modules)
    _check_log(st, st.log, 'log', cfg if signed and cfg.get('id') else None)
    _check_log(st, st.inp, 'in')
    _started(st, cfg)
    if not store.roomy():
        # the parser and the MAC the logs' lines were checked with go before
        # the stamps' hashing and the wake index: on a small heap a sync
        # session that delivers nothing never needs them again (a month of
        # results handed over at 64K: docs/budgets.md#27)
        sporadic.forget_since(had)
        gc.collect()
    st.log_size = size(st.log)
    st.in_size = size(st.inp)
    # the stamps (before anything is compacted: a compaction stamps what it writes)
    # jobs.txt as the store left it at its last full pass (the wake index
    # matches it): its stamp is taken unhashed; the next full pass,
    # compaction or sync hashes it (stamp.verify, docs/device.md#stamps)
    s = None
    if size(st.jobs):
        from sporadic.device import wake
        if store.WAKE_INDEX and wake.vouches(st):
            s = _read(ok)
            st.unverified = True
        else:
            s = file_stamp(st.jobs)
    nok = _read(nokp)
    if nok is not None:  # the stamp of a compaction's output
        if s == nok:     # power lost between the two renames of its end
            rename(nokp, ok)
        else:            # an output that never was renamed in
            remove(nokp)
    if s is not None and s != nok:
        if s != _read(ok):
            if signed or not _jobs_sorted(st):
                rename(st.jobs, st.bad)
            else:        # insecure: a sorted, canonical file is taken as it is
                _put(ok, s)
                st.notes.append('jobs.txt changed: stamped again')
    if signed and st.in_size and not stamp.chain_ok(st.inp, _read(st.inp[:-4] + '.ok')):
        rename(st.inp, inbad)
        st.in_size = 0
    n = 0
    for _ in read_lines(st.quar):
        n += 1
    st.quarantined = n
    st.log_size = size(st.log)
    st.in_size = size(st.inp)
    # what to re-import (storesync.reimport, once this module is out of RAM)
    todo = []
    for p, name in ((st.bad, 'jobs.txt'), (newbad, 'jobs.new'), (inbad, 'in.txt')):
        if exists(p):
            todo.append((p, name))
    return todo, signed


def _started(st, cfg):
    # run.txt (Store.started): an action the board was cut in, or the
    # outcome written and run.txt not yet removed. The first: its `run`
    # record into the log, under the board's MAC, as the runtime wrote it
    # before (the planner then records `err interrupted`: at most once)
    try:
        with open(st.run) as g:
            t = g.read()
    except OSError:
        return
    # ID K AT ATTEMPT KIND[ HOST] and a newline; a torn one: the action never
    # started. No KIND (firmware before it): ID K AT ATTEMPT[ HOST], signed
    f = t.split() if t[-1:] == '\n' else []
    kind = f[4] if len(f) > 4 and f[4] in ('s', 'e') else None
    if kind is not None:
        f.pop(4)
    # the board's id: cfg.json's (a HOST field only where it has none: the
    # runtime's default id), never a record in another board's name
    host = cfg.get('id') or (f[4] if len(f) > 4 else None)
    if len(f) > 3 and host and f[1].isdigit() and f[2].isdigit() and f[3].isdigit():
        jid, k, att = f[0], int(f[1]), int(f[3])
        done = False
        for line in read_lines(st.log):
            r = line.split(' ', 6)
            if len(r) > 5 and r[0] == jid and r[2] == host and r[3] == f[1] \
                    and int(r[5].lstrip('abcdefghijklmnopqrstuvwxyz') or 1) == att:
                done = True
        if not done:
            # the record's canonical text from its fields by the outbox's
            # unpacker (core/outpack.py, ~100 lines), not the parser: its
            # ~150 names would stay in the qstr pools of the session that
            # opened the store, a small board's sync (a 64-bit board cut in
            # an action needed 64K for it, 58K without them)
            from sporadic.core import outpack
            u = outpack.Unpacker()
            u.line('@' + host)
            line = u.line('%s %d %s run%s -' % (jid, k, f[2], att if att > 1 else ''))
            u = outpack = None
            mac = '-'
            if cfg.get('secret'):
                from sporadic.core import hmac
                mac = hmac.mac_result(cfg['secret'], line)
                if cfg.get('sign') and kind != 'e':
                    # a single-run job's record is signed (core/recsig.py);
                    # an `each`/`who` one keeps its HMAC alone, as the
                    # runtime writes it: no signing code in this boot's heap
                    try:
                        from sporadic.core import recsig
                        mac = recsig.sign(cfg['sign'], cfg['sign_pub'], line, mac)
                    except MemoryError:
                        pass    # its HMAC alone, never no record (runtime._record)
                    recsig = None
            g = open(st.log, 'a')
            try:
                write(g, line[:-1] + mac + '\n')
            finally:
                g.close()
            st.notes.append('an action was cut: its run record written')
    remove(st.run)


def _check_log(st, path, name, cfg=None):
    # every line canonical and newline-terminated, or rewrite the log
    # without the bad ones (each quarantined once). cfg (log.txt, signed
    # fleet): every line must also be this board's own record, a result
    # under its MAC: the log's stamp, line by line, written with the line.
    sz = size(path)
    if not sz:
        return
    me = secret = None
    if cfg is not None:
        me = cfg.get('id')
        secret = cfg.get('secret')
    good = 0
    ok = True
    for line in read_lines(path):
        good += len(line) + 1
        if cfg is not None and secret and line[:1] != '.' and line.split(' ', 2)[1:2] == ['r']:
            # a result (ID r HOST ...) under this board's MAC is its own
            # record, written canonical by its runtime: the MAC over its
            # text is the check, no parser loads for it (its ~150 names
            # stayed in the qstr pool of the sync session that opened the
            # store: a small board's sixth pool block, docs/budgets.md#31).
            # Any other line, or a log to rewrite, is parsed as before.
            if _foreign(line, me, secret):
                ok = False
        elif not _valid(line) or (cfg is not None and _foreign(line, me, secret)):
            ok = False
    if ok and good == sz:
        return
    tmp = path[:-4] + '.tmp'
    f = open(tmp, 'w')
    for line in read_lines(path):
        if not _valid(line):
            st.quarantine(line, 'bad line in ' + name, name)
            continue
        why = _foreign(line, me, secret) if cfg is not None else None
        if why is None:
            write(f, line + '\n')
        else:
            st.quarantine(line, why, 'edited log.txt')
    f.close()
    if good != sz:
        g = open(path)
        g.seek(good)
        torn = g.read()
        g.close()
        st.quarantine(torn, 'torn last line (power loss while writing)', name)
        st.notes.append('dropped a torn line from ' + path)
    rename(tmp, path)


def _foreign(line, me, secret):
    # None for a record this board wrote to its log (a result of its own
    # under its MAC, an assignment it made as a leader), else why not
    f = line.split(' ', 7)
    if line[0] == '.' or len(f) < 6 or f[1] not in ('r', 'a'):
        return 'not a record of this board: its log holds only its results'
    if f[1] == 'a':
        return None if f[5] == me else 'an assignment by %s in the log of %s' % (f[5], me)
    if f[2] != me:
        return 'a result of %s in the log of %s' % (f[2], me)
    if secret:
        from sporadic.core import hmac
        if not hmac.check_line(secret, line):
            return 'bad MAC: a result of %s that %s did not write' % (me, me)
    return None


def _valid(line):
    # (the parser loads with the first line to check: an open with empty
    # logs, a first sync's, interns none of its names, docs/budgets.md#31)
    from sporadic.core import jobline
    try:
        return jobline.canonical(line) == line
    except Exception:
        return False


def _jobs_sorted(st):
    # insecure: is jobs.txt sorted and canonical, as a store writes it?
    # (an edited file is then taken as it is)
    from sporadic.core import jobline
    last = ''
    n = 0
    for line in read_lines(st.jobs):
        if not line or line <= last:
            return False
        if line[0] != '.' and not (line[jobline.ID_LEN:jobline.ID_LEN + 1] == ' '
                                   and jobline.is_id(line[:jobline.ID_LEN])):
            return False
        last = line
        n += len(line) + 1
    return n == size(st.jobs)
