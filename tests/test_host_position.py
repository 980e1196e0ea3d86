"""A board's position in the fleet's host list (`.h HOST SINCE LAT LON`, issue #14):
written by `companion image`/`deploy`/`flash --lat --lon`, signed like every host
record, the newest record of a host holds (whatever the merge order), read by
`companion plan` for sunrise/sunset jobs; old records without a position still
parse, on the boards too, and a board counts each host once."""
import datetime
import json
import os
import random
import shutil

import pytest

from companion import cli
from companion.fleet import folder as fleet_mod, host_list
from sporadic.core import jobline
from sporadic.desktop import merging
from tests.mpy import MICROPYTHON, run_mpy


def run_cli(capsys, *argv):
    capsys.readouterr()
    rc = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def host_lines(path):
    with open(path) as f:
        return [l for l in f.read().splitlines() if l.startswith('.h ')]


def astral_sunset(lat, lon, day):
    astral = pytest.importorskip('astral', reason="astral is not installed (pip install -e '.[test]')")
    from astral.sun import sunset
    date = datetime.date(1970, 1, 1) + datetime.timedelta(days=day)
    lmt = datetime.timezone(datetime.timedelta(hours=lon / 15))   # sun.event's civil day
    return sunset(astral.Observer(lat, lon), date, tzinfo=lmt).timestamp()


def test_an_imaged_boards_position_reaches_plan_through_the_host_list(tmp_path, capsys):
    fleet = str(tmp_path / 'fleet')
    assert run_cli(capsys, '--fleet', fleet, 'init')[0] == 0
    rc, out, err = run_cli(capsys, '--fleet', fleet, 'add', 'each 2026-12-01T00:00Z pin 1 on ; at=sunset+20m')
    assert rc == 0, err
    jid = out.strip()
    img = str(tmp_path / 'fs.bin')
    rc, out, err = run_cli(capsys, '--fleet', fleet, 'image', '--board', 'esp32', '--id', 'lamp-1',
                           '--lat', '52.52', '--lon', '13.405', '-o', img)
    assert rc == 0, err
    jobs = os.path.join(fleet, 'jobs.txt')
    (rec,) = host_lines(jobs)
    # its board key last (docs/security.md#board-signatures)
    assert rec.startswith('.h lamp-1 ') and rec.rsplit(' ', 1)[0].endswith(' 52.52 13.405')
    assert rec.rsplit(' ', 1)[1].startswith('ed25519:')
    # the image holds the same record and the batch that signs it
    from companion.make import image
    found = image.read_image(open(img, 'rb').read(), image.geometry('esp32'))
    assert rec in found['/jobs.txt'].decode().splitlines()
    # signed: a fleet that lacks the record takes it only with its batch, and a
    # board that moves itself (the same record, another position) is refused
    f = fleet_mod.Fleet(fleet)
    held = f.lines()
    batches = [l for l in held if l.startswith('.b ')]
    f.write_lines([l for l in held if l != rec])
    moved = rec.replace(' 52.52 ', ' 48.85 ')
    refused = f.receive([rec, moved] + batches, 'board')
    assert [l for l, _ in refused] == [moved]
    assert host_lines(jobs) == [rec]

    # plan of a copy of the file, away from the fleet folder (no devices/lamp-1.json):
    # the hosts and their positions come from the file's host list
    copy = str(tmp_path / 'copy.txt')
    shutil.copy(jobs, copy)
    elsewhere = str(tmp_path / 'no-fleet')
    rc, out, err = run_cli(capsys, '--fleet', elsewhere, 'plan', copy, '--json',
                           '--from', '2026-12-02T00:00Z', '--until', '2026-12-04T00:00Z')
    assert rc == 0, err
    rows = json.loads(out)
    assert [(r['host'], r['lat'], r['lon']) for r in rows] == [('lamp-1', 52.52, 13.405)] * 2
    for r in rows:
        day = int(r['instance'].split('.')[1])
        assert r['job'] == jid and abs(r['at'] - 1200 - astral_sunset(52.52, 13.405, day)) < 120, r
    rc, out, err = run_cli(capsys, '--fleet', elsewhere, 'plan', copy,
                           '--from', '2026-12-02T00:00Z', '--until', '2026-12-03T00:00Z')
    assert rc == 0 and 'lamp-1 at 52.52,13.405' in out

    # the board goes elsewhere: a later record, which holds over the first
    rc, out, err = run_cli(capsys, '--fleet', fleet, 'image', '--board', 'esp32', '--id', 'lamp-1',
                           '--lat', '-33.86', '--lon', '151.21', '-o', img)
    assert rc == 0, err
    (rec2,) = [l for l in host_lines(jobs) if l != rec]
    assert rec2.rsplit(' ', 1)[0].endswith(' -33.86 151.21') and int(rec2.split()[2]) > int(rec.split()[2])
    assert rec2.rsplit(' ', 1)[1] == rec.rsplit(' ', 1)[1]      # the same board key
    assert f.host_positions() == {'lamp-1': (-33.86, 151.21)}
    assert f.hosts() == ['lamp-1']
    rc, out, err = run_cli(capsys, '--fleet', elsewhere, 'plan', jobs, '--json',
                           '--from', '2026-12-02T00:00Z', '--until', '2026-12-03T00:00Z')
    (r,) = json.loads(out)
    assert abs(r['at'] - 1200 - astral_sunset(-33.86, 151.21, int(r['instance'].split('.')[1]))) < 120
    # imaged again without a position: none in the host list either, so plan says so
    rc, out, err = run_cli(capsys, '--fleet', fleet, 'image', '--board', 'esp32', '--id', 'lamp-1', '-o', img)
    assert rc == 0, err
    (rec3,) = [l for l in host_lines(jobs) if l not in (rec, rec2)]
    assert len(rec3.split()) == 4 and f.host_positions() == {}     # .h HOST SINCE KEY
    rc, out, err = run_cli(capsys, '--fleet', fleet, 'plan', jobs,
                           '--from', '2026-12-02T00:00Z', '--until', '2026-12-03T00:00Z')
    assert rc == 2 and err.startswith('companion: ') and 'needs the position of lamp-1' in err


