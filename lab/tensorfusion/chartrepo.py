"""The test chart in two versions, packaged with helm and served from a chart repository on
loopback (``python -m http.server``: index.yaml, the .tgz files and values-cn.yaml), so that the
documented ``helm upgrade --install --repo <url> ... -f <url>/values-cn.yaml`` works verbatim."""
import copy
import shutil
import subprocess
from pathlib import Path

import yaml

CHART_SRC = Path(__file__).resolve().parent.parent / "charts" / "tensor-fusion"
# version -> appVersion (= operator image tag) and the values that differ from values.yaml.
VERSIONS = {
    "1.8.6": {"appVersion": "2.16.0", "values": {
        "cluster": {"hypervisorImage": "tensorfusion/tensor-fusion-hypervisor:2.14.0",
                    "nodeDiscoveryImage": "tensorfusion/tensor-fusion-node-discovery:2.14.0"},
        "providerConfigs": {"nvidia": {"images": {
            "middleware": "tensorfusion/vgpu-provider-nvidia:1.3.8",
            "remoteClient": "tensorfusion/tensor-fusion-client:v2.14.0",
            "remoteWorker": "tensorfusion/tensor-fusion-worker:v2.14.0"}}}}},
    "1.8.7": {"appVersion": "2.17.0", "values": {}},  # values.yaml as it is
}
V1, V2 = "1.8.6", "1.8.7"


def merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in over.items():
        out[k] = merge(out.get(k) or {}, v) if isinstance(v, dict) else v
    return out


def build(repo_dir: Path, url: str, helm: str, webhook_url: str, ca_bundle: str) -> None:
    """Package every version into ``repo_dir``; the webhook URL and CA of this lab become chart
    defaults (the real chart's certgen Jobs and Service have no equivalent here)."""
    repo_dir.mkdir(parents=True, exist_ok=True)
    work = repo_dir.parent / "chart-build"
    base_values = yaml.safe_load((CHART_SRC / "values.yaml").read_text())
    for version, spec in VERSIONS.items():
        dest = work / version / "tensor-fusion"
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(CHART_SRC, dest)
        chart = yaml.safe_load((dest / "Chart.yaml").read_text())
        chart.update({"version": version, "appVersion": spec["appVersion"]})
        (dest / "Chart.yaml").write_text(yaml.safe_dump(chart, sort_keys=False))
        values = merge(base_values, spec["values"])
        values["controller"]["admissionWebhooks"].update({"url": webhook_url,
                                                          "caBundle": ca_bundle})
        (dest / "values.yaml").write_text(yaml.safe_dump(values, sort_keys=False))
        (dest / "values-cn.yaml").unlink()  # served beside the index, as upstream
        subprocess.run([helm, "package", str(dest), "-d", str(repo_dir)], check=True,
                       capture_output=True, text=True)
    shutil.copy(CHART_SRC / "values-cn.yaml", repo_dir / "values-cn.yaml")
    subprocess.run([helm, "repo", "index", str(repo_dir), "--url", url], check=True,
                   capture_output=True, text=True)
    shutil.rmtree(work, ignore_errors=True)
