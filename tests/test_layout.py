"""The shape of the tree (#16), checked from the sources with `ast`.

1. No import cycle among the modules of firmware/sporadic/ and among those
   of companion/. For companion/ every import counts as an edge, at module
   level and inside functions alike: a function-level import defers the
   cost, not the dependency, so the layers (fleet <- provision <- links <-
   sync <- verbs <- cli) must form a DAG either way. For firmware/ only
   module-level imports count: a board defers an import into a function to
   spare its heap, and such an import runs after both modules are loaded.
   Importing a.b.c is an edge to a.b.c only (not to the packages a, a.b).
2. No module-level `def __getattr__` anywhere in firmware/ or companion/.
3. No board's firmware_files() carries anything of sporadic/desktop/.
4. Every module of firmware/sporadic/** and companion/** opens with a
   docstring or a comment line saying what it is.
"""
import ast
import os

import pytest

from companion.fleet import files

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIRMWARE = os.path.join(ROOT, 'firmware')
COMPANION = os.path.join(ROOT, 'companion')


def sporadic_modules():
    """{module name: path} of firmware/sporadic/**.py."""
    out = {}
    for top, dirs, names in os.walk(os.path.join(FIRMWARE, 'sporadic')):
        dirs[:] = sorted(d for d in dirs if not d.startswith(('.', '_')))
        for n in names:
            if n.endswith('.py'):
                rel = os.path.relpath(os.path.join(top, n), FIRMWARE)[:-3].split(os.sep)
                if rel[-1] == '__init__':
                    rel = rel[:-1]
                out['.'.join(rel)] = os.path.join(top, n)
    return out


def companion_modules():
    """{module name: path} of companion/**.py: its subpackages and the files
    that run on a board (link/onboard/, vboard/onboard/) alike."""
    out = {}
    for top, dirs, names in os.walk(COMPANION):
        dirs[:] = sorted(d for d in dirs if d not in ('node_modules', '__pycache__') and not d.startswith('.'))
        for n in names:
            if n.endswith('.py'):
                rel = os.path.relpath(os.path.join(top, n), ROOT)[:-3].split(os.sep)
                if rel[-1] == '__init__':
                    rel = rel[:-1]
                out['.'.join(rel)] = os.path.join(top, n)
    return out


def parse(path):
    with open(path, encoding='utf-8') as f:
        return ast.parse(f.read(), path)


def from_package(node, module, is_package):
    """The absolute package a `from ... import` in `module` names (relative
    imports resolved)."""
    if not node.level:
        return node.module
    base = module.split('.') if is_package else module.split('.')[:-1]
    base = base[:len(base) - (node.level - 1)]
    return '.'.join(base + ([node.module] if node.module else []))


def imported_names(tree, module, is_package, module_level_only):
    """The absolute names an `import` or `from ... import` in tree reaches
    (for `from P import x`: P.x, and P itself)."""
    nodes = tree.body if module_level_only else ast.walk(tree)
    if module_level_only:   # module level includes the bodies of if/try at the top
        nodes = list(_top_level(tree.body))
    for node in nodes:
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name
        elif isinstance(node, ast.ImportFrom):
            pkg = from_package(node, module, is_package)
            yield pkg
            for a in node.names:
                yield pkg + '.' + a.name


def _top_level(body):
    for node in body:
        yield node
        if isinstance(node, (ast.If, ast.Try)):
            for part in ('body', 'orelse', 'finalbody'):
                yield from _top_level(getattr(node, part, []))
            for h in getattr(node, 'handlers', []):
                yield from _top_level(h.body)


def import_graph(modules, module_level_only):
    graph = {}
    for name, path in modules.items():
        is_package = path.endswith('__init__.py')
        targets = set(imported_names(parse(path), name, is_package, module_level_only))
        graph[name] = sorted(t for t in targets if t in modules and t != name)
    return graph


