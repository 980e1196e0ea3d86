"""merging.merge's short cut for job lines (_JOB and _skeleton: one parse per
distinct TYPE TIME OPTIONS, the command's words passed through) answers what
parse() answers for every line: the same canonical text, the same error at
the same place, for lines that only look canonical too."""
import pytest
from hypothesis import given, strategies as st

from sporadic.core import jobline
from sporadic.core.merge import compact
from sporadic.desktop import merging

ID = '3k1v0a9c'
GOOD = [
    ID + ' each 2026-12-01T06:00Z log job1 ; every=67m',
    ID[:7] + 'd each 2026-12-01T06:00Z led blink 3 ; every=1d within=2h on=pump',
    ID[:7] + 'e who:pump 2026-12-01T07:00Z relay on 2 30 ; within=1h',
    ID[:7] + 'f any:0.01 2026-12-01T00:00Z sensor upload ; every=1w within=2h tick=5m',
    ID[:7] + 'g one 2026-12-01T00:00Z backup rotate ; every=1d grace=1h retry=2',
    ID[:7] + 'h each 2026-12-01T06:00:30Z a;b ;c = x=1 ; retry=1',
    ID[:7] + 'i each 2026-12-01T06:00Z pin 9 on',
    ID[:7] + 'j each 2026-12-01T00:00Z pin 9 on ; at="30 7 * * *" tz=Europe/Berlin tzr=CET-1CEST,M3.5.0,M10.5.0/3',
]

# each in the shape _JOB matches, and each refused by parse() or written back
# otherwise: the short cut must fall back to parse() for all of them
NEAR = [
    ID + ' each 2026-02-30T06:00Z log x',                       # no such date
    ID + ' each 2026-12-01T24:00Z log x',                       # hour out of range
    ID + ' each 1969-12-01T06:00Z log x',                       # year out of range
    ID + ' each 2026-12-01T06:00:00Z log x',                    # written without :00
    ID + ' each 2026-12-01T06:00Z log x ; every=60m',           # written every=1h
    ID + ' each 2026-12-01T06:00Z log x ; every=1h within=1h',  # the default window
    ID + ' each 2026-12-01T06:00Z log x ; within=2h every=1d',  # options in another order
    ID + ' each 2026-12-01T06:00Z log x ; every=1h within=2h',  # window longer than every
    ID + ' each 2026-12-01T06:00Z log x ; every=0m',
    ID + ' each 2026-12-01T06:00Z log x ; every=1h every=1h',
    ID + ' each 2026-12-01T06:00Z log x ; on=',
    ID + ' each 2026-12-01T06:00Z log x ; bogus=1',
    ID + ' each 2026-12-01T06:00Z log x ; tick=1m',             # tick is for any: jobs
    ID + ' one 2026-12-01T06:00Z log x ; on=pump',
    ID + ' each 2026-12-01T06:00Z log x ;  every=1h',           # two spaces
    ID + ' each 2026-12-01T06:00Z log x ; every=1h ',           # a space at the end
    ID + ' each 2026-12-01T06:00Z log x ; every=1h ; retry=1',  # a second ';'
    ID + ' each 2026-12-01T06:00Z log x ; retry=-1',
    ID + ' each 2026-12-01T06:00Z log x ; at="0 0 30 2 *"',     # never matches
    ID + ' each 2026-12-01T00:00Z pin 9 on ; at="30 7 * * *" tz=Europe/Berlin',   # its tzr added
    ID + ' each 2026-12-01T06:00Z log x ; at="30 7 * * *',      # unterminated quote
    ID + ' each 2026-12-01T06:00Z log x ; every=1h at="30 7 * * *"',
    ID + ' who:bad/host 2026-12-01T06:00Z log x',
    ID + ' who:' + 'p' * 33 + ' 2026-12-01T06:00Z log x',
    ID + ' any:0.50 2026-12-01T06:00Z log x',                  # written any:0.5
    ID + ' any:2 2026-12-01T06:00Z log x',
    ID + ' any:0 2026-12-01T06:00Z log x',
    ID + ' any:.5 2026-12-01T06:00Z log x',
]

