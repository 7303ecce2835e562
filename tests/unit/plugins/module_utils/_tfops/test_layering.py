"""Imports between the sub-packages of plugins/module_utils/_tfops only go down (issue 40).

Every file under _tfops is parsed with ``ast`` (module-level and function-level imports alike,
absolute and relative); an import from one sub-package of another is allowed only into a lower
layer of LAYERS. An import into the same layer or a higher one is a violation, and so is a cycle
between sub-packages (with strict layers the two go together; the cycle is named because it is
what makes a change in one package ripple through the others).

KNOWN_VIOLATIONS lists violations allowed for now, each with why it is there (none today); the
test allows them and fails when one of them disappears, so that the list only shrinks."""
import ast
import os

from ansible_collections.tensorfusion.ops.plugins.module_utils import _tfops

PREFIX = "ansible_collections.tensorfusion.ops.plugins.module_utils._tfops"
TFOPS = os.path.dirname(os.path.abspath(_tfops.__file__))

# Bottom first. A sub-package may import only from a lower layer; those of one layer do not
# import each other.
LAYERS = [
    # Shared bases every concern uses (errors, the API client and its retries, deadlines and
    # watches, redaction, the module contract): nothing of _tfops below it, so that any
    # concern may use it.
    ("core",),
    # Concerns that need only core. workloads: rollout state and restarts of Deployments,
    # StatefulSets and DaemonSets as kubectl judges them - nothing of TensorFusion or Helm.
    # maintenance: the runbook's lock, its fence and maintenance windows, which guard writes of
    # every concern above and so must not depend on one.
    ("workloads", "maintenance"),
    # Helm's CLI, its stored releases, releases and snapshot bundles: chart machinery on core
    # alone; TensorFusion's pools are one use of a chart and sit above it.
    ("helm",),
    # TensorFusion GPU pool rollouts: use workloads' rollout decisions and Helm's stored releases
    # (chart drift, the chart's pools, a release's changes with the pools kept, a snapshot's
    # restore of the pools).
    ("gpupool",),
    # Built from pools, Helm and workloads, and independent of each other: plans of a run's
    # changes (changeplan), secret rotations whose consumers are pools, Helm values and
    # workloads (secret), and the cluster picture - info, findings, acceptance, access - that
    # reads every concern below (cluster).
    ("changeplan", "secret", "cluster"),
    # The run report records plans, locks, rotations and workloads' changes: above what it
    # records.
    ("report",),
    # A runbook's inputs bring every concern together: above them all.
    ("runbook",),
    # One body per module (backends/<module>.py, the run(ctx) its main() hands to core/module.py):
    # may use every concern; none uses it.
    ("backends",),
]

# Violations allowed for now, (importing file, imported module) relative to _tfops -> why; each
# must be removed from here once fixed. None today: keep it that way (move the code down, or the
# importer up).
KNOWN_VIOLATIONS = {}


def layer_of(layers=None):
    """{sub-package: its layer's index}."""
    return {pkg: i for i, layer in enumerate(layers or LAYERS) for pkg in layer}


