"""Parts 1 and 3: how soon each contender notices that a GPUPool rollout is done, and how many
API requests it makes per rollout.

(a) ``tensorfusion.ops.gpupool_rollout`` (change + wait, one task);
(b) ``kubectl wait --for=jsonpath='{.status.componentStatus.hypervisorConfigSynced}'=true``,
    started once the campaign is running (it cannot tell a stale synced status from a new one);
(c) plain Ansible as a kubernetes.core user writes it today: the change (the same module with
    ``wait: false``), then ``kubectl get gpupool -o json`` retried with ``until`` / ``delay: 5``.
    kubernetes.core itself cannot be installed here (no Galaxy); its ``k8s_info`` makes the same
    single GET per retry.

"Done" is the operator double's final status write (synced, progress 100), read from its log
(epoch ``acked`` time). Each contender runs its own rollout (a new image each time), one after
the other, so that the API server's request counter can be read before and after each."""
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import apimetrics, oplog
from bench.proc import REPO, median, table

GPUPOOL = "tensor-fusion-shared"
POOL = "shared"
HV = "tensorfusion/tensor-fusion-hypervisor"
PLAYBOOKS = Path(__file__).resolve().parent / "playbooks"


def _kubectl():
    from lab import paths
    return str(paths.kubectl_binary())


def playbook_env(times_file, **extra):
    """ansible-playbook's environment for a benchmark run: this tree's collection, the timing
    callback writing to ``times_file``, this Python as the modules' interpreter."""
    from lab import paths
    return dict(os.environ, ANSIBLE_CALLBACKS_ENABLED="tfops_bench_times",
                ANSIBLE_CALLBACK_PLUGINS=str(Path(__file__).resolve().parent / "callback_plugins"),
                TFOPS_BENCH_TIMES_FILE=times_file, ANSIBLE_NOCOLOR="1",
                ANSIBLE_COLLECTIONS_PATH=str(paths.collections_link(REPO)),
                ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false",
                ANSIBLE_PYTHON_INTERPRETER=sys.executable, **extra)


