"""Two companions share one fleet through git: `companion merge` is the merge
driver for jobs.txt, git's union driver takes results.txt."""
import os
import shutil
import subprocess
import sys

import pytest

from sporadic.core import jobline
from companion.fleet import Fleet
from companion.fleet import add_job, cancel_job

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

