"""core/yamldoc.py: the C loader (when PyYAML has it) reads a manifest exactly as the safe loader does."""
import yaml

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import redact
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import yamldoc

MANIFEST = """---
# Source: tensor-fusion/templates/x.yaml
apiVersion: v1
kind: ConfigMap
metadata: {name: a, labels: {on: "yes", n: "1"}}
data:
  when: 2026-12-04T02:00:00Z
  flag: yes
  octal: 0755
  empty: ""
  nothing: null
---
---
apiVersion: v1
kind: Secret
metadata: {name: s}
stringData: {password: hunter2}
"""


def test_load_all_reads_what_the_safe_loader_reads():
    assert list(yamldoc.load_all(MANIFEST)) == list(yaml.safe_load_all(MANIFEST))
    assert [d["metadata"]["name"] for d in redact.parse_manifest(MANIFEST)] == ["a", "s"]


def test_dump_then_load_gives_the_document_back():
    doc = {"b": [1, "on", None, ""], "a": {"x": "2026-12-04"}}
    assert yamldoc.load(yamldoc.dump(doc, sort_keys=True)) == doc
    assert yaml.safe_load(yamldoc.dump(doc)) == doc


def test_the_c_loader_is_used_when_pyyaml_has_it():
    if getattr(yaml, "CSafeLoader", None):
        assert yamldoc._LOADER is yaml.CSafeLoader  # pylint: disable=protected-access
