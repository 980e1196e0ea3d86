# Opening the flash store: bring any interrupted operation to a consistent
# end (docs/device.md#crash-safety). Loaded by Store.recover() for the open
# only, then dropped from RAM.
from sporadic import jobline
from sporadic.store import exists, size, read_lines, crashpoint, _write, _rename, _remove
import os


def recover(st):
    st.log_size = size(st.log)
    st.in_size = size(st.inp)
    if not exists(st.out):
        crashpoint()
        try:
            os.mkdir(st.out)
        except OSError:   # LittleFS after a power cut: stat failed, the folder is there
            pass
    if exists(st.new):
        st.finish()
        st.notes.append('finished an interrupted compaction')
    for p in (st.tmp, st.log[:-4] + '.tmp', st.inp[:-4] + '.tmp'):
        if exists(p):
            _remove(p)
            st.notes.append('removed partial ' + p)
    _check_log(st, st.log, 'log')
    _check_log(st, st.inp, 'in')
    st.log_size = size(st.log)
    st.in_size = size(st.inp)
    if exists(st.bad):
        _import_bad(st)
    elif not _jobs_ok(st):
        _rename(st.jobs, st.bad)
        st.notes.append('jobs.txt unsorted or torn: re-imported')
        _import_bad(st)
    n = 0
    for _ in read_lines(st.quar):
        n += 1
    st.quarantined = n
    st.log_size = size(st.log)
    st.in_size = size(st.inp)


def _check_log(st, path, name):
    # every line canonical and newline-terminated, or rewrite the log
    # without the bad ones (each quarantined once)
    sz = size(path)
    if not sz:
        return
    good = 0
    ok = True
    for line in read_lines(path):
        good += len(line) + 1
        if not _valid(line):
            ok = False
    if ok and good == sz:
        return
    tmp = path[:-4] + '.tmp'
    f = open(tmp, 'w')
    for line in read_lines(path):
        if _valid(line):
            _write(f, line + '\n')
        else:
            st.quarantine(line, 'bad line in ' + name, name)
    f.close()
    if good != sz:
        g = open(path)
        g.seek(good)
        torn = g.read()
        g.close()
        st.quarantine(torn, 'torn last line (power loss while writing)', name)
        st.notes.append('dropped a torn line from ' + path)
    _rename(tmp, path)


def _valid(line):
    try:
        return jobline.canonical(line) == line
    except Exception:
        return False


def _jobs_ok(st):
    sz = size(st.jobs)
    if not sz:
        return True
    try:
        with open(st.jobs[:-4] + '.ok') as f:
            if f.read() == str(sz):
                return True          # as the store last wrote it
    except (OSError, ValueError):
        pass
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
    if n != sz:
        return False
    st.stamp()
    return True


def _import_bad(st):
    # a jobs.txt that was not sorted/canonical (hand-written, torn):
    # every line goes through receive(), then the bad copy goes
    st.receive(read_lines(st.bad, True), 'jobs.txt')
    st.compact()
    _remove(st.bad)
