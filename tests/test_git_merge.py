"""Two companions share one fleet through git: `companion merge` is the merge
driver for jobs.txt, git's union driver takes results.txt."""
import os
import random
import shutil
import subprocess
import sys

import pytest

from sporadic.core import jobline
from companion.fleet.zonerule import zone_rule
from companion.fleet.folder import Fleet
from companion.fleet.jobs_file import add_job, cancel_job

GIT = shutil.which('git')
pytestmark = pytest.mark.needs('git')


def git(cwd, *args):
    env = dict(os.environ, GIT_AUTHOR_NAME='t', GIT_AUTHOR_EMAIL='t@x', GIT_COMMITTER_NAME='t',
               GIT_COMMITTER_EMAIL='t@x')
    return subprocess.run([GIT, *args], cwd=cwd, check=True, capture_output=True, text=True, env=env).stdout


def driver(cwd):
    companion = [sys.executable, '-m', 'companion.cli']
    git(cwd, 'config', 'merge.sporadic.name', 'sporadic job-line merge')
    git(cwd, 'config', 'merge.sporadic.driver', ' '.join(companion) + ' merge %O %A %B -o %A')


def board_reports(fleet, host, jid, ks):
    """What a sync with board `host` brings into a fleet folder."""
    lines = [jobline.Result(jid, host, k, 1796100000 + k * 60, 'ok', 1, '-', 'ran %d' % k).line() for k in ks]
    fleet.merge_in(lines, host)
    fleet.add_results(lines)


def test_two_clones_merge_through_git_without_markers_or_loss(tmp_path):
    origin = tmp_path / 'origin'
    a_dir = tmp_path / 'a'
    b_dir = tmp_path / 'b'
    a_dir.mkdir()
    fa = Fleet(a_dir)
    fa.init('shared', insecure=True)
    j1 = add_job(fa, 'each 2026-12-01T06:00Z log hello ; every=1m', now=1796000000)
    git(a_dir, 'init', '-q', '-b', 'main')
    driver(a_dir)
    git(a_dir, 'add', '-A')
    git(a_dir, 'commit', '-qm', 'fleet')
    git(tmp_path, 'clone', '-q', '--bare', str(a_dir), str(origin))
    git(a_dir, 'remote', 'add', 'origin', str(origin))
    git(tmp_path, 'clone', '-q', str(origin), str(b_dir))
    driver(b_dir)
    fb = Fleet(b_dir)

    # laptop A syncs pump-1 and adds a job; laptop B syncs pump-2 and cancels nothing
    board_reports(fa, 'pump-1', j1.id, [0, 1, 2])
    j2 = add_job(fa, 'one 2026-12-01T00:00Z log backup ; every=1d', now=1796000001)
    board_reports(fb, 'pump-2', j1.id, [0, 1])
    j3 = add_job(fb, 'who:pump 2026-12-02T00:00Z pin 5 on', now=1796000002)
    cancel_job(fb, j3.id)
    board_reports(fb, 'pump-1', j1.id, [3])   # B met pump-1 later than A did

    git(a_dir, 'commit', '-qam', 'A synced pump-1')
    git(a_dir, 'push', '-q', 'origin', 'main')
    git(b_dir, 'commit', '-qam', 'B synced pump-2')
    git(b_dir, 'pull', '-q', '--no-rebase', '--no-edit', 'origin', 'main')
    git(b_dir, 'push', '-q', 'origin', 'main')
    git(a_dir, 'pull', '-q', '--no-rebase', '--no-edit', 'origin', 'main')

    for d in (a_dir, b_dir):
        for name in ('jobs.txt', 'results.txt'):
            text = (d / name).read_text()
            assert '<<<<<<<' not in text and '>>>>>>>' not in text
    assert (a_dir / 'jobs.txt').read_text() == (b_dir / 'jobs.txt').read_text()
    jobs = Fleet(a_dir).lines()
    assert any(l.startswith(j2.id + ' one ') for l in jobs)
    assert j3.id + ' cancel' in jobs and not any(l.startswith(j3.id + ' who') for l in jobs)
    assert any(l.startswith('%s r pump-1 3 ' % j1.id) for l in jobs)   # newest of both sides
    assert any(l.startswith('%s r pump-2 1 ' % j1.id) for l in jobs)
    got = {(r.host, r.k) for r in Fleet(a_dir).results()}
    assert got == {('pump-1', 0), ('pump-1', 1), ('pump-1', 2), ('pump-1', 3), ('pump-2', 0), ('pump-2', 1)}



