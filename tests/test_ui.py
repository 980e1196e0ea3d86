"""The fleet page (`companion ui`, issue #33): what it serves is what the CLI's
queries say (status, results, jobs, plan, the duplicates of core/leader.py);
it follows the folder (ETag), refuses every path but its own (404), and a
folder the queries refuse is a message on the page, never a traceback.
The slow tests open it in a real headless Chromium (tests/browser.py),
the fleet made with the product's own commands."""
import contextlib
import http.client
import json
import os
import re
import threading
import time

import pytest

from sporadic.core import jobline
from companion.fleet.folder import Fleet
from companion.fleet.jobs_file import add_job

T0 = 1796083200  # 2026-12-01T00:00Z


def result(jid, host, k, at, outcome='ok', out='x'):
    return jobline.Result(jid, host, k, at, outcome, output=out).line()


def receive(fleet, lines):
    # as a sync receives them (Fleet.receive, then the results history)
    fleet.receive(lines, 'test')
    fleet.add_results(lines)


def small_fleet(tmp_path):
    """Three boards: pump-1 and pump-2 synced, both ran instance .0 of an
    `any` job (a duplicate), pump-2 missed an `each` instance (its reason
    recorded); gate-1 deployed, never synced."""
    f = Fleet(str(tmp_path / 'fleet'))
    f.init('farm', insecure=True)
    j_any = add_job(f, 'any:1 2026-12-01T00:05Z log up ; every=1h within=30m', now=T0)
    j_each = add_job(f, 'each 2026-12-01T00:10Z log hi ; every=1h within=10m on=pump', now=T0 + 1)
    add_job(f, 'one 2026-12-01T00:30Z log backup ; every=2h grace=10m', now=T0 + 2)
    receive(f, [result(j_any.id, 'pump-1', 0, T0 + 320), result(j_any.id, 'pump-2', 0, T0 + 330),
                result(j_each.id, 'pump-1', 0, T0 + 610),
                result(j_each.id, 'pump-2', 0, T0 + 1200, 'miss', 'asleep past its window')])
    for h in ('pump-1', 'pump-2', 'gate-1'):
        d = {'id': h, 'board': 'unix', 'deployed': T0 - 600}
        if h != 'gate-1':
            d.update(last_sync=T0 + 1800, drift=2, syncs=[T0, T0 + 900, T0 + 1800], complete=True)
        f.save_device(d)
    return f, j_any, j_each


@contextlib.contextmanager
def served(folder, clock):
    """The page's server on a free loopback port, in this process, on clock."""
    from companion.ui.server import make_server
    srv = make_server(folder, port=0, now=clock)
    th = threading.Thread(target=srv.serve_forever, kwargs={'poll_interval': 0.05}, daemon=True)
    th.start()
    try:
        yield srv.server_address[1]
    finally:
        srv.shutdown()
        srv.server_close()
        th.join(5)


def get(port, path, headers=None, method='GET'):
    c = http.client.HTTPConnection('127.0.0.1', port, timeout=10)
    try:
        c.request(method, path, headers=headers or {})
        r = c.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        c.close()


def state(port, span='1d', headers=None):
    st, h, body = get(port, '/state.json?span=' + span, headers)
    assert st == 200, (st, body)
    return json.loads(body), h


def cli_json(capsys, fleet, *argv):
    from companion import cli
    capsys.readouterr()
    assert cli.main(['--fleet', fleet.dir] + list(argv) + ['--json']) == 0
    return json.loads(capsys.readouterr().out)


