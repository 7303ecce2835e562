"""core/quantity.py: quantities as Go's resource.Quantity writes them once read (the forms below
are what resource.MustParse(x).String() gives)."""
import pytest

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import quantity


@pytest.mark.parametrize("given, written", [
    ("1000m", "1"), ("1", "1"), (1, "1"), ("0.5", "500m"), ("1500m", "1500m"), ("100m", "100m"),
    ("1000", "1k"), ("1024", "1024"), ("2000k", "2M"), ("1e3", "1e3"), ("12e2", "1200"),
    ("1Ki", "1Ki"), ("1024Ki", "1Mi"), ("1024Mi", "1Gi"), ("1.5Gi", "1536Mi"), ("0.5Ki", "512"),
    ("500Mi", "500Mi"), ("0.0001", "100u"), ("0.5n", "1n"), ("0", "0"), ("0Gi", "0"),
    ("-1000m", "-1"), ("1.0", "1"), ("250m", "250m"), (0.25, "250m"),
])
def test_a_quantity_is_written_as_go_writes_it(given, written):
    assert quantity.canonical(given) == written


@pytest.mark.parametrize("given", ["abc", "1 Gi", "1GiB", "", None, True, {"a": 1}])
def test_what_is_no_quantity_comes_back_as_it_was(given):
    assert quantity.canonical(given) == given


def test_a_pod_spec_s_quantities_and_nothing_else_are_rewritten():
    spec = {"containers": [{"name": "a", "image": "x:1000", "resources": {"requests": {"cpu": "1000m", "memory": "1024Mi"},
                                                                          "limits": {"nvidia.com/gpu": 1}}}],
            "initContainers": [{"name": "i", "resources": {"limits": {"cpu": "0.5"}}}],
            "volumes": [{"name": "v", "emptyDir": {"sizeLimit": "1024Ki"}},
                        {"name": "e", "ephemeral": {"volumeClaimTemplate": {"spec": {"resources": {"requests": {"storage": "1000Mi"}}}}}}],
            "overhead": {"cpu": "1000m"}, "nodeSelector": {"size": "1000m"}}
    out = quantity.canonical_pod_spec(spec)
    assert out["containers"][0]["resources"] == {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"nvidia.com/gpu": "1"}}
    assert out["containers"][0]["image"] == "x:1000" and out["nodeSelector"] == {"size": "1000m"}
    assert out["initContainers"][0]["resources"]["limits"] == {"cpu": "500m"}
    assert out["volumes"][0]["emptyDir"]["sizeLimit"] == "1Mi"
    assert out["volumes"][1]["ephemeral"]["volumeClaimTemplate"]["spec"]["resources"]["requests"] == {"storage": "1000Mi"}
    assert out["overhead"] == {"cpu": "1"}
    assert spec["containers"][0]["resources"]["requests"]["cpu"] == "1000m", "not changed in place"
