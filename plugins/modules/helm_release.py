#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: helm_release
short_description: Upgrade or install TensorFusion's Helm release, or roll it back to a revision or a snapshot
version_added: 0.1.0
description:
  - V(present) runs C(helm upgrade --install) with a chart reference, a chart repository URL
    (C(--repo)), a chart version, values, values files or URLs (such as the mainland-China
    C(values-cn.yaml)) and C(--set) values, with helm 3 or helm 4 (the version is detected and the
    flags that differ are mapped, for example O(atomic) to C(--atomic) or C(--rollback-on-failure)).
  - Idempotent - a server-side dry run (C(helm upgrade --dry-run=server)) renders the release
    against the API server; when its chart version, user values and rendered manifest equal the
    deployed revision, nothing runs and C(changed) is false.
  - V(rolled_back) runs C(helm rollback) to O(revision), or to the revision recorded in a snapshot
    bundle of M(tensorfusion.ops.helm_snapshot) (O(snapshot)); a bundle rollback also restores the
    bundle's TensorFusionCluster C(componentConfig) and waits for the GPU pools with the same
    stale-status-guarded wait as M(tensorfusion.ops.gpupool_rollout). A rollback to the
    configuration already deployed is C(changed=false).
  - A release whose last revision is C(pending-install), C(pending-upgrade) or C(pending-rollback)
    fails with a clear message, or with O(recover_pending=rollback) is first rolled back to its last
    deployed revision.
  - Helm does not upgrade CRDs (the chart's C(crds/) folder); O(apply_crds) applies them with
    server-side apply before the upgrade.
  - The helm flags a cluster may need - O(disable_openapi_validation), O(skip_crds), O(no_hooks) and
    O(extra_args) (an allow-list of further C(helm upgrade) / C(helm rollback) flags) - go to every
    helm command of the task that takes them, the server-side dry run of check mode included. A
    rollback to a O(snapshot) uses the flags the bundle recorded for the upgrade that followed it
    (M(tensorfusion.ops.helm_snapshot) O(tensorfusion.ops.helm_snapshot#module:helm_flags)) for
    each of these options the task leaves unset.
  - Secret data and values whose keys look secret (passwords, tokens, keys, licences) are replaced
    by their sha256 in every result and diff; the command shown masks them too. Helm runs with a
    temporary 0600 kubeconfig made from the authentication options, removed afterwards.
options:
  state:
    description:
      - V(present) installs or upgrades; V(rolled_back) rolls back to O(revision) or O(snapshot).
    type: str
    choices: [present, rolled_back]
    default: present
  chart_ref:
    description:
      - Chart name (with O(chart_repo_url)), C(repo/name), a path or an C(oci://) reference.
    type: str
    default: tensor-fusion
  chart_repo_url:
    description:
      - Chart repository URL, passed as C(--repo). An C(http://) or C(https://) URL; anything else
        is refused before helm runs.
    type: str
  chart_version:
    description: Chart version; the repository's newest when left out.
    type: str
  values:
    description:
      - Values as a dictionary, passed to helm in a temporary 0600 file.
    type: dict
  values_files:
    description:
      - Values files as paths or URLs, as C(-f) takes them, in order (later ones win).
    type: list
    elements: str
    default: []
  set_values:
    description:
      - C(--set) style values, applied after O(values_files) and O(values).
      - C(key=) sets an empty string, for example C(agent.agentId=) for a local deployment without
        ClusterAgent.
    type: list
    elements: dict
    default: []
    suboptions:
      value:
        description: C(key=value).
        type: str
        required: true
      value_type:
        description:
          - V(raw) is C(--set), V(string) C(--set-string), V(json) C(--set-json), V(file)
            C(--set-file) and V(literal) C(--set-literal).
        type: str
        choices: [raw, string, json, file, literal]
        default: raw
  create_namespace:
    description: Create the release namespace if it does not exist (C(--create-namespace)).
    type: bool
    default: true
  reset_values:
    description:
      - Start from the chart's values and apply only this task's values (C(--reset-values)), so
        that the task describes the whole configuration. Without it helm 3 silently reuses the last
        release's values when no value is given.
      - Left unset, it is true unless O(reuse_values) or O(reset_then_reuse_values) is; set true
        together with either of them, the task is refused before anything is written.
    type: bool
  reuse_values:
    description:
      - Merge this task's values into the last release's (C(--reuse-values)). Mutually exclusive
        with O(reset_values) and O(reset_then_reuse_values).
    type: bool
    default: false
  reset_then_reuse_values:
    description: C(--reset-then-reuse-values) (helm 3.14 or later).
    type: bool
    default: false
  atomic:
    description:
      - Roll back automatically when the upgrade fails - C(--atomic) with helm 3,
        C(--rollback-on-failure) with helm 4.
    type: bool
    default: false
  skip_crds:
    description:
      - Pass C(--skip-crds) to C(helm upgrade --install) (helm installs a chart's CRDs only on the
        first install, never on an upgrade).
      - When not set - false, or with O(snapshot) the value the bundle recorded.
    type: bool
  disable_openapi_validation:
    description:
      - Pass C(--disable-openapi-validation) to C(helm upgrade) - helm then does not check the
        rendered manifest against the API server's OpenAPI schema, which an API server older
        than the chart fails for fields it does not know (TensorFusion's chart sets a Service's
        C(internalTrafficPolicy), unknown before Kubernetes 1.21; every supported server knows
        it). The API server still validates what it receives and drops the fields it does not
        know.
      - With helm 4 it also selects client-side apply (C(--server-side=false)) for C(helm upgrade)
        and C(helm rollback), unless O(extra_args) sets C(--server-side) - server-side apply refuses
        every field the API server's schema does not know (C(field not declared in schema)),
        whatever this flag says, and helm's server-side dry run does not show that failure.
      - C(helm rollback) has no such flag and checks no schema; a rollback that re-renders a stored
        chart (RV(method=upgrade-to-stored-chart)) skips the check always, as the revision was
        deployed on this cluster before.
      - When not set - false, or with O(snapshot) the value the bundle recorded.
    type: bool
    version_added: 0.1.0
  no_hooks:
    description:
      - Pass C(--no-hooks) to C(helm upgrade) and C(helm rollback) - the chart's hook Jobs (such as
        TensorFusion's webhook certificate Jobs) do not run.
      - When not set - false, or with O(snapshot) the value the bundle recorded.
    type: bool
    version_added: 0.1.0
  extra_args:
    description:
      - Further helm flags, each C(--flag), C(--flag=value) or a C(--flag) followed by its value as
        the next item. Only these are accepted - C(--burst-limit), C(--ca-file), C(--cert-file),
        C(--cleanup-on-fail), C(--dependency-update), C(--devel), C(--enable-dns), C(--force)
        (helm 4 C(--force-replace)), C(--force-conflicts) (helm 4), C(--force-replace) (helm 3
        C(--force)), C(--hide-notes), C(--history-max), C(--insecure-skip-tls-verify),
        C(--key-file), C(--keyring), C(--labels), C(--pass-credentials), C(--plain-http), C(--qps),
        C(--recreate-pods) (helm 3 rollback), C(--render-subchart-notes), C(--server-side) (helm 4;
        C(false) and C(auto) are what helm 3 does anyway), C(--skip-schema-validation),
        C(--take-ownership), C(--verify), C(--wait-for-jobs).
      - Each helm command gets those it takes (C(helm upgrade), C(helm rollback), and for chart
        downloads C(helm show crds)). A flag this helm does not have is refused, naming it, before
        anything is written.
      - A flag the module sets itself (C(--namespace), C(--kubeconfig) and the other C(--kube-*),
        C(--install), C(--dry-run), C(--wait), C(--timeout), C(--atomic), C(--output), C(--repo),
        C(--version), C(--values), C(--set*), C(--reset-values), C(--reuse-values),
        C(--create-namespace), C(--skip-crds), C(--no-hooks), C(--disable-openapi-validation),
        C(--description)) is refused with the option that sets it, and so are C(--debug),
        C(--username), C(--password) and C(--post-renderer).
      - When not set - none, or with O(snapshot) the flags the bundle recorded.
    type: list
    elements: str
    version_added: 0.1.0
  keep_pools:
    description:
      - Keep the live GPU pools of the TensorFusionClusters that the chart renders. The chart owns
        the TensorFusionCluster, and Helm replaces its C(spec.gpuPools) list whole whenever the
        rendering of the pools changes - reverting the images, batch policy and autoUpdate flags
        set on the live object, and starting a rollout at the chart's policy right away.
      - With V(true) the chart is rendered through a post-renderer that puts the live pool entries
        into the rendered TensorFusionCluster (new entries of the chart are added), so Helm changes
        nothing in the pools and the release's manifest holds them. What the chart itself rendered
        for the pools is recorded in the cluster's annotation C(ops.tensor-fusion.ai/chart-pools)
        (Pod templates only as digests), and what it renders differently from the previous chart
        step is returned as RV(chart_pool_changes), for the pools step to roll in the window.
      - A ProviderConfig whose spec the chart changes rolls every hypervisor of its vendor
        upstream; the pools it would start rolling at once are paused first
        (C(autoUpdateHypervisor) false, with the pause marker that M(tensorfusion.ops.gpupool_rollout)
        resumes), see RV(held_for_provider_configs).
      - In the diff (C(--diff)) both revisions' TensorFusionClusters carry the live pools, as the
        post-renderer renders them, so that the pools show no change in the chart step (a
        revision's stored pools are those of its own chart step, often older than the live ones).
      - A Pod template the new chart renders differently is not rolled, a warning says so (naming
        the pool and component, never the content).
      - The manifest of the revision this step writes holds the pools as they are, paused ones
        included; a pause that a later step lifts comes back with a plain C(helm rollback) to
        that revision (the runbooks' report says so, and how to follow it).
      - With helm 4 the post-renderer is a plugin in a private C(HELM_PLUGINS) folder of the run.
      - Needs C(list) on C(tensorfusionclusters) and C(list) and C(watch) on C(providerconfigs)
        (a ProviderConfig the chart changes is watched until the operator has taken it; the
        C(helm-chart.yml) RBAC of the C(tensorfusion.ops.rbac) role grants them) and PyYAML.
    type: bool
    default: true
    version_added: 0.2.0
  plan_identity:
    description:
      - With O(state=present), for change plans (M(tensorfusion.ops.change_plan)) - the plan's
        salt returns RV(plan_identity), the digests of the chart helm loads and of the values it
        renders; with C(chart_digest) or C(values_digest) set as well (what the plan recorded),
        the task fails before anything is written when the chart or the rendered values differ.
    type: dict
    version_added: 0.2.0
    suboptions:
      salt:
        description: The plan's salt (hex), for the values' digest.
        type: str
        required: true
      chart_digest:
        description: The chart digest the plan recorded.
        type: str
      values_digest:
        description: The values digest the plan recorded.
        type: str
  apply_crds:
    description:
      - Before the upgrade, apply the chart's C(crds/) (C(helm show crds)) with server-side apply
        and forced conflicts, as the product's upgrade guide does. Check mode applies them as a
        server-side dry run.
    type: bool
    default: false
  revision:
    description:
      - With V(rolled_back), the revision to go back to. Refused with another O(state) (it would be
        ignored), as O(snapshot) is; O(signing_key) and O(allow_unsigned) go with O(snapshot) only.
    type: int
  snapshot:
    description:
      - With V(rolled_back), a bundle made by M(tensorfusion.ops.helm_snapshot) - its path (a folder
        of the V(local) store) or its reference C(secret://<namespace>/<name>) (the V(cluster)
        store). It must verify (checksums, this cluster, and the HMAC-SHA256 signature of its index against the
        snapshot key - the Secret C(tensorfusion-ops-snapshot-key) in O(namespace), or
        O(signing_key)) and its revision must still be in the release history unchanged.
      - A bundle that fails any check is refused before anything is written - the task fails with
        C(error=UnusableBundle), C(refused=true) and C(changed=false). So is a bundle whose key
        Secret no longer exists.
    type: str
  signing_key:
    description:
      - With O(snapshot), the key the bundle was signed with when M(tensorfusion.ops.helm_snapshot)
        was given its own O(tensorfusion.ops.helm_snapshot#module:signing_key) (at least 16
        characters), instead of the key Secret in the cluster. Never shown in a result or a log.
    type: str
    version_added: 0.1.0
  allow_unsigned:
    description:
      - With O(snapshot), accept a bundle with no signature (taken before signed bundles). Its
        checksums are still verified, but anyone who can write the bundle folder can then forge
        its content; a bundle with an invalid signature is refused either way.
    type: bool
    default: false
    version_added: 0.1.0
  recover_pending:
    description:
      - What to do when the release is stuck C(pending-*). V(fail) stops with the status and the
        revisions; V(rollback) first rolls back to the last deployed revision (make sure no other
        helm operation is running).
    type: str
    choices: [fail, rollback]
    default: fail
  restore_component_config:
    description:
      - With O(snapshot), also restore each pool of the bundle's TensorFusionClusters as it was
        captured - its C(componentConfig) and its rolling policy
        (C(nodeManagerConfig.nodePoolRollingUpdatePolicy) - C(batchPercentage), C(batchInterval), the
        C(autoUpdate*) flags, the maintenance window) - and wait for the GPU pools to roll what
        changed. Every other field of a live pool is kept. A pool the helm rollback itself moved
        (O(keep_pools=false)) is restored too.
    type: bool
    default: true
  stall_timeout:
    description:
      - With O(snapshot), fail when a GPU pool's rollout shows no progress for this many seconds.
    type: int
    default: 600
extends_documentation_fragment:
  - tensorfusion.ops.attributes
  - tensorfusion.ops.auth
  - tensorfusion.ops.helm
  - tensorfusion.ops.fence
  - tensorfusion.ops.wait
  - tensorfusion.ops.wait.TIMEOUT
attributes:
  check_mode:
    details: Renders against the API server with a server-side dry run and returns the values and manifest diff; writes nothing.
  diff_mode:
    support: full
    details: Returns the values and manifest before and after (and the restored componentConfig), with secrets hashed.
  platform:
    platforms: kubernetes
    support: full
    details: Runs the helm CLI and talks to the Kubernetes API.
  idempotent:
    support: full
    details: A release whose chart, values and flags are unchanged is not upgraded again (no new revision).
requirements:
  - helm 3.13 or later, or helm 4
author:
  - TensorFusion ops maintainers (@NexusGPU)
"""

EXAMPLES = r"""
- name: Upgrade TensorFusion from the chart repository, mainland-China mirrors, local mode
  tensorfusion.ops.helm_release:
    chart_repo_url: https://download.tensor-fusion.ai
    chart_version: 1.8.7
    values_files:
      - https://download.tensor-fusion.ai/values-cn.yaml
    set_values:
      - value: agent.agentId=
    atomic: true
    deadline: "{{ window.deadline }}"

- name: Upgrade on an API server older than the chart, which does not know every field it sets
  tensorfusion.ops.helm_release:
    chart_repo_url: https://download.tensor-fusion.ai
    chart_version: 1.8.7
    disable_openapi_validation: true
    extra_args:
      - --history-max=20
      - --cleanup-on-fail

- name: Roll back to the restore point taken before the upgrade (with the upgrade's helm flags)
  tensorfusion.ops.helm_release:
    state: rolled_back
    snapshot: "{{ snapshot.bundle }}"

- name: Roll back to revision 3, first clearing a release left pending-upgrade
  tensorfusion.ops.helm_release:
    state: rolled_back
    revision: 3
    recover_pending: rollback
"""

RETURN = r"""
pools_reset:
  description:
    - With O(keep_pools=false), what the upgrade sets back on the live GPU pools of the chart's
      TensorFusionCluster (the chart's rendering replaces them), per pool entry, field by field
      (C(field), C(from), C(to); a Pod template only named, C(hidden)). Each pool is also a warning.
  returned: when O(keep_pools=false) and the release is upgraded
  type: list
  elements: dict
  sample:
    - cluster: tensor-fusion
      pool: shared
      changes: [{field: batchPercentage, from: 50, to: 20}, {field: batchInterval, from: 3s, to: 1s}]
api_server:
  description: The API server helm talked to.
  returned: always
  type: str
  sample: https://k8s.example.com:6443
name:
  description: Release name.
  returned: always
  type: str
  sample: tensor-fusion-sys
namespace:
  description: Release namespace.
  returned: always
  type: str
  sample: tensor-fusion-sys
status:
  description: Status of the release's last revision after the task (before it in check mode).
  returned: always
  type: str
  sample: deployed
revision_before:
  description: The release's last revision before the task; null when it did not exist.
  returned: always
  type: int
  sample: 4
chart_version_before:
  description: Chart version of the release's last revision before the task; null when it did not exist.
  returned: always
  type: str
  sample: 1.8.6
app_version_before:
  description: App version of the release's last revision before the task; null when it did not exist.
  returned: always
  type: str
  sample: 2.16.0
revision_after:
  description: The release's last revision after the task.
  returned: always
  type: int
  sample: 5
target_revision:
  description: The revision rolled back to.
  returned: when state is rolled_back
  type: int
  sample: 3
chart:
  description: Chart name of the desired (or rolled back to) revision.
  returned: always
  type: str
  sample: tensor-fusion
chart_version:
  description: Chart version of the desired revision.
  returned: always
  type: str
  sample: 1.8.7
app_version:
  description: App version of the desired revision.
  returned: always
  type: str
  sample: 2.17.0
helm_version:
  description: Version of the helm binary used.
  returned: always
  type: str
  sample: 3.17.2
command:
  description: The helm command that changed (or in check mode would change) the release, with secrets masked; null when nothing ran.
  returned: always
  type: str
  sample: >-
    helm upgrade --install tensor-fusion-sys tensor-fusion --namespace tensor-fusion-sys
    --repo https://download.tensor-fusion.ai --version 1.8.7 --reset-values --timeout 600s
    --kubeconfig <tmp>/kubeconfig
reasons:
  description: Why the release changes (empty when it does not).
  returned: always
  type: list
  elements: str
  sample: [chart tensor-fusion-1.8.6 -> tensor-fusion-1.8.7, rendered manifest differs]
recovered:
  description: The pending revision that was rolled back first, and to which revision.
  returned: always
  type: dict
  sample: {from_status: pending-upgrade, from_revision: 6, to_revision: 5}
component_config:
  description:
    - Per pool of the snapshot's TensorFusionClusters whose componentConfig or rolling policy was
      restored (or would be, in check mode), the components it moved and waited for, whether it
      was written, and C(restored) - what changed field by field, each C({field, from, to}) or, for
      a Pod template or patch, C({field, hidden=true}) (never its content) - and C(summary), the
      same in a line.
  returned: when snapshot is used
  type: list
  elements: dict
  sample:
    - cluster: tensor-fusion
      pool: shared
      gpupool: tensor-fusion-shared
      changed_components: [hypervisor]
      waited_for: [hypervisor]
      written: true
      restored:
        - {field: hypervisor.image, from: "tensorfusion/tensor-fusion-hypervisor:2.17.0",
           to: "tensorfusion/tensor-fusion-hypervisor:2.16.0"}
        - {field: batchPercentage, from: 34, to: 17}
      summary: "hypervisor.image tensorfusion/tensor-fusion-hypervisor:2.17.0 -> tensorfusion/tensor-fusion-hypervisor:2.16.0, batchPercentage 34 -> 17"
crds:
  description: With O(apply_crds), each CRD of the chart and whether the apply changed it.
  returned: when state is present
  type: dict
  sample: {tensorfusionclusters.tensor-fusion.ai: false, gpupools.tensor-fusion.ai: true}
manifest_changes:
  description:
    - The objects the desired rendering adds, changes and removes compared with the deployed one,
      by kind, as C(namespace/name) (the content is in the diff, secrets masked); with
      O(keep_pools) the TensorFusionClusters' pools are not compared (the pools step rolls them).
  returned: with state=present
  type: dict
  sample: {added: {ConfigMap: [tensor-fusion-sys/new-config]}, changed: {Deployment: [tensor-fusion-sys/tensor-fusion-operator]}, removed: {}}
plan_identity:
  description: The digests of the chart and of the rendered values (see O(plan_identity)).
  returned: when plan_identity is set and state is present
  type: dict
  sample: {chart_digest: "sha256:5d41...", values_digest: "pbkdf2-sha256:9a1c..."}
image_changes:
  description:
    - With O(state=present), the container images the new rendering changes (in check mode, would
      change), object by object - C(object) (C(<Kind> <namespace>/<name>)), C(container), C(from)
      (null for a new container or object) and C(to). The pools' images are not the chart step's
      (see RV(chart_pool_changes)).
  returned: with state=present
  type: list
  elements: dict
  sample:
    - {object: Deployment tensor-fusion-sys/tensor-fusion-sys-controller, container: controller,
       from: "tensorfusion/tensor-fusion-operator:1.40.0", to: "tensorfusion/tensor-fusion-operator:1.41.0"}
chart_pool_changes:
  description:
    - With O(keep_pools), per TensorFusionCluster and pool entry, the component settings that this
      chart renders differently from the previous chart step (new default images, ports,
      endpoints), as M(tensorfusion.ops.gpupool_rollout) options; C(pod_template_changed) marks a
      Pod template the chart changed (its content is never returned), C(provider_config_changed)
      the ProviderConfigs whose change holds the pool's hypervisors.
    - The C(tensorfusion.ops.pool_updates) filter turns them into the pools step's input.
  returned: with state=present
  type: dict
  sample: {"tensor-fusion": {"shared": {"hypervisor": {"image": "tensorfusion/tensor-fusion-hypervisor:2.15.0"}}}}
held_for_provider_configs:
  description: C(<cluster>/<pool entry>) whose hypervisor campaigns were paused before the chart step (in check mode, would be).
  returned: with state=present
  type: list
  elements: str
  sample: ["tensor-fusion/shared"]
helm_flags:
  description:
    - The helm flags the task used - O(disable_openapi_validation), O(skip_crds), O(no_hooks) and
      O(extra_args) (normalised to C(--flag) or C(--flag=value)).
  returned: always
  type: dict
  sample: {disable_openapi_validation: true, skip_crds: false, no_hooks: false, extra_args: [--history-max=20]}
helm_flags_source:
  description:
    - Where each of RV(helm_flags) came from - V(task), V(snapshot) (recorded in the bundle) or V(default).
  returned: always
  type: dict
  sample: {disable_openapi_validation: snapshot, skip_crds: default, no_hooks: default, extra_args: task}
method:
  description:
    - How a rollback was done - V(rollback) (C(helm rollback)) or V(upgrade-to-stored-chart), when
      C(helm rollback) would fail because the target revision renders a kept object that the
      current one does not (such as the chart's C(tf-cloud-vendor-credentials) Secret, rendered only
      while absent) and the revision's stored chart is upgraded to with its values instead.
  returned: when a rollback ran
  type: str
  sample: rollback
snapshot:
  description:
    - The bundle used, as M(tensorfusion.ops.helm_snapshot_info) describes it (with its
      C(signature) status); also in the failed result of a refused bundle.
  returned: when snapshot is used
  type: dict
refused:
  description:
    - True when the bundle of O(snapshot) was refused before anything was written (then
      C(error=UnusableBundle) and C(changed=false)); a runbook's report counts such a rollback as
      not having run.
  returned: when a bundle is refused
  type: bool
  sample: true
diff:
  description: Values and manifest (and restored componentConfig) before and after, secrets hashed.
  returned: in check mode and diff mode
  type: list
  elements: dict
"""

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import module as tfmodule
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.common_args import (
    FENCE_ARG_SPEC,
    WAIT_ARG_SPEC,
    deadline_from,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.backends import helm_release as backend
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.maintenance.fence import Fence


def main():
    module = tfmodule.new_module(
        dict(**FENCE_ARG_SPEC, name=dict(type="str", default="tensor-fusion-sys", aliases=["release_name"]),
             namespace=dict(type="str", default="tensor-fusion-sys", aliases=["release_namespace"]),
             state=dict(type="str", default="present", choices=["present", "rolled_back"]),
             chart_ref=dict(type="str", default="tensor-fusion"),
             chart_repo_url=dict(type="str"),
             chart_version=dict(type="str"),
             values=dict(type="dict"),
             values_files=dict(type="list", elements="str", default=[]),
             set_values=dict(type="list", elements="dict", default=[], options=dict(
                 value=dict(type="str", required=True),
                 value_type=dict(type="str", default="raw",
                                 choices=["raw", "string", "json", "file", "literal"]))),
             create_namespace=dict(type="bool", default=True),
             reset_values=dict(type="bool"),
             reuse_values=dict(type="bool", default=False),
             reset_then_reuse_values=dict(type="bool", default=False),
             atomic=dict(type="bool", default=False),
             skip_crds=dict(type="bool"),
             disable_openapi_validation=dict(type="bool"),
             keep_pools=dict(type="bool", default=True),
             plan_identity=dict(type="dict", options=dict(
                 salt=dict(type="str", required=True),
                 chart_digest=dict(type="str"),
                 values_digest=dict(type="str"))),
             no_hooks=dict(type="bool"),
             extra_args=dict(type="list", elements="str"),
             apply_crds=dict(type="bool", default=False),
             revision=dict(type="int"),
             snapshot=dict(type="str"),
             signing_key=dict(type="str", no_log=True),
             allow_unsigned=dict(type="bool", default=False),
             recover_pending=dict(type="str", default="fail", choices=["fail", "rollback"]),
             restore_component_config=dict(type="bool", default=True),
             stall_timeout=dict(type="int", default=600),
             binary_path=dict(type="path"),
             **WAIT_ARG_SPEC),
        supports_check_mode=True)
    tfmodule.run(module, backend.run, deadline=deadline_from, fence=Fence)


if __name__ == "__main__":
    main()