def test_the_page_shows_what_the_cli_queries_say(tmp_path, capsys):
    f, j_any, j_each = small_fleet(tmp_path)
    now = T0 + 2000
    with served(f.dir, lambda: now) as port:
        s, _ = state(port)
    # boards: the rows of `status` (same query, same clock)
    from companion.fleet import queries as fleetcmd
    rows = json.loads(json.dumps(fleetcmd.status_rows(f, now)))
    assert s['boards'] == rows
    assert [b['id'] for b in s['boards']] == ['gate-1', 'pump-1', 'pump-2']
    by = {b['id']: b for b in s['boards']}
    assert by['pump-1']['duplicates'] == by['pump-2']['duplicates'] == [j_any.id + '.0']
    assert by['pump-2']['missed'] == 1 and by['pump-1']['ok'] == 2
    # duplicates: `status --json`'s, from the board's rule over the whole record
    assert s['duplicates'] == cli_json(capsys, f, 'status')['duplicates']
    assert s['duplicates'][j_any.id + '.0']['hosts'] == ['pump-1', 'pump-2']
    # the timeline: `results --json` rows of the span, duplicates marked, a miss with its reason
    res = [r for r in cli_json(capsys, f, 'results') if r['at'] >= now - 86400]
    assert s['timeline'] == res
    (miss,) = [r for r in s['timeline'] if r['outcome'] == 'missed']
    assert miss['host'] == 'pump-2' and miss['output'] == 'asleep past its window'
    assert {r['host'] for r in s['timeline'] if r['duplicate']} == {'pump-1', 'pump-2'}
    # jobs: `jobs --json` (the line in words too)
    words = {j['job']: j['words'] for j in s['jobs']}
    assert words[j_each.id] == ('log hi every 1h from 2026-12-01T00:10:00Z on boards matching pump, within 10m'
                                .replace(':00Z', 'Z'))
    assert [j['job'] for j in s['jobs']] == [j['job'] for j in cli_json(capsys, f, 'jobs')]
    # the next 24 hours: `plan`'s rows for the fleet's job file, per board
    from companion import cli
    capsys.readouterr()
    assert cli.main(['--fleet', f.dir, 'plan', f.path('jobs.txt'), '--from', '2026-12-01T00:33:20Z',
                     '--until', '2026-12-02T00:33:20Z', '--hosts', 'gate-1,pump-1,pump-2', '--json']) == 0
    plan = json.loads(capsys.readouterr().out)
    for h in ('pump-1', 'gate-1'):
        mine = [(r['at'], r['instance'], r['state']) for r in plan if r['host'] == h][:12]
        assert [(r['at'], r['instance'], r['state']) for r in s['plan'][h]] == mine and mine
    assert not any(r['instance'].startswith(j_each.id) for r in s['plan']['gate-1'])   # on=pump
    # one board's plan alone (?plan=): the same rows (a `one` job still ranked over every board)
    with served(f.dir, lambda: now) as port:
        one, _ = state(port, '1d&plan=pump-2')
    assert list(one['plan']) == ['pump-2'] and one['plan']['pump-2'] == s['plan']['pump-2']
    assert any(r['state'] == 'standby' for r in one['plan']['pump-2']) or any(
        r['state'] == 'run' and 'backup' in r['command'] for r in one['plan']['pump-2'])
    # gate-1: deployed, never synced: said in words
    assert any('gate-1 was deployed but never synced' in p for p in s['problems']), s['problems']
    assert by['gate-1']['attention'][0][0] == 'late'


def test_the_page_follows_the_folder(tmp_path):
    """The ETag changes when a sync changes the folder; until then a poll is a 304."""
    f, j_any, _ = small_fleet(tmp_path)
    now = [T0 + 2000]
    with served(f.dir, lambda: now[0]) as port:
        s1, h1 = state(port)
        st, h, body = get(port, '/state.json?span=1d', {'If-None-Match': h1['ETag']})
        assert st == 304 and body == b''
        receive(f, [result(j_any.id, 'gate-1', 1, T0 + 3900)])
        d = f.device('gate-1')
        d.update(last_sync=T0 + 3950, syncs=[T0 + 3950])
        f.save_device(d)
        s2, h2 = state(port, headers={'If-None-Match': h1['ETag']})
        assert h2['ETag'] != h1['ETag']
        assert [b['last_sync'] for b in s2['boards'] if b['id'] == 'gate-1'] == [T0 + 3950]
        assert not any('never synced' in p for p in s2['problems'])
        # time moves on: a new minute is a new answer (how long ago, what is due)
        now[0] += 60
        assert state(port, headers={'If-None-Match': h2['ETag']})[1]['ETag'] != h2['ETag']


