"""The layout rules of docs/ARCHITECTURE.md, checked on the source tree.

Every product module (``nova_pci_mdev`` outside ``tests``) is read with
``ast``: what it imports and the length of each function. Rooms are
packages (:data:`ROOMS`): every module belongs to one, a room imports only
the rooms of its allowance, and neither rooms nor modules import each other
in a cycle (imports inside functions count: they are cycles that only wait
for the call). A rule broken names the module and the import;
:class:`PlantedViolationTest` proves each rule fails on a tree that breaks
it.
"""

import ast
import os

import testtools

import nova_pci_mdev

PACKAGE_DIR = os.path.dirname(nova_pci_mdev.__file__)
MAX_FUNCTION_LINES = 50
#: The one module that may import libvirt (and only inside a function).
SEAM = 'nova_pci_mdev.virt.libvirt.seam'

P = 'nova_pci_mdev'
GROUND = ('%s.exception' % P, '%s.names' % P, '%s.numa' % P)
#: room (a package, or one of the ground floor's modules) -> the rooms it
#: may import besides itself. A module belongs to the longest room its
#: name is in; a module in no room is a rule broken (a loose sibling such as
#: ``nova_pci_mdev/store_rows.py`` is in none).
ROOMS = {
    # The public API: small, and each name imported when first used.
    P: ('%s.exception' % P, '%s.compute' % P, '%s.conf' % P,
        '%s.objects' % P),
    '%s.exception' % P: (),
    '%s.names' % P: ('%s.exception' % P,),
    '%s.numa' % P: ('%s.exception' % P, '%s.names' % P),
    # The one bounded reader of files, for every room at the edges.
    '%s.input_files' % P: ('%s.exception' % P,),
    '%s.data' % P: (),
    '%s.objects' % P: ('%s.exception' % P, '%s.names' % P),
    '%s.pci' % P: GROUND + ('%s.objects' % P,),
    # conf/validation parses options into pci objects (devspec, alias).
    '%s.conf' % P: GROUND + ('%s.input_files' % P, '%s.objects' % P,
                             '%s.pci' % P),
    # The host side: only libvirt's so far (``virt`` holds nothing else).
    '%s.virt' % P: (),
    # The seam, node devices, records, slots, guest XML.
    '%s.virt.libvirt' % P: GROUND + ('%s.input_files' % P, '%s.objects' % P),
    '%s.virt.libvirt.mdev' % P: GROUND + (
        '%s.input_files' % P, '%s.virt.libvirt' % P),
    '%s.virt.libvirt.nvidia' % P: GROUND + (
        '%s.input_files' % P, '%s.objects' % P, '%s.virt.libvirt' % P,
        '%s.virt.libvirt.mdev' % P),
    # The emulated host keeps its mdevs in the state directory and reports
    # failures there as the store does (store.files.os_errors).
    '%s.virt.libvirt.emulated' % P: GROUND + (
        '%s.input_files' % P, '%s.virt.libvirt' % P,
        '%s.virt.libvirt.mdev' % P, '%s.virt.libvirt.nvidia' % P,
        '%s.store' % P),
    '%s.store' % P: GROUND + ('%s.data' % P, '%s.input_files' % P,
                              '%s.objects' % P),
    # Orchestration, and the wiring of a host (compute.wiring: the store
    # in its state directory, the emulated host of test:// URIs).
    '%s.compute' % P: GROUND + (
        '%s.conf' % P, '%s.input_files' % P, '%s.objects' % P, '%s.pci' % P, '%s.store' % P,
        '%s.virt.libvirt' % P, '%s.virt.libvirt.emulated' % P,
        '%s.virt.libvirt.mdev' % P, '%s.virt.libvirt.nvidia' % P),
    # The command line: the public API, and what it renders.
    '%s.cmd' % P: GROUND + (
        P, '%s.compute' % P, '%s.conf' % P, '%s.data' % P,
        '%s.input_files' % P, '%s.objects' % P, '%s.pci' % P,
        '%s.store' % P, '%s.virt.libvirt' % P,
        '%s.virt.libvirt.nvidia' % P),
}
#: module -> project rooms it must not import although its room may.
NARROWER = {
    # The Settings conf returns only holds parsed pci objects.
    '%s.conf.settings' % P: ('%s.pci' % P,),
}
#: Modules of the standard library that mean I/O; pure rooms import none.
IO_MODULES = ('os', 'io', 'socket', 'sqlite3', 'subprocess', 'fcntl',
              'tempfile', 'shutil', 'urllib', 'http', 'requests', 'libvirt')