def find_cycle(graph):
    """One cycle as [a, b, ..., a], or None."""
    state = {}
    stack = []

    def visit(n):
        state[n] = 'open'
        stack.append(n)
        for m in graph[n]:
            if state.get(m) == 'open':
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 'done'
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def test_the_graph_sees_imports_and_cycles():
    # the checker itself: a function-level import is an edge for companion/,
    # not for firmware/; a relative import resolves; a cycle is found
    tree = ast.parse('import os\nfrom . import b\ndef f():\n    from pkg.c import x\n')
    assert set(imported_names(tree, 'pkg.a', False, False)) == {'os', 'pkg', 'pkg.b', 'pkg.c', 'pkg.c.x'}
    assert set(imported_names(tree, 'pkg.a', False, True)) == {'os', 'pkg', 'pkg.b'}
    assert find_cycle({'a': ['b'], 'b': ['c'], 'c': ['a']}) == ['a', 'b', 'c', 'a']
    assert find_cycle({'a': ['b'], 'b': ['c'], 'c': []}) is None


# Edges of a cycle another step of the work removes. Strict: once the edge
# is gone this test fails until the entry is deleted. (Empty since #30 took
# simulate/'s two cycles out: the package re-exporting its modules, and
# engine <-> parallel.)
PENDING_EDGES = set()


def test_companion_imports_form_a_dag():
    graph = import_graph(companion_modules(), module_level_only=False)
    assert graph['companion.cli'], 'the graph found no import of cli: the checker is broken'
    for a, b in PENDING_EDGES:
        assert b in graph[a], '%s no longer imports %s: delete it from PENDING_EDGES' % (a, b)
        graph[a].remove(b)
    assert find_cycle(graph) is None, 'import cycle in companion/: ' + ' -> '.join(find_cycle(graph))


def test_firmware_module_level_imports_form_a_dag():
    graph = import_graph(sporadic_modules(), module_level_only=True)
    assert graph['sporadic.device.runtime'], 'the graph found no import of the runtime: the checker is broken'
    assert find_cycle(graph) is None, 'import cycle in firmware/sporadic/: ' + ' -> '.join(find_cycle(graph))


def python_files(*tops):
    for top in tops:
        for d, dirs, names in os.walk(top):
            dirs[:] = [x for x in dirs if x not in ('node_modules', '__pycache__') and not x.startswith('.')]
            for n in names:
                if n.endswith('.py'):
                    yield os.path.join(d, n)


def test_no_module_level_getattr():
    found = [os.path.relpath(p, ROOT) for p in python_files(FIRMWARE, COMPANION)
             for node in parse(p).body
             if isinstance(node, ast.FunctionDef) and node.name == '__getattr__']
    assert found == []


@pytest.mark.parametrize('board', files.boards().names())
def test_no_desktop_module_goes_to_a_board(board):
    paths = [p for p, _ in files.firmware_files(board)]
    assert any(p.startswith('/lib/sporadic/core/jobline.') for p in paths), paths   # the core goes
    assert [p for p in paths if '/desktop/' in p] == []


def test_every_module_says_what_it_is():
    missing = []
    for path in sorted(set(sporadic_modules().values()) | set(companion_modules().values())):
        with open(path, encoding='utf-8') as f:
            text = f.read()
        first = text.lstrip('\n').split('\n', 1)[0].strip()
        tree = ast.parse(text)
        doc = ast.get_docstring(tree)
        said = (doc and doc.strip()) or (first.startswith('#') and len(first.lstrip('# ')) > 3)
        if not said:
            missing.append(os.path.relpath(path, ROOT))
    assert missing == []


# -- the companion's layers (#30) ------------------------------------------------
#
# companion/ is in subpackages, each a layer that imports only the layers below
# it (docs/architecture.md#companion). A module of one subpackage may import
# any module of its own subpackage and of any lower layer; never one of its own
# layer's other subpackages, never one above.

