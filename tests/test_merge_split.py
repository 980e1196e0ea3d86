"""`companion merge` on two CPUs (companion/fleet/mergefiles.py): the two halves of
the id space merged side by side write the same bytes, the same messages and
the same exit status as one process, whatever the files hold; where a half
cannot stand alone the command merges in one process instead."""
import os
import subprocess
import sys

import pytest

from companion.fleet import mergefiles
from sporadic.desktop import merging
from tests.test_git_merge import _diverged_fleet_files


def run_merge(cwd, names, *extra):
    r = subprocess.run([sys.executable, '-m', 'companion.cli', 'merge', *names, *extra],
                       capture_output=True, cwd=cwd)
    return r.returncode, r.stdout, r.stderr


def write(tmp_path, files, crlf=()):
    names = []
    for name, lines in files.items():
        end = '\r\n' if name in crlf else '\n'
        (tmp_path / name).write_bytes((end.join(lines) + (end if lines else '')).encode())
        names.append(name)
    return names


def canonical_sides():
    """base, ours, theirs as the companion writes them: canonical lines only,
    two job texts under one id in both halves of the id space."""
    return [merging.merge(lines) for lines in _diverged_fleet_files()]


def split_is_taken(tmp_path, names):
    return mergefiles._merge_halves([str(tmp_path / n) for n in names]) is not None


def same_both_ways(tmp_path, names):
    one = run_merge(tmp_path, names, '--workers', '1')
    two = run_merge(tmp_path, names, '--workers', '2')
    assert two == one
    assert run_merge(tmp_path, names, '--workers', '2', '-o', 'two.txt')[0] == one[0]
    assert (tmp_path / 'two.txt').read_bytes() == one[1]
    return one


@pytest.mark.skipif(not hasattr(os, 'fork'), reason='the split needs os.fork')
def test_two_halves_write_what_one_process_writes(tmp_path):
    base, ours, theirs = canonical_sides()
    job = next(l for l in ours if l < 'g' and ' each ' in l)   # and a second text under a first-half id
    theirs = sorted(theirs + [job[:8] + ' each 2026-12-02T00:00Z log other text'])
    names = write(tmp_path, {'base.txt': base, 'ours.txt': ours, 'theirs.txt': theirs})
    assert split_is_taken(tmp_path, names)
    rc, out, err = same_both_ways(tmp_path, names)
    lines = out.decode().splitlines()
    assert rc == 0 and lines == sorted(lines)
    assert {l[0] for l in lines} & set('0123456789abcdef.') and {l[0] for l in lines} & set('ghijklmnopqrstuv')
    notes = err.decode().splitlines()    # conflicts from both halves, in byte order as one process gives them
    assert len(notes) >= 2 and notes == sorted(notes), notes
    # CRLF, an empty file, one file, a file of one half only
    (tmp_path / 'empty.txt').write_text('')
    low = [l for l in ours if l < 'g']
    names2 = write(tmp_path, {'crlf.txt': theirs, 'low.txt': low}, crlf=('crlf.txt',))
    for ns in (names2, ['empty.txt'], ['empty.txt', 'ours.txt'], ['low.txt'], ['ours.txt']):
        assert split_is_taken(tmp_path, ns)
        assert same_both_ways(tmp_path, ns)[0] == 0


@pytest.mark.skipif(not hasattr(os, 'fork'), reason='the split needs os.fork')
def test_lines_that_leave_their_half_or_are_bad_merge_in_one_process(tmp_path):
    base, ours, theirs = canonical_sides()
    high = next(l for l in ours if l >= 'g' and ' r ' in l)
    low = next(l for l in ours if '0' <= l[0] <= 'f' and ' r ' in l)
    # a result line after a space: raw, it sorts before 'g'; its id is in the second half
    spaced = write(tmp_path, {'a.txt': ours, 'b.txt': theirs + ['  ' + high.replace(' ok ', ' err ', 1)]})
    # a job line a user typed without its id: the id parse() gives it is in the other half
    typed = next(t for t in ('each 2026-12-01T06:00Z log typed %d' % i for i in range(99))
                 if jobline_id(t) >= 'g')
    untyped = write(tmp_path, {'c.txt': ours + [typed]})
    # a bad line (its message gives its number in the whole file), a comment, a blank line
    bad = write(tmp_path, {'d.txt': ours[:40] + [low[:8] + ' r pump-1 x 1796000000 ok -'] + ours[40:],
                           'e.txt': ['# kept apart', ''] + theirs})
    for names in (spaced, untyped, bad):
        same_both_ways(tmp_path, names)
        assert not split_is_taken(tmp_path, names)
    rc, out, err = run_merge(tmp_path, bad)
    assert rc == 1 and err.decode().startswith("d.txt:41: bad instance number 'x'\n"), err
    rc, out, err = run_merge(tmp_path, untyped)
    assert rc == 0 and jobline_id(typed) + ' each ' in out.decode()


def jobline_id(text):
    from sporadic.core import jobline
    return jobline.parse(text).id


def test_a_missing_file_is_one_line(tmp_path):
    (tmp_path / 'a.txt').write_text('')
    r = subprocess.run([sys.executable, '-m', 'companion.cli', 'merge', 'a.txt', 'gone.txt'],
                       capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert r.returncode != 0 and r.stderr.count('\n') == 1 and 'gone.txt' in r.stderr, r.stderr


def test_with_other_threads_running_it_merges_without_forking(tmp_path, monkeypatch):
    """A fork copies only the calling thread; a lock another thread holds
    (the import lock, a logger's) would stay locked in the child forever."""
    import threading
    base, ours, theirs = canonical_sides()
    names = write(tmp_path, {'ours.txt': ours, 'theirs.txt': theirs})
    paths = [str(tmp_path / n) for n in names]
    want = mergefiles.merged_text(paths, [], [], workers=1)

    def no_fork():
        raise AssertionError('forked with another thread running')

    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        monkeypatch.setattr(os, 'fork', no_fork)
        assert mergefiles.merged_text(paths, [], [], workers=2) == want
    finally:
        stop.set()
        other.join()
