"""The board's watchdog is fed through long work. Once a loop has started it,
a real board's watchdog keeps running across Ctrl-C and soft resets (ESP8266
5 s, Pico W 8 s, ESP32 60 s: MicroPython's ports/*/machine_wdt.c), so a
pass over a big job file, a compaction, a long sync answer and a deploy must
feed it as they go, or the board resets in the middle of them. Run on the
unix port with the ESP8266 board module and the stand-in `machine`, whose
WDT counts its feeds."""
import os
import re
import shutil

import pytest

from tests.devutil import make_flash, boot, T0, ROOT

pytestmark = [pytest.mark.needs('micropython', 'mpy-cross'), pytest.mark.slow]   # slow: boards reading a 2,000-line file (> 2 s a test)

N = 2000   # job lines


def esp8266_flash(folder):
    jobs = ['each 2026-12-01T%02d:%02dZ log j%d ; every=1d within=1h' % (i // 60 % 24, i % 60, i)
            for i in range(N)]
    make_flash(folder, jobs=jobs, board='esp8266')      # the esp8266 image's files, as image/deploy give them
    shutil.copy(os.path.join(ROOT, 'tests', 'standin', 'machine.py'), os.path.join(folder, 'lib', 'machine.py'))
    return folder


def counts(p):
    m = re.search(r'WDT (\d+) FEEDS (\d+)', p.stdout)
    assert m, p.stdout[-2000:] + p.stderr[-2000:]
    return int(m.group(1)), int(m.group(2))


def test_a_pass_over_a_big_file_feeds_the_watchdog_as_it_reads(tmp_path):
    d = esp8266_flash(str(tmp_path / 'b'))
    code = '''
from sporadic.device import store
store.open_store()
from sporadic.device import runtime
import machine
rt = runtime.get()
before = machine.FEEDS
rt.step(%d)
print('jobs', rt.jobs)
print('WDT', machine.WDT_STARTS, 'FEEDS', machine.FEEDS - before)
''' % (T0 + 600)
    p = boot(d, code, heap='128K')
    starts, feeds = counts(p)
    assert 'jobs %d' % N in p.stdout
    # one pass reads the N lines (and its own records): a feed each 64 lines at least
    assert feeds >= N // 64 and starts == 1, (starts, feeds)


def test_a_sync_request_starts_the_watchdog_and_a_long_answer_feeds_it(tmp_path):
    d = esp8266_flash(str(tmp_path / 'b'))
    code = '''
import machine
from sporadic.device import syncsrv
syncsrv.h('T %d')
first = (machine.WDT_STARTS, machine.FEEDS)
syncsrv.w('G .')
print()
print('first', first[0], first[1])
print('WDT', machine.WDT_STARTS, 'FEEDS', machine.FEEDS - first[1])
''' % (T0 + 600)
    p = boot(d, code, heap='128K')
    starts, feeds = counts(p)
    # the first request started the watchdog (a cable pulled now: the board
    # resets into its loop), and the answer over N lines fed it as it went
    assert 'first 1 1' in p.stdout, p.stdout[-500:]
    assert starts == 1 and feeds >= N // 64, (starts, feeds)


def test_the_boot_path_feeds_the_watchdog_while_it_re_imports_a_copied_file(tmp_path):
    """A jobs.txt copied onto the board by hand (no stamp) is re-imported
    when the store opens at boot, before the loop runs; a watchdog left
    running by the session before the soft reset must be fed meanwhile.
    This is what main.py runs (sporadic.boot.main), stopped before the
    loop's first step."""
    d = esp8266_flash(str(tmp_path / 'b'))
    code = '''
import machine
from sporadic.device import boot, runtime
runtime.main = lambda **kw: None      # stop where the loop would start
boot.main()
print('WDT', machine.WDT_STARTS, 'FEEDS', machine.FEEDS)
'''
    p = boot(d, code, heap='128K')
    starts, feeds = counts(p)
    assert starts == 1 and feeds >= N // 64, (starts, feeds)