COMPANION_LAYERS = (
    ('errors', 'cpus'),                              # what every layer shares
    ('link', 'fleet'),                               # a board's line; the fleet folder and its queries
    ('sync', 'make', 'vboard', 'simulate'),          # sync and deploy; image and flash; virtual boards; the simulator
    ('demo', 'ui'),                                  # the demo, on sync and vboard; the web page, on fleet
    ('commands',),                                   # argparse and printing, one module per verb group
    ('cli',),                                        # one table of verb groups, main()
)
# Edges of an upward import another step of the work removes (strict, as
# PENDING_EDGES; empty since the package's __init__ no longer installs the
# zone rule into sporadic.core.jobline, which imported fleet/zones).
PENDING_UPWARD = set()


def layer_of(module):
    """(layer index, subpackage) of a companion module; the package itself
    (companion/__init__.py) is below every layer: each import of a module
    runs it."""
    parts = module.split('.')
    if len(parts) == 1:
        return -1, ''
    for i, names in enumerate(COMPANION_LAYERS):
        if parts[1] in names:
            return i, parts[1]
    raise AssertionError('%s is in no layer of COMPANION_LAYERS: give its subpackage one' % module)


def upward_imports(graph):
    """[(a, b)] where companion module a imports b of its own layer's other
    subpackage or of a higher layer."""
    out = []
    for a, targets in sorted(graph.items()):
        la, pa = layer_of(a)
        for b in targets:
            lb, pb = layer_of(b)
            if pa != pb and lb >= la:
                out.append((a, b))
    return out


def test_the_layer_check_sees_an_upward_import():
    g = {'companion.fleet.queries': ['companion.sync.syncer', 'companion.errors'],
         'companion.sync.syncer': ['companion.link.base', 'companion.make.image'],
         'companion.commands.fleet': ['companion.fleet.queries']}
    assert upward_imports(g) == [('companion.fleet.queries', 'companion.sync.syncer'),
                                 ('companion.sync.syncer', 'companion.make.image')]


def test_companion_subpackages_import_only_downward():
    graph = import_graph(companion_modules(), module_level_only=False)
    assert graph['companion.commands.board'], 'the graph found no import of the board verbs: the checker is broken'
    found = set(upward_imports(graph))
    for edge in PENDING_UPWARD:
        assert edge in found, '%s no longer imports %s: delete it from PENDING_UPWARD' % edge
    assert sorted(found - PENDING_UPWARD) == []


# -- no module over 500 lines ------------------------------------------------------

MAX_LINES = 500
# Modules still over it (strict: once one is under, delete it here). Empty
# since the fleet folder's module is split (folder, board_keys, jobs_file,
# actions, host_list).
PENDING_LONG = set()


def long_modules(paths, limit=MAX_LINES):
    out = {}
    for p in paths:
        with open(p, encoding='utf-8') as f:
            n = sum(1 for _ in f)
        if n > limit:
            out[os.path.relpath(p, ROOT)] = n
    return out


def test_no_companion_module_is_over_500_lines():
    found = long_modules(companion_modules().values())
    for p in PENDING_LONG:
        assert p in found, '%s is %d lines or less now: delete it from PENDING_LONG' % (p, MAX_LINES)
    assert {p: n for p, n in found.items() if p not in PENDING_LONG} == {}


# -- state is passed, not assigned into another module --------------------------------

def module_names(tree, module, is_package, known):
    """{local name: module} of the names an import binds to a module in tree:
    `import a.b` binds a, `import a.b as x` binds x, `from p import m` binds
    m when p.m is a module (one of `known`, or importable as one)."""
    import importlib.util
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    out[a.asname] = a.name
                else:
                    out[a.name.split('.')[0]] = a.name.split('.')[0]
        elif isinstance(node, ast.ImportFrom):
            pkg = from_package(node, module, is_package)
            for a in node.names:
                full = pkg + '.' + a.name
                is_module = full in known
                if not is_module and pkg.split('.')[0] not in ('sporadic', 'companion'):
                    try:
                        is_module = importlib.util.find_spec(full) is not None
                    except (ImportError, ValueError):
                        is_module = False
                if is_module:
                    out[a.asname or a.name] = full
    return out


