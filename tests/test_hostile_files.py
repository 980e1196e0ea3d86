"""The fleet folder is hostile input too (issue #29, cases 5 and 6).

Case 5: a job line cut short in the fleet's jobs.txt keeps its id, so it is
a second text under the id the owner signed. `companion check` says so, and
the merge (rule 4, core/rivals.py) never lets the unsigned text replace the
signed one: the first sync brings the signed text back from the board, and
a board deployed from the folder gets the job.

Case 6: a bad file (git conflict markers, bytes that are not UTF-8, a line
longer than a board takes, a file of 100 MB, a cut key, a counter or a
secret that is not a number) ends every verb in one line naming the file
(and line) and what to do, exit status 2, nothing changed; `check` lists
each bad line.

The fleets are set up with the product's commands (`companion init`, `add`,
`deploy`, `sync`), each run as a user runs it, in its own process; the
boards are virtual boards (`companion vboard`).
"""
import os

import pytest

from companion.fleet.folder import Fleet
from sporadic.core import merge
from sporadic.core.rivals import signed_first
from tests.devutil import CLI
from tests.test_errors import one_line

JOB = 'each 2026-12-01T06:00Z log hello ; every=1d'


def job_line(fleet_dir, jid):
    [line] = [l for l in Fleet(fleet_dir).lines() if l.startswith(jid + ' ') and ' r ' not in l[8:11]]
    return line


def rewrite(path, old, new):
    with open(path, 'rb') as f:
        data = f.read()
    assert old in data
    with open(path, 'wb') as f:
        f.write(data.replace(old, new))


def board_jobs(flash):
    with open(os.path.join(flash, 'jobs.txt')) as f:
        return f.read().splitlines()


# -- case 5: a truncated line never beats the signed one ----------------------------

@pytest.mark.slow
def test_a_cut_job_line_is_caught_and_the_signed_text_comes_back(tmp_path):
    c = CLI(str(tmp_path / 'fleet'))
    c('init')
    b1 = c.vboard('--id', 'b1', '--flash', str(tmp_path / 'b1'))
    b2 = c.vboard('--id', 'b2', '--flash', str(tmp_path / 'b2'))
    try:
        c('deploy', b1.path, '--id', 'b1', '-q')
        jid = c('add', JOB).strip()
        assert c('sync', b1.path, '-q').startswith('synced b1')
        signed = job_line(c.dir, jid)
        assert signed.endswith('; every=1d')
        jobs = os.path.join(c.dir, 'jobs.txt')
        cut = signed[:signed.index(' ; ')]
        rewrite(jobs, signed.encode(), cut.encode())     # `... ; every=1d` -> `...`

        p = c.run('check', jobs, ok=False)
        assert p.returncode != 0, p.stdout + p.stderr
        n = open(jobs).read().splitlines().index(cut) + 1
        assert '%s:%d: this line is not signed by this fleet' % (jobs, n) in p.stdout, p.stdout
        assert '1 bad line(s)' in p.stderr

        out = c('sync', b1.path)       # the board refuses the cut text and holds the signed one
        assert 'synced b1' in out, out
        assert 'flagged: %s: a job text no signature of the fleet covers lost to the signed one' % jid in out, out
        assert job_line(c.dir, jid) == signed          # the signed text came back and stays
        assert c.run('check', jobs).returncode == 0
        out = c('sync', b1.path)
        assert 'refused' not in out, out

        c('deploy', b2.path, '--id', 'b2', '-q')       # a board deployed from the folder gets the job
        assert c('sync', b2.path, '-q').startswith('synced b2')
        assert signed in board_jobs(str(tmp_path / 'b2'))
    finally:
        c.stop_boards()


def test_the_merge_keeps_a_signed_job_text_over_an_unsigned_one(tmp_path):
    """Fleet.merge_in (add, cancel, a sync's receive): the signed text wins
    under one id, whichever sorts first; with no signature on either, the
    smaller (rule 4 as before)."""
    f = Fleet(str(tmp_path / 'f'))
    f.init()
    jid = c_add(f, JOB)
    signed = job_line(f.dir, jid)
    cut = signed[:signed.index(' ; ')]
    longer = signed + ' within=1h'
    for forged in (cut, longer):     # sorts before / after the signed text
        f.write_lines(sorted(set(f.lines()) - {signed}) + [forged])
        assert job_line(f.dir, jid) == forged
        conflicts = []
        f.merge_in([signed], 'board', conflicts=conflicts)
        assert job_line(f.dir, jid) == signed
        assert any('no signature of the fleet covers' in c for c in conflicts), conflicts
        f.merge_in([forged], 'hand')                   # and it does not come back
        assert job_line(f.dir, jid) == signed


