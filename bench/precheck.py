"""Part 4, precheck at scale: ``tf_cluster_info`` against the runbook's manual ``kubectl get``
commands on the same (big) lab, side by side, several repetitions each; optional cProfile of one
module run (where its time goes)."""
import cProfile  # noqa: F401  (documented: the profile is taken with python -m cProfile)
import io
import json
import pstats
import subprocess
import sys
import tempfile
from pathlib import Path

from bench import apimetrics
from bench.proc import REPO, median, module_env, run_measured, table

# The runbook's manual "before" step (design.md): clusters, pools, nodes, GPUs, operator Pods,
# plus what a person checks for business workloads (Deployments, StatefulSets, PDBs) and events.
KUBECTL_COMMANDS = [
    ["get", "tensorfusionclusters", "-o", "json"],
    ["get", "gpupools", "-o", "json"],
    ["get", "gpunodes", "-o", "json"],
    ["get", "gpus", "-o", "json"],
    ["get", "pods", "-n", "tensor-fusion-sys", "-o", "json"],
    ["get", "deployments,statefulsets", "-A", "-o", "json"],
    ["get", "pdb", "-A", "-o", "json"],
    ["get", "events", "-A", "--field-selector", "type=Warning", "-o", "json"],
]


def _module_cmd(state, workdir, profile=None, root=None):
    args = Path(workdir) / "cluster_info_args.json"
    args.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {"kubeconfig": state["kubeconfig"]}}))
    tree = Path(root) / "ansible_collections/tensorfusion/ops" if root else REPO
    script = str(tree / "plugins/modules/tf_cluster_info.py")
    if profile:
        return [sys.executable, "-m", "cProfile", "-o", str(profile), script, str(args)]
    return [sys.executable, script, str(args)]


def module_run(state, workdir, scraper, profile=None, root=None):
    """One run of the module process (of the working tree, or of the collection under ``root``)."""
    env = module_env()
    if root:
        env["PYTHONPATH"] = str(root)
    before = scraper.scrape()
    secs, rss, code, out, err = run_measured(_module_cmd(state, workdir, profile, root), env=env)
    requests = apimetrics.delta(before, scraper.scrape())
    if code or '"failed": true' in out[:2000] and profile is None:
        raise RuntimeError("tf_cluster_info failed: %s %s" % (out[-2000:], err[-2000:]))
    result = json.loads(out[out.index("{"):])
    return {"seconds": secs, "peak_rss_mib": rss, "api_requests": apimetrics.contender_requests(requests, apimetrics.PRECHECK),
            "module_api_requests": result.get("api_requests"), "output_bytes": len(out),
            "requests_by_verb": apimetrics.by_verb(requests)}, result


def kubectl_run(state, scraper):
    from lab import paths
    total, peak = 0.0, 0.0
    before = scraper.scrape()
    for cmd in KUBECTL_COMMANDS:
        secs, rss, code, _out, err = run_measured([str(paths.kubectl_binary()), "--kubeconfig", state["kubeconfig"],
                                                   "--chunk-size=500", *cmd])
        if code:
            raise RuntimeError("kubectl %s failed: %s" % (" ".join(cmd), err[-1000:]))
        total += secs
        peak = max(peak, rss)
    requests = apimetrics.delta(before, scraper.scrape())
    return {"seconds": total, "peak_rss_mib": peak, "api_requests": apimetrics.contender_requests(requests, apimetrics.PRECHECK),
            "requests_by_verb": apimetrics.by_verb(requests)}


def profile_summary(path, top=25):
    """The profile's heaviest functions by cumulative and by own time, as text."""
    buf = io.StringIO()
    stats = pstats.Stats(str(path), stream=buf)
    stats.strip_dirs().sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)
    return buf.getvalue()


def run(state, runs=3, profile=True, outdir=None, compare_root=None):
    """``compare_root``: a collections root holding another version of the collection (for
    example the commit before a change), measured in the same rounds."""
    scraper = apimetrics.Scraper(state)
    mods, kubs, others = [], [], []
    result = None
    with tempfile.TemporaryDirectory(prefix="tfops-bench-precheck-") as tmp:
        for _ in range(runs):
            measured, result = module_run(state, tmp, scraper)
            mods.append(measured)
            kubs.append(kubectl_run(state, scraper))
            if compare_root:
                others.append(module_run(state, tmp, scraper, root=compare_root)[0])
        prof_text = None
        if profile and outdir:
            prof = Path(outdir) / "tf_cluster_info.prof"
            module_run(state, tmp, scraper, profile=prof)
            prof_text = profile_summary(prof)
            (Path(outdir) / "tf_cluster_info.profile.txt").write_text(prof_text)
    data = result["data"]
    report = {
        "size": {"gpu_nodes": len(data["gpunodes"]), "gpus": data["gpus"]["total"],
                 "hypervisors": len(data["hypervisors"]), "tf_workloads": len(data["workloads"]),
                 "findings": result["summary"]},
        "tf_cluster_info": _summary(mods), "kubectl_get": _summary(kubs),
        "runs": {"tf_cluster_info": mods, "kubectl_get": kubs},
        "goal": {"seconds": 10, "api_requests": 25, "peak_rss_mib": 300},
    }
    if others:
        report["tf_cluster_info_compared"] = dict(_summary(others), root=str(compare_root))
        report["runs"]["tf_cluster_info_compared"] = others
    m, k = report["tf_cluster_info"], report["kubectl_get"]
    report["ratio"] = {key: (m[key] / k[key] if k[key] else None) for key in ("seconds", "peak_rss_mib", "api_requests")}
    return report


def _summary(runs):
    return {"seconds": median(r["seconds"] for r in runs), "peak_rss_mib": max(r["peak_rss_mib"] for r in runs),
            "api_requests": median(r["api_requests"] for r in runs), "repetitions": len(runs),
            "output_bytes": runs[-1].get("output_bytes")}


def render(report):
    m, k, r = report["tf_cluster_info"], report["kubectl_get"], report["ratio"]
    rows = [["tf_cluster_info", m["seconds"], m["peak_rss_mib"], m["api_requests"]],
            ["kubectl get x%d" % len(KUBECTL_COMMANDS), k["seconds"], k["peak_rss_mib"], k["api_requests"]],
            ["ratio module/kubectl", r["seconds"], r["peak_rss_mib"], r["api_requests"]],
            ["goal (module)", 10.0, 300.0, 25]]
    if report.get("tf_cluster_info_compared"):
        c = report["tf_cluster_info_compared"]
        rows.insert(1, ["tf_cluster_info before", c["seconds"], c["peak_rss_mib"], c["api_requests"]])
    return table("4. precheck at scale %s" % json.dumps(report["size"]),
                 ["", "median s", "peak MiB", "requests"], rows)
