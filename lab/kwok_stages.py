"""The kubelet stand-in's knobs and the kwok Stages that carry them (pure: no cluster, no process).

The knobs live in the ConfigMap ``kube-system/tfops-lab-kubelet`` (tests turn them at run time):

- ``readyDelaySeconds``: how long a Pod takes from bound to Running and Ready (a Job's Pod: to
  Succeeded);
- ``neverReadyImages``: a regular expression (Go's RE2 syntax, which kwok evaluates); a container
  whose image matches never becomes Ready: its status shows ImagePullBackOff and its Pod stays
  Pending until the knob no longer matches; a Pod that is Ready already stays so;
- ``deadNodes``: comma-separated Node names that stop answering: no lease renewal (the real
  node-lifecycle controller marks them), their Pods frozen (not started, not deleted).

kwok plays Stages: a selector (a jq expression here), a delay and a status patch (or a delete).
``stages(knobs)`` renders the lab's own Stages for a set of knobs; lab/kubelet.py writes them into
kwok's configuration and restarts kwok when they change (kwok reads a Pod against the Stages when
the Pod changes, never when a Stage does: a restart re-lists every Pod, so a Pod stuck on a
never-ready image starts once the knob is cleared). A dead node is a label instead
(``DEAD_LABEL`` on the Node and its Lease): kwok manages only Nodes without it, and the lease
Stage skips Leases with it, so a dead node needs no restart and comes back at once.
"""
import json
import math
import re
import textwrap
from dataclasses import dataclass, field
from typing import Dict, FrozenSet, List, Mapping, Optional, Tuple

KNOBS_NAMESPACE = "kube-system"
KNOBS_NAME = "tfops-lab-kubelet"
STAND_IN_LABEL = "tfops.lab/stand-in"
DEAD_LABEL = "tfops.lab/dead"
# Which Nodes kwok manages (its --manage-nodes-with-label-selector): the lab's, unless dead. A
# label, not an annotation: kwok filters annotations itself and would keep a node it once managed.
MANAGED_NODES = f"{STAND_IN_LABEL}=true,{DEAD_LABEL}!=true"
LEASE_NAMESPACE = "kube-node-lease"
# Set on a terminating Pod right before kwok deletes it (its value is the Pod's UID; see
# _delete_steps).
DELETION_CONFIRMED = "tfops.lab/deletion-confirmed"
# How often a Pod stuck on a never-ready image shows a new pull attempt (the Python stand-in's
# pace; a kubelet backs off from 10 s to 5 min): operators (TensorFusion's double among them)
# look at such a Pod again when it changes.
PULL_RETRY_SECONDS = 2
LEASE_SECONDS = 40
LEASE_RENEW_SECONDS = 10  # a kubelet renews every quarter of its lease
# Pod IPs from the benchmarking range: valid for Endpoints (which refuse the nodes' loopback
# addresses), routed nowhere, and nothing ever connects to them (there is no kube-proxy).
POD_CIDR = "198.18.0.0/15"
DEFAULT_READY_DELAY = 0.5
MAX_READY_DELAY = 3600.0

# Python-only regular expression syntax that RE2 (Go, which kwok evaluates) rejects: lookaround,
# backreferences, possessive and atomic groups, conditionals.
_NOT_RE2 = re.compile(r"\(\?(?:[=!]|<[=!]|>|\(|P=)|\\[1-9]|[*+?}]\+")


@dataclass(frozen=True)
class Knobs:
    ready_delay: float = DEFAULT_READY_DELAY
    never_ready: str = ""
    dead_nodes: FrozenSet[str] = field(default_factory=frozenset)


def parse_knobs(data: Optional[Mapping[str, str]],
                default_delay: float = DEFAULT_READY_DELAY) -> Tuple[Knobs, List[str]]:
    """The knobs of the ConfigMap's ``data`` (None: no ConfigMap), and the problems found: a knob
    whose value is unusable says why and keeps its default, so one bad knob never stops Pods."""
    data = data or {}
    problems = []
    delay = default_delay
    raw = data.get("readyDelaySeconds")
    if raw not in (None, ""):
        try:
            delay = float(raw)
            if not math.isfinite(delay) or not 0 <= delay <= MAX_READY_DELAY:
                raise ValueError
        except ValueError:
            problems.append(f"readyDelaySeconds {raw!r} is not a number of seconds from 0 to "
                            f"{MAX_READY_DELAY:.0f}; using {default_delay}")
            delay = default_delay
    pattern = data.get("neverReadyImages") or ""
    if pattern:
        problem = regex_problem(pattern)
        if problem:
            problems.append(f"neverReadyImages {pattern!r} {problem}; no image fails")
            pattern = ""
    dead = frozenset(n.strip() for n in (data.get("deadNodes") or "").split(",") if n.strip())
    return Knobs(ready_delay=delay, never_ready=pattern, dead_nodes=dead), problems