# -- the merge's answer, byte for byte ------------------------------------------

def _diverged_fleet_files(seed=15, jobs=60, lines=1500):
    """base, ours, theirs: two laptops' jobs.txt grown apart from one base, as
    a git merge hands them to the driver. Every merge rule has work here: many
    hosts' results per job (K past 9 and 99, so text order is not number
    order; retries; every outcome), cancels, assignments, fleet records, two
    job texts under one id, lines a user typed (no id, loose spacing, a zone
    name without its rule, CRLF), comments, blanks and bad lines."""
    from sporadic.core import jobtext
    rnd = random.Random(seed)
    texts = []
    for i in range(jobs):
        texts.append(rnd.choice((
            'each 2026-12-01T06:%02dZ log job%d ; every=%dm' % (i % 60, i, rnd.randrange(1, 600)),
            'each 2026-12-01T06:00Z led blink %d ; every=1d within=2h on=pump-%d' % (i, i % 7),
            'who:pump 2026-12-01T07:00Z relay on %d 30 ; within=1h' % i,
            'any:0.%02d 2026-12-01T00:00Z sensor upload %d ; every=7d within=1d tick=1m' % (1 + i % 90, i),
            'one 2026-12-01T00:00Z backup rotate %d ; every=1d grace=1h retry=2' % i,
            'each 2026-12-01T00:00Z pin %d on ; at="0 6 * * 1-5" tz=Europe/Berlin' % i)))
    job_lines = [jobline.canonical(t, zone_rule=zone_rule) for t in texts]
    ids = [l[:8] for l in job_lines]
    hosts = ['pump-%d' % i for i in range(25)] + ['gate', 'relay-9']

    def result():
        return jobline.Result(rnd.choice(ids), rnd.choice(hosts), rnd.choice((rnd.randrange(12), rnd.randrange(150))),
                              1796000000 + rnd.randrange(10 ** 6), rnd.choice(('run', 'err', 'miss', 'ok')),
                              rnd.choice((1, 1, 1, 2, 3)), rnd.choice(('-', '%016x' % rnd.getrandbits(64))),
                              rnd.choice(('', 'done', 'out %d' % rnd.randrange(99), 'a  b'))).line()

    def assignment():
        return jobtext.Assign(rnd.choice(ids), rnd.choice(hosts), rnd.randrange(30), 1796000000 + rnd.randrange(99),
                              rnd.choice(hosts), rnd.choice(('-', '%016x' % rnd.getrandbits(64)))).line()

    base = job_lines[:jobs // 2] + [result() for _ in range(lines // 2)] + ['.h ' + h for h in hosts[:10]]
    sides = []
    for side in range(2):
        own = list(base)
        own += job_lines[jobs // 2:] if side == 0 else job_lines[jobs // 2 + jobs // 4:]
        own += [result() for _ in range(lines // 2)]
        own += [assignment() for _ in range(lines // 20)]
        own += [rnd.choice(ids) + ' cancel' for _ in range(3)]
        own += ['.h ' + h for h in rnd.sample(hosts, 8)]
        own += [rnd.choice(ids) + ' each 2026-12-0%dT00:00Z log side %d' % (1 + side, side)]
        # what a user typed into the file
        own += ['each 2026-12-01T06:00Z   log typed %d ; every=60m' % side,
                '  %s   r pump-1 7  1796000000 ok  -  by hand ' % rnd.choice(ids),
                ids[side] + ' cancel   ',
                'each 2026-12-01T00:00Z pin 9 on ; tz=Europe/Berlin at="30 7 * * *"',
                '# a comment', '', 'each nonsense', 'any:2 2026-12-01T06:00Z x',
                ids[0] + ' r pump-1 x 1796000000 ok -']
        rnd.shuffle(own)
        sides.append(own)
    rnd.shuffle(base)
    return base, sides[0], sides[1]


# `companion merge base.txt ours.txt theirs.txt`: the sha256 of the file it
# writes (1,192 lines) and its stderr, as the rules of docs/jobline.md#merge
# make them; a change of speed must not change a byte
MERGED_SHA256 = '9e13133d67f1c745851b5a7fe8ac367063d1cbb17b9bc699ad594a0f9945c3fa'
MERGED_STDERR = '''\
ours.txt:353: bad instance number 'x'
ours.txt:1034: P out of range: 2 (0<P<=1)
ours.txt:1164: bad time: expected YYYY-MM-DDTHH:MM[:SS]Z (UTC), got 'nonsense'
theirs.txt:899: bad time: expected YYYY-MM-DDTHH:MM[:SS]Z (UTC), got 'nonsense'
theirs.txt:1210: bad instance number 'x'
theirs.txt:1316: P out of range: 2 (0<P<=1)
gdenh6p9: two job texts under one id; kept the first in byte order
nut9jgfe: two job texts under one id; kept the first in byte order
'''


def test_merge_output_is_the_known_answer_on_a_realistic_three_way_merge(tmp_path):
    import hashlib
    paths = []
    for name, lines in zip(('base.txt', 'ours.txt', 'theirs.txt'), _diverged_fleet_files()):
        p = tmp_path / name
        # ours comes from a Windows laptop: CRLF line ends
        p.write_bytes(('\r\n' if name == 'ours.txt' else '\n').join(lines).encode() + b'\n')
        paths.append(name)
    out = tmp_path / 'merged.txt'
    r = subprocess.run([sys.executable, '-m', 'companion.cli', 'merge', *paths, '-o', 'merged.txt'],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 1   # bad lines: reported, skipped, and the merge still written
    assert r.stderr == MERGED_STDERR
    merged = out.read_bytes()
    assert merged.count(b'\n') == 1192
    assert hashlib.sha256(merged).hexdigest() == MERGED_SHA256


def test_merge_reads_a_file_in_pieces_as_splitlines_reads_it_whole(tmp_path):
    """mergefiles.read_lines reads a chunk at a time; wherever a chunk ends (inside a
    CRLF, a UTF-8 sequence, a bad byte), the lines are f.read().splitlines()'s."""
    from companion.fleet.mergefiles import read_lines
    rnd = random.Random(5)
    alphabet = ['a', 'b', ' ', '\n', '\r', '\r\n', '\x0b', '\x0c', '\x1c', '\x1e', '\x85', '\u2028', '\u2029',
                'é', '€', '\U0001f600']
    path = tmp_path / 'lines.txt'
    for _ in range(150):
        data = ''.join(rnd.choice(alphabet) for _ in range(rnd.randrange(30))).encode()
        if rnd.random() < 0.3:
            k = rnd.randrange(len(data) + 1)
            data = data[:k] + bytes([rnd.choice([0xff, 0xc3, 0xe2, 0x80])]) + data[k:]
        path.write_bytes(data)
        with open(path, encoding='utf-8', errors='surrogateescape') as f:   # a bad byte: a lone surrogate
            want = f.read().splitlines()
        for chunk in (1, 2, 3, 7, 1 << 20):
            assert read_lines(str(path), chunk) == want, (data, chunk)


def test_merge_driver_starts_without_the_fleet_verbs_or_the_zone_database(tmp_path):
    """git starts one `companion merge` per file: it imports the core and the
    writer only (each module Python compiles costs start-up), and the zone
    database still loads for the first zone name a line gives."""
    src = tmp_path / 'a.txt'
    src.write_text('each 2026-12-01T06:00Z log hello ; every=1m\n')
    r = subprocess.run([sys.executable, '-X', 'importtime', '-m', 'companion.cli', 'merge', str(src), '-o',
                        str(tmp_path / 'out.txt')], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    imported = {l.rsplit('|', 1)[-1].strip() for l in r.stderr.splitlines() if l.startswith('import time:')}
    assert {'sporadic.desktop.merging', 'companion.fleet.atomic'} <= imported
    assert not imported & {'companion.fleet.queries', 'companion.fleet.folder', 'companion.fleet.zones', 'companion.fleet.provision'}
    src.write_text('each 2026-12-01T00:00Z pin 9 on ; at="30 7 * * *" tz=Europe/Berlin\n')
    r = subprocess.run([sys.executable, '-m', 'companion.cli', 'merge', str(src)], capture_output=True, text=True)
    assert r.returncode == 0 and 'tzr=CET-1CEST,M3.5.0,M10.5.0/3' in r.stdout, r.stderr