def c_add(f, text):
    from companion.fleet.folder import add_job
    return add_job(f, text).id


def test_rule_4_signed_first_in_the_core_merge():
    """merge.compact(lines, signed=...): the rule itself, on a `who:` text
    that sorts after the job's results (held until the group ends), and
    without `signed` (a board: every line verified) the smaller text."""
    jid = '0123abcd'
    each = jid + ' each 2026-12-01T06:00Z log a'
    who = jid + ' who:pump 2026-12-01T06:00Z log a'
    res = [jid + ' r b%d 1 1796083200 ok - x' % i for i in range(3)]
    other = ['1111aaaa each 2026-12-01T06:00Z log b', '1111aaaa r b1 0 1796083200 ok - y']
    lines = sorted([each, who] + res + other)
    assert list(merge.compact(lines)) == sorted([each] + res + other)
    conflicts = []
    out = list(merge.compact(lines, conflicts, signed=lambda l: l == who or l.startswith('1111')))
    assert out == sorted([who] + res + other), out
    assert len(conflicts) == 1 and conflicts[0].startswith(jid)
    out = list(merge.compact(lines, [], signed=lambda l: l == each or l.startswith('1111')))
    assert out == sorted([each] + res + other), out
    # neither signed: both pass to rule 4's second half, the smaller stays
    assert list(signed_first(lines, lambda l: False)) == lines
    assert list(merge.compact(lines, [], signed=lambda l: False)) == sorted([each] + res + other)


def test_a_forged_batch_does_not_make_a_text_signed(tmp_path):
    f = Fleet(str(tmp_path / 'f'))
    f.init()
    other = Fleet(str(tmp_path / 'o'))
    other.init()
    jid = c_add(f, JOB)
    signed = job_line(f.dir, jid)
    cut = signed[:signed.index(' ; ')]
    elsewhere = other.sign([cut])        # another fleet's key signs the cut text
    test = f.signed_test(f.lines() + elsewhere)
    assert test(signed) and not test(cut)
    refused = f.receive([cut] + elsewhere, 'board')
    assert refused[0] == (cut, 'not signed by this fleet: no verified batch covers it')
    assert [l for l, _ in refused[1:]] == elsewhere      # the other fleet's record too (security.md#seals)
    f.write_lines(sorted(set(f.lines()) - {signed}) + [cut] + elsewhere)
    f.merge_in([signed], 'board')
    assert job_line(f.dir, jid) == signed


# -- case 6: a bad file ends in one line naming it, exit 2, nothing changed ---------

@pytest.fixture
def fleet(tmp_path):
    c = CLI(str(tmp_path / 'fleet'))
    c('init')
    c.jid = c('add', JOB).strip()
    c.jobs = os.path.join(c.dir, 'jobs.txt')
    yield c
    c.stop_boards()


def snapshot(folder):
    """Every file of a folder and its bytes."""
    out = {}
    for top, _, names in os.walk(folder):
        for n in names:
            p = os.path.join(top, n)
            with open(p, 'rb') as f:
                out[os.path.relpath(p, folder)] = f.read()
    return out


def refused(c, argv, *words):
    """`companion ARGV` ends in one line holding every word, exit 2, and the
    fleet folder is byte for byte as it was."""
    before = snapshot(c.dir)
    p = c.run(*argv, ok=False)
    line = one_line(p, *words)
    assert snapshot(c.dir) == before, line
    return line


def conflicted(c):
    """jobs.txt as `git merge` leaves it without the merge driver (docs/git.md)."""
    with open(c.jobs) as f:
        lines = f.read().splitlines()
    theirs = [l for l in lines if not l.startswith(c.jid)] + [c.jid + ' cancel']
    text = '\n'.join(['<<<<<<< HEAD'] + lines + ['======='] + theirs + ['>>>>>>> origin/main']) + '\n'
    with open(c.jobs, 'w') as f:
        f.write(text)
    return text.splitlines()


def test_conflict_markers_are_named_by_check_and_refused_by_every_verb(fleet):
    lines = conflicted(fleet)
    p = fleet.run('check', fleet.jobs, ok=False)
    assert p.returncode != 0
    for n, l in enumerate(lines, 1):
        if l[:7] in ('<<<<<<<', '=======', '>>>>>>>'):
            assert '%s:%d: a git conflict marker' % (fleet.jobs, n) in p.stdout, p.stdout
    for argv in (['add', 'each +1h log other'], ['cancel', fleet.jid], ['jobs'], ['status']):
        refused(fleet, argv, 'jobs.txt:1: a git conflict marker (<<<<<<<)', 'companion merge', 'restore the file from git')