# not the shape _JOB takes (parse() decides them the usual way)
OTHER = [
    ID + ' each 2026-12-01T06:00Z ;',                           # the command is ';'
    ID + ' each 2026-12-01T06:00Z ; every=1h',
    ID + ' each 2026-12-01T06:00Z log "a b"',
    ID + ' each 2026-12-01T06:00Z lo"g',
    ID + ' each 2026-12-01T06:00Z log  x',
    ID + ' each 2026-12-01T06:00Z log\tx',
    ID + ' each 2026-12-01T06:00Z log é',
    ID + ' each 2026-12-01T06:00Z',
    ID + ' each:x 2026-12-01T06:00Z log x',
    ID + ' r 2026-12-01T06:00Z log x y',
    ID + ' a 2026-12-01T06:00Z log x y',
    ID.upper() + ' each 2026-12-01T06:00Z log x',
    ' ' + ID + ' each 2026-12-01T06:00Z log x',
    ID + ' each 2026-12-01T06:00Z log x ',
]


def by_parse(*sources):
    """merging.merge without any short cut: parse() every line."""
    errors, good = [], set()
    for name, lines in sources:
        for n, raw in enumerate(lines, 1):
            try:
                r = jobline.parse(raw)
            except jobline.ParseError as e:
                errors.append('%s:%d: %s' % (name, n, e))
                continue
            except Exception as e:
                errors.append('%s:%d: unreadable (%s)' % (name, n, e))
                continue
            if r is not None:
                good.add(r.line())
    conflicts = []
    return list(compact(sorted(good), conflicts)), errors, conflicts


def both(*sources):
    errors, conflicts = [], []
    got = merging.merge(*sources, errors=errors, conflicts=conflicts)
    assert (got, errors, conflicts) == by_parse(*sources)
    return got, errors


def test_the_short_cut_takes_canonical_job_lines_and_nothing_else():
    if merging._JOB is None:
        pytest.skip('no accelerator on this interpreter')
    for line in GOOD:
        assert jobline.parse(line).line() == line
        assert merging._skeleton({}, *merging._JOB(line).groups()), line
    for line in NEAR:
        assert merging._JOB(line) is not None, line
        assert not merging._skeleton({}, *merging._JOB(line).groups()), line
    for line in OTHER:
        assert merging._JOB(line) is None, line


def test_lines_that_look_canonical_get_parse_s_text_and_error_at_their_place():
    a = GOOD + NEAR + OTHER
    b = list(reversed(NEAR)) + GOOD[:3]
    got, errors = both(('a.txt', a), ('b.txt', b))
    assert 'a.txt:%d: bad time: no such date 2026-02-30' % (len(GOOD) + 1) in errors
    assert 'b.txt:%d: bad time: no such date 2026-02-30' % len(NEAR) in errors
    assert ID + ' each 2026-12-01T06:00Z log x ; every=1h' not in got   # a conflict: kept the first


def test_one_skeleton_answers_for_every_command_it_holds():
    # the same TYPE TIME OPTIONS under many commands and ids, good and bad:
    # the first line's verdict is reused, the others still parse if refused
    lines = []
    for i, c in enumerate('0123456789abcdefghijklmnopqrstuv'):
        lines.append('%s0%s each 2026-12-01T06:00Z log job%d ; every=67m' % (ID[:6], c, i))
        lines.append('%s1%s each 2026-12-01T06:00Z log "job %d" ; every=67m' % (ID[:6], c, i))
        lines.append('%s2%s each 2026-12-01T06:00Z log job%d ; every=60m' % (ID[:6], c, i))
        lines.append('%s3%s each 2026-12-01T06:00Z lo"g ; every=67m' % (ID[:6], c))
    got, errors = both(('jobs.txt', lines))
    assert len(got) == 96 and len(errors) == 32
    assert all('quote inside a word' in e for e in errors)


words = st.text(st.sampled_from('ab1;="é\t -'), min_size=1, max_size=6)


@given(st.sampled_from(GOOD + NEAR), st.lists(st.tuples(st.integers(0, 90), words), max_size=3))
def test_edited_job_lines_merge_as_parse_reads_them(line, edits):
    for i, s in edits:
        line = line[:i] + s + line[i + 1:]
    both(('a.txt', [line, GOOD[0]]), ('b.txt', [line.replace(' ', '  ', 1), line]))
