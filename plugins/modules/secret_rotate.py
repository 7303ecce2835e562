#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: secret_rotate
short_description: Rotate a Secret in the documented order, verify its consumers, lose nothing
version_added: 0.1.0
description:
  - Rotates the content of a Secret that TensorFusion components or other workloads consume, in
    the product's order. Create the new Secret (O(strategy=versioned)) or update it in place after
    keeping a copy of the old content (O(strategy=in_place)). Point the consumers at it or restart
    them. Wait for their rollouts. Verify that every consumer's new Pods are Ready and run on the
    new content, that is that each Pod references the rotated Secret (env
    C(valueFrom.secretKeyRef), C(envFrom), a volume, a projected volume or C(imagePullSecrets)) and,
    in place, started after the update. Only then, and only with O(delete_old), delete previous
    versions.
  - Kubernetes restarts nothing when a Secret changes, and the chart's C(tf-cloud-vendor-credentials)
    is never updated by C(helm upgrade); this module does the restarts.
  - Consumers are Deployments, StatefulSets and DaemonSets; GPU pool components (hypervisor,
    worker) whose Pod template in the TensorFusionCluster names the Secret (env, envFrom, volume or
    imagePullSecrets); and a Helm release's values key that names it (such as the chart's
    C(imagePullSecrets)). Workloads and pool components are also discovered by scanning the
    namespace's Pod templates and the clusters' component templates.
  - If any step fails, references are pointed back at the old Secret (or its old content is
    written back and the consumers are restarted on it), the old Secret stays, and the failure
    names the step and the consumer. A pool component that was written before its rollout failed
    is put back too, and its campaign awaited. A consumer whose new Pods keep failing to start
    (C(ImagePullBackOff), C(CrashLoopBackOff)) for 30 seconds ends the wait with the cause, for a
    workload and a pool component alike; a Deployment past its progress deadline at once.
  - A put-back whose rollout cannot finish either (its new Pods do not start on the old content
    as well) is reported in RV(not_put_back) and RV(stuck), saying which Pods are stuck, which Ready
    Pods still run on the rotated content, and what to do.
  - With O(strategy=in_place), a consumer whose Pod template does not reference the Secret (for
    example one that points at a versioned copy of it) is refused before anything is written, since
    a restart would never bring it the new content.
  - Values never appear in results, diffs or logs. Results carry Secret names, key names and a
    short content digest.
options:
  name:
    description:
      - Name of the Secret. With O(strategy=versioned), the base name of its versions, which are
        named C(<name>-<digest>).
    type: str
    required: true
  namespace:
    description:
      - Namespace of the Secret and its consumers. A namespace that does not exist is refused
        before anything is written (when the credentials may read namespaces).
    type: str
    default: tensor-fusion-sys
  data:
    description:
      - New content, base64-encoded values by key (a mapping). Never logged.
      - Anything but a mapping of key names to non-empty text is refused before anything is read
        or written, naming the option and the key, never the value. Text is not read as
        C(key=value) pairs (Ansible would read V(dG9rZW4=) as the key C(dG9rZW4) with an empty
        value).
    type: raw
  string_data:
    description:
      - New content, plain values by key (merged over O(data)). Never logged.
      - Checked as O(data) is; a nested mapping or list is refused (it would be stored as its
        Python text).
    type: raw
  type:
    description: Type of the Secret. Defaults to the current Secret's type, or C(Opaque).
    type: str
  strategy:
    description:
      - V(in_place) updates the Secret under its name, after keeping the old content in an
        immutable copy C(<name>-<digest>), and restarts the consumers.
      - V(versioned) creates an immutable Secret C(<name>-<digest>) and repoints the consumers
        from whichever version they reference.
    type: str
    choices: [in_place, versioned]
    default: in_place
  consumers:
    description:
      - The consumers. Without them, they are discovered (see O(discover)).
      - Each one must exist; one that does not is refused before anything is written.
    type: list
    elements: dict
    suboptions:
      kind:
        description: What consumes the Secret.
        type: str
        required: true
        choices: [Deployment, StatefulSet, DaemonSet, TensorFusionCluster, HelmRelease]
      name:
        description:
          - Name of the workload, of the TensorFusionCluster (found when there is exactly one), or
            of the Helm release.
        type: str
      values_key:
        description:
          - For a HelmRelease, the dotted key of the user values under which the Secret's name
            appears, such as V(imagePullSecrets). Repointing re-renders the release's current chart
            with only that key changed; the release's workloads that use the Secret are then waited
            on and verified. With O(strategy=in_place) those workloads are restarted.
        type: str
      namespace:
        description: Namespace of the workload; defaults to O(namespace).
        type: str
      pool:
        description: For a TensorFusionCluster, the pool entry's name (or the GPUPool name).
        type: str
      component:
        description: For a TensorFusionCluster, the component whose Pod template uses the Secret.
        type: str
        choices: [hypervisor, worker]
  discover:
    description:
      - Also find consumers by scanning the namespace's workload templates and, in
        C(tensor-fusion-sys), the clusters' component templates. Defaults to true when
        O(consumers) is empty.
    type: bool
  delete_old:
    description:
      - After every consumer is verified, delete previous versions (keeping the newest O(keep)).
        A version that a running Pod or a template still references is kept, with a warning.
    type: bool
    default: false
  keep:
    description: With O(delete_old), how many previous versions survive.
    type: int
    default: 0
  delete_unrolled_pods:
    description:
      - For hypervisor consumers whose C(autoUpdateHypervisor) is false, the operator never rolls
        a template change. With this option the Pods still on the old Secret after
        O(unrolled_grace) are deleted and the operator recreates them from the current spec, as the
        product docs allow. Without it, such a consumer is refused before anything is written.
    type: bool
    default: false
  unrolled_grace:
    description: Seconds to let the operator roll the Pods before deleting the unrolled ones.
    type: int
    default: 60
  stall_timeout:
    description:
      - For pool components, fail when their rollout makes no progress for this long. Hypervisor
        Pods that do not start end the wait after 30 seconds whatever this is.
    type: int
  binary_path:
    description: Path of the helm 3 or helm 4 binary for HelmRelease consumers; C(helm) on C(PATH) by default.
    type: path
