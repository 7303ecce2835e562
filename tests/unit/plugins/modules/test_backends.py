"""Every module has its body in module_utils/_tfops/backends/<module>.py, and hands that backend's
run(ctx) to core/module.run (issue 40): from a module's name to its logic by name alone."""
import ast
import importlib
import os

import pytest

from ansible_collections.tensorfusion.ops.plugins import modules as modules_package
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops import backends as backends_package
from ansible_collections.tensorfusion.ops.plugins.plugin_utils import in_process

MODULES = list(modules_package.__path__)[0]  # a namespace package: no __init__.py
BACKENDS = list(backends_package.__path__)[0]
BACKEND = "ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.backends"


def names(folder):
    return sorted(f[:-3] for f in os.listdir(folder) if f.endswith(".py") and not f.startswith("_"))


def test_one_backend_per_module_and_none_without_one():
    assert names(BACKENDS) == sorted(set(names(MODULES)) - in_process.ACTION_ONLY)


@pytest.mark.parametrize("module", sorted(in_process.ACTION_ONLY))
def test_an_action_only_module_has_its_action_and_no_backend(module):
    """A module that is only an action on the controller (it reads the play's variables as
    given): its action plugin does the work; the module itself documents it and refuses to run."""
    assert os.path.exists(os.path.join(os.path.dirname(MODULES), "action", module + ".py"))
    assert module not in names(BACKENDS)


@pytest.mark.parametrize("module", sorted(set(names(MODULES)) - in_process.ACTION_ONLY))
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
