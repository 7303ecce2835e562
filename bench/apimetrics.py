"""API requests counted by the API server itself: ``apiserver_request_total`` from ``/metrics``,
scraped before and after a contender runs.

The counter has no client label, so a delta holds everything the lab did meanwhile (the operator
double, the kubelet and controller stand-ins). Those write and watch; the contenders here read.
``contender_requests`` therefore counts the reads (GET, LIST, WATCH; discovery included) and the
writes to the TensorFusionCluster spec (the one object a contender changes), and the harness
measures the lab's own background over an idle window of the same length to show how much of a
delta is noise."""
import re
import ssl
import urllib.request
from collections import Counter
from pathlib import Path

_SAMPLE = re.compile(r'^apiserver_request_total\{(?P<labels>[^}]*)\}\s+(?P<value>\S+)')
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
READ_VERBS = ("GET", "LIST", "WATCH")
KEY = ("verb", "group", "resource", "subresource")


def parse(text):
    """Counter {(verb, group, resource, subresource): requests} from Prometheus text."""
    counts = Counter()
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if not match:
            continue
        labels = dict(_LABEL.findall(match.group("labels")))
        counts[tuple(labels.get(k, "") for k in KEY)] += int(float(match.group("value")))
    return counts


def delta(before, after, own_scrapes=1):
    """Requests between two scrapes; the first scrape's own GET /metrics is counted in the
    second and taken off (``own_scrapes``)."""
    out = Counter(dict((k, after[k] - before.get(k, 0)) for k in after if after[k] - before.get(k, 0)))
    if own_scrapes:
        out[("GET", "", "", "")] -= own_scrapes
        if out[("GET", "", "", "")] <= 0:
            del out[("GET", "", "", "")]
    return out


# What each contender can request; the lab's own actors (kubelet stand-in, controllers, the
# operator double's re-watches) also read, so a delta is filtered to these before it is counted.
PRECHECK = {"LIST": {"tensorfusionclusters", "gpupools", "gpunodes", "gpus", "pods", "deployments",
                     "statefulsets", "secrets", "events", "poddisruptionbudgets"}}
ROLLOUT = {"GET": {"gpupools", "tensorfusionclusters", "gpunodes"},
           "LIST": {"gpupools", "tensorfusionclusters", "gpunodes", "pods", "workloads", "tensorfusionworkloads"},
           "WATCH": {"gpupools", "tensorfusionclusters", "pods"},
           "PATCH": {"tensorfusionclusters"}, "PUT": {"tensorfusionclusters"}}


def contender_requests(counts, allowed=None):
    """Requests a contender can have made: discovery (non-resource GETs) plus, per verb, the
    resources in ``allowed`` (main resources only, no status writes); every read and the spec
    writes to TensorFusionClusters when ``allowed`` is None."""
    total = 0
    for (verb, _group, resource, subresource), value in counts.items():
        if allowed is None:
            mine = verb in READ_VERBS or (resource == "tensorfusionclusters" and not subresource)
        else:
            mine = (verb == "GET" and not resource) or (resource in allowed.get(verb, ()) and not subresource)
        if mine:
            total += value
    return total


def from_by_verb(by_verb_counts):
    """Counter keyed like parse() from a by_verb() dict (to recount stored results)."""
    out = Counter()
    for key, value in by_verb_counts.items():
        verb, _, rest = key.partition(" ")
        resource, _, sub = rest.partition("/")
        out[(verb, "", "" if resource == "(non-resource)" else resource, sub)] += value
    return out


def by_verb(counts):
    out = Counter()
    for (verb, _g, resource, sub), value in counts.items():
        out["%s %s%s" % (verb, resource or "(non-resource)", "/" + sub if sub else "")] += value
    return dict(sorted(out.items()))


class Scraper:
    """GET /metrics with the lab's admin token."""

    def __init__(self, state):
        self.url = state["server"].rstrip("/") + "/metrics"
        self.token = state["token"]
        ca = Path(state["state_dir"]) / "pki" / "ca.crt"
        self.ctx = ssl.create_default_context(cafile=str(ca)) if ca.exists() else ssl._create_unverified_context()

    def scrape(self):
        req = urllib.request.Request(self.url, headers={"Authorization": "Bearer " + self.token})
        with urllib.request.urlopen(req, context=self.ctx, timeout=60) as resp:
            return parse(resp.read().decode())
