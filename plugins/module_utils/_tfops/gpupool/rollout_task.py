# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A GPU pool rollout from start to end: validate, decide, write, wait, report - gpupool_rollout's
(backends/gpupool_rollout.py) and a Secret rotation's pool roll (secret/consumers.py)."""

from __future__ import annotations

import contextlib
import copy
import time

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.predicates import live_only, pod_ready
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import gates
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import rollout
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool.gate_check import GatedBatches
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.deadline import (
    Deadline,
    micro_time,
    parse_time,
    refuse_passed,
    utcnow,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import (
    ApiError,
    BusinessChangesPaused,
    ControllerGone,
    Forbidden,
    GateFailed,
    InvalidInput,
    LockLost,
    TfopsError,
    WaitTimeout,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool.cluster import (
    ClusterEditor,
    PoolObserver,
    count_nodes,
    RolloutWait,
    pause_transform,
    paused_marker,
    pool_entry_transform,
    ready_seconds,
    start_watch,
    with_paused_marker,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.waiting import ObjectWatcher
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import stale
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.labels import TF_GROUP
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.workloads import changes
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.workloads.business import BusinessWatch
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.module import Run


def pauses_at_deadline(params):
    return params["wait"] and params["on_deadline"] == "pause" and params["state"] == "present"


def validate(params):
    """Everything that can be refused without the cluster; raises InvalidInput."""
    rollout.validate_task(params.get("components"), params.get("rolling_update"))
    if params["wait"] and params["wait_timeout"] <= 0:
        # 0 would write, time out at once and (on_deadline pause) pause the pool.
        raise InvalidInput("wait_timeout must be a positive number of seconds, not %s (wait: false "
                           "writes without waiting)" % params["wait_timeout"])
    deadline = Deadline(timeout=params["wait_timeout"], end=params.get("deadline"),
                        options=("wait_timeout", "deadline"))
    if not pauses_at_deadline(params):
        refuse_passed(deadline, params.get("deadline"))
    if params.get("stall_timeout") is not None and params["stall_timeout"] <= 0:
        raise InvalidInput("stall_timeout must be positive")
    if (params.get("pods_fail_after") or 0) < 0:
        raise InvalidInput("pods_fail_after must be 0 (off) or a positive number of seconds, not %d"
                           % params["pods_fail_after"])
    if not 1 <= params["wait_until_progress"] <= 100:
        raise InvalidInput("wait_until_progress must be 1-100")
    params["gates"] = gates.normalize(params.get("gates"))
    if params["gates"] and (not params["wait"] or params["state"] != "present"
                            or params["wait_until_progress"] != 100):
        raise InvalidInput("gates judge every batch of a rollout this task waits for to the end: "
                           "they need wait: true, state: present and wait_until_progress: 100")
    business = params.get("business_changes")
    # None (a Task of another module, such as a rotation's pool roll): not watched.
    params["business_since"] = (business or {}).get("since") or None
    params["business_changes"] = changes.check_spec(business) if business is not None else None
    params["started_at"] = parse_time(params["rollout_started"], "rollout_started") \
        if params.get("rollout_started") else utcnow()
    return deadline


def plan_change(params, template, marker, change=None):
    """(new template, components whose hash changes, marker after) for the task's state;
    ``change`` (template -> template) replaces the task's components settings when given."""
    components = params.get("components") or {}
    policy = params.get("rolling_update") or {}
    named = [c for c in rollout.COMPONENTS if c in components]
    affected = named or list(rollout.COMPONENTS)
    if params["state"] == "paused":
        new = rollout.set_auto_update(template, affected, False)
        ours = [c for c in affected if rollout.auto_update(template, c)]
        return new, [], sorted(set(marker) | set(ours))
    if params["state"] == "resumed":
        return rollout.set_auto_update(template, affected, True), [], \
            [c for c in marker if c not in affected]
    new = change(template) if change else rollout.desired_spec_template(template, components, policy)
    # Components this collection paused are resumed, unless the task sets their flag itself.
    resume = [c for c in marker if policy.get("auto_update_%s" % c) is None]
    new = rollout.set_auto_update(new, resume, True) if resume else new
    changed = rollout.hash_changed_components(template, new)
    rollout.refuse_frozen(changed, new, params.get("record_only") or [])
    # Every pause of ours ends here: resumed above, or its flag set by the task itself.
    return new, changed, []


def _with_interval(template, interval):
    """``template`` with batchInterval ``interval`` (seconds, a Go duration text, or None: unset)."""
    new = copy.deepcopy(template)
    policy = new.setdefault("nodeManagerConfig", {}).setdefault("nodePoolRollingUpdatePolicy", {})
    if interval is None:
        policy.pop("batchInterval", None)
    else:
        policy["batchInterval"] = interval if isinstance(interval, str) else "%ds" % interval
    return new


def _diff(entry_name, before, after):
    def view(template):
        return rollout.redact_for_diff({
            "componentConfig": template.get("componentConfig") or {},
            "nodePoolRollingUpdatePolicy": rollout.policy_of(template)})
    return {"before_header": "spec.gpuPools[%s].specTemplate" % entry_name,
            "after_header": "spec.gpuPools[%s].specTemplate" % entry_name,
            "before": view(before), "after": view(after)}


class RolloutTask(Run):
    """``template_change`` (template -> template) replaces the task's components settings: a
    Secret rotation repoints a component's Pod template through the same rollout, and with
    ``pods_fail_after`` (seconds) its wait ends once hypervisor Pods have failed to start that long
    (RolloutWait)."""

    def __init__(self, ctx, params, template_change=None, pods_fail_after=None):
        super().__init__(ctx, params)
        self.template_change = template_change
        self.pods_fail_after = pods_fail_after

    def run(self):
        params = self.params
        editor = ClusterEditor(self.kube, params.get("cluster"))
        tfc = editor.read()
        index = rollout.find_pool_index(tfc, params["pool"])
        entry_name = tfc["spec"]["gpuPools"][index].get("name")
        gpupool = rollout.gpupool_name(tfc, index)
        template = tfc["spec"]["gpuPools"][index]["specTemplate"]
        marker = paused_marker(tfc).get(entry_name, [])
        new, changed, new_marker = plan_change(params, template, marker, self.template_change)
        if params["state"] == "present" and not changed and \
                new.get("componentConfig") != template.get("componentConfig"):
            self.warnings.append(
                "pool %s: the change touches only fields the operator does not hash (Pod template "
                "metadata, vectorImage without enableVector, client remote/embedded mode images) "
                "or writes a quantity another way (1000m for 1): it is written, but the operator "
                "starts no rollout for it and none is waited for"
                % entry_name)
        spec_changed = new != template or new_marker != marker
        started = params.get("started_at") or utcnow()
        observer = PoolObserver(self.kube, gpupool, params.get("namespace"), since=started)
        pool = observer.read_pool()
        waits = self._components_to_wait(pool, new, changed, observer)
        policy = rollout.policy_of(new)
        pct = int(policy.get("batchPercentage") or 100)
        interval = rollout.go_duration_seconds(policy.get("batchInterval") or "1s")
        gate = params.get("gates") if "hypervisor" in waits else None
        hold = gates.hold_seconds(interval, gate["bake_seconds"]) if gate else None
        schedule = self._schedule(observer, pct, policy.get("batchInterval") or "1s", interval,
                                  gate, hold) if changed else None
        result = {"changed": spec_changed, "cluster": editor.name, "pool": entry_name,
                  "gpupool": gpupool, "state": params["state"],
                  "changed_components": changed, "waited_for": waits,
                  "batches": rollout.batches(pct),
                  "estimated_seconds": schedule["seconds"] if schedule else 0,
                  "schedule": schedule, "gates": None,
                  "diff": _diff(entry_name, template, new),
                  # What the change sets, from and to (a plan says it; Pod templates only named).
                  "spec_changes": rollout.field_changes(rollout.pool_view(template), rollout.pool_view(new)),
                  "components": dict((c, {"before_hash": rollout.component_status(pool, c)[0]})
                                     for c in rollout.COMPONENTS),
                  # When the rollout began (a later batch call is given it back) and the business
                  # workloads changed meanwhile (null when not watched).
                  "started": micro_time(started), "business_changes": None}
        if self.deadline.bounded and changed and result["estimated_seconds"] > self.deadline.remaining():
            self.warnings.append("the rollout is estimated at %ss but only %ds remain before the %s" % (
                result["estimated_seconds"], self.deadline.remaining(), self.deadline.reason))
        if self.check_mode or (not spec_changed and not waits):
            return self._finish(result, pool, [], None)
        if params.get("deadline") and self.deadline.expired():
            # A batch loop's next call can start just after the window's end: a campaign already
            # written is paused as at the deadline; a change not written yet is refused.
            if spec_changed:
                raise InvalidInput("deadline %s has already passed" % params["deadline"])
            self._pause(editor, entry_name, waits)
            raise WaitTimeout("deadline %s passed before this batch; paused %s (autoUpdate false) at "
                              "this point: run the same task again to resume and finish" % (
                                  params["deadline"], ", ".join(waits)), paused=waits)
        watcher = start_watch(self.kube, gpupool)  # before the write: no event is missed
        # Also before the write: a gate that cannot see the business workloads writes nothing.
        business = self._business_watch(watcher) if params["wait"] and waits else None
        before = watcher.objects.get((None, gpupool)) or pool
        trackers = [rollout.CampaignTracker(c, before, changed=c in changed) for c in waits]
        held = bool(gate) and hold > interval
        # The hold is the gates' alone: afterwards the pool keeps the interval it asked for.
        restore = (lambda t: _with_interval(t, rollout.policy_of(new).get("batchInterval"))) if held else None
        gated = GatedBatches(self.kube, observer, gate, utcnow()) if gate else None
        closed = []  # the business changes' summary, once their watch is stopped
        written = None  # the cluster as this task last wrote it
        try:
            if spec_changed or held:
                def change(template):
                    new_template = plan_change(params, template, marker, self.template_change)[0]
                    return _with_interval(new_template, hold) if held else new_template
                written = editor.update(pool_entry_transform(entry_name, change))
                if new_marker != marker:
                    written = editor.update(lambda obj: with_paused_marker(obj, entry_name, new_marker))
                result["changed"] = True
            if not params["wait"] or not waits:
                if params["wait"] and spec_changed:
                    result["reconcile_requested"] = self._settle(editor.name, written)
                return self._finish(result, observer.read_pool(), [], None)
            with self._rolling(editor.name, entry_name, waits):
                try:
                    done = self._wait(result, editor, entry_name, observer, watcher, trackers, gated, business,
                                      waits, pct, restore)
                finally:
                    self.warnings.extend(observer.notes + observer.absence_notes())
            if spec_changed and params["wait_until_progress"] >= 100:  # not mid-campaign: a batch loop's call
                done["reconcile_requested"] = self._settle(editor.name, written)
        except TfopsError as exc:
            if business is not None:
                closed.append(self._close_business(business, gpupool))
                exc.details["business_changes"] = closed[0]
            raise
        finally:
            if business is not None and not closed:
                closed.append(self._close_business(business, gpupool))
        result["business_changes"] = closed[0] if closed else None
        return done

    def _settle(self, cluster_name, written):
        """The operator may leave the cluster Updating after a write of ours (gpupool/stale.py):
        made to look again before the task ends. Returns the GPUPools annotated."""
        pools_api = self.kube.resource("GPUPool", group=TF_GROUP)

        def picture():
            tfc = ClusterEditor(self.kube, cluster_name).read()
            pools = []
            for index in range(len((tfc.get("spec") or {}).get("gpuPools") or [])):
                name = rollout.gpupool_name(tfc, index)
                try:
                    pools.append(stale.pool_view(self.kube.call("get", "gpupools/%s" % name, pools_api.get,
                                                                name=name).to_dict()))
                except ApiError as exc:
                    if exc.status != 404:
                        raise
            return stale.cluster_view(tfc), pools
        version = ((written or {}).get("metadata") or {}).get("resourceVersion")
        return stale.settle(self.kube, cluster_name, version, picture, self.deadline, self.warnings)

    @contextlib.contextmanager
    def _rolling(self, cluster, entry_name, waits):
        """While the wait lasts, the run's Lease names this rollout (fence.rolling): should the
        run be interrupted meanwhile, its warden pauses it. Without a fence, nothing."""
        fence = self.kube.fence
        if fence is None:
            yield
            return
        fence.rolling([{"cluster": cluster, "pool": entry_name, "components": list(waits)}])
        # Cleared when the wait ends or fails; not on Ctrl-C (KeyboardInterrupt, a BaseException):
        # the run is being interrupted, and the note is what its warden pauses.
        try:
            yield
        except Exception:
            self._clear_rolling(fence, entry_name)
            raise
        self._clear_rolling(fence, entry_name)

    def _clear_rolling(self, fence, entry_name):
        try:
            fence.rolling([])
        except (ControllerGone, LockLost):  # the run is gone or lost its lock: not ours to clear
            pass
        except TfopsError as exc:  # the warden looks at the pool before it pauses anything
            self.warnings.append("the lock's note of the rollout of pool %s could not be cleared: %s" % (
                entry_name, exc.msg))

    def _business_watch(self, watcher):
        """The business workloads' Pod templates followed while the pool rolls (None: gate off, or
        not for this task); with gate pause, changes at its scale interrupt the rollout's wait."""
        spec = self.params.get("business_changes")
        if self.check_mode or not spec or spec["gate"] == "off":
            return None
        business = BusinessWatch(self.kube, spec, self.params.get("business_since"),
                                 on_pause=watcher.interrupt if spec["gate"] == "pause" else None)
        try:
            business.start()
        except Forbidden as exc:
            if spec["gate"] == "pause":
                raise InvalidInput(
                    "business_changes: gate pause cannot see the business workloads (%s); nothing was "
                    "written: grant list and watch of deployments, statefulsets and daemonsets in every "
                    "namespace (roles/rbac/files upgrade.yml), or set the gate to warn or off" % exc.msg)
            self.warnings.append("business workloads' Pod templates are not watched during this rollout "
                                 "(%s): changes to them are not recorded" % exc.msg)
            return None
        return business

    def _close_business(self, business, gpupool):
        """Stop following the business workloads; their changes (also in a warning with gate warn)."""
        business.stop()
        warning = business.warning("during the rollout of GPUPool %s" % gpupool)
        if warning:
            self.warnings.append(warning)
        self.warnings.extend(business.new_unseen())
        return business.summary(ended=micro_time(utcnow()))

    def _wait(self, result, editor, entry_name, observer, watcher, trackers, gated, business, waits, pct, restore):
        params = self.params
        waiter = RolloutWait(observer, trackers, params.get("stall_timeout"),
                             params["wait_until_progress"], self.pods_fail_after, business=business)
        result["gates"] = gated.verdicts if gated else None
        try:
            if gated:
                gated.run_to_last(waiter, watcher, pct, self.deadline)
            waiter.run(watcher, self.deadline)
        except GateFailed as exc:
            self._gate_failed(exc, editor, entry_name, gated, waiter, restore)
        except BusinessChangesPaused as exc:
            # As at a deadline (resumable): the pool's own interval back with the pause.
            self._pause(editor, entry_name, waits, restore)
            exc.msg += ("; paused %s (autoUpdate false) at this point: run the same task again to "
                        "resume and finish once the business changes have settled" % ", ".join(waits))
            exc.details["paused"] = waits
            raise
        except WaitTimeout as exc:
            if params["on_deadline"] == "pause":
                self._pause(editor, entry_name, waits, restore)
                exc.msg += ("; paused %s (autoUpdate false) at this point: run the same task "
                            "again to resume and finish" % ", ".join(waits))
                exc.details["paused"] = waits
            raise
        counts = None
        if params["wait_until_progress"] >= 100:
            self._wait_pool_running(watcher, observer.gpupool)
            if "hypervisor" in waits:
                counts = self._wait_hypervisors(observer, self._hypervisor_image())
        if gated:
            try:
                gated.bake_batch(waiter, self.deadline)
            except GateFailed as exc:
                self._gate_failed(exc, editor, entry_name, gated, waiter, restore)
            if restore:
                editor.update(pool_entry_transform(entry_name, restore))
        return self._finish(result, waiter.pool, trackers, waiter, counts)

    def _gate_failed(self, exc, editor, entry_name, gated, waiter, restore):
        """A failed gate pauses the pool (the held interval kept the next batch back until now),
        and in the same write gives it back its own interval: paused, it needs no hold."""
        self._pause(editor, entry_name, ["hypervisor"], restore)
        # Not "paused" (a window's pause, which the next run resumes): a gate's pause is for
        # the runbook's rollback.
        exc.details.update(gate_paused=["hypervisor"], gates=gated.verdicts, timeline=waiter.timeline)
        raise exc

    @staticmethod
    def _schedule(observer, pct, interval_text, interval, gate=None, hold=None):
        """The batches this change would roll (the operator's batch rule on this pool's nodes) and
        how long they take, a batch's nodes as long to come back as the slowest hypervisor Pod took
        to become Ready; with gates, each gap is the held interval and the last batch bakes too."""
        nodes = observer.gpunodes()
        node_ready = rollout.node_seconds(ready_seconds(p) for p in observer.hypervisor_pods())
        batches, seconds = rollout.pool_schedule(len(nodes), pct, interval, node_ready,
                                                 bake_seconds=hold or 0)
        plain = rollout.pool_schedule(len(nodes), pct, interval, node_ready)[1]
        if gate and batches:
            seconds = round(seconds + gate["bake_seconds"], 1)
        return {"nodes": len(nodes), "batch_percentage": pct, "batch_interval": interval_text,
                "batch_seconds": round(node_ready, 1), "batch_count": len(batches),
                "batch_sizes": [b["nodes"] for b in batches], "batches": batches, "seconds": seconds,
                "gate_bake_seconds": gate["bake_seconds"] if gate else 0,
                "gate_seconds": round(seconds - plain, 1) if gate else 0}

    def _hypervisor_image(self):
        return ((self.params.get("components") or {}).get("hypervisor") or {}).get("image")

    def _components_to_wait(self, pool, new, changed, observer):
        if self.params["state"] == "paused":
            return []
        named = [c for c in rollout.COMPONENTS if c in (self.params.get("components") or {})]
        if self.params["state"] == "resumed":
            named = named or list(rollout.COMPONENTS)
        waits = []
        for comp in rollout.COMPONENTS:
            unsynced = not rollout.component_status(pool, comp)[2]
            if comp in changed and not rollout.auto_update(new, comp):
                self.warnings.append(
                    "%s: the change %s but autoUpdate%s is false, so the operator does not roll it "
                    "(Pods created afterwards get it)" % (
                        comp, "would be recorded" if self.check_mode else "is recorded", comp.capitalize()))
                continue
            if comp in changed or (comp in named and unsynced and rollout.auto_update(new, comp)):
                if observer.consumers(comp) == 0:
                    self.warnings.append(
                        "%s: GPUPool %s has nothing for a %s campaign to update, and the operator "
                        "never marks an empty campaign synced; not waiting for it" % (
                            comp, observer.gpupool, comp))
                    continue
                waits.append(comp)
        return waits

    def _pause(self, editor, entry_name, comps, also=None):
        editor.update(pause_transform(entry_name, comps, also))

    def _wait_pool_running(self, watcher, gpupool):
        def running(objects):
            phase = ((objects.get((None, gpupool)) or {}).get("status") or {}).get("phase")
            return phase == "Running", "GPUPool %s phase %s" % (gpupool, phase)
        watcher.wait(running, self.deadline)

    def _wait_hypervisors(self, observer, image):
        """Done for hypervisors (docs/operator-behaviour.md 8.4): one Ready Pod per node, new image.
        Returns the node counts from what the wait saw, so the result lists nothing again."""
        # Both from the watch cache: etcd lists cost 15 ms an object on a busy API server, and
        # this is the time between the operator's "synced" and the task's return (bench/, part 1).
        nodes = observer.gpunodes(cached=True)
        want = len(nodes)
        pods = ObjectWatcher(self.kube, observer.pods, namespace=observer.namespace,
                             label_selector="tensor-fusion.ai/component=hypervisor,"
                                            "tensor-fusion.ai/pool-%s=true" % observer.gpupool,
                             cached_list=True)

        def ready(objects):
            alive = live_only(objects.values())
            good = [p for p in alive if pod_ready(p)
                    and (not image or p["spec"]["containers"][0].get("image") == image)]
            return len(good) == want and len(alive) == want, \
                "%d of %d hypervisor Pods Ready%s" % (len(good), want, " with %s" % image if image else "")
        pods.wait(ready, self.deadline)
        return count_nodes(nodes, list(pods.objects.values()), image)

    def _finish(self, result, pool, trackers, waiter, node_counts=None):
        for comp in rollout.COMPONENTS:
            status_hash, progress, synced, _ip = rollout.component_status(pool, comp)
            result["components"][comp].update(after_hash=status_hash, progress=progress, synced=synced)
        for tracker in trackers:
            item = result["components"][tracker.comp]
            steps = sorted(set(e["progress"] for e in waiter.timeline
                               if e["component"] == tracker.comp and e["progress"] > 0))
            item.update(campaign=tracker.campaign, batches=len(steps),
                        duration=round(waiter.done_at.get(tracker.comp, time.monotonic() - waiter.started), 3))
        result["timeline"] = waiter.timeline if waiter else []
        result["nodes"] = node_counts or PoolObserver(
            self.kube, result["gpupool"], self.params.get("namespace")).node_counts(
            self._hypervisor_image())
        return result
