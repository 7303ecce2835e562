# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU-pool rollout decisions as pure functions: what a task changes in a TensorFusionCluster's
pool entry, which components must roll and be waited for, how many batches that takes, and when
the operator's status really says "done" (it has no observedGeneration, so status right after a
change is stale until the campaign hash shows up)."""

from __future__ import annotations

import copy
import math
import re

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import chart_pools
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import durations
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import podtemplate
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import quantity
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.tfcluster import pool_index
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import (
    InvalidInput,
    Superseded,
)


COMPONENTS = ("hypervisor", "worker", "client")
IN_PROGRESS = "tensor-fusion.ai/%s-update-in-progress"
LAST_BATCH = "tensor-fusion.ai/%s-batch-update-last-time"
PAUSED_BY_US = "ops.tensor-fusion.ai/paused"  # on the TFC: "<pool>:<component>,..." we paused
AUTO_FLAG = {"hypervisor": "autoUpdateHypervisor", "worker": "autoUpdateWorker",
             "client": "autoUpdateClient"}
# The operator re-checks no faster than this between batches (PendingRequeueDuration upstream).
MIN_BATCH_GAP = 3.0
DEFAULT_NODE_SECONDS = 15.0  # one batch's nodes coming back, when the cluster shows none yet
# The last batch beyond its nodes coming back: the operator's reconcile and its status write.
OPERATOR_REACTION = 0.5

# snake_case task option -> componentConfig field, per component (defined once, in chart_pools,
# which must stay free of the collection's other modules: it also runs as helm's post-renderer).
FIELDS = dict((component, dict((option, field) for field, option in options.items()))
              for component, options in chart_pools.COMPONENT_OPTIONS.items())
POLICY_FIELDS = {"auto_update_hypervisor": "autoUpdateHypervisor",
                 "auto_update_worker": "autoUpdateWorker", "auto_update_client": "autoUpdateClient",
                 "batch_percentage": "batchPercentage", "batch_interval": "batchInterval"}

# The operator's isolation policy (its TF_ISOLATION_MODE_POLICY; the chart's default is dynamic).
ISOLATION_DYNAMIC = "dynamic"


def _pod_spec(component):
    """``podTemplate.template.spec``: labels and annotations in ``template.metadata`` are not
    hashed upstream, so they start no rollout."""
    return (((component or {}).get("podTemplate") or {}).get("template") or {}).get("spec") or {}


# The operator's own names for the bare containers it builds (docs/operator-behaviour.md 3.1).
HYPERVISOR_CONTAINERS = ({"name": "tensorfusion-hypervisor"}, {"name": "vector"})


def _hypervisor_pod_spec(hv, vector):
    """The hypervisor template's spec as the operator hashes it (docs/operator-behaviour.md 3.1):
    its containers only when their number is the one ``enableVector`` calls for (two with the
    vector sidecar, one without), else bare ones - a change made only in the dropped containers
    starts no campaign."""
    spec = _pod_spec(hv)
    wanted = 2 if vector else 1
    if len(spec.get("containers") or []) == wanted:
        return spec
    return dict(spec, containers=[dict(c) for c in HYPERVISOR_CONTAINERS[:wanted]])


def hashed_view(spec_template, comp, isolation_policy=ISOLATION_DYNAMIC):
    """What the operator's hash of ``comp`` covers (docs/operator-behaviour.md 3.1): equal
    views mean no campaign. A change elsewhere (the rolling policy, client.remoteModeImage,
    template metadata, vectorImage without enableVector) moves no hash, nor does a quantity
    written another way (``1000m`` for ``1``: the operator hashes the spec as Go reads it)."""
    config = (spec_template or {}).get("componentConfig") or {}
    hv, wk, cl = (config.get(c) or {} for c in COMPONENTS)
    if comp == "hypervisor":
        vector = bool(hv.get("enableVector"))
        view = {"image": hv.get("image"), "port": hv.get("portNumber"), "vector": vector,
                "vectorImage": hv.get("vectorImage") if vector else None,
                "spec": quantity.canonical_pod_spec(_hypervisor_pod_spec(hv, vector))}
        if isolation_policy != ISOLATION_DYNAMIC:
            manager = (spec_template or {}).get("nodeManagerConfig") or {}
            view["isolation"] = [manager.get("defaultIsolationMode") or "soft",
                                 manager.get("isolationModeRules") or []]
        return view
    if comp == "worker":
        return {"image": wk.get("image"), "spec": quantity.canonical_pod_spec(_pod_spec(wk)),
                "port": hv.get("portNumber")}
    return {"image": cl.get("image"), "operatorEndpoint": cl.get("operatorEndpoint"),
            "patchToPod": cl.get("patchToPod"), "patchToContainer": cl.get("patchToContainer")}


# A registry is a first component with a dot or a port, or localhost (as Docker's reference
# grammar has it); otherwise the first component is part of the lowercase repository path.
_HOST = r"[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?"
_IMAGE_RE = re.compile(
    r"(?:(?:localhost|%s(?:\.%s)+)(?::[0-9]+)?/|%s:[0-9]+/)?" % (_HOST, _HOST, _HOST) +
    r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$")
_SECRETISH = re.compile(r"(LICEN[CS]E|TOKEN|PASSWORD|PASSWD|SECRET|API_?KEY|ACCESS_?KEY|PRIVATE|SIGN)",
                        re.IGNORECASE)


# ---- input validation -------------------------------------------------------------------------
def go_duration_seconds(value, what="batch_interval"):
    """Seconds in a Go duration such as "1s", "1m30s", "500ms"; a clear error otherwise."""
    return durations.go_duration_seconds(value, what)


def validate_image(component, field, ref, option=None):
    """``option``: the name the message gives the value (default components.<component>.<field>)."""
    # fullmatch: "$" would also match before a final newline (a YAML block scalar, a survey
    # answer), and the operator then cannot create the Pods.
    if not isinstance(ref, str) or not _IMAGE_RE.fullmatch(ref):
        raise InvalidInput("%s: %r is not a valid image reference (registry/"
                           "repository:tag or @sha256:digest, lowercase repository, no spaces "
                           "or newlines)" % (option or "components.%s.%s" % (component, field), ref))


def _whole_number(option, value, low, high):
    """Ansible's int type lets a boolean through (as 1 or 0): refuse it by name."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput("%s: %r is not a whole number %d-%d" % (option, value, low, high))