#: The modules that read files themselves; every other reader goes through
#: nova_pci_mdev.input_files (bounded, regular files only): the store's
#: files (each checked with lstat and read at most a header).
OWN_READERS = ('nova_pci_mdev.input_files', 'nova_pci_mdev.store.files')
PURE = ('nova_pci_mdev.objects', 'nova_pci_mdev.pci',
        'nova_pci_mdev.virt.libvirt.records',
        'nova_pci_mdev.virt.libvirt.nodedev',
        'nova_pci_mdev.virt.libvirt.nodenames',
        'nova_pci_mdev.virt.libvirt.xmlsafe',
        'nova_pci_mdev.virt.libvirt.slots',
        'nova_pci_mdev.virt.libvirt.config')


def product_modules():
    """``{dotted name: (path, source)}`` of every product module."""
    found = {}
    for root, dirs, files in os.walk(PACKAGE_DIR):
        dirs[:] = sorted(d for d in dirs
                         if d not in ('tests', '__pycache__', 'data'))
        for name in sorted(files):
            if not name.endswith('.py'):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, os.path.dirname(PACKAGE_DIR))
            dotted = rel[:-3].replace(os.sep, '.')
            if dotted.endswith('.__init__'):
                dotted = dotted[:-len('.__init__')]
            with open(path, encoding='utf-8') as f:
                found[dotted] = (path, f.read())
    return found


def imports(tree, top_level_only=False):
    """``[(module name, line)]`` imported by ``tree``."""
    nodes = tree.body if top_level_only else ast.walk(tree)
    result = []
    for node in nodes:
        if isinstance(node, ast.Import):
            result.extend((a.name, node.lineno) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            result.append((node.module, node.lineno))
            result.extend(('%s.%s' % (node.module, a.name), node.lineno)
                          for a in node.names)
    return result


def _in(name, prefix):
    return name == prefix or name.startswith(prefix + '.')


def room_of(name):
    """The room of a module or package: the longest key of :data:`ROOMS`
    that ``name`` is in (the top package's room is its ``__init__`` only),
    or None."""
    rooms = [r for r in ROOMS if name == r or (r != P and _in(name, r))]
    return max(rooms, key=len) if rooms else None


def project_imports(trees):
    """``{module: [(project module, line)]}``: what each module of
    ``trees`` imports from the project, at any depth of its body. ``from X
    import Y`` is module ``X.Y`` when that is a module of ``trees`` (or a
    package outside them, such as ``data``), else ``X``."""
    result = {}
    for name, tree in trees.items():
        found = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found.extend((a.name, node.lineno) for a in node.names
                             if _in(a.name, P))
            elif isinstance(node, ast.ImportFrom) and node.module and _in(
                    node.module, P):
                for alias in node.names:
                    sub = '%s.%s' % (node.module, alias.name)
                    module = sub if (sub in trees or sub in ROOMS) else (
                        node.module)
                    found.append((module, node.lineno))
        result[name] = found
    return result


#: Library modules whose private names may be read (none are, today).
LIBRARY_PRIVATE_OK = ()


def private_reaches(name, tree):
    """``module:line x._attr`` for each private attribute read on anything
    but ``self``, ``cls`` or a library module of :data:`LIBRARY_PRIVATE_OK`
    (project modules and other objects keep their privates)."""
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and node.attr.startswith('_')
                and not node.attr.startswith('__')):
            continue
        owner = node.value
        if isinstance(owner, ast.Name) and (
                owner.id in ('self', 'cls') or
                owner.id in LIBRARY_PRIVATE_OK):
            continue
        yield '%s:%d %s' % (name, node.lineno, ast.unparse(node))


def loose_modules(names):
    """Modules that belong to no room."""
    return sorted(n for n in names if room_of(n) is None)


def room_violations(graph):
    """``module:line imports X`` for each import outside the module's
    room and its allowance, or named in :data:`NARROWER`."""
    broken = []
    for name, found in sorted(graph.items()):
        room = room_of(name)
        if room is None:
            continue
        allowed = (room,) + ROOMS[room]
        narrower = NARROWER.get(name, ())
        for module, line in found:
            target = room_of(module)
            if target not in allowed or any(_in(module, n) for n in narrower):
                broken.append('%s:%d imports %s (room %s may import %s)' % (
                    name, line, module, room,
                    ', '.join(sorted(allowed)) or 'nothing'))
    return broken


