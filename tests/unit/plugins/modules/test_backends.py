"""Every module has its body in module_utils/_tfops/backends/<module>.py, and hands that backend's
run(ctx) to core/module.run (issue 40): from a module's name to its logic by name alone."""
import ast
import importlib
import os

import pytest

from ansible_collections.tensorfusion.ops.plugins import modules as modules_package
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops import backends as backends_package

MODULES = list(modules_package.__path__)[0]  # a namespace package: no __init__.py
BACKENDS = list(backends_package.__path__)[0]
BACKEND = "ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.backends"


def names(folder):
    return sorted(f[:-3] for f in os.listdir(folder) if f.endswith(".py") and not f.startswith("_"))


def test_one_backend_per_module_and_none_without_one():
    assert names(BACKENDS) == names(MODULES)


@pytest.mark.parametrize("module", names(MODULES))
def test_the_module_runs_its_own_backend(module):
    backend = importlib.import_module("%s.%s" % (BACKEND, module))
    assert callable(getattr(backend, "run", None)), "backends/%s.py has no run(ctx)" % module
    with open(os.path.join(MODULES, module + ".py")) as source:
        tree = ast.parse(source.read())
    imported = [node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                and node.module and node.module.startswith(BACKEND)]
    assert imported, "plugins/modules/%s.py imports no backend" % module
    assert {"%s.%s" % (n.module, a.name) if n.module == BACKEND else n.module
            for n in imported for a in n.names} == {"%s.%s" % (BACKEND, module)}