def playbook(name, extra, env_extra=None):
    """Run a bench playbook; (epoch at exit, the callback's task list, process)."""
    with tempfile.NamedTemporaryFile(prefix="tfops-bench-times-", suffix=".json", delete=False) as handle:
        times_file = handle.name
    env = playbook_env(times_file, **(env_extra or {}))
    cmd = ["ansible-playbook", "-i", "localhost,", "-c", "local", str(PLAYBOOKS / name) if "/" not in name else name,
           "-e", json.dumps(extra)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        ended = time.time()
        try:
            times = json.loads(Path(times_file).read_text())
        except (OSError, ValueError):
            times = {"tasks": []}
    finally:
        os.unlink(times_file)
    if proc.returncode:
        raise RuntimeError("%s failed: %s %s" % (name, proc.stdout[-3000:], proc.stderr[-2000:]))
    return ended, times, proc


class Lab:
    def __init__(self, state):
        self.state = state
        self.scraper = apimetrics.Scraper(state)
        self.oplog = Path(state["state_dir"]) / "logs" / "tf-operator.log"
        self.counter = 0
        self.recorder = None  # bench/poolwatch.py, for an operator that logs no status writes

    def status_writes(self):
        if self.recorder is not None:
            return self.recorder.status_writes()
        return oplog.status_writes(self.oplog.read_text(errors="replace"))

    def pool(self):
        out = subprocess.run([_kubectl(), "--kubeconfig", self.state["kubeconfig"], "get", "gpupool", GPUPOOL,
                              "-o", "json"], capture_output=True, text=True, check=True)
        return json.loads(out.stdout)

    def settle(self, timeout=1800):
        """Set-up between contenders: the pool Running and synced (kubectl wait: a watch)."""
        for cond in ("{.status.phase}=Running", "{.status.componentStatus.hypervisorConfigSynced}=true"):
            subprocess.run([_kubectl(), "--kubeconfig", self.state["kubeconfig"], "wait", "gpupool/" + GPUPOOL,
                            "--for=jsonpath=" + cond, "--timeout=%ds" % timeout],
                           capture_output=True, text=True, check=True)

    def set_gap_floor(self, seconds):
        from lab import tensorfusion as tf
        api = tf._clients(self.state)
        try:
            tf.set_knobs(api, batchGapFloorSeconds=seconds)
        finally:
            api.close()

    def next_image(self):
        self.counter += 1
        return "%s:bench-%d-%d" % (HV, int(time.time()), self.counter)

    def wait_campaign_started(self, old_hash, timeout=600):
        """Harness set-up for (b): the campaign's first status write is in the double's log."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            first, _final = oplog.campaign(self.status_writes(), GPUPOOL, "hypervisor", old_hash)
            if first:
                return first
            time.sleep(0.05)
        raise RuntimeError("no campaign started on %s" % GPUPOOL)

    def final_write(self, old_hash, after, timeout=120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            first, final = oplog.campaign(self.status_writes(), GPUPOOL, "hypervisor", old_hash, after)
            if final:
                return first, final
            time.sleep(0.2)
        raise RuntimeError("the double's log has no final status write for the campaign after %s" % old_hash)


def _vars(lab, image, pct, interval, **more):
    return dict(bench_kubeconfig=lab.state["kubeconfig"], bench_pool=POOL, bench_image=image, bench_pct=pct,
                bench_interval=interval, bench_kubectl=_kubectl(), bench_gpupool=GPUPOOL, **more)


def run_a(lab, pct, interval):
    old = lab.pool()["status"]["componentStatus"]["hypervisor"]
    before = lab.scraper.scrape()
    started = time.time()
    ended, times, _proc = playbook("rollout_module.yml", _vars(lab, lab.next_image(), pct, interval))
    requests = apimetrics.delta(before, lab.scraper.scrape())
    task = times["tasks"][-1]
    first, final = lab.final_write(old, started)
    synced = [e for e in task["result"]["timeline"] if e["synced"]]
    detected = _epoch(synced[0]["time"]) if synced else None
    return {"contender": "a", "latency_return": task["end"] - final["acked"],
            "latency_detect": (detected - final["acked"]) if detected else None,
            "latency_process_exit": ended - final["acked"],
            "rollout_seconds": final["acked"] - first["sent"], "batches": task["result"].get("batches"),
            "api_requests": apimetrics.contender_requests(requests, apimetrics.ROLLOUT), "requests_by_verb": apimetrics.by_verb(requests)}


def run_b(lab, pct, interval):
    old = lab.pool()["status"]["componentStatus"]["hypervisor"]
    started = time.time()
    playbook("rollout_module.yml", _vars(lab, lab.next_image(), pct, interval, bench_wait=False))
    lab.wait_campaign_started(old)
    before = lab.scraper.scrape()
    proc = subprocess.run([_kubectl(), "--kubeconfig", lab.state["kubeconfig"], "wait", "gpupool/" + GPUPOOL,
                           "--for=jsonpath={.status.componentStatus.hypervisorConfigSynced}=true",
                           "--timeout=3600s"], capture_output=True, text=True, check=False)
    ended = time.time()
    requests = apimetrics.delta(before, lab.scraper.scrape())
    if proc.returncode:
        raise RuntimeError("kubectl wait failed: " + proc.stderr)
    first, final = lab.final_write(old, started)
    return {"contender": "b", "latency_return": ended - final["acked"], "latency_detect": None,
            "rollout_seconds": final["acked"] - first["sent"],
            "api_requests": apimetrics.contender_requests(requests, apimetrics.ROLLOUT), "requests_by_verb": apimetrics.by_verb(requests)}


def run_c(lab, pct, interval):
    old = lab.pool()["status"]["componentStatus"]["hypervisor"]
    before = lab.scraper.scrape()
    started = time.time()
    _e, change, _p = playbook("rollout_module.yml", _vars(lab, lab.next_image(), pct, interval, bench_wait=False))
    middle = lab.scraper.scrape()
    ended, times, _proc = playbook("poll_until.yml", _vars(lab, "", pct, interval, bench_before_hash=old))
    after = lab.scraper.scrape()
    task = times["tasks"][-1]
    first, final = lab.final_write(old, started)
    total = apimetrics.delta(before, after, own_scrapes=2)
    poll = apimetrics.delta(middle, after)
    return {"contender": "c", "latency_return": task["end"] - final["acked"], "latency_detect": None,
            "latency_process_exit": ended - final["acked"],
            "rollout_seconds": final["acked"] - first["sent"],
            "retries": (task["result"] or {}).get("attempts"),
            "api_requests": apimetrics.contender_requests(total, apimetrics.ROLLOUT),
            "api_requests_poll_only": apimetrics.contender_requests(poll, apimetrics.ROLLOUT),
            "requests_by_verb": apimetrics.by_verb(total)}


def background(lab, seconds):
    """The lab's own reads over an idle window (no contender, no rollout)."""
    before = lab.scraper.scrape()
    time.sleep(seconds)
    counts = apimetrics.delta(before, lab.scraper.scrape())
    return {"seconds": seconds, "api_requests": apimetrics.contender_requests(counts, apimetrics.ROLLOUT),
            "requests_by_verb": apimetrics.by_verb(counts)}


def _epoch(iso):
    from datetime import datetime, timezone
    return datetime.strptime(iso, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()


RUNNERS = {"a": run_a, "b": run_b, "c": run_c}


def run(state, contenders=("a", "b", "c"), repetitions=3, pct=20, interval="1s", gap_floor=1, idle=10):
    lab = Lab(state)
    lab.set_gap_floor(gap_floor)
    runs = []
    for _rep in range(repetitions):
        for name in contenders:
            lab.settle()
            runs.append(RUNNERS[name](lab, pct, interval))
    report = {"nodes": state.get("nodes"), "batch_percentage": pct, "batch_interval": interval,
              "batch_gap_floor": gap_floor, "repetitions": repetitions, "runs": runs,
              "background": background(lab, idle) if idle else None, "contenders": {}}
    for name in contenders:
        mine = [r for r in runs if r["contender"] == name]
        report["contenders"][name] = dict(
            (key, median(r.get(key) for r in mine)) for key in
            ("latency_return", "latency_detect", "latency_process_exit", "rollout_seconds", "api_requests",
             "api_requests_poll_only", "retries"))
    agg = report["contenders"]
    if "a" in agg and "c" in agg and agg["a"]["latency_return"]:
        report["c_over_a"] = agg["c"]["latency_return"] / max(agg["a"]["latency_return"], 1e-3)
    if "a" in agg and "b" in agg and agg["a"]["latency_detect"] is not None:
        report["a_detect_minus_b"] = agg["a"]["latency_detect"] - agg["b"]["latency_return"]
    return report


def render(report, title):
    names = {"a": "(a) gpupool_rollout", "b": "(b) kubectl wait", "c": "(c) get + until/delay 5"}
    rows = []
    for key, agg in report["contenders"].items():
        rows.append([names[key], agg["latency_detect"], agg["latency_return"], agg["rollout_seconds"],
                     agg["api_requests"]])
    text = table("%s (%s nodes, %s%% / %s, %d reps, medians)" % (
        title, report["nodes"], report["batch_percentage"], report["batch_interval"], report["repetitions"]),
        ["", "detect s", "return s", "rollout s", "requests"], rows)
    if report.get("c_over_a"):
        text += "\n(c)/(a) return latency: %.1fx (goal >= 20x)" % report["c_over_a"]
    if report.get("a_detect_minus_b") is not None:
        text += "\n(a) detection - (b): %+.3f s (goal within 0.05 s)" % report["a_detect_minus_b"]
    if report.get("background"):
        text += "\nlab background reads over %ss idle: %s" % (report["background"]["seconds"],
                                                             report["background"]["api_requests"])
    return text