def cycles(edges):
    """The strongly connected components of more than one node (or with a
    self-edge) of the graph ``{node: set(nodes)}``, each sorted
    (Tarjan's algorithm, iterative: linear in nodes and edges)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in edges.get(node, ()):
                    found.append(sorted(component))
    return sorted(found)


def module_edges(graph):
    """``{module: set(modules it imports)}``, packages' own ``__init__``
    excluded as targets when the import names a module inside them."""
    return {name: {m for m, _ in found if m != name and m in graph}
            for name, found in graph.items()}


def room_edges(graph):
    edges = {}
    for name, found in graph.items():
        room = room_of(name)
        if room is None:
            continue
        targets = edges.setdefault(room, set())
        targets.update(r for r in (room_of(m) for m, _ in found)
                       if r is not None and r != room)
    return edges


class LayoutTest(testtools.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.modules = product_modules()
        cls.trees = {name: ast.parse(source, path)
                     for name, (path, source) in cls.modules.items()}

    def test_the_tree_is_read(self):
        # Guards every rule below against an empty walk.
        self.assertIn('nova_pci_mdev.compute.host', self.modules)
        self.assertIn(SEAM, self.modules)
        self.assertGreater(len(self.modules), 40)
        graph = project_imports(self.trees)
        self.assertIn('nova_pci_mdev.store.schema',
                      {m for m, _ in graph['nova_pci_mdev.store.rows']})

    def test_only_the_seam_imports_libvirt(self):
        importers = sorted(
            name for name, tree in self.trees.items()
            if any(mod == 'libvirt' or mod.startswith('libvirt.')
                   for mod, _ in imports(tree)))
        self.assertEqual([SEAM], importers)
        self.assertEqual([], [m for m, _ in imports(self.trees[SEAM], True)
                              if m.startswith('libvirt')],
                         'the seam imports libvirt lazily, in real()')

    def test_pure_modules_do_no_io(self):
        broken = []
        for name, tree in self.trees.items():
            if not any(_in(name, p) for p in PURE):
                continue
            broken.extend('%s:%d imports %s' % (name, line, mod)
                          for mod, line in imports(tree)
                          if any(_in(mod, io) for io in IO_MODULES))
        self.assertEqual([], broken)

    def test_no_function_over_the_limit(self):
        over = []
        for name, tree in self.trees.items():
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    length = node.end_lineno - node.lineno + 1
                    if length > MAX_FUNCTION_LINES:
                        over.append('%s:%d %s (%d lines)' % (
                            name, node.lineno, node.name, length))
        self.assertEqual([], over)

    def test_every_module_is_in_a_room(self):
        self.assertEqual([], loose_modules(self.modules))

    def test_rooms_import_only_their_allowance(self):
        self.assertEqual([], room_violations(project_imports(self.trees)))

    def test_no_import_cycle_between_modules(self):
        self.assertEqual([], cycles(module_edges(project_imports(
            self.trees))))

    def test_no_import_cycle_between_rooms(self):
        self.assertEqual([], cycles(room_edges(project_imports(self.trees))))

    def test_no_private_attribute_of_another_object(self):
        """``x._name`` only on ``self``, ``cls`` or a library module:
        no module reaches into another object's (or project module's)
        private state."""
        broken = []
        for name, tree in sorted(self.trees.items()):
            broken.extend(private_reaches(name, tree))
        self.assertEqual([], broken)

    def test_allowances_are_acyclic(self):
        """The table itself: no two rooms may import each other, even
        through others, whatever the code does today."""
        edges = {room: set(allowed) for room, allowed in ROOMS.items()}
        self.assertEqual([], cycles(edges))

    def test_files_are_read_through_input_files(self):
        """No ``open()`` for reading, ``json.load`` or ``shutil`` copy
        outside :data:`OWN_READERS`: one reader bounds every file."""
        broken = []
        for name, tree in self.trees.items():
            if name in OWN_READERS:
                continue
            broken.extend('%s:%d %s' % (name, node.lineno, what)
                          for node, what in _reads(tree))
        self.assertEqual([], broken)


def _reads(tree):
    """``(node, what)`` of the calls in ``tree`` that read a file without
    :mod:`nova_pci_mdev.input_files`."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == 'open':
            mode = node.args[1] if len(node.args) > 1 else next(
                (k.value for k in node.keywords if k.arg == 'mode'), None)
            text = mode.value if isinstance(mode, ast.Constant) else 'r'
            if not set(str(text)) & set('wax'):
                yield node, 'open() for reading'
        elif isinstance(func, ast.Attribute) and isinstance(
                func.value, ast.Name) and (func.value.id, func.attr) in (
                    ('json', 'load'), ('shutil', 'copytree'),
                    ('shutil', 'copyfile'), ('shutil', 'copy'),
                    ('shutil', 'copy2')):
            yield node, '%s.%s()' % (func.value.id, func.attr)


