"""The execution environment definition (extensions/ee) produces a build context that holds what
the runbooks need: ``ansible-builder create`` runs here (it needs no container engine) and the
generated context is read back: the Python requirements, the system packages, the helm download
with its checksum check, and the collection artifact installed by the galaxy stage."""
import json
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[3]
EE_DIR = REPO / "extensions" / "ee"
HELM_URL = re.compile(r"https://get\.helm\.sh/helm-v[34]\.\d+\.\d+-linux-\$\{arch\}\.tar\.gz")


def _galaxy_version():
    return yaml.safe_load((REPO / "galaxy.yml").read_text())["version"]


def _run(argv, cwd):
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, f"{argv} failed: {proc.stdout[-2000:]} {proc.stderr[-2000:]}"


def _requirements(path):
    """name -> Requirement of a pip requirements file (comments and blank lines skipped)."""
    found = {}
    for line in Path(path).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            req = Requirement(line)
            found[req.name.lower()] = req
    return found


def missing_requirements(context):
    """The requirements of the collection's requirements.txt that the context does not carry with
    the same version specifier."""
    carried = _requirements(context / "_build" / "requirements.txt")
    return [str(req) for name, req in _requirements(REPO / "requirements.txt").items()
            if name not in carried or carried[name].specifier != req.specifier]


def create_context(workdir, definition=None):
    """The EE folder and the dependency files it names, laid out as in the repository under
    workdir (so the repository stays untouched), with the collection artifact built next to the
    definition as its README says; then ``ansible-builder create``. ``definition`` replaces the
    definition file's content. Returns the context folder."""
    ee_dir = workdir / "extensions" / "ee"
    shutil.copytree(EE_DIR, ee_dir, ignore=shutil.ignore_patterns("*.tar.gz"))
    for name in ("requirements.txt", "bindep.txt"):
        shutil.copy(REPO / name, workdir / name)
    if definition is not None:
        (ee_dir / "execution-environment.yml").write_text(yaml.safe_dump(definition))
    _run(["ansible-galaxy", "collection", "build", "--output-path", str(ee_dir), str(REPO)], workdir)
    context = workdir / "context"
    _run([sys.executable, "-m", "ansible_builder", "create", "-f", str(ee_dir / "execution-environment.yml"),
          "-c", str(context), "--output-filename", "Containerfile"], workdir)
    return context


@pytest.fixture(scope="module")
def context(tmp_path_factory):
    return create_context(tmp_path_factory.mktemp("ee"))


def final_stage(context):
    containerfile = (context / "Containerfile").read_text()
    return containerfile.split("FROM base AS final", 1)[1]


def test_every_python_requirement_is_installed_through_pip(context):
    assert missing_requirements(context) == []


def test_a_requirement_missing_from_the_definition_is_found(tmp_path):
    """The check above can fail: a definition whose Python needs leave out croniter."""
    definition = yaml.safe_load((EE_DIR / "execution-environment.yml").read_text())
    definition["dependencies"]["python"] = [
        str(req) for name, req in _requirements(REPO / "requirements.txt").items() if name != "croniter"]
    missing = missing_requirements(create_context(tmp_path, definition))
    assert [Requirement(item).name for item in missing] == ["croniter"]


def test_system_packages_are_the_collections_bindep_and_no_python_library(context):
    bindep = (context / "_build" / "bindep.txt").read_text()
    assert bindep == (REPO / "bindep.txt").read_text()
    packages = [line.split()[0] for line in bindep.splitlines() if line.strip() and not line.startswith("#")]
    assert "ca-certificates" in packages
    assert not [name for name in packages if name.startswith(("python3-", "python-"))]


def test_helm_is_downloaded_and_its_checksum_checked_before_it_is_unpacked(context):
    steps = [line for line in final_stage(context).splitlines() if HELM_URL.search(line)]
    assert len(steps) == 1, final_stage(context)
    step = steps[0]
    download, check, unpack = (step.index(HELM_URL.search(step).group(0)), step.index("sha256sum -c"),
                               step.index("tar -xzf"))
    assert download < check < unpack
    pinned = dict(re.findall(r"(amd64|arm64)\) sum=([0-9a-f]{64}) ;;", step))
    assert set(pinned) == {"amd64", "arm64"}
    assert "install -m 0755" in step and "helm version" in step


def test_the_collection_artifact_is_in_the_context_and_installed_by_the_galaxy_stage(context):
    artifact = context / "_build" / "collection" / f"tensorfusion-ops-{_galaxy_version()}.tar.gz"
    with tarfile.open(artifact) as tar:
        manifest = json.load(tar.extractfile("MANIFEST.json"))["collection_info"]
    assert (manifest["namespace"], manifest["name"], manifest["version"]) == ("tensorfusion", "ops", _galaxy_version())
    galaxy = yaml.safe_load((context / "_build" / "requirements.yml").read_text())
    assert galaxy["collections"] == [{"name": f"/build/collection/{artifact.name}", "type": "file"}]
    containerfile = (context / "Containerfile").read_text()
    assert "COPY _build /build" in containerfile
    assert "ansible-galaxy collection install $ANSIBLE_GALAXY_CLI_COLLECTION_OPTS -r requirements.yml" in containerfile
    assert "COPY --from=galaxy /usr/share/ansible /usr/share/ansible" in final_stage(context)


def test_the_collections_own_ee_metadata_points_at_its_dependency_files():
    meta = yaml.safe_load((REPO / "meta" / "execution-environment.yml").read_text())
    assert meta == {"version": 3, "dependencies": {"python": "requirements.txt", "system": "bindep.txt"}}