def test_plan_without_hosts_and_without_a_host_list_says_so(tmp_path, capsys):
    f = tmp_path / 'jobs.txt'
    f.write_text('each 2026-12-01T00:00Z x ; at=@daily\n')
    rc, out, err = run_cli(capsys, 'plan', f, '--until', '2026-12-03T00:00Z')
    assert rc == 2 and err.strip() == 'companion: %s holds no host list (.h lines): give --hosts a,b,c' % f
    # an old host record (no position) still names a host
    f.write_text('.h old-1\neach 2026-12-01T00:00Z x ; at=@daily\n')
    rc, out, err = run_cli(capsys, 'plan', f, '--json', '--from', '2026-12-01T00:00Z', '--until', '2026-12-03T00:00Z')
    assert rc == 0 and {r['host'] for r in json.loads(out)} == {'old-1'}


BAD_RECORDS = ['.h p 01', '.h p 5 52.520 13', '.h p 5 91 0', '.h p 5 0 180.5', '.h p 5 -0 1', '.h p 5 1',
               '.h p x 1 2', '.h p 5 1 2 3', '.h p  5', '.h p 5 1.123456 0', '.h p 5 01 0', '.h p 5 1. 0']


def test_companion_check_refuses_malformed_host_records(tmp_path, capsys):
    f = tmp_path / 'jobs.txt'
    f.write_text('.h a\n.h b 1796154607\n.h c 1796154607 -90 180\n' + ''.join(l + '\n' for l in BAD_RECORDS))
    rc, out, err = run_cli(capsys, 'check', f)
    lines = out.splitlines()
    assert rc == 1 and len(lines) == len(BAD_RECORDS)
    for n, (bad, got) in enumerate(zip(BAD_RECORDS, lines), 4):
        assert got.startswith('%s:%d: bad host record %r' % (f, n, bad)), got