def foreign_assignments(tree, module, is_package, known):
    """[(line, 'mod.attr')] where tree assigns (=, +=, del, setattr) an
    attribute of a module it imported."""
    mods = module_names(tree, module, is_package, known)
    out = []

    def base(node):
        while isinstance(node, ast.Attribute):
            node = node.value
        return node.id if isinstance(node, ast.Name) else None

    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ('setattr', 'delattr')
              and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id in mods):
            out.append((node.lineno, node.args[0].id + '.?'))
        for t in targets:
            for el in (t.elts if isinstance(t, ast.Tuple) else [t]):
                if isinstance(el, ast.Attribute) and base(el) in mods:
                    out.append((node.lineno, ast.unparse(el)))
    return out


def test_the_assignment_check_sees_one():
    tree = ast.parse('from sporadic.core import plan\nimport os.path as p\nimport time\n'
                     'plan.position = (1, 2)\nclass A:\n    def f(self):\n        self.x = 1\n'
                     'p.sep = "/"\nsetattr(time, "time", None)\nlocal = object()\nlocal.x = 1\n')
    known = {'sporadic.core.plan'}
    assert foreign_assignments(tree, 'companion.x', False, known) == [(4, 'plan.position'), (8, 'p.sep'),
                                                                       (9, 'time.?')]


# Assignments another step of #30 makes parameters (strict, as above). Empty
# since plan.position is gone (a calendar job is placed: job.cal.place(pos))
# and the virtual board's boot shim builds the board the firmware imports
# (the unix board module with the relay's watchdog) instead of filling in
# the module's wdt_feed and sleep_ms.
PENDING_ASSIGNMENTS = set()


def test_no_companion_module_assigns_into_another():
    """companion/ (firmware/'s own check is the firmware part of #30)."""
    modules = companion_modules()
    known = set(modules) | set(sporadic_modules())
    found = set()
    for name, path in modules.items():
        for line, what in foreign_assignments(parse(path), name, path.endswith('__init__.py'), known):
            found.add((name, what))
    for pending in PENDING_ASSIGNMENTS:
        assert pending in found, '%s no longer assigns %s: delete it from PENDING_ASSIGNMENTS' % pending
    assert sorted(found - PENDING_ASSIGNMENTS) == []


# ---- #30: the firmware's shape, function-level imports included ----
# (appended as their own functions: the companion's checks are above)

def all_modules(top, package):
    """{module name: path} of every .py under top (subpackages included)."""
    out = {}
    for d, dirs, names in os.walk(top):
        dirs[:] = sorted(x for x in dirs if x not in ('node_modules', '__pycache__') and not x.startswith('.'))
        for n in names:
            if n.endswith('.py'):
                rel = os.path.relpath(os.path.join(d, n), top)[:-3].split(os.sep)
                if rel[-1] == '__init__':
                    rel = rel[:-1]
                out['.'.join([package] + rel)] = os.path.join(d, n)
    return out


# Function-level imports that split a module for MicroPython's heap: the
# importer loads its part only on the path that needs it, and the part builds
# on the importer. (importer, part): what the part is for. Every other
# import, at module level or inside a function, is an edge of the DAG.
# Strict: an entry whose import is gone, or has moved to module level, fails.
HEAP_SPLITS = {
    ('sporadic.core.jobline', 'sporadic.core.jobtext'):
        "jobline.py: the parser a board's loop holds; jobtext.py: its rare half "
        "(error messages, job text written back, ids, results and assignments parsed), "
        "loaded on first use",
    ('sporadic.device.store', 'sporadic.device.recover'):
        "the store's recovery at open: loaded for the open only, then dropped",
    ('sporadic.device.store', 'sporadic.device.reimport'):
        "re-checking a file changed behind the store's back: loaded at an open "
        "that found one, in the emptiest heap",
    ('sporadic.device.store', 'sporadic.device.fold'):
        "the compaction (logs folded into jobs.txt, and finish): loaded for a compaction "
        "only, a small heap's loop lets it go after one. It loads in turn what only some "
        "compactions need: the outbox's packing (a sealed segment), splice (a sync's "
        "store: the digest index; the loop's own compactions never load it), stamp (to "
        "check a jobs.txt the open took on the wake index's word)",
}