def regex_problem(pattern: str) -> Optional[str]:
    """Why ``pattern`` cannot be a never-ready pattern, or None. kwok evaluates it with Go's RE2;
    Python's own parser checks the syntax both share, and the Python-only constructs are named."""
    try:
        re.compile(pattern)
    except re.error as exc:
        return f"is not a regular expression ({exc})"
    if _NOT_RE2.search(pattern):
        return ("uses syntax Go's RE2 does not have (lookaround, backreferences, possessive or "
                "atomic groups)")
    return None


# ---- selectors (jq, evaluated by kwok's gojq; a Stage whose expression errs does not match) ----
_NOT_DELETED = '(.metadata.deletionTimestamp == null)'
_NOT_FINISHED = '((.status.phase // "Pending") | (. != "Succeeded" and . != "Failed"))'
_READY = '(([.status.conditions[]? | select(.type == "Ready") | .status] | .[0]) == "True")'
_JOB = '([.metadata.ownerReferences[]? | select(.kind == "Job")] | length > 0)'
_PULL_BACKOFF = ('([.status.containerStatuses[]? | select(.state.waiting.reason == '
                 '"ImagePullBackOff")] | length > 0)')


def _failing(pattern: str) -> str:
    """A container image matches ``pattern``. ``try``: a pattern RE2 refuses fails no image
    (instead of failing the expression, which would leave every Pod unstarted)."""
    if not pattern:
        return "false"
    return f"(try ([.spec.containers[].image | test({json.dumps(pattern)})] | any) catch false)"


def _all(*terms: str) -> str:
    return " and ".join(terms)


def _jq(expression: str) -> Dict:
    return {"matchExpressions": [{"jq": {"key": expression, "operator": "In",
                                         "values": ["true"]}}]}


def _stage(name: str, kind: str, selector: Dict, steps: List[Dict], delay_ms: Optional[int] = None,
           api_group: str = "v1", delay_from: Optional[str] = None, weight: int = 1) -> Dict:
    """A Stage. When several match an object, kwok plays one of those with a weight above 0 (0
    only when it is the one that matches)."""
    spec = {"resourceRef": {"apiGroup": api_group, "kind": kind}, "selector": selector,
            "steps": steps, "weight": weight}
    if delay_ms is not None:
        spec["delay"] = {"durationMilliseconds": delay_ms}
        if delay_from:
            spec["delay"]["durationFrom"] = {"jq": {"expression": delay_from}}
    return {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage",
            "metadata": {"name": name}, "spec": spec}


def _status_patch(template: str) -> List[Dict]:
    return [{"patch": {"subresource": "status", "root": "status", "template": template}}]


# kwok writes a Pod by name, with what it read of it. A Pod of the same name may have replaced
# that one meanwhile (a hypervisor Pod, a StatefulSet's), and kwok reads a Pod more than once
# when it starts (its list, then a list per node), so a write meant for the old Pod could land on
# the new one. Each write to a Pod therefore carries the UID it was meant for: metadata.uid is
# immutable, so the API server refuses (422) a write that would land on another Pod.
_UID = "metadata:\n  uid: {{ .metadata.uid | Quote }}\n"


def _pod_status_patch(template: str) -> List[Dict]:
    return [{"patch": {"subresource": "status",
                       "template": _UID + "status:\n" + textwrap.indent(template, "  ")}}]


def _delete_steps() -> List[Dict]:
    """Delete with grace 0, as a kubelet confirms a Pod's end. kwok's delete cannot carry the UID,
    so a write that does (an annotation) comes first: it fails on another Pod of that name, and a
    failed step ends the Stage before its delete."""
    return [{"patch": {"template": _UID + f"  annotations:\n    {DELETION_CONFIRMED}: "
                                          "{{ .metadata.uid | Quote }}\n"}},
            {"delete": True}]