extends_documentation_fragment:
  - tensorfusion.ops.attributes
  - tensorfusion.ops.auth
  - tensorfusion.ops.fence
  - tensorfusion.ops.wait
  - tensorfusion.ops.wait.TIMEOUT
attributes:
  check_mode:
    details: Lists the consumers found and what would be created, repointed, restarted and deleted.
  diff_mode:
    support: full
    details: Shows references (versioned) or the content digest (in place) before and after.
  idempotent:
    support: full
    details: A Secret that already holds the content, with its consumers moved over, is left alone.
notes:
  - A chart-managed Secret with a fixed name, such as C(tf-cloud-vendor-credentials), is rotated with
    O(strategy=in_place); a Secret named in the chart's values is rotated with O(strategy=versioned)
    and a HelmRelease consumer.
author:
  - TensorFusion ops maintainers (@NexusGPU)
"""

EXAMPLES = r"""
- name: Rotate the cloud-vendor credentials and restart the controller
  tensorfusion.ops.secret_rotate:
    name: tf-cloud-vendor-credentials
    string_data:
      ak: "{{ vault_vendor_ak }}"
      sk: "{{ vault_vendor_sk }}"
    consumers:
      - kind: Deployment
        name: tensor-fusion-sys-controller
    delete_old: true

- name: New registry credential for the hypervisors of pool shared, old one removed after
  tensorfusion.ops.secret_rotate:
    name: registry-credentials
    type: kubernetes.io/dockerconfigjson
    strategy: versioned
    string_data:
      .dockerconfigjson: "{{ vault_dockerconfig | to_json }}"
    consumers:
      - kind: TensorFusionCluster
        pool: shared
        component: hypervisor
    delete_old: true
    deadline: "{{ window.deadline }}"

- name: Registry credential of the controller, named in the chart's imagePullSecrets value
  tensorfusion.ops.secret_rotate:
    name: controller-registry
    strategy: versioned
    type: kubernetes.io/dockerconfigjson
    string_data:
      .dockerconfigjson: "{{ vault_dockerconfig | to_json }}"
    consumers:
      - kind: HelmRelease
        name: tensor-fusion-sys
        values_key: imagePullSecrets
    delete_old: true
"""

RETURN = r"""
api_server:
  description: The API server the module talked to.
  returned: always
  type: str
  sample: https://k8s.example.com:6443
strategy:
  description: The strategy used.
  returned: always
  type: str
  sample: versioned
namespace:
  description: Namespace of the Secret.
  returned: always
  type: str
  sample: tensor-fusion-sys
secret:
  description: The Secret the consumers use now; key names and a content digest, never values.
  returned: always
  type: dict
  sample: {"name": "registry-credentials-3f2a9c1b7d", "type": "Opaque", "keys": ["ak", "sk"], "digest": "3f2a9c1b7d"}
previous:
  description: Previous versions moved away from (versioned) or the copy of the old content (in place).
  returned: always
  type: list
  elements: str
  sample: ["registry-credentials"]
consumers:
  description: The consumers found or given.
  returned: always
  type: list
  elements: dict
  sample: [{"kind": "Deployment", "namespace": "tensor-fusion-sys", "name": "tensor-fusion-sys-controller"}]