def test_firmware_imports_form_a_dag_function_level_included():
    graph = import_graph(sporadic_modules(), module_level_only=False)
    top = import_graph(sporadic_modules(), module_level_only=True)
    for a, b in HEAP_SPLITS:
        assert b in graph[a], '%s no longer imports %s: delete it from HEAP_SPLITS' % (a, b)
        assert b not in top[a], '%s imports %s at module level: no heap split' % (a, b)
        graph[a].remove(b)
    cycle = find_cycle(graph)
    assert cycle is None, 'import cycle in firmware/sporadic/: ' + ' -> '.join(cycle)


def private_uses(modules):
    """('path:line', module X, name) for each `from X import _name` and
    `X._name` where X is another module of `modules`."""
    found = []
    for name, path in sorted(modules.items()):
        tree = parse(path)
        is_package = path.endswith('__init__.py')
        alias = {}     # local name -> a module of `modules`
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                pkg = from_package(node, name, is_package)
                for a in node.names:
                    full = pkg + '.' + a.name
                    if full in modules:
                        alias[a.asname or a.name] = full
                    elif pkg in modules and pkg != name and a.name[:1] == '_' and a.name[:2] != '__':
                        found.append(('%s:%d' % (os.path.relpath(path, ROOT), node.lineno), pkg, a.name))
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname and a.name in modules:
                        alias[a.asname] = a.name
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr[:1] == '_' and node.attr[:2] != '__':
                v = node.value
                target = alias.get(v.id) if isinstance(v, ast.Name) else None
                if target is None:   # sporadic.device.store._write
                    parts = []
                    while isinstance(v, ast.Attribute):
                        parts.append(v.attr)
                        v = v.value
                    if isinstance(v, ast.Name):
                        dotted = '.'.join([v.id] + parts[::-1])
                        target = dotted if dotted in modules else None
                if target is not None and target != name:
                    found.append(('%s:%d' % (os.path.relpath(path, ROOT), node.lineno), target, node.attr))
    return found


# The companion's own (helper `layout`'s part of #30), as (module's last
# name, private name). Strict: once one is gone, delete it here. (Empty since
# image.flash_bytes, was _parse_size, which flash.py used.)
PENDING_PRIVATE = set()


def test_no_module_uses_another_modules_private_names():
    modules = dict(all_modules(os.path.join(FIRMWARE, 'sporadic'), 'sporadic'))
    modules.update(all_modules(COMPANION, 'companion'))
    found = private_uses(modules)
    seen = {(mod.rpartition('.')[2], attr) for _, mod, attr in found}
    left = ['%s: %s.%s' % f for f in found if (f[1].rpartition('.')[2], f[2]) not in PENDING_PRIVATE]
    assert left == []
    assert PENDING_PRIVATE <= seen, 'no longer used, delete from PENDING_PRIVATE: %s' % (PENDING_PRIVATE - seen)


def test_the_private_name_check_sees_both_forms(tmp_path):
    # the checker itself: both forms across modules are found, a module's own are not
    (tmp_path / 'a.py').write_text('_x = 1\n')
    (tmp_path / 'b.py').write_text('from p.a import _x\nimport p.a as a\nprint(a._x)\n_y = 2\n_y\n')
    found = private_uses({'p.a': str(tmp_path / 'a.py'), 'p.b': str(tmp_path / 'b.py')})
    assert [f[1:] for f in found] == [('p.a', '_x'), ('p.a', '_x')]
    assert [f[0].rpartition(':')[2] for f in found] == ['1', '3']


def test_no_firmware_module_over_500_lines():
    long = []
    for path in sorted(all_modules(os.path.join(FIRMWARE, 'sporadic'), 'sporadic').values()):
        with open(path, encoding='utf-8') as f:
            n = sum(1 for _ in f)
        if n > 500:
            long.append('%s: %d lines' % (os.path.relpath(path, ROOT), n))
    assert long == []