def validate_task(components, rolling_update, where="", pod_fields=None):
    """Every check that can fail without the cluster, before anything is read or written.
    ``where`` goes before each option's name in a message (a runbook's tfops_pools[0].).
    ``pod_fields``: the API server's field names (Kube.pod_field_names), for the second pass over
    a pod_template once connected (core/podtemplate.py)."""
    for comp, settings in (components or {}).items():
        for key, value in (settings or {}).items():
            if value is not None and key.endswith("image"):
                validate_image(comp, key, value, "%scomponents.%s.%s" % (where, comp, key))
        if (settings or {}).get("pod_template") is not None:
            # A raw object upstream (docs/operator-behaviour.md 1.1): the API server stores anything.
            podtemplate.validate(settings["pod_template"], "%scomponents.%s.pod_template" % (where, comp),
                                 pod_fields)
        port = (settings or {}).get("port_number")
        if port is not None:
            _whole_number("%scomponents.%s.port_number" % (where, comp), port, 0, 65535)
        if port is not None and not 0 <= port <= 65535:
            raise InvalidInput("%scomponents.%s.port_number %s is not a port (0-65535)" % (where, comp, port))
    policy = rolling_update or {}
    pct = policy.get("batch_percentage")
    if pct is not None:
        _whole_number("%srolling_update.batch_percentage" % where, pct, 1, 100)
    if pct is not None and not 1 <= pct <= 100:
        raise InvalidInput(
            "%srolling_update.batch_percentage must be 1-100, not %s%s" % (
                where, pct, " (0 is omitted by the operator and defaulted to 100 by the CRD: every node "
                            "at once)" if pct == 0 else ""))
    if policy.get("batch_interval") is not None:
        go_duration_seconds(policy["batch_interval"], "%srolling_update.batch_interval" % where)