def test_bytes_that_are_not_utf8_are_named_not_rewritten(fleet):
    rewrite(fleet.jobs, b'log hello', b'log h\xe9llo')      # Latin-1, not UTF-8
    n = open(fleet.jobs, 'rb').read().splitlines().index(
        [l for l in open(fleet.jobs, 'rb').read().splitlines() if b'h\xe9llo' in l][0]) + 1
    p = fleet.run('check', fleet.jobs, ok=False)
    assert p.returncode != 0
    assert '%s:%d: byte 0xe9 at column' % (fleet.jobs, n) in p.stdout, p.stdout
    refused(fleet, ['add', 'each +1h log other'], 'jobs.txt:%d: byte 0xe9 at column' % n, 'is not UTF-8')
    refused(fleet, ['jobs'], 'jobs.txt:%d: byte 0xe9' % n)


def test_a_line_longer_than_a_board_takes_is_caught(fleet):
    from sporadic.core.jobline import JOB_MAX
    long = fleet.jid[:-1] + 'v each 2026-12-01T06:00Z log ' + 'x' * 2000
    big = fleet.jid + ' each 2026-12-01T06:00Z log ' + 'x' * (1 << 20)     # 1 MB
    with open(fleet.jobs) as f:
        lines = f.read().splitlines()
    with open(fleet.jobs, 'w') as f:
        f.write(''.join(l + '\n' for l in sorted(lines + [long, big])))
    n_long = sorted(lines + [long, big]).index(long) + 1
    n_big = sorted(lines + [long, big]).index(big) + 1
    p = fleet.run('check', fleet.jobs, ok=False)
    assert p.returncode != 0
    assert '%s:%d: job line of %d characters: longer than a board takes (at most %d)' % (
        fleet.jobs, n_long, len(long) - 9, JOB_MAX) in p.stdout, p.stdout[:600]
    assert '%s:%d: a line of %d characters: longer than a board takes' % (fleet.jobs, n_big, len(big)) in p.stdout
    refused(fleet, ['jobs'], 'jobs.txt:%d: ' % min(n_long, n_big), 'longer than a board takes')
    with open(fleet.jobs, 'w') as f:
        f.write(''.join(l + '\n' for l in lines))
    refused(fleet, ['add', 'each +1h log ' + 'y' * 100000], 'bad job line: a line of 100013 characters: longer '
            'than a board takes (a job line at most %d' % JOB_MAX)
    refused(fleet, ['add', 'each +1h log ' + 'y' * 2000], 'bad job line: job line of', 'at most %d' % JOB_MAX)


def test_a_file_of_100_mb_is_refused_at_once(fleet):
    with open(fleet.jobs, 'r+b') as f:
        f.truncate(100 << 20)        # 100 MB (sparse: zeros after the lines)
    for argv in (['jobs'], ['add', 'each +1h log other'], ['check', fleet.jobs], ['merge', fleet.jobs]):
        refused(fleet, argv, 'jobs.txt is 104.9 MB, more than a job-line file holds (at most 64 MB)',
                'restore it from git')