def _targets(root, rel, node):
    """The modules of root (as "pkg/module", or "pkg" for a package's own names) that an
    import node names."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names if a.name.startswith(PREFIX + ".")]
        return ["/".join(n[len(PREFIX) + 1:].split(".")[:2]) for n in names]
    if node.level:
        here = rel.split("/")[:-1]  # the importing file's package, relative to root
        if node.level - 1 > len(here):
            return []  # beyond _tfops
        parts = here[:len(here) - (node.level - 1)] + (node.module.split(".") if node.module else [])
    elif node.module and (node.module == PREFIX or node.module.startswith(PREFIX + ".")):
        parts = node.module[len(PREFIX) + 1:].split(".") if node.module != PREFIX else []
    else:
        return []
    if len(parts) >= 2:
        return ["/".join(parts[:2])]
    out = []
    for alias in node.names:
        sub = parts + [alias.name]
        if len(sub) == 1:
            out.append(sub[0])  # from _tfops import gpupool: the package
        elif os.path.exists(os.path.join(root, *sub)) or os.path.exists(os.path.join(root, *sub) + ".py"):
            out.append("/".join(sub))  # from _tfops.gpupool import plan: a module
        else:
            out.append(sub[0])  # a name of the package's __init__.py
    return out


def imports(root):
    """[(importing file, line, imported module)] between files of root, paths relative to root
    with "/", modules as "pkg/module"; function-level imports included."""
    found = []
    for folder, _dirs, files in os.walk(root):
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read(), path)
            for node in ast.walk(tree):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    found.extend((rel, node.lineno, target) for target in _targets(root, rel, node))
    return sorted(found)


def package_of(path):
    return path.split("/")[0] if "/" in path else None


def violations(found, layers=None):
    """{(importing file, imported module): [lines]} of the imports that do not go down a layer."""
    layer = layer_of(layers)
    out = {}
    for rel, line, target in found:
        src, dst = package_of(rel), target.split("/")[0]
        if src is None or src == dst:
            continue
        if layer[dst] >= layer[src]:
            out.setdefault((rel, target), []).append(line)
    return out


def graph(found, leave_out=()):
    """{sub-package: {sub-packages it imports}}, without the (file, module) pairs of leave_out."""
    edges = {}
    for rel, _line, target in found:
        src, dst = package_of(rel), target.split("/")[0]
        if src is not None and src != dst and (rel, target) not in leave_out:
            edges.setdefault(src, set()).add(dst)
    return edges


def cycles(edges):
    """The strongly connected groups of more than one sub-package, each sorted, sorted."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []
    counter = [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(set(edges) | {d for ds in edges.values() for d in ds}):
        if node not in index:
            visit(node)
    return sorted(groups)


def _describe(items):
    return "\n".join("  %s:%s -> %s" % (rel, ",".join(str(n) for n in lines), target)
                     for (rel, target), lines in sorted(items.items()))


FOUND = imports(TFOPS)


def test_every_sub_package_has_a_layer():
    packages = {d for d in os.listdir(TFOPS) if os.path.isfile(os.path.join(TFOPS, d, "__init__.py"))}
    assert packages == set(layer_of()), "each sub-package of _tfops needs its place in LAYERS"
    assert len(layer_of()) == sum(len(layer) for layer in LAYERS), "a sub-package in two layers"


def test_imports_between_sub_packages_only_go_down():
    new = {k: v for k, v in violations(FOUND).items() if k not in KNOWN_VIOLATIONS}
    assert not new, ("imports into the same or a higher layer (see LAYERS; move the code down, "
                     "or the importer up):\n" + _describe(new))


def test_each_known_violation_is_still_there():
    gone = sorted(set(KNOWN_VIOLATIONS) - set(violations(FOUND)))
    assert not gone, "fixed - remove from KNOWN_VIOLATIONS: %s" % gone


def test_no_cycle_between_sub_packages_but_the_known_ones():
    assert cycles(graph(FOUND, leave_out=KNOWN_VIOLATIONS)) == []


# The graph logic itself, on small trees.

def _tree(tmp_path, files):
    for rel, text in files.items():
        path = tmp_path.joinpath(*rel.split("/"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return str(tmp_path)


def test_imports_reads_absolute_relative_and_function_level_imports(tmp_path):
    root = _tree(tmp_path, {
        "__init__.py": "",
        "core/__init__.py": "",
        "core/errors.py": "import os\nfrom ..helm import cli\n",
        "helm/__init__.py": "VERSION = 1\n",
        "helm/cli.py": ("from %s.core.errors import InvalidInput\n"
                        "from %s.core import errors\n"
                        "def later():\n    from .. import gpupool\n"
                        "    from ..gpupool.plan import batches\n") % (PREFIX, PREFIX),
        "gpupool/__init__.py": "",
        "gpupool/plan.py": "from %s.helm import VERSION\nimport %s.core.errors\n" % (PREFIX, PREFIX),
    })
    assert imports(root) == [
        ("core/errors.py", 2, "helm/cli"),
        ("gpupool/plan.py", 1, "helm"),
        ("gpupool/plan.py", 2, "core/errors"),
        ("helm/cli.py", 1, "core/errors"),
        ("helm/cli.py", 2, "core/errors"),
        ("helm/cli.py", 4, "gpupool"),
        ("helm/cli.py", 5, "gpupool/plan"),
    ]


def test_violations_are_imports_into_the_same_or_a_higher_layer():
    layers = [("core",), ("a", "b"), ("top",)]
    found = [("top/x.py", 1, "a/m"), ("a/m.py", 2, "core/e"), ("a/m.py", 3, "a/n"),
             ("a/m.py", 4, "b/n"), ("core/e.py", 5, "top/x"), ("core/e.py", 9, "top/x")]
    assert violations(found, layers) == {("a/m.py", "b/n"): [4], ("core/e.py", "top/x"): [5, 9]}


def test_cycles_are_groups_that_reach_each_other():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c", "e"}}) == [["a", "b"], ["c", "d"]]
    assert cycles({"a": {"b"}, "b": {"c"}}) == []
    found = [("a/x.py", 1, "b/y"), ("b/y.py", 1, "a/z")]
    assert cycles(graph(found)) == [["a", "b"]]
    assert cycles(graph(found, leave_out={("b/y.py", "a/z")})) == []
