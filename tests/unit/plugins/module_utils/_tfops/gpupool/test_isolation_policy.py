"""gpupool/isolation_policy.py: a chart write that switches the operator's isolation policy is said
before the write (#47 (3))."""
import pytest

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import isolation_policy


def controller(policy=None, component="operator"):
    env = [{"name": "OTHER", "value": "x"}] + ([{"name": "TF_ISOLATION_MODE_POLICY", "value": policy}] if policy else [])
    return {"kind": "Deployment", "metadata": {"labels": {"tensor-fusion.ai/component": component}},
            "spec": {"template": {"spec": {"containers": [{"name": "vector"}, {"name": "controller", "env": env}]}}}}


@pytest.mark.parametrize("docs, policy", [
    ([controller("dynamic")], "dynamic"), ([controller("Static")], "static"), ([controller()], "static"),
    ([controller("dynamic", component="other")], None), ([], None),
])
def test_the_operator_s_policy_as_the_chart_renders_it(docs, policy):
    assert isolation_policy.operator_policy(docs) == policy


def test_a_switch_is_said_and_no_switch_is_not():
    warning = isolation_policy.switch_warning([controller("dynamic")], [controller("static")])
    assert "from dynamic to static" in warning and "--isolation-policy=dynamic" in warning
    assert "HYPERVISOR_POLICY_STALE" in warning
    assert isolation_policy.switch_warning([controller("dynamic")], [controller("dynamic")]) is None
    assert isolation_policy.switch_warning([], [controller("static")]) is None  # a first install