restarts:
  description: Consumers restarted for the new content (in place).
  returned: when strategy is in_place
  type: list
  elements: str
  sample: ["Deployment tensor-fusion-sys/tensor-fusion-sys-controller"]
deleted:
  description: Previous versions deleted (or that would be, in check mode).
  returned: always
  type: list
  elements: str
  sample: ["registry-credentials"]
steps:
  description:
    - Each step with its status (ok, failed) and time; C(restore) steps after a failure.
    - C(repoint) and C(restart) steps say whether they wrote (C(changed)); false when the consumer
      already pointed at the new Secret or already ran on this version.
  returned: always
  type: list
  elements: dict
  sample: [{"step": "create", "status": "ok", "detail": "registry-credentials-3f2a9c1b7d", "seconds": 0.02}]
failed_step:
  description: The step that failed.
  returned: failure
  type: str
  sample: verify
failed_consumer:
  description: The consumer whose step failed.
  returned: failure
  type: str
  sample: Deployment tensor-fusion-sys/tensor-fusion-sys-controller
restored:
  description: What was put back after a failure.
  returned: failure
  type: list
  elements: str
  sample: ["Deployment tensor-fusion-sys/tensor-fusion-sys-controller points at registry-credentials again"]
created:
  description:
    - The Secrets a failed rotation created (new versions, the copy of the previous content); they
      are kept (immutable, unreferenced) and reused by the next run.
  returned: failure
  type: list
  elements: str
  sample: ["registry-credentials-5f2c9a1b3d"]
modified:
  description:
    - What a failed rotation changed before it failed (the Secret updated in place, consumers
      repointed or restarted, also a pool component written before its rollout failed); each is in
      RV(put_back) when putting it back worked. The message never says that nothing had changed
      after a write.
  returned: failure
  type: list
  elements: str
  sample: ["Deployment tensor-fusion-sys/tensor-fusion-sys-controller"]
not_put_back:
  description:
    - What a failed rotation could not put back (each with the reason in RV(restored)). With
      O(strategy=in_place), the Secret's previous content and each consumer's restart on it are
      separate entries.
  returned: failure
  type: list
  elements: str
  sample: ["Deployment tensor-fusion-sys/web restarted on the previous content"]
stuck:
  description:
    - For each put-back that was written but whose rollout cannot finish, one line - the consumer,
      the Pods that do not start and why, the Ready Pods still on the rotated content, and what to do.
      The C(restore) step in RV(steps) holds the same as a mapping (C(stuck)).
  returned: failure
  type: list
  elements: str
  sample: ["Deployment tensor-fusion-sys/web is stuck mid-rollout; to do: fix what keeps its new Pods from
           starting (web-7c9d app: ImagePullBackOff (Back-off pulling image) for 30s); its rollout finishes by
           itself, on the previous content, and nothing else is left to put back"]
put_back:
  description:
    - What was put back after a failure and, when the task waits, is running as before again (each
      restored consumer is waited for, at most 300 seconds).
  returned: failure
  type: list
  elements: str
  sample: ["Deployment tensor-fusion-sys/tensor-fusion-sys-controller points at registry-credentials again"]
"""


from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import module as tfmodule
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.common_args import (
    FENCE_ARG_SPEC,
    WAIT_ARG_SPEC,
    deadline_from,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.backends import secret_rotate as backend
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.maintenance.fence import Fence


def main():
    module = tfmodule.new_module(
        dict(**FENCE_ARG_SPEC, name=dict(type="str", required=True),
             namespace=dict(type="str", default="tensor-fusion-sys"),
             data=dict(type="raw", no_log=True),
             string_data=dict(type="raw", no_log=True),
             type=dict(type="str"),
             strategy=dict(type="str", default="in_place", choices=["in_place", "versioned"]),
             consumers=dict(type="list", elements="dict", options=dict(
                 kind=dict(type="str", required=True,
                           choices=["Deployment", "StatefulSet", "DaemonSet", "TensorFusionCluster",
                                    "HelmRelease"]),
                 name=dict(type="str"),
                 values_key=dict(type="str", no_log=False),
                 namespace=dict(type="str"),
                 pool=dict(type="str"),
                 component=dict(type="str", choices=["hypervisor", "worker"]))),
             discover=dict(type="bool"),
             delete_old=dict(type="bool", default=False),
             keep=dict(type="int", default=0, no_log=False),
             delete_unrolled_pods=dict(type="bool", default=False),
             unrolled_grace=dict(type="int", default=60),
             stall_timeout=dict(type="int"),
             binary_path=dict(type="path"),
             **WAIT_ARG_SPEC),
        supports_check_mode=True,
        required_one_of=[("data", "string_data")])
    tfmodule.run(module, backend.run, deadline=deadline_from, fence=Fence)


if __name__ == "__main__":
    main()