def test_the_companion_writes_what_the_parser_takes_back():
    rnd = random.Random(3)
    for _ in range(2000):
        lat, lon = rnd.uniform(-90, 90), rnd.uniform(-180, 180)
        line = '.h h %d %s %s' % (rnd.randrange(2 ** 31), host_list.degrees_text(lat), host_list.degrees_text(lon))
        assert jobline.canonical(line) == line
        _, la, lo = host_list.host_records([line])['h']
        assert abs(la - lat) <= 5e-6 and abs(lo - lon) <= 5e-6
    assert [host_list.degrees_text(x) for x in (-0.000001, 0.0, 90.0, -180.0, 13.4049999, 52.52)] == [
        '0', '0', '90', '-180', '13.405', '52.52']


def test_the_newest_record_of_each_host_holds_whatever_the_merge_order():
    rnd = random.Random(5)
    for _ in range(300):
        lines = []
        for h in ('p', 'p-1', 'p-10', 'p.1'):
            lines.append('.h ' + h)
            for _ in range(rnd.randrange(3)):
                t = rnd.randrange(1, 5)
                lines.append('.h %s %d' % (h, t) + (' %d %d' % (rnd.randrange(90), rnd.randrange(180))
                                                    if rnd.random() < 0.7 else ''))
        lines += ['.b 00000001 x', '.k 00000002 y', '.t 5']
        a = rnd.sample(lines, rnd.randrange(len(lines) + 1))
        b = [l for l in lines if l not in a]
        whole = merging.merge(lines)
        assert merging.merge(merging.merge(a), merging.merge(b)) == whole == merging.merge(whole)
        assert sorted(set(lines)) == whole   # every record kept: merge is plain union here
        want = {}
        for l in lines:
            if l.startswith('.h '):
                f = l.split()
                want.setdefault(f[1], []).append((int(f[2]) if len(f) > 2 else -1, l))
        got = host_list.host_records(rnd.sample(whole, len(whole)))
        for h, recs in want.items():
            since, line = max(recs)
            f = line.split()
            assert got[h] == (since, float(f[3]) if len(f) > 3 else None, float(f[4]) if len(f) > 3 else None)


BOARD_CODE = '''
from sporadic.core import jobline, merge, groups
lines = %r
out = []
for l in lines:
    try:
        out.append(jobline.canonical(l))
    except jobline.ParseError as e:
        out.append('E ' + str(e))
kept = list(merge.compact(sorted(l for l in out if l[0] == '.')))
seen = []
groups.scan(kept + ['0000000a each 2026-01-01T00:00Z x'], 'p-1', 8, lambda *a: seen.append(a[-1]))
from sporadic.core import plan
seen.append(plan.rank('0000000a', 'p-1', seen[0]))
print(repr((out, kept, seen)))
'''


@pytest.mark.skipif(not MICROPYTHON, reason='no micropython')
def test_a_board_reads_old_and_new_host_records_as_the_companion_does():
    lines = ['.h p', '.h p-1 1796154607 52.52 13.405', '.h p-1', '.h p-10 7', '.h p 9 -90 180', '.h p 5 91 0']
    want = []
    for l in lines:
        try:
            want.append(jobline.canonical(l))
        except jobline.ParseError as e:
            want.append('E ' + str(e))
    kept = merging.merge([l for l in want if l[0] == '.'])
    assert kept == ['.h p', '.h p 9 -90 180', '.h p-1', '.h p-1 1796154607 52.52 13.405', '.h p-10 7']
    got = run_mpy(BOARD_CODE % (lines,), heap='256K', source=True)
    # each host counted once, so a `one` job's rank is what the companion computes
    from sporadic.core import plan
    assert eval(got) == (want, kept, [['p', 'p-1', 'p-10'], plan.rank('0000000a', 'p-1', ['p', 'p-1', 'p-10'])])