# ---- status templates (Go templates with sprig; kwok renders them to YAML) ---------------------
# The Pod's addresses: its node's InternalIP, and an IP kwok hands out from --cidr, kept once
# given; a host-network Pod has its node's, as with a real kubelet (a loopback address here, which
# an EndpointSlice refuses: no Service of the lab selects such Pods).
_POD_ADDRESSES = """\
{{ $pod := . }}
hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
{{ with .status.podIP }}podIP: {{ . | Quote }}{{ else }}podIP: {{ PodIPWith $pod.spec.nodeName \
(or $pod.spec.hostNetwork false) (or $pod.metadata.uid "") (or $pod.metadata.name "") \
(or $pod.metadata.namespace "") | Quote }}{{ end }}
startTime: {{ or .status.startTime Now | Quote }}
"""


def _conditions(ready: bool, reason: str = "") -> str:
    status = '"True"' if ready else '"False"'
    extra = f"\n  reason: {reason}" if reason and not ready else ""
    return f"""\
conditions:
- type: Initialized
  status: "True"
  lastTransitionTime: {{{{ Now | Quote }}}}
- type: ContainersReady
  status: {status}{extra}
  lastTransitionTime: {{{{ Now | Quote }}}}
- type: Ready
  status: {status}{extra}
  lastTransitionTime: {{{{ Now | Quote }}}}
"""


_CONTAINER = """\
- name: {{ .name | Quote }}
  image: {{ .image | Quote }}
  imageID: {{ printf "lab://%s" .image | Quote }}
  restartCount: 0
"""
_RUNNING = """\
  containerID: {{ printf "lab://%s/%s" $pod.metadata.uid .name | Quote }}
  ready: true
  started: true
  state:
    running:
      startedAt: {{ Now | Quote }}
"""
_COMPLETED = """\
  containerID: {{ printf "lab://%s/%s" $pod.metadata.uid .name | Quote }}
  ready: false
  started: false
  state:
    terminated:
      exitCode: 0
      reason: Completed
      startedAt: {{ Now | Quote }}
      finishedAt: {{ Now | Quote }}
"""
_PULL_FAILING = """\
  ready: false
  started: false
  state:
    waiting:
      reason: ImagePullBackOff
      message: {{ printf "Back-off pulling image %q" .image | Quote }}
"""

POD_RUNNING = (_POD_ADDRESSES + "phase: Running\n" + _conditions(True) + "containerStatuses:\n"
               + "{{ range .spec.containers }}\n" + _CONTAINER + _RUNNING + "{{ end }}\n")
POD_SUCCEEDED = (_POD_ADDRESSES + "phase: Succeeded\n" + _conditions(False, "PodCompleted")
                 + "containerStatuses:\n{{ range .spec.containers }}\n" + _CONTAINER + _COMPLETED
                 + "{{ end }}\n")


def pod_pull_failing(pattern: str, job: bool) -> str:
    """Pending, not Ready: the containers whose image matches wait in ImagePullBackOff, the
    others run (a Job's have completed), as the Python stand-in played it."""
    others = _COMPLETED if job else _RUNNING
    return (f"{{{{ $failing := {json.dumps(pattern, ensure_ascii=False)} }}}}\n" + _POD_ADDRESSES
            + "phase: Pending\n" + _conditions(False, "ContainersNotReady") + "containerStatuses:\n"
            + "{{ range .spec.containers }}\n" + _CONTAINER
            + "{{ if regexMatch $failing .image }}\n" + _PULL_FAILING + "{{ else }}\n" + others
            + "{{ end }}\n{{ end }}\n")


POD_PULL_RETRIED = """\
conditions:
- type: ContainersReady
  lastProbeTime: {{ Now | Quote }}
- type: Ready
  lastProbeTime: {{ Now | Quote }}
"""

_NODE_CONDITION = """\
- type: {type}
  status: "{status}"
  reason: {reason}
  message: {message}
  lastHeartbeatTime: {{{{ Now | Quote }}}}
  lastTransitionTime: {{{{ Now | Quote }}}}
"""
NODE_READY = "conditions:\n" + "".join(_NODE_CONDITION.format(type=t, status=s, reason=r, message=m) for t, s, r, m in (
    ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("Ready", "True", "KubeletReady", "tfops lab kubelet stand-in (kwok) is posting ready status")))
