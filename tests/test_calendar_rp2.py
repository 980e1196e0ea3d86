"""The calendar core on the real MicroPython rp2 firmware (an emulated Pico, see
tests/test_rp2.py): a few hundred cron, zone and sun cases in one exec, on
the firmware `companion image` put on it (what deploy puts), give CPython's answers (the sun within a
minute: the rp2 port's floats are 32-bit)."""
import json
import random

import pytest

from tests.test_calendar import MPY_ANSWER, cpython_answers, mpy_cases
from tests.test_rp2 import WHY, mpremote, world  # noqa: F401  (the fixture)

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group('rp2'), pytest.mark.skipif(WHY is not None, reason='emulated Pico: %s' % WHY)]


def test_the_rp2_firmware_gives_the_same_calendar_answers(world):
    c = world.companion
    c('init')
    fs_bin = str(world.tmp / 'fs.bin')
    c('image', '--board', 'rp2-pico', '--id', 'pico-1', '-o', fs_bin)
    vb = world.pico(image_file=fs_bin)
    cases = mpy_cases(random.Random(31), 200)
    # the cases ride in the program: one exec, read back line by line
    code = MPY_ANSWER + 'for x in %r:\n    print(json.dumps(answer(json.loads(x))))\n' % [json.dumps(x) for x in cases]
    p = mpremote(vb.path, 'exec', code, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    got = [json.loads(l) for l in p.stdout.splitlines() if l.strip()]
    want = cpython_answers(cases)
    assert len(got) == len(want)
    for g, w, x in zip(got, want, cases):
        if x[0] == 'cron':
            assert g == w, x
        else:
            assert (g is None) == (w is None) and (w is None or abs(g - w) < 60), (x, g, w)