class TestHelpersTest(testtools.TestCase):
    """Test helpers live in ``tests/fixtures``: no test module imports
    another (a test module is a list of tests, not a library)."""

    def test_no_test_module_imports_another(self):
        tests = os.path.join(PACKAGE_DIR, 'tests')
        broken = []
        for root, dirs, files in os.walk(tests):
            dirs[:] = sorted(d for d in dirs if d != '__pycache__')
            for name in sorted(f for f in files if f.endswith('.py')):
                path = os.path.join(root, name)
                with open(path, encoding='utf-8') as f:
                    tree = ast.parse(f.read(), path)
                broken.extend(
                    '%s:%d imports %s' % (os.path.relpath(path, tests), line,
                                          module)
                    for module, line in imports(tree)
                    if module.rsplit('.', 1)[-1].startswith('test_')
                    and _in(module, P))
        self.assertEqual([], broken)


def _parsed(sources):
    return {name: ast.parse(source) for name, source in sources.items()}


class PlantedViolationTest(testtools.TestCase):
    """Each rule above, on a small tree that breaks it: the checks find
    the module and the import, so a green layout test means something."""

    def test_a_loose_sibling_is_in_no_room(self):
        self.assertEqual(['nova_pci_mdev.store_rows'], loose_modules([
            'nova_pci_mdev.store.rows', 'nova_pci_mdev.store_rows',
            'nova_pci_mdev.cmd.cli']))

    def test_a_room_importing_outside_its_allowance_is_named(self):
        graph = project_imports(_parsed({
            'nova_pci_mdev.store.rows':
                'from nova_pci_mdev.objects import fields\n'
                'def f():\n'
                '    from nova_pci_mdev.cmd import cli\n',
            'nova_pci_mdev.cmd.cli': 'from nova_pci_mdev import exception\n',
            'nova_pci_mdev.conf.settings':
                'from nova_pci_mdev.pci import whitelist\n',
        }))
        broken = room_violations(graph)
        self.assertEqual(2, len(broken), broken)
        self.assertTrue(broken[0].startswith(
            'nova_pci_mdev.conf.settings:1 imports nova_pci_mdev.pci '
            '(room nova_pci_mdev.conf may import'), broken[0])
        self.assertTrue(broken[1].startswith(
            'nova_pci_mdev.store.rows:3 imports nova_pci_mdev.cmd.cli '
            '(room nova_pci_mdev.store may import'), broken[1])

    def test_a_cycle_through_a_lazy_import_is_found(self):
        graph = project_imports(_parsed({
            'nova_pci_mdev.cmd.cli': 'from nova_pci_mdev.cmd import live\n',
            'nova_pci_mdev.cmd.live':
                'def f():\n    from nova_pci_mdev.cmd import cli\n',
            'nova_pci_mdev.cmd.render': 'from nova_pci_mdev.cmd import live\n',
        }))
        self.assertEqual([['nova_pci_mdev.cmd.cli', 'nova_pci_mdev.cmd.live']],
                         cycles(module_edges(graph)))

    def test_a_cycle_between_rooms_is_found(self):
        graph = project_imports(_parsed({
            'nova_pci_mdev.pci.stats': 'from nova_pci_mdev.conf import pci\n',
            'nova_pci_mdev.conf.pci': 'from nova_pci_mdev.objects import x\n',
            'nova_pci_mdev.conf.validation':
                'from nova_pci_mdev.pci import stats\n',
        }))
        self.assertEqual([['nova_pci_mdev.conf', 'nova_pci_mdev.pci']],
                         cycles(room_edges(graph)))
        self.assertEqual([], cycles(module_edges(graph)))

    def test_a_reach_into_another_object_is_found(self):
        tree = ast.parse('class A:\n'
                         '    def f(self, dev):\n'
                         '        self._x = dev._free()\n'
                         '        return self._store._error, rows._COLUMNS\n')
        self.assertEqual(['m:3 dev._free', 'm:4 rows._COLUMNS',
                          'm:4 self._store._error'],
                         sorted(private_reaches('m', tree)))

    def test_cycles_are_found_in_a_long_chain(self):
        edges = {i: {i + 1} for i in range(5000)}
        edges[5000] = {0}
        edges[6000] = {6000}
        found = cycles(edges)
        self.assertEqual([list(range(5001)), [6000]], found)
