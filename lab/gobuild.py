"""Build the lab's Go programs from the Go module proxy, by module path and version.

Kubernetes and etcd cannot be built with a plain ``go install <pkg>@<version>``: their main
modules replace their sibling modules with local paths (``k8s.io/api => ./staging/src/k8s.io/api``),
and ``go install`` refuses a module with replace directives. So each build gets a small wrapper
module in the cache that requires the real module and, for Kubernetes, pins every staging module
the downloaded go.mod replaces to its published ``v0.<minor>.<patch>`` release. The list is read
from that go.mod each time (it changes between minors), never typed here.

The pure parts (reading a go.mod, the wrapper's go.mod, the version ldflags) are functions the
unit tests cover; ``GoTool`` runs the ``go`` command.
"""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from .errors import InstallError

# A replace directive of a module's go.mod that points at a folder of its own repository.
_LOCAL_REPLACE = re.compile(r"^\s*(?:replace\s+)?(\S+)(?:\s+\S+)?\s+=>\s+(\.{1,2}/\S*)\s*$")
_GO_LINE = re.compile(r"^go\s+(\d+)\.(\d+)(?:\.(\d+))?\s*$", re.M)
_GODEBUG_LINE = re.compile(r"^godebug\s+.*$", re.M)


def local_replaces(go_mod: str) -> List[str]:
    """The module paths that ``go_mod`` replaces with a local folder, in file order."""
    found = []
    in_block = False
    for raw in go_mod.splitlines():
        line = raw.split("//", 1)[0].rstrip()
        if line.startswith("replace ("):
            in_block = True
            continue
        if in_block and line.strip() == ")":
            in_block = False
            continue
        if in_block or line.startswith("replace "):
            match = _LOCAL_REPLACE.match(line)
            if match and match.group(1) not in found:
                found.append(match.group(1))
    return found


def requirements(go_mod: str) -> Dict[str, str]:
    """The ``require`` directives of a go.mod: {module path: version}."""
    found = {}
    in_block = False
    for raw in go_mod.splitlines():
        line = raw.split("//", 1)[0].strip()
        if line.startswith("require ("):
            in_block = True
            continue
        if in_block and line == ")":
            in_block = False
            continue
        if line.startswith("require "):
            line = line[len("require "):].strip()
        elif not in_block:
            continue
        parts = line.split()
        if len(parts) == 2:
            found[parts[0]] = parts[1]
    return found


def pinned_siblings(go_mod: str, placeholder_version: str) -> Dict[str, str]:
    """What a wrapper must pin for a module whose go.mod replaces its siblings with folders of
    its own repository: each replaced module it requires, at the version it requires, or at
    ``placeholder_version`` when it requires the placeholder ``v0.0.0`` (Kubernetes' staging
    modules, published separately as v0.<minor>.<patch>)."""
    required = requirements(go_mod)
    return {path: placeholder_version if required[path] == "v0.0.0" else required[path]
            for path in local_replaces(go_mod) if path in required}


def godebug_lines(go_mod: str) -> List[str]:
    return _GODEBUG_LINE.findall(go_mod)


def go_line(go_mod: str) -> Tuple[int, int, int]:
    """The ``go`` directive of a go.mod as (major, minor, patch); (1, 0, 0) when it has none."""
    match = _GO_LINE.search(go_mod)
    if not match:
        return (1, 0, 0)
    return (int(match.group(1)), int(match.group(2)), int(match.group(3) or 0))


def staging_version(kube_version: str) -> str:
    """k8s.io/kubernetes v1.35.4 publishes its staging modules as v0.35.4."""
    major, minor, patch = _semver(kube_version)
    if major != 1:
        raise InstallError(f"unexpected Kubernetes version {kube_version}: expected 1.x.y")
    return f"v0.{minor}.{patch}"


def _semver(version: str) -> Tuple[int, int, int]:
    match = re.fullmatch(r"v?(\d+)\.(\d+)\.(\d+)", version)
    if not match:
        raise InstallError(f"not a release version: {version!r} (expected like 1.35.4)")
    return int(match.group(1)), int(match.group(2)), int(match.group(3))


def wrapper_go_mod(name: str, requires: Dict[str, str], replaces: Dict[str, str],
                   go_version: Tuple[int, int, int], godebug: Sequence[str] = ()) -> str:
    """The go.mod of a wrapper module: ``requires`` {path: version}, ``replaces`` {path:
    version} (each path replaced by the same path at that version), the ``go`` line of the
    module it wraps and that module's ``godebug`` lines (they set the runtime defaults its
    main package is built for)."""
    lines = [f"module {name}", "", "go %d.%d.%d" % go_version, ""]
    lines += list(godebug) + ([""] if godebug else [])
    lines.append("require (")
    lines += [f"\t{path} {version}" for path, version in sorted(requires.items())]
    lines.append(")")
    if replaces:
        lines += ["", "replace ("]
        lines += [f"\t{path} => {path} {version}" for path, version in sorted(replaces.items())]
        lines.append(")")
    return "\n".join(lines) + "\n"


