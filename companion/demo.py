"""`companion demo`: a fleet of three virtual boards, no hardware, under a
minute. Starts the boards (the MicroPython unix port on pseudo-terminals),
deploys, adds one job of each type, syncs, lets the boards run on a fast
clock, syncs again (twice, so each board learns what the others did through
the companion) and shows who ran what."""
import os
import shutil
import tempfile
import time

from sporadic.core.timefmt import format_time
from companion.errors import console
from companion.fleet.folder import Fleet
from companion.fleet.jobs_file import add_job

BOARDS = ('pump-1', 'pump-2', 'gate-1')
JOBS = (
    'each +5m log hello from every board ; every=30m within=10m',
    'who:pump +10m pin 5 on ; within=20m',
    'any:0.02 +5m log one of you uploads ; every=2h within=1h tick=1m',
    'one +5m log backup rotate ; every=2h within=2h grace=1h',
)


class DemoClock:
    """The demo's time: real time sped up by `scale` from a start."""

    def __init__(self, scale):
        self.scale = scale
        self.t0 = int(time.time())
        self.r0 = time.monotonic()

    def now(self):
        return self.t0 + int((time.monotonic() - self.r0) * self.scale)


def run_demo(workdir=None, scale=600, run_seconds=12, insecure=False, out=print, keep=False, heap='128K'):
    from companion.sync import syncer
    from companion.vboard.board import VBoard
    base = workdir or tempfile.mkdtemp(prefix='sporadic-demo-')
    fleet = Fleet(os.path.join(base, 'fleet'))
    fleet.init('demo', insecure=insecure)
    clock = DemoClock(scale)
    boards = []
    started = time.monotonic()
    try:
        out('1. starting %d virtual boards (MicroPython unix port, %s heap, clock x%d)' % (len(BOARDS), heap, scale))
        for name in BOARDS:
            vb = VBoard(os.path.join(base, name), board_id=name, heap=heap, clock_scale=scale)
            path = vb.start()
            boards.append((name, vb, path))
            out('   %-7s on %s' % (name, path))
        out('2. deploying the firmware over each serial line')
        for name, vb, path in boards:
            info = syncer.deploy(fleet, path, name, board='unix', progress=False)
            out('   %-7s %d files, %d bytes' % (name, info['files'], info['bytes']))
        t_added = clock.now()
        out('3. adding one job of each type (times relative to the demo clock, %s)' % format_time(t_added))
        for line in JOBS:
            j = add_job(fleet, line, now=clock.now())
            out('   %s  %s' % (j.id, j.text()))
        out('4. first sync: boards get the jobs and the time')
        for name, vb, path in boards:
            rep = syncer.sync(fleet, path, progress=False, now=clock.now())
            out('   %-7s companion -> board %d lines, %d bytes on the wire' % (name, rep['lines_sent'], rep['bytes']))
        visits = max(1, int(run_seconds / 1.5))
        out('5. the boards run on their own clocks for %d s; the companion comes by %d times: what one board'
            ' did reaches the others on their next sync' % (run_seconds, visits))
        for rnd in range(1, visits + 1):
            time.sleep(run_seconds / visits)
            for name, vb, path in boards:
                rep = syncer.sync(fleet, path, progress=False, now=clock.now())
                out('   visit %d %-7s board -> companion %2d lines (%d new result records), companion -> board %2d lines,'
                    ' %5d bytes on the wire' % (rnd, name, rep['lines_received'], rep['new_results'],
                                                rep['lines_sent'], rep['bytes']))
        end = clock.now()
        out('6. the demo clock ran from %s to %s: %d simulated minutes in %.0f s at x%d (starting and deploying'
            ' took the first %d; the boards took its time at the first sync, the syncs took the rest beside'
            ' the %d s). Each time below is the board clock at the run' % (
                format_time(clock.t0)[11:16], format_time(end)[11:16], (end - clock.t0) // 60,
                time.monotonic() - clock.r0, scale, (t_added - clock.t0) // 60, run_seconds))
        show_results(fleet, out)
        out('done in %.0f s. fleet folder: %s' % (time.monotonic() - started, fleet.dir))
        return fleet
    finally:
        for name, vb, path in boards:
            vb.stop()
        if not keep and workdir is None:
            shutil.rmtree(base, ignore_errors=True)


def show_results(fleet, out=print):
    """The table of who ran what (every outcome; a start without one) and under
    it every single-run instance more than one board ran, from the same
    record (fleet/queries.py duplicates: the results history, not the compacted
    jobs.txt)."""
    from companion.fleet.queries import result_rows, shown_rows, duplicates, duplicate_text, DUPLICATE_NOTE
    from rich.table import Table
    jobs = {j.id: j for j in fleet.jobs()}
    d = duplicates(fleet)
    t = Table(title='who ran what')
    for c in ('time', 'type', 'instance', 'host', 'outcome', 'output'):
        t.add_column(c, no_wrap=True)
    for r in shown_rows(result_rows(fleet)):
        j = jobs.get(r['job'])
        t.add_row(r['time'][11:16], j.kind if j else '?', r['instance'], r['host'],
                  r['outcome'] + (' (dup)' if r['instance'] in d else ''), r['output'][:28])
    console().print(t)
    out('single-run instances that ran on more than one board: %s' % ('none' if not d else len(d)))
    for i, dd in d.items():
        out('  ' + duplicate_text(i, dd))
    if d:
        out(DUPLICATE_NOTE)

