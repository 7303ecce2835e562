"""workloads/restart.py: the label selector as kubectl writes it."""
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.workloads.restart import selector_string


def test_selector_string_covers_expressions():
    sel = {"matchLabels": {"b": "2", "a": "1"},
           "matchExpressions": [{"key": "t", "operator": "In", "values": ["x", "y"]},
                                {"key": "u", "operator": "NotIn", "values": ["z"]},
                                {"key": "e", "operator": "Exists"},
                                {"key": "n", "operator": "DoesNotExist"}]}
    assert selector_string(sel) == "a=1,b=2,t in (x,y),u notin (z),e,!n"
