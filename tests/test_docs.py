"""Docs match the tree (#30): every file of this repository that README.md
or docs/*.md names exists.

A name counts as a repository path when it ends in .py, .md, .sh or .toml,
or starts with one of the repository's top folders (`firmware/`,
`companion/`, `tests/`, ...). It is found when it is a path from the root,
from the doc's own folder, from `firmware/` (`sporadic/...`, the board's
view), or the tail of a path in the tree (`device/store.py`, `fleet.py`);
`*` matches as in a shell. Paths on a board (`/main.py`), names with a
placeholder in capitals (`boards/NAME/board.json`) and the files below,
which are not this repository's, are left out.
"""
import fnmatch
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIP_DIRS = {'.git', '.venv', 'node_modules', '__pycache__', '.pytest_cache', '.mp32'}
TOP = ('firmware/', 'companion/', 'tests/', 'bench/', 'boards/', 'examples/', 'docs/')

# Named by the docs, yet not files of this repository.
NOT_OURS = {
    'manifest_2MiB.py': "MicroPython's ESP8266 manifest (docs/hardware.md)",
    'tools/manifestfile.py': "MicroPython's manifest reader",
    'ports/esp8266/README.md': "MicroPython's ESP8266 port",
    'lib/board.py': 'a path on a board: board.py as the companion puts it',
    'actions.py': "a fleet folder's (or a board's) user actions",
    'any.toml': 'a scenario a user writes (docs/simulate.md)',
    'year.toml': "the scenario `bench/simulate.py --toml year.toml` writes",
    'SCENARIO.toml': 'a placeholder',
    'bench/.mp32/': 'built by bench/build_micropython32.sh',
    'bench/.mp32': 'built by bench/build_micropython32.sh',
    'bench/.mp32/micropython': 'built by bench/build_micropython32.sh',
    'bench/.mp32/micropython-frozen': 'built by bench/build_micropython32.sh',
    'bench/.mp32/micropython-romfs': 'built by bench/build_micropython32.sh',
}

TOKEN = re.compile(r'(?<![\w/.:-])((?:[\w.*-]+/)*[\w*-][\w.*-]*\.(?:py|md|sh|toml)'
                   r'|(?:firmware|companion|tests|bench|boards|examples|docs)/[\w./*-]*)')


def docs():
    out = [os.path.join(ROOT, 'README.md')]
    d = os.path.join(ROOT, 'docs')
    out += [os.path.join(d, n) for n in sorted(os.listdir(d)) if n.endswith('.md')]
    return out


def tree():
    """Every file and folder of the repository, as paths from the root."""
    out = set()
    for top, dirs, names in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.endswith('.egg-info')]
        rel = os.path.relpath(top, ROOT).replace(os.sep, '/')
        base = '' if rel == '.' else rel + '/'
        if base:
            out.add(base)
        out.update(base + n for n in names)
    return out


def named_paths(path):
    """(line number, name) of each repository path the doc names."""
    with open(path, encoding='utf-8') as f:
        for no, line in enumerate(f, 1):
            for m in TOKEN.finditer(line):
                name = m.group(1).rstrip('.')
                if re.search(r'[A-Z]{2,}/|/[A-Z]{2,}\b', name) and name not in NOT_OURS:
                    continue            # boards/NAME/board.json, devices/ID.json
                yield no, name


def found(name, doc_dir, paths):
    if name in NOT_OURS:
        return True
    name = name.rstrip('/')
    cands = [name, os.path.relpath(os.path.join(doc_dir, name), ROOT).replace(os.sep, '/'),
             'firmware/' + name]
    for c in cands:
        if any(fnmatch.fnmatchcase(p.rstrip('/'), c) for p in paths):
            return True
    tail = '*/' + name
    return any(fnmatch.fnmatchcase(p.rstrip('/'), tail) for p in paths)


def missing():
    paths = tree()
    out = []
    for doc in docs():
        for no, name in named_paths(doc):
            if not found(name, os.path.dirname(doc), paths):
                out.append('%s:%d: %s' % (os.path.relpath(doc, ROOT), no, name))
    return out


def test_every_repository_path_the_docs_name_exists():
    assert missing() == []


def test_the_check_finds_a_stale_name():
    # The check itself: the names #30 found stale are caught, real ones pass.
    paths = tree()
    d = os.path.join(ROOT, 'docs')
    for stale in ('DESIGN.md', 'sporadic/boot.py', 'net.py', 'storex.py', 'companion/syncer2.py'):
        assert not found(stale, d, paths), stale
    for real in ('sporadic/device/boot.py', 'device/store.py', 'firmware/sporadic/core/',
                 'architecture.md', 'onboard/*.py'):
        assert found(real, d, paths), real