# ---- locating and editing the pool entry --------------------------------------------------------
def find_pool_index(tfc, pool):
    """pool_index, or InvalidInput naming the pools there are."""
    index = pool_index(tfc, pool)
    if index is not None:
        return index
    cluster = tfc["metadata"]["name"]
    names = [e.get("name") for e in (tfc.get("spec") or {}).get("gpuPools") or []]
    raise InvalidInput("TensorFusionCluster %s has no pool %r; its pools are: %s" % (
        cluster, pool, ", ".join("%s (GPUPool %s-%s)" % (n, cluster, n) for n in names) or "none"))


def gpupool_name(tfc, index):
    return "%s-%s" % (tfc["metadata"]["name"], tfc["spec"]["gpuPools"][index].get("name"))


def merge_template(base, patch):
    """Deep merge for Pod templates: dicts merge; lists of named items (containers, env, volumes,
    imagePullSecrets) merge by name; other lists and scalars replace."""
    if isinstance(base, dict) and isinstance(patch, dict):
        merged = copy.deepcopy(base)
        for key, value in patch.items():
            merged[key] = merge_template(base.get(key), value) if key in base else copy.deepcopy(value)
        return merged
    if isinstance(base, list) and isinstance(patch, list) and _named(base) and _named(patch):
        merged = [copy.deepcopy(item) for item in base]
        index = dict((item["name"], i) for i, item in enumerate(merged))
        for item in patch:
            if item["name"] in index:
                merged[index[item["name"]]] = merge_template(merged[index[item["name"]]], item)
            else:
                merged.append(copy.deepcopy(item))
        return merged
    return copy.deepcopy(patch)


def _named(items):
    return all(isinstance(i, dict) and "name" in i for i in items)


def desired_spec_template(spec_template, components, rolling_update):
    """The pool's specTemplate after the task's componentConfig and policy settings."""
    new = copy.deepcopy(spec_template)
    config = new.setdefault("componentConfig", {})
    for comp, settings in (components or {}).items():
        target = config.setdefault(comp, {})
        for key, value in (settings or {}).items():
            if value is None:
                continue
            field = FIELDS[comp][key]
            if key == "pod_template" or key.startswith("patch"):
                target[field] = merge_template(target.get(field) or {}, value)
            else:
                target[field] = value
    policy_settings = dict((POLICY_FIELDS[k], v) for k, v in (rolling_update or {}).items()
                           if v is not None)
    if policy_settings:
        manager = new.setdefault("nodeManagerConfig", {})
        manager.setdefault("nodePoolRollingUpdatePolicy", {}).update(policy_settings)
    return new


def set_auto_update(spec_template, components, value):
    new = copy.deepcopy(spec_template)
    policy = new.setdefault("nodeManagerConfig", {}).setdefault("nodePoolRollingUpdatePolicy", {})
    for comp in components:
        policy[AUTO_FLAG[comp]] = value
    return new


def policy_of(spec_template):
    return ((spec_template.get("nodeManagerConfig") or {}).get("nodePoolRollingUpdatePolicy") or {})


def auto_update(spec_template, comp):
    """autoUpdate<C> with the operator's fallback: absent means false (docs/operator-behaviour.md 1.1)."""
    return bool(policy_of(spec_template).get(AUTO_FLAG[comp], False))


def hash_changed_components(old, new, isolation_policy=ISOLATION_DYNAMIC):
    """Components whose hashed configuration differs between two specTemplates: exactly the
    campaigns the operator will start."""
    return [comp for comp in COMPONENTS
            if hashed_view(old, comp, isolation_policy) != hashed_view(new, comp, isolation_policy)]