@pytest.mark.parametrize('damage', ['cut fleet.pem', 'cut fleet.pub', 'seq=abc'])
def test_a_damaged_key_file_is_named(fleet, damage):
    keys = os.path.join(fleet.dir, 'keys')
    if damage == 'seq=abc':
        with open(os.path.join(keys, 'seq'), 'w') as f:
            f.write('abc\n')
        refused(fleet, ['add', 'each +1h log other'], 'keys/seq holds \'abc\', not the last SEQ used: write 1 into it')
        return
    name = damage.split()[1]
    p = os.path.join(keys, name)
    with open(p, 'rb') as f:
        data = f.read()
    with open(p, 'wb') as f:
        f.write(data[:len(data) // 2])
    refused(fleet, ['add', 'each +1h log other'], 'keys/%s is not' % name, 'cut or damaged?', 'restore it')


@pytest.mark.slow
def test_a_sync_with_a_bad_fleet_file_stops_before_anything_changes(tmp_path):
    """`companion sync` with a board: conflict markers (was `ParseError:
    unknown type '<<<<<<<'`), a 1 MB job line (was a MemoryError on every
    sync), a device secret that is not hex: one line each, exit 2, neither
    the folder nor the board changed; with the file restored the sync runs."""
    c = CLI(str(tmp_path / 'fleet'))
    c('init')
    flash = str(tmp_path / 'b1')
    b1 = c.vboard('--id', 'b1', '--flash', flash)
    try:
        c('deploy', b1.path, '--id', 'b1', '-q')
        c.jid = c('add', JOB).strip()
        c.jobs = os.path.join(c.dir, 'jobs.txt')
        assert c('sync', b1.path, '-q').startswith('synced b1')
        good = open(c.jobs, 'rb').read()
        on_board = board_jobs(flash)

        conflicted(c)
        refused(c, ['sync', b1.path], 'jobs.txt:1: a git conflict marker (<<<<<<<)')
        with open(c.jobs, 'ab') as f:
            f.seek(0)
        with open(c.jobs, 'wb') as f:
            f.write(good + (c.jid[:-1] + 'v each 2026-12-01T06:00Z log ' + 'x' * (1 << 20) + '\n').encode())
        n = len(good.splitlines()) + 1
        refused(c, ['sync', b1.path], 'jobs.txt:%d: a line of' % n, 'longer than a board takes')
        with open(c.jobs, 'wb') as f:
            f.write(good)
        secret = os.path.join(c.dir, 'keys', 'devices', 'b1')
        kept = open(secret).read()
        with open(secret, 'w') as f:
            f.write('not-hex-at-all\n')
        refused(c, ['sync', b1.path], 'keys/devices/b1 is not a hex secret', 'deploy the board again')
        assert board_jobs(flash) == on_board
        with open(secret, 'w') as f:
            f.write(kept)
        assert c('sync', b1.path, '-q').startswith('synced b1')
    finally:
        c.stop_boards()


@pytest.mark.needs('git')
def test_git_merge_keeps_the_signed_text_over_a_cut_one(tmp_path):
    """Two clones of a signed fleet: one cuts a job line by hand and commits
    it, the other adds a job; `companion merge` as git's merge driver keeps
    the signed text (rule 4), where the smaller text used to win."""
    from tests.test_git_merge import git, driver
    from companion.fleet.folder import add_job
    a_dir, b_dir, origin = tmp_path / 'a', tmp_path / 'b', tmp_path / 'origin'
    a_dir.mkdir()
    fa = Fleet(str(a_dir))
    fa.init('shared')
    jid = add_job(fa, JOB).id
    signed = job_line(fa.dir, jid)
    git(a_dir, 'init', '-q', '-b', 'main')
    driver(a_dir)
    git(a_dir, 'add', '-A')
    git(a_dir, 'commit', '-qm', 'fleet')
    git(tmp_path, 'clone', '-q', '--bare', str(a_dir), str(origin))
    git(a_dir, 'remote', 'add', 'origin', str(origin))
    git(tmp_path, 'clone', '-q', str(origin), str(b_dir))
    driver(b_dir)
    os.chmod(str(b_dir / 'keys' / 'fleet.pem'), 0o600)     # git keeps no mode but x
    rewrite(str(a_dir / 'jobs.txt'), signed.encode(), signed[:signed.index(' ; ')].encode())
    git(a_dir, 'commit', '-qam', 'cut by hand')
    git(a_dir, 'push', '-q', 'origin', 'main')
    add_job(Fleet(str(b_dir)), 'each 2026-12-02T06:00Z log other', now=1796000000)
    git(b_dir, 'commit', '-qam', 'B adds a job')
    git(b_dir, 'pull', '-q', '--no-rebase', '--no-edit', 'origin', 'main')
    assert job_line(str(b_dir), jid) == signed


@pytest.mark.parametrize('text, why', [
    (b'each +1h log h\xe9llo', 'bad job line: byte 0xe9 at column 15 is not UTF-8'),
    (b'each +1h log \xe2\x80\xa8x', 'bad job line: a control character (U+2028) at column 14'),
])
def test_add_refuses_a_line_a_file_cannot_hold(fleet, text, why):
    """`add` of bytes that are not UTF-8 (was: an internal error) or of a
    character a file breaks a line at (was: written, then every verb
    refused the file)."""
    import subprocess
    import sys
    before = snapshot(fleet.dir)
    p = subprocess.run([sys.executable.encode(), b'-m', b'companion.cli', b'--fleet', fleet.dir.encode(), b'add',
                        text], capture_output=True, text=True, timeout=120)
    one_line(p, why)
    assert snapshot(fleet.dir) == before


def test_serve_refuses_to_start_on_a_bad_file(fleet):
    conflicted(fleet)
    refused(fleet, ['serve', '--port', '0', '--for', '1', '--bind', '127.0.0.1'], 'jobs.txt:1: a git conflict marker')


def test_a_result_from_a_host_named_dots_is_unverified_not_a_crash(tmp_path):
    """A board may name any host id in a result; `..` is one, and
    keys/devices/.. is a folder, not a secret (was IsADirectoryError in
    a sync once any board was deployed)."""
    from companion.fleet.folder import device_secret, verify_result
    from sporadic.core import jobline
    f = Fleet(str(tmp_path / 'f'))
    f.init()
    device_secret(f, 'b1', create=True)
    for host in ('..', '.'):
        r = jobline.parse('0123abcd r %s 1 1796083200 ok 0123456789abcdef x' % host)
        assert verify_result(f, r) is False


def test_check_names_the_signed_line_a_cut_one_differs_from(tmp_path, capsys):
    """Both texts in the file (a cut copy added beside the signed one):
    check points at the signed line; an insecure fleet's file and a file
    outside a fleet folder have nothing to verify."""
    from companion import cli
    from companion.fleet.folder import add_job
    f = Fleet(str(tmp_path / 'f'))
    f.init()
    jid = add_job(f, JOB).id
    signed = job_line(f.dir, jid)
    cut = signed[:signed.index(' ; ')]
    path = os.path.join(f.dir, 'jobs.txt')
    with open(path) as fh:
        lines = sorted(fh.read().splitlines() + [cut])
    with open(path, 'w') as fh:
        fh.write(''.join(l + '\n' for l in lines))
    capsys.readouterr()
    assert cli.main(['check', path]) != 0
    out = capsys.readouterr().out
    assert out == ('%s:%d: this line differs from the text the fleet signed under id %s (line %d): a board refuses '
                   'it; restore the signed line (git checkout -- %s, or a sync brings it back from a board that '
                   'holds it), or cancel the job and add the text you want\n'
                   % (path, lines.index(cut) + 1, jid, lines.index(signed) + 1, path)), out
    elsewhere = str(tmp_path / 'jobs.txt')
    with open(elsewhere, 'w') as fh:
        fh.write(''.join(l + '\n' for l in lines))
    assert cli.main(['check', elsewhere]) == 0


def test_results_txt_has_no_size_limit_but_its_lines_are_checked(fleet):
    """results.txt keeps every result ever received: a large one is read,
    a bad line in it is named like one in jobs.txt."""
    from companion.fleet import mergefiles
    path = os.path.join(fleet.dir, 'results.txt')
    line = fleet.jid + ' r b1 %d 1796083200 ok - done\n'
    with open(path, 'w') as f:
        f.write(''.join(sorted(line % k for k in range(100))))
    old = mergefiles.FILE_MAX
    try:
        mergefiles.FILE_MAX = os.path.getsize(fleet.jobs)     # results.txt is larger
        assert os.path.getsize(path) > mergefiles.FILE_MAX
        assert len(Fleet(fleet.dir).check_files().results()) == 100
    finally:
        mergefiles.FILE_MAX = old
    with open(path, 'a') as f:
        f.write('>>>>>>> theirs\n')
    refused(fleet, ['results'], 'results.txt:101: a git conflict marker (>>>>>>>)')


def test_a_bad_result_from_a_board_never_lands_in_results_txt(tmp_path):
    """What a board sends is hostile too: a result line that is not a
    record (here from a board's outbox) is not written into results.txt,
    where it would stop every verb."""
    f = Fleet(str(tmp_path / 'f'))
    f.init()
    good = '0123abcd r b1 1 1796083200 ok - done'
    bad = ['0123abcd r b1 x 1796083200 ok - done', '0123abcd r b1 2 1796083200 ok - d\udce9', '0123abcd r  b1 3 1 ok -']
    assert f.add_results([good] + bad) == [good]
    assert [r.line() for r in f.check_files().results()] == [good]


def test_a_board_id_is_never_a_path_in_the_folder(tmp_path):
    """The id a board gives itself at a sync names devices/ID.json: one
    with a '/' (`../../x`) is refused, nothing written outside devices/."""
    from companion.errors import UserError
    f = Fleet(str(tmp_path / 'f'))
    f.init()
    for bad in ('../../evil', 'a/b', ''):
        with pytest.raises(UserError, match='the board names itself'):
            f.save_device({'id': bad})
        with pytest.raises(UserError, match='the board names itself'):
            f.device(bad)
    assert not os.path.exists(str(tmp_path / 'evil.json'))
    f.save_device({'id': 'b1'})
    assert f.device('b1') == {'id': 'b1'}
