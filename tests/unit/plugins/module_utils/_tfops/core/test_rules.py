"""core/rules.py: the user's JMESPath rules, checked and run over a gathered picture."""
import pytest

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.rules import custom_findings, validate_rules
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput
from ..cluster.test_findings import healthy  # helpers shared with that file


def test_custom_rules():
    rules = [{"code": "SMALL_POOL", "severity": "warning", "expression": "pools[?ready_nodes < `8`]",
              "description": "small"}]
    validate_rules(rules)
    assert custom_findings(healthy(), rules) == [
        {"code": "SMALL_POOL", "severity": "warning", "object": "tf-shared", "message": "small"}]
    with pytest.raises(InvalidInput, match="not a JMESPath expression"):
        validate_rules([{"code": "X", "severity": "info", "expression": "pools[?"}])