def refuse_frozen(changed, new_spec, deliberate=()):
    """A changed component whose autoUpdate is false never rolls: say so before writing, unless
    the task asks for that (``deliberate``, its record_only): then the change is only recorded, as
    a chart upgrade records a new image for a component the pool does not roll."""
    frozen = [c for c in changed if not auto_update(new_spec, c) and c not in deliberate]
    if frozen:
        raise InvalidInput(
            "%s would change but %s false: the operator would record the new hash and never roll "
            "it. Set rolling_update.%s: true in this task (or pause deliberately with "
            "state=paused)." % (", ".join(frozen),
                                " and ".join(AUTO_FLAG[c] for c in frozen) + (" are" if len(frozen) > 1 else " is"),
                                ": true, rolling_update.".join("auto_update_%s" % c for c in frozen)))


# ---- estimates ----------------------------------------------------------------------------------
def batches(pct):
    """Completions to reach 100 %: progress moves in steps of pct (3.3: 30 % gives 30,60,90,100)."""
    return int(math.ceil(100.0 / pct))


# ---- what a pool would do: its batches and their schedule -----------------------------------------------------------------------
def batch_sizes(total, pct):
    """Nodes per completed batch, by the operator's rule: batchSize = ceil(pct * total / 100),
    the i-th batch brings the updated count to min((i + 1) * batchSize, total); progress moves in
    steps of pct, so there are ceil(100 / pct) batches even when some are empty."""
    pct = int(pct or 100)
    if not 1 <= pct <= 100:
        raise InvalidInput("batch percentage must be 1-100, not %s" % pct)
    count = batches(pct)
    size = int(math.ceil(pct * total / 100.0)) if total else 0
    done, sizes = 0, []
    for index in range(count):
        upto = min((index + 1) * size, total)
        sizes.append(upto - done)
        done = upto
    return sizes


def node_seconds(samples):
    """Seconds a batch's nodes take to come back, from what the cluster shows: the slowest of the
    hypervisor Pods' creation-to-Ready times (a batch ends when its last node is back)."""
    good = [float(s) for s in samples if s is not None and s >= 0]
    return max(good) if good else DEFAULT_NODE_SECONDS


def pool_schedule(total, pct, interval_seconds, node_ready_seconds, bake_seconds=0.0):
    """The planned batches of one campaign: [{index, nodes, start, end, progress}] in seconds from
    its start, and its total. Upstream, a batch counts as done once its nodes run Pods of the new
    hash (Ready or not: the operator rolls blind), and the next starts max(batchInterval, 3 s)
    later; a batch of no node still waits its gap (batches are counted by progress, not nodes).
    Each batch ends when its nodes are back; the campaign when the last of them is."""
    if not total:
        return [], 0.0  # no objects: the operator has nothing to update
    gap = max(float(interval_seconds or 0), MIN_BATCH_GAP, float(bake_seconds or 0))
    sizes = batch_sizes(total, pct)
    out = []
    for index, nodes in enumerate(sizes):
        start = index * gap
        end = start + (float(node_ready_seconds) if nodes else 0.0)
        out.append({"index": index + 1, "nodes": nodes, "start": round(start, 1), "end": round(end, 1),
                    "progress": min(100, int(pct) * (index + 1)) if index + 1 < len(sizes) else 100})
    seconds = max(b["end"] for b in out) + OPERATOR_REACTION
    return out, round(seconds, 1)


# ---- status reading (the stale guard) -----------------------------------------------------------
def components_view(pool):
    """{component: hash, progress, synced, in_progress, auto_update} of a GPUPool (a raw dict)."""
    spec = pool.get("spec") or {}
    out = {}
    for comp in COMPONENTS:
        status_hash, progress, synced, in_progress = component_status(pool, comp)
        out[comp] = {"hash": status_hash, "progress": progress, "synced": synced,
                     "in_progress": in_progress, "auto_update": auto_update(spec, comp)}
    return out


def component_status(pool, comp):
    """(hash, progress, synced, in_progress) with the omitempty defaults made explicit."""
    status = ((pool.get("status") or {}).get("componentStatus") or {})
    annotations = (pool.get("metadata") or {}).get("annotations") or {}
    return (status.get(comp, ""), int(status.get("%sUpdateProgress" % comp) or 0),
            bool(status.get("%sConfigSynced" % comp)),
            annotations.get(IN_PROGRESS % comp, ""))