def test_core_does_no_io_of_its_own():
    # docs/architecture.md: core/ imports nothing of device/, net/ or desktop/
    # and no port module, and opens no file (recon.file_source, the one
    # exception, streams files for tests and benches: ALLOWED_OPEN)
    ports = {'os', 'time', 'board', 'machine', 'socket', 'network', 'select', 'esp', 'rp2'}
    bad = []
    core = sporadic_modules()
    for name, path in sorted(core.items()):
        if not name.startswith('sporadic.core'):
            continue
        tree = parse(path)
        for t in imported_names(tree, name, path.endswith('__init__.py'), False):
            if t.split('.')[0] in ports or t.startswith(('sporadic.device', 'sporadic.net', 'sporadic.desktop')):
                bad.append('%s imports %s' % (name, t))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == 'open' \
                    and (name, _enclosing(tree, node)) not in ALLOWED_OPEN:
                bad.append('%s:%d opens a file' % (name, node.lineno))
    assert bad == []


ALLOWED_OPEN = {('sporadic.core.recon', 'file_source')}


def _enclosing(tree, target):
    # the name of the module-level function holding `target`
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            for sub in ast.walk(node):
                if sub is target:
                    return node.name
    return None


# ---- #30: the firmware assigns into no other module either ----
# (its own function, as the companion's check above)

# The one kind left, by design (docs/architecture.md#device: "the watchdog
# hook"): store.feed, the function every long read of the store calls each
# FEED_LINES lines to feed the board's watchdog. It is read inside
# store.read_lines (17 call sites in 8 modules: the loop, recovery, the sync
# half, trust, the broker) and the hashing loops of trust.py and stamp.py;
# passing it instead would add an argument to each of those calls and a
# reference to each generator frame, on the 64K heap the loop and a sync
# share, for a value that changes only when the board's owner of the
# watchdog changes: the boot path before the store opens, the loop as it
# starts, the sync server as a request starts. (module, assignment): who sets it.
# Strict: an entry that is gone fails.
FIRMWARE_ASSIGNMENTS = {
    ('sporadic.device.boot', 'store.feed'): 'a re-import at open feeds a watchdog started before a soft reset',
    ('sporadic.device.rtinit', 'store.feed'): "the loop's long reads feed board.wdt_feed (set as the runtime starts)",
    ('sporadic.device.syncsrv', 's.feed'): "a sync's long answers feed the watchdog its request started",
}


def test_no_firmware_module_assigns_into_another():
    modules = sporadic_modules()
    known = set(modules)
    found = set()
    for name, path in modules.items():
        for line, what in foreign_assignments(parse(path), name, path.endswith('__init__.py'), known):
            found.add((name, what))
    assert found, 'the check found no assignment at all: store.feed is set by three modules (the checker is broken)'
    for allowed in FIRMWARE_ASSIGNMENTS:
        assert allowed in found, '%s no longer assigns %s: delete it from FIRMWARE_ASSIGNMENTS' % allowed
    assert sorted(found - set(FIRMWARE_ASSIGNMENTS)) == []


def test_the_package_keeps_built_ins_from_the_stores_roomy_heap():
    # sporadic/__init__.py puts the built-ins in sys.modules on a heap of
    # store.ROOMY or more; it holds that number as a literal (a name in the
    # package would stay on every board's heap), and this keeps the two one
    import re
    fw = os.path.join(ROOT, 'firmware', 'sporadic')
    with open(os.path.join(fw, 'device', 'store.py')) as f:
        roomy = re.search(r'^ROOMY = const\((\d+)\)', f.read(), re.M)
    with open(os.path.join(fw, '__init__.py')) as f:
        pkg = re.findall(r'gc\.mem_free\(\) < (\d+)', f.read())
    assert roomy and pkg == [roomy.group(1)], (roomy and roomy.group(1), pkg)