# A Lease's renewTime is a MicroTime: exactly six fractional digits, which Now's RFC 3339 (nano,
# trailing zeros cut) is not.
LEASE_RENEWED = ('renewTime: {{ dateInZone "2006-01-02T15:04:05.000000Z07:00" now "UTC" | Quote }}\n')
# Due LEASE_RENEW_SECONDS after the last renewal (at once for a lease that came back from a dead
# node); kwok subtracts the current time from a timestamp.
LEASE_DUE = (f'.spec.renewTime | .[0:19] + "Z" | fromdateiso8601 + {LEASE_RENEW_SECONDS} '
             '| todateiso8601')


def stages(knobs: Knobs) -> List[Dict]:
    """The Stages kwok plays for ``knobs``. Their selectors exclude one another (but for the
    weightless tfops-pod-ip-taken), so at most one plays for an object at a time."""
    delay = int(round(knobs.ready_delay * 1000))
    failing = _failing(knobs.never_ready)
    live = _all(_NOT_DELETED, _NOT_FINISHED, f"({_READY} | not)")
    pod_stages = [
        # A Pod that has its IP and nothing to play: a patch that changes nothing, so no write.
        # kwok notes a Pod's IP as taken only when it plays a patch for the Pod; after a restart
        # it would hand the IPs of settled Pods out again without this (host-network Pods have
        # their node's IP and are not counted).
        _stage("tfops-pod-ip-taken", "Pod", _jq(f"(.status.podIP != null) and {_NOT_DELETED}"),
               _status_patch("podIP: {{ .status.podIP | Quote }}\n"), weight=0),
        # A terminating Pod on a live node is gone at once. Once deleted with grace 0, a Pod
        # that still has finalizers waits for them alone: it no longer matches.
        _stage("tfops-pod-delete", "Pod", _jq(
            "(.metadata.deletionTimestamp != null) and "
            "((.metadata.deletionGracePeriodSeconds // 1) != 0)"), _delete_steps()),
        _stage("tfops-pod-running", "Pod",
               _jq(_all(live, f"({_JOB} | not)", f"({failing} | not)")),
               _pod_status_patch(POD_RUNNING), delay_ms=delay),
        _stage("tfops-pod-succeeded", "Pod", _jq(_all(live, _JOB, f"({failing} | not)")),
               _pod_status_patch(POD_SUCCEEDED), delay_ms=delay),
    ]
    if knobs.never_ready:
        for job in (False, True):
            job_term = _JOB if job else f"({_JOB} | not)"
            pod_stages.append(_stage(
                f"tfops-pod-image-pull-failing{'-job' if job else ''}", "Pod",
                _jq(_all(live, job_term, failing, f"({_PULL_BACKOFF} | not)")),
                _pod_status_patch(pod_pull_failing(knobs.never_ready, job)), delay_ms=delay))
        # Then a pull attempt every PULL_RETRY_SECONDS while the image still matches: the Pod's
        # readiness conditions show when it was last tried (lastProbeTime).
        pod_stages.append(_stage(
            "tfops-pod-image-pull-retry", "Pod", _jq(_all(live, failing, _PULL_BACKOFF)),
            _pod_status_patch(POD_PULL_RETRIED), delay_ms=PULL_RETRY_SECONDS * 1000))
    node_stages = [
        # A node without a Ready status (new, or marked by the node-lifecycle controller after
        # an outage or while it was dead) posts one at once, as a kubelet's next status sync.
        _stage("tfops-node-ready", "Node", _jq(
            '((([.status.conditions[]? | select(.type == "Ready") | .status] | .[0]) // "Unknown")'
            ' != "True")'), _status_patch(NODE_READY)),
        _stage("tfops-node-lease", "Lease",
               {"matchLabels": {STAND_IN_LABEL: "true"},
                **_jq(f'(.metadata.namespace == "{LEASE_NAMESPACE}") and '
                      f'((.metadata.labels["{DEAD_LABEL}"] // "") != "true")')},
               [{"patch": {"type": "merge", "root": "spec", "template": LEASE_RENEWED}}],
               delay_ms=LEASE_RENEW_SECONDS * 1000, api_group="coordination.k8s.io/v1",
               delay_from=LEASE_DUE),
    ]
    return pod_stages + node_stages


def render(knobs: Knobs) -> str:
    """kwok's configuration file for ``knobs``: the Stages as YAML documents (each one JSON,
    which YAML reads as it is)."""
    return "".join("---\n" + json.dumps(doc, indent=1, sort_keys=True) + "\n"
                   for doc in stages(knobs))