def version_ldflags(version: str, build_date: str, packages: Sequence[str]) -> List[str]:
    """``-X`` flags that give a Kubernetes binary its version: without them it reports
    ``v0.0.0-master+$Format:%H$`` and every client that parses the server version breaks
    (helm's kubeVersion checks, the scheduler's emulation version)."""
    major, minor, _ = _semver(version)
    values = {"gitVersion": "v" + version.lstrip("v"), "gitMajor": str(major),
              "gitMinor": str(minor), "gitTreeState": "clean", "buildDate": build_date,
              # the proxy records no commit for a module version: empty, not "$Format:%H$"
              "gitCommit": ""}
    flags = []
    for package in packages:
        flags += [f"-X {package}.{key}={value}" for key, value in values.items()]
    return flags


KUBE_VERSION_PACKAGES = ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")


class GoTool:
    """The ``go`` command, run with the local toolchain only (a go.mod may not make it download
    another), no cgo, and the module proxy the machine is set up with."""

    def __init__(self, log, go: Optional[str] = None):
        self.log = log
        self.go = go or self._find()
        self.version = self._version()

    @staticmethod
    def _find() -> str:
        """``TFOPS_GO``, else ``go`` on PATH, else Go's own install folder: Debian's golang-go
        (1.19) may come first on PATH and is too old, so the version is checked, not assumed."""
        for candidate in (os.environ.get("TFOPS_GO"), shutil.which("go"), "/usr/local/go/bin/go"):
            if candidate and Path(candidate).exists():
                return candidate
        raise InstallError("no Go toolchain found: install Go (1.25 or later) or set TFOPS_GO "
                           "to its go binary")

    def _version(self) -> Tuple[int, int, int]:
        out = subprocess.run([self.go, "env", "GOVERSION"], capture_output=True, text=True,
                             env=self.env()).stdout.strip()
        match = re.match(r"go(\d+)\.(\d+)(?:\.(\d+))?", out)
        if not match:
            raise InstallError(f"cannot tell the version of {self.go} (go env GOVERSION said {out!r})")
        return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)

    def require(self, needed: Tuple[int, int, int], what: str) -> None:
        if self.version < needed:
            raise InstallError(
                f"{what} needs Go {'.'.join(map(str, needed))} or later; {self.go} is "
                f"{'.'.join(map(str, self.version))}: put a newer go first on PATH or set TFOPS_GO")

    @staticmethod
    def env(**extra: str) -> Dict[str, str]:
        env = {**os.environ, "GOTOOLCHAIN": "local", "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod"}
        env.update(extra)
        return env

    def run(self, args: Sequence[str], cwd: Path, capture: bool = False,
            env: Optional[Dict[str, str]] = None) -> str:
        """``go args`` in ``cwd``; ``env``: variables besides the toolchain's (GOBIN, say)."""
        cmd = [self.go, *args]
        self.log("$ " + " ".join(cmd) + f"  (in {cwd})")
        res = subprocess.run(cmd, cwd=cwd, env=self.env(**(env or {})), text=True,
                             stdout=subprocess.PIPE if capture else sys.stderr,
                             stderr=subprocess.PIPE if capture else None)
        if res.returncode != 0:
            detail = (res.stderr or "").strip()[-2000:] if capture else "see the output above"
            raise InstallError(f"go {' '.join(args)} failed ({res.returncode}): {detail}")
        return res.stdout if capture else ""

    def download(self, module: str, version: str, cwd: Path) -> Dict:
        """``go mod download -json`` of one module version: its go.mod, .info and folder."""
        out = self.run(["mod", "download", "-json", f"{module}@{version}"], cwd, capture=True)
        info = json.loads(out)
        if info.get("Error"):
            raise InstallError(f"the Go module proxy did not serve {module}@{version}: "
                               f"{info['Error']}")
        return info


def module_time(download: Dict) -> str:
    """The commit time the proxy records for a module version (its .info), as RFC 3339."""
    try:
        return json.loads(Path(download["Info"]).read_text())["Time"]
    except (OSError, ValueError, KeyError):
        return "1970-01-01T00:00:00Z"


def build_wrapped(go: GoTool, work: Path, go_mod: str, version: str, packages: Dict[str, str],
                  out_dir: Path, ldflags: Sequence[str] = (), tags: Sequence[str] = ()) -> None:
    """Build ``packages`` ({binary name: package path}, all of the wrapped module, which is at
    ``version``) inside a wrapper module in ``work`` whose go.mod is ``go_mod``; the binaries
    land in ``out_dir`` only when every one was built."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "go.mod").write_text(go_mod)
    (work / "go.sum").unlink(missing_ok=True)
    # Fill go.sum for exactly these packages. Each is named at the wrapped module's version: a
    # bare package path would mean @upgrade, the newest release.
    go.run(["get", *(f"{package}@{version}" for package in packages.values())], work)
    staging = out_dir.with_name(out_dir.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    flags = ["-trimpath", "-ldflags", " ".join(["-s", "-w", *ldflags])]
    if tags:
        flags += ["-tags", ",".join(tags)]
    for binary, package in packages.items():
        go.run(["build", *flags, "-o", str(staging / binary), package], work)
    shutil.rmtree(out_dir, ignore_errors=True)
    staging.rename(out_dir)