class CampaignTracker:
    """Follows one component's campaign across GPUPool events.

    Before the write we record the status hash and the in-progress annotation. The operator starts
    a campaign by setting the in-progress annotation to the new hash; only then does progress mean
    anything. Done is: the status hash equals that campaign's hash, progress 100, synced - so a
    stale ``synced: true`` from before the change, or a campaign that ends just as ours begins,
    never counts."""

    def __init__(self, comp, pool_before, changed=True):
        self.comp = comp
        self.before_hash, self.before_progress, self.before_synced, self.before_in_progress = \
            component_status(pool_before, comp)
        # Without a change of ours (a resume, or a re-run while a campaign goes on) the campaign to
        # finish is the one already under way: the in-progress hash, else the status hash.
        self.campaign = None if changed else (self.before_in_progress or self.before_hash or None)
        self.progress = None

    def observe(self, pool):
        """Update from a GPUPool; returns True when this component is done."""
        status_hash, progress, synced, in_progress = component_status(pool, self.comp)
        if in_progress and in_progress != self.before_in_progress and in_progress != self.campaign:
            if self.campaign is not None:
                # Someone changed the pool again: the configuration we wait for will never roll.
                raise Superseded(
                    "%s: the rollout this task started (campaign %s) was superseded by another "
                    "change of the pool (campaign %s); not waiting for a configuration that is "
                    "gone" % (self.comp, self.campaign, in_progress), superseded_by=in_progress)
            self.campaign = in_progress
        if self.campaign is None:
            return False
        if status_hash == self.campaign:
            self.progress = progress
            return progress >= 100 and synced
        return False

    def describe(self):
        if self.campaign is None:
            return "%s: the operator has not started a campaign yet (status still shows hash %s)" % (
                self.comp, self.before_hash or "none")
        return "%s: campaign %s at %s%%" % (self.comp, self.campaign, self.progress or 0)


# Component fields a plan or report shows with their values (images, ports, endpoints); any other
# field (Pod templates and patches, which may hold secrets) is named only.
SHOWN_FIELDS = ("image", "vectorImage", "portNumber", "enableVector", "operatorEndpoint",
                "remoteModeImage", "embeddedModeImage")


def pool_view(template):
    """What a change run moves of a pool's specTemplate, and a restore point gives back: its
    componentConfig (images, Pod templates, ...) and its rolling policy (batchPercentage,
    batchInterval, the autoUpdate flags, the maintenance window); policy None when the template
    has no nodeManagerConfig at all."""
    template = template or {}
    return {"componentConfig": template.get("componentConfig") or {},
            "policy": policy_of(template) if "nodeManagerConfig" in template else None}


def field_changes(before, after):
    """What differs between two pool_views, field by field, for plans and reports: each
    {field, from, to}, or {field, hidden: true} for a Pod template or patch (never its content)."""
    changes = []
    b_config, a_config = before["componentConfig"], after["componentConfig"]
    for comp in sorted(set(b_config) | set(a_config)):
        b, a = b_config.get(comp) or {}, a_config.get(comp) or {}
        for field in sorted(set(b) | set(a)):
            if b.get(field) == a.get(field):
                continue
            item = {"field": "%s.%s" % (comp, field)}
            if field in SHOWN_FIELDS:
                item.update({"from": b.get(field), "to": a.get(field)})
            else:
                item["hidden"] = True
            changes.append(item)
    b_policy, a_policy = before["policy"] or {}, after["policy"] or {}
    for field in sorted(set(b_policy) | set(a_policy)):
        if b_policy.get(field) != a_policy.get(field):
            changes.append({"field": field, "from": b_policy.get(field), "to": a_policy.get(field)})
    return changes


def redact_for_diff(value):
    """Env values whose names look secret (licences, tokens, keys) masked in diffs and results."""
    if isinstance(value, dict):
        redacted = dict((k, redact_for_diff(v)) for k, v in value.items())
        if isinstance(value.get("name"), str) and "value" in value and _SECRETISH.search(value["name"]):
            redacted["value"] = "********"
        return redacted
    if isinstance(value, list):
        return [redact_for_diff(v) for v in value]
    return value