def test_paths_outside_the_page_are_404(tmp_path):
    f, _, _ = small_fleet(tmp_path)
    with served(f.dir, lambda: T0) as port:
        st, h, body = get(port, '/')
        assert st == 200 and h['Content-Type'].startswith('text/html') and b'state.json' in body
        assert b'http://' not in body and b'https://' not in body     # nothing fetched from elsewhere
        for path in ('/jobs.txt', '/fleet.json', '/keys/peer', '/devices/pump-1.json', '/../fleet.json',
                     '/%2e%2e/keys/fleet.pem', '/state.json/../keys/peer', '/page.html', '/etc/passwd',
                     '//etc/passwd', '/index.html/x'):
            st, _, body = get(port, path)
            assert st == 404, (path, st)
            assert b'Traceback' not in body and b'secret' not in body
        st, _, _ = get(port, '/', method='POST')
        assert st in (405, 501)                                       # read-only
        st, _, body = get(port, '/state.json?span=forever')
        assert st == 400 and b'span=forever' in body
        st, _, _ = get(port, '/state.json', {'Host': 'evil.example:80'})   # DNS rebinding
        assert st == 403


def test_a_torn_job_file_and_bad_device_files_are_messages_on_the_page(tmp_path):
    f, _, _ = small_fleet(tmp_path)
    with open(f.path('jobs.txt'), 'rb') as fh:
        data = fh.read()
    with open(f.path('jobs.txt'), 'wb') as fh:       # cut mid-line (a copy that broke off)
        fh.write(data[:len(data) // 2] + b'\x00\xff')
    with served(f.dir, lambda: T0 + 2000) as port:
        s, _ = state(port)
        assert any(re.search(r'jobs\.txt:\d+: .*fix or remove the line', p) for p in s['problems']), s['problems']
        assert [b['id'] for b in s['boards']] == ['gate-1', 'pump-1', 'pump-2']   # still listed
        with open(f.path('jobs.txt'), 'wb') as fh:
            fh.write(data)
        with open(f.path('devices', 'pump-2.json'), 'w') as fh:
            fh.write('{"id": "pump-2", "last_')
        s, _ = state(port)
        assert any('pump-2.json is not readable JSON' in p for p in s['problems']), s['problems']
        os.remove(f.path('fleet.json'))
        s, _ = state(port)
        assert any('is not a fleet folder' in p for p in s['problems']), s['problems']
        st, _, body = get(port, '/state.json')
        assert b'Traceback' not in body and b'internal error' not in body


def test_a_fleet_reads_a_device_file_again_once_another_process_changed_it(tmp_path):
    # Fleet parses each devices/ID.json once per version (the page reads them several times)
    f, _, _ = small_fleet(tmp_path)
    d = f.device('pump-1')
    d['drift'] = 99                                  # a caller's copy: the file's object is unchanged
    assert f.device('pump-1')['drift'] == 2
    other = Fleet(f.dir)                             # a sync in another process
    d = other.device('pump-1')
    d.update(drift=-5, last_sync=T0 + 2700)
    other.save_device(d)
    assert f.device('pump-1')['drift'] == -5 and [x.get('last_sync') for x in f.devices()][1] == T0 + 2700


def test_status_says_why_a_board_needs_attention(tmp_path):
    from companion.fleet import queries as fleetcmd
    f, _, _ = small_fleet(tmp_path)
    rows = {r['id']: r for r in fleetcmd.status_rows(f, T0 + 1900)}
    assert rows['pump-1']['usual_interval_s'] == 900 and rows['pump-1']['attention'] == []
    rows = {r['id']: r for r in fleetcmd.status_rows(f, T0 + 1800 + 2 * 900 + 1)}
    assert rows['pump-1']['attention'] == [('late', 'not synced for 30m 1s, usually every 15m')]
    # the fleet's actions.py changed after the boards' deploy: each needs a redeploy
    with open(f.path('actions.py'), 'w') as fh:
        fh.write('def water(ms):\n    return ms\n')
    os.utime(f.path('actions.py'), (T0, T0))
    rows = {r['id']: r for r in fleetcmd.status_rows(f, T0 + 1900)}
    assert [k for k, _ in rows['pump-2']['attention']] == ['redeploy']
    # a board that refused lines (its status answer): how many, and the last reason it gave
    d = f.device('pump-1')
    d['status'] = {'quarantined': 2, 'trust': {'mode': 'signed', 'refusals': ['no batch covers it: abc', 'bad MAC: x']}}
    f.save_device(d)
    rows = {r['id']: r for r in fleetcmd.status_rows(f, T0 + 1900)}
    assert ('trouble', 'refused 2 line(s); last: bad MAC: x') in rows['pump-1']['attention']


def test_status_prints_the_boards_that_are_late(tmp_path, capsys):
    from companion import cli
    f, _, _ = small_fleet(tmp_path)     # synced every 15 min until 2026-12-01T00:30Z, days ago
    capsys.readouterr()
    now = T0 + 4 * 86400 + 13 * 3600    # the companion's clock, not the wall's ("5d 14m" at 00:44)
    assert cli.main(['--fleet', f.dir, 'status'], clock=lambda: now) == 0
    out = capsys.readouterr().out
    assert 'pump-1 not synced for 4d 12h, usually every 15m' in out, out
    assert 'gate-1 never synced since it was deployed' in out, out


def test_job_lines_in_words():
    from companion.fleet.queries import job_words
    from companion.fleet.zonerule import zone_rule
    cases = {
        'each 2026-01-01T00:00Z pump on 30 ; at="0 6 * * 1-5" tz=Europe/Berlin within=1h on=pump':
            'pump on 30 every weekday 06:00 Europe/Berlin on boards matching pump, within 1h',
        'who:light 2026-01-01T00:00Z relay on 1 ; at=sunset+20m within=30m':
            "relay on 1 at each board's sunset+20m on boards matching light, within 30m",
        'one 2026-01-01T00:00Z report monthly ; at="0 3 1 * *" tz=America/Chicago grace=2h':
            'report monthly on day 1 of every month 03:00 America/Chicago on one board (ranked; the next after 2h), '
            'within 1d',
        'each 2026-12-01T06:00Z led blink 3 ; every=1d within=2h':
            'led blink 3 every 1d from 2026-12-01T06:00Z on every board, within 2h',
    }
    for line, words in cases.items():
        assert job_words(jobline.parse('abcdefgh ' + line, zone_rule=zone_rule)) == words


# -- in a real browser ----------------------------------------------------------------

def _browser():
    from tests.browser import CHROMIUM, Chromium
    if CHROMIUM is None:
        pytest.skip('chromium not installed (Debian: apt-get install chromium; .ci/run does)')
    return Chromium()


@pytest.fixture
def chromium():
    """Skip before anything starts where there is no browser to look with."""
    from tests.browser import CHROMIUM
    if CHROMIUM is None:
        pytest.skip('chromium not installed (Debian: apt-get install chromium; .ci/run does)')


def start_ui(fleet_dir):
    """`companion ui --port 0` as a user starts it; (process, url) once it printed its address."""
    import subprocess
    import sys
    from tests.devutil import ROOT
    p = subprocess.Popen([sys.executable, '-m', 'companion.cli', '--fleet', fleet_dir, 'ui', '--port', '0'],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    line = p.stdout.readline()
    m = re.search(r'(http://127\.0\.0\.1:\d+/)', line)
    if not m:
        p.kill()
        raise AssertionError('companion ui printed %r; %s' % (line, p.stderr.read()))
    return p, m.group(1)


def stop(p):
    p.terminate()
    try:
        p.wait(10)
    except Exception:
        p.kill()
        p.wait()


@pytest.mark.slow
def test_a_bad_folder_is_a_message_in_the_browser(tmp_path, chromium):
    """A torn jobs.txt and a board that never synced, as a person sees them;
    a path outside the page is a 404 there too."""
    f, _, _ = small_fleet(tmp_path)
    with open(f.path('jobs.txt'), 'ab') as fh:
        fh.write(b'abcdefgh each 2026-12-01T00:0')
    p, url = start_ui(f.dir)
    try:
        with _browser() as b:
            b.open(url)
            b.wait("!!document.querySelector('#boards tr[data-board=\"gate-1\"]')", what='the boards')
            text = b.text()
            assert re.search(r'jobs\.txt:\d+: .*fix or remove the line', text), text
            assert 'gate-1 was deployed but never synced' in text, text
            assert 'Traceback' not in text and 'internal error' not in text
            b.open(url + 'jobs.txt')
            assert 'no such page' in b.text()
            assert b.eval("performance.getEntriesByType('navigation')[0].responseStatus") == 404
    finally:
        stop(p)



@pytest.mark.slow
def test_the_page_of_a_fleet_in_a_real_browser(chromium, fleet_cli, tmp_path):
    """Two boards set up with the product's commands (init, vboard, deploy,
    add, sync): both run the same `any` instance, each in its own section,
    and both miss an instance added past its window. `companion ui` in
    headless Chromium: each board's row, the miss with its reason; then
    pump-2 syncs in the background and the duplicate appears marked on the
    page, without a reload."""
    from tests.devutil import wait_for, has_outcome
    c = fleet_cli
    c('init')
    flash = {h: str(tmp_path / h) for h in ('pump-1', 'pump-2')}
    boards = {h: c.vboard('--id', h, '--flash', flash[h]) for h in flash}
    for h, vb in boards.items():
        c('deploy', vb.path, '--id', h, '-q')
    late = c.run('add', 'each 2026-01-01T00:00Z log late ; within=1m')
    assert 'recorded as missed' in late.stderr
    j_late = late.stdout.strip()
    # due once both syncs are done (seconds; a board told later runs it
    # late, within=30m): neither board hears of the other's run before its own
    j_any = c('add', 'any:1 +10s log up ; within=30m tick=5s').strip()
    j_hourly = c('add', 'each +2h log hourly ; every=1h within=10m').strip()
    for vb in boards.values():
        c('sync', vb.path, '-q')
    for h in flash:
        wait_for(lambda: has_outcome(flash[h], j_any, h, 0), timeout=120, what='%s to run %s.0' % (h, j_any))
        wait_for(lambda: has_outcome(flash[h], j_late, h, 0, ('miss',)), timeout=60, what='%s to miss %s' % (h, j_late))
    c('sync', boards['pump-1'].path, '-q')
    p, url = start_ui(c.dir)
    try:
        with _browser() as b:
            b.open(url)
            b.wait("!!document.querySelector('#boards tr[data-board=\"pump-2\"]')", what='the boards')
            b.eval('window.loadedOnce = true')
            rows = b.eval("[...document.querySelectorAll('#boards tbody tr')].map(r => r.dataset.board)")
            assert rows == ['pump-1', 'pump-2'], rows
            text = b.text()
            assert re.search(r'MISSED .*%s\.0 on pump-1: \S' % j_late, text), text
            assert 'DUPLICATE' not in text.split('Timeline')[0].replace('Duplicates (', ''), text
            # a sync in another terminal: the page follows, no reload
            c('sync', boards['pump-2'].path, '-q')
            b.wait("document.querySelector('#dups').innerText.includes('%s.0')" % j_any, timeout=30,
                   what='the duplicate on the page')
            assert b.eval('window.loadedOnce === true')
            dup = b.eval("document.querySelector('#dups li[data-instance=\"%s.0\"]').innerText" % j_any)
            assert dup.startswith('DUPLICATE') and 'pump-1 at' in dup and 'pump-2 at' in dup, dup
            for h in ('pump-1', 'pump-2'):
                cell = b.eval("document.querySelector('#boards tr[data-board=\"%s\"]').innerText" % h)
                assert '1 duplicate' in cell, cell
            assert b.eval("document.querySelectorAll('#lanes .mark.dup').length") == 2
            # the next 24 hours, per board, from the planner
            for h in ('pump-1', 'pump-2'):
                plan = b.eval("document.querySelector('#plan section[data-board=\"%s\"]').innerText" % h)
                assert plan.count(j_hourly + '.') == 12 and 'log hourly' in plan, plan
            # the last hour's timeline, chosen on the page: the runs still there
            b.eval("(() => { const s = document.querySelector('#span'); s.value = '1h';"
                   " s.dispatchEvent(new Event('change')); return true; })()")
            b.wait("state.span === 3600 && document.querySelectorAll('#lanes .mark.dup').length === 2",
                   what='the last hour')
            shot = os.environ.get('SPORADIC_UI_SHOT')
            if shot:   # the README's picture: docs/ui.png
                b.screenshot(shot)
            # one board's next hours, chosen on the page
            b.eval("(() => { const s = document.querySelector('#planfor'); s.value = 'pump-2';"
                   " s.dispatchEvent(new Event('change')); return true; })()")
            b.wait("[...document.querySelectorAll('#plan section')].map(x => x.dataset.board).join() === 'pump-2'",
                   what="pump-2's plan alone")
            b.phone()   # a phone's width: every board still there, nothing wider than the screen
            b.wait("document.documentElement.clientWidth < 500")
            assert b.eval("document.documentElement.scrollWidth <= document.documentElement.clientWidth + 1")
            assert 'pump-2' in b.text()
    finally:
        stop(p)
