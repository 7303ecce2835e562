"""The pure parts of lab/gobuild.py: what a wrapper module pins, read from the wrapped go.mod."""
import pytest

from lab import gobuild
from lab.errors import InstallError

# Shaped like k8s.io/kubernetes' go.mod: staging modules required at v0.0.0 and replaced with
# folders; other requirements and replaces (to versions) that a wrapper must leave alone.
KUBE_GO_MOD = """\
// This is a generated file. Do not edit directly.

module k8s.io/kubernetes

go 1.25.0

godebug default=go1.25

require (
\tgithub.com/blang/semver/v4 v4.0.0
\tk8s.io/api v0.0.0
\tk8s.io/apiserver v0.0.0 // indirect
\tk8s.io/klog/v2 v2.130.1
)

require k8s.io/kube-aggregator v0.0.0

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/apiserver => ./staging/src/k8s.io/apiserver
\tk8s.io/kube-aggregator => ./staging/src/k8s.io/kube-aggregator
\tk8s.io/sample-apiserver => ./staging/src/k8s.io/sample-apiserver
\tgithub.com/example/forked v1.0.0 => github.com/example/fork v1.0.1
)
"""

ETCD_GO_MOD = """\
module go.etcd.io/etcd/server/v3

go 1.26.0

toolchain go1.26.11

require (
\tgo.etcd.io/etcd/api/v3 v3.6.17
\tgo.etcd.io/etcd/client/v3 v3.6.17
\tgo.etcd.io/raft/v3 v3.6.0
)

replace (
\tgo.etcd.io/etcd/api/v3 => ../api
\tgo.etcd.io/etcd/client/v3 => ../client/v3
)

replace go.etcd.io/etcd => ./FORBIDDEN_DEPENDENCY
"""


def test_local_replaces_are_read_from_blocks_and_single_lines_in_order():
    assert gobuild.local_replaces(KUBE_GO_MOD) == [
        "k8s.io/api", "k8s.io/apiserver", "k8s.io/kube-aggregator", "k8s.io/sample-apiserver"]
    assert gobuild.local_replaces(ETCD_GO_MOD) == [
        "go.etcd.io/etcd/api/v3", "go.etcd.io/etcd/client/v3", "go.etcd.io/etcd"]


def test_requirements_cover_blocks_single_lines_and_comments():
    assert gobuild.requirements(KUBE_GO_MOD) == {
        "github.com/blang/semver/v4": "v4.0.0", "k8s.io/api": "v0.0.0",
        "k8s.io/apiserver": "v0.0.0", "k8s.io/klog/v2": "v2.130.1",
        "k8s.io/kube-aggregator": "v0.0.0"}


def test_kubernetes_staging_modules_are_pinned_to_their_published_release():
    # Only what the go.mod requires: a replaced module nothing requires is not pinned.
    assert gobuild.pinned_siblings(KUBE_GO_MOD, gobuild.staging_version("1.35.4")) == {
        "k8s.io/api": "v0.35.4", "k8s.io/apiserver": "v0.35.4",
        "k8s.io/kube-aggregator": "v0.35.4"}


def test_etcd_siblings_are_pinned_to_the_versions_the_server_requires():
    assert gobuild.pinned_siblings(ETCD_GO_MOD, "v3.6.17") == {
        "go.etcd.io/etcd/api/v3": "v3.6.17", "go.etcd.io/etcd/client/v3": "v3.6.17"}


def test_go_line_and_godebug():
    assert gobuild.go_line(KUBE_GO_MOD) == (1, 25, 0)
    assert gobuild.go_line(ETCD_GO_MOD) == (1, 26, 0)
    assert gobuild.go_line("module x\n") == (1, 0, 0)
    assert gobuild.godebug_lines(KUBE_GO_MOD) == ["godebug default=go1.25"]


@pytest.mark.parametrize("version, expected", [("1.35.4", "v0.35.4"), ("v1.34.0", "v0.34.0")])
def test_staging_version(version, expected):
    assert gobuild.staging_version(version) == expected


@pytest.mark.parametrize("version", ["2.0.0", "1.35", "latest"])
def test_staging_version_refuses_what_is_not_a_1_x_release(version):
    with pytest.raises(InstallError):
        gobuild.staging_version(version)


def test_wrapper_go_mod_requires_the_module_and_replaces_each_pin_by_a_version():
    text = gobuild.wrapper_go_mod("tfops-lab/kubernetes", {"k8s.io/kubernetes": "v1.35.4"},
                                  {"k8s.io/api": "v0.35.4"}, (1, 25, 0),
                                  ["godebug default=go1.25"])
    assert text.splitlines() == [
        "module tfops-lab/kubernetes", "", "go 1.25.0", "", "godebug default=go1.25", "",
        "require (", "\tk8s.io/kubernetes v1.35.4", ")", "",
        "replace (", "\tk8s.io/api => k8s.io/api v0.35.4", ")"]
    assert gobuild.local_replaces(text) == []  # no folder: go install's objection is gone


def test_version_ldflags_set_every_field_a_client_parses_in_each_package():
    flags = gobuild.version_ldflags("1.35.4", "2026-04-15T18:01:22Z", gobuild.KUBE_VERSION_PACKAGES)
    for package in gobuild.KUBE_VERSION_PACKAGES:
        assert f"-X {package}.gitVersion=v1.35.4" in flags
        assert f"-X {package}.gitMajor=1" in flags
        assert f"-X {package}.gitMinor=35" in flags
        assert f"-X {package}.buildDate=2026-04-15T18:01:22Z" in flags
        assert f"-X {package}.gitCommit=" in flags
