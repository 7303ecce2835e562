"""helm/repo_index.py: a pinned chart version the repository's index does not list."""
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import repo_index

INDEX = {"apiVersion": "v1", "entries": {"tensor-fusion": [{"version": "1.8.7"}, {"version": "1.8.6"}]}}


def test_a_version_the_index_lists_passes_and_one_it_does_not_is_said_with_what_it_has():
    assert repo_index.missing(INDEX, "tensor-fusion", "1.8.7") is None
    assert repo_index.missing(INDEX, "tensor-fusion", "v1.8.6") is None
    assert repo_index.missing(INDEX, "tensor-fusion", "9.9.9") == (
        "tfops_chart_version: 9.9.9 is not a version of chart tensor-fusion in the chart repository's index "
        "(it has 1.8.6, 1.8.7)")
    assert repo_index.missing(INDEX, "other", "1.0.0") == "tfops_chart: the chart repository's index has no chart other"


def test_constraints_and_charts_not_of_the_repository_are_left_to_helm():
    assert repo_index.missing(INDEX, "tensor-fusion", "~1.8") is None
    assert repo_index.missing(INDEX, "tensor-fusion", ">=1.8.0 <2") is None
    assert repo_index.plain_chart_name("tensor-fusion") == "tensor-fusion"
    for ref in ("./charts/tf", "/srv/tf-1.8.7.tgz", "oci://registry/tf", "repo/tensor-fusion", None):
        assert repo_index.plain_chart_name(ref) is None
    assert repo_index.versions_of({"entries": "x"}, "tensor-fusion") is None
