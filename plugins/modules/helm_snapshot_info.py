#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: helm_snapshot_info
short_description: List and verify the snapshot bundles of M(tensorfusion.ops.helm_snapshot)
version_added: 0.1.0
description:
  - Lists the bundles of both stores of M(tensorfusion.ops.helm_snapshot) (O(store)) - the
    Secrets of type C(tensorfusion.ops/snapshot) in O(namespace) (every namespace when it is not
    given) and the folders in O(dest) - newest first, optionally of one release, and verifies each
    (a cluster bundle's content as a folder's) - every file against the sha256 in its index, no file missing or added, the cluster it was
    captured on (the C(kube-system) namespace UID) against the cluster of the authentication
    options, and the HMAC-SHA256 signature of its index against the snapshot key (the Secret
    C(tensorfusion-ops-snapshot-key) in the bundle's release namespace, or O(signing_key)).
  - A bundle that fails any check is reported with C(usable=false) and its problems (never a
    failure of the task); M(tensorfusion.ops.helm_release) refuses to restore from it. Each
    bundle's C(signature) says what the signature check found, its C(store) and C(location)
    where it is.
options:
  store:
    description: The stores to list - V(cluster), V(local) or V(both).
    type: str
    choices: [cluster, local, both]
    default: both
    version_added: 0.1.0
  dest:
    description: Folder that holds the local bundles (a folder that does not exist holds none).
    type: path
    default: ~/tfops-snapshots
  name:
    description: Only bundles of this release.
    type: str
    aliases: [release_name]
  namespace:
    description: Only bundles of releases in this namespace.
    type: str
    aliases: [release_namespace]
  verify_cluster:
    description:
      - Mark bundles captured on another cluster unusable and read the snapshot keys to check
        signatures with. V(false) checks signatures only with O(signing_key) (without it no signed
        bundle is usable) and, with O(store=local), connects to nothing.
    type: bool
    default: true
  cluster_uid:
    description:
      - The cluster identity (C(kube-system) namespace UID) to check against, instead of reading it
        (the module still connects for the snapshot keys unless O(signing_key) is given).
    type: str
  signing_key:
    description:
      - The key the bundles were signed with when M(tensorfusion.ops.helm_snapshot) was given its
        own O(tensorfusion.ops.helm_snapshot#module:signing_key), instead of the key Secrets.
        Never shown in a result or a log.
    type: str
    version_added: 0.1.0
  allow_unsigned:
    description:
      - Count bundles with no signature (taken before signed bundles) as usable when their
        checksums verify; see M(tensorfusion.ops.helm_release)
        O(tensorfusion.ops.helm_release#module:allow_unsigned).
    type: bool
    default: false
    version_added: 0.1.0
  only_this_cluster:
    description: Leave out bundles of other clusters instead of listing them as unusable.
    type: bool
    default: false
extends_documentation_fragment:
  - tensorfusion.ops.attributes
  - tensorfusion.ops.attributes.READ_ONLY
  - tensorfusion.ops.auth
  - tensorfusion.ops.retry
attributes:
  platform:
    platforms: kubernetes
    support: full
    details: Reads local files and the Kubernetes API (Secrets of the snapshot type).
author:
  - TensorFusion ops maintainers (@NexusGPU)
"""

EXAMPLES = r"""
- name: Usable restore points of the release, in the cluster and in a local folder
  tensorfusion.ops.helm_snapshot_info:
    dest: /var/lib/tfops/snapshots
    name: tensor-fusion-sys
    namespace: tensor-fusion-sys
  register: snapshots

- name: Roll back to the newest usable one
  tensorfusion.ops.helm_release:
    state: rolled_back
    snapshot: "{{ snapshots.usable[0] }}"
"""

RETURN = r"""
bundles:
  description:
    - The bundles, newest capture first, with what verification found and the helm flags recorded
      for the upgrade that followed each (C(helm_flags), null when none were recorded).
    - C(signature) is V(verified), V(invalid) (changed after capture), V(other_key) (signed with a
      key that is not the one here), V(no_key) (no key to check it with - the key Secret is missing
      or could not be read) or V(unsigned); only V(verified), or V(unsigned) with
      O(allow_unsigned), leaves a bundle usable.
    - C(store) is V(cluster) or V(local); C(location) (also C(path)) the bundle's reference
      C(secret://<namespace>/<name>) or its folder; a cluster bundle lists its C(secrets).
    - C(run_changed_nothing) is true for the restore point of a runbook run whose report (kept in
      the namespace) says it changed nothing - a rerun with nothing to do - so rolling back to it
      would undo nothing.
  returned: always
  type: list
  elements: dict
  sample:
    - path: secret://tensor-fusion-sys/tfops-snapshot.tensor-fusion-sys.20261129t020001123456z.rev4
      location: secret://tensor-fusion-sys/tfops-snapshot.tensor-fusion-sys.20261129t020001123456z.rev4
      store: cluster
      secrets: [tfops-snapshot.tensor-fusion-sys.20261129t020001123456z.rev4]
      name: tfops-snapshot.tensor-fusion-sys.20261129t020001123456z.rev4
      release: tensor-fusion-sys
      namespace: tensor-fusion-sys
      revision: 4
      status: deployed
      chart: tensor-fusion
      chart_version: 1.8.6
      app_version: 2.16.0
      captured_at: "2026-11-29T02:00:01.123456Z"
      api_server: https://k8s.example.com:6443
      cluster_uid: 5b0c7f8e-2a44-4d8c-9a51-0f7d6c1b2e3a
      helm_flags: {disable_openapi_validation: true, skip_crds: false, no_hooks: false, extra_args: []}
      signature: verified
      usable: true
      problems: []
      run_changed_nothing: false
usable:
  description:
    - Locations (references or paths) of the usable bundles of both stores, newest first (of one
      capture in both stores, the cluster copy first).
  returned: always
  type: list
  elements: str
  sample: [secret://tensor-fusion-sys/tfops-snapshot.tensor-fusion-sys.20261129t020001123456z.rev4]
undo_points:
  description:
    - Of C(usable), those not taken by a run that changed nothing (C(run_changed_nothing)), newest
      first; its first is the state before the newest change a runbook made. The rollback runbook
      takes it when no snapshot is chosen.
  returned: always
  type: list
  elements: str
  sample: [secret://tensor-fusion-sys/tfops-snapshot.tensor-fusion-sys.20261128t020001123456z.rev3]
cluster_uid:
  description: The identity bundles were checked against; null when not checked.
  returned: always
  type: str
  sample: 5b0c7f8e-2a44-4d8c-9a51-0f7d6c1b2e3a
api_server:
  description: The API server the module talked to; null when it did not connect.
  returned: always
  type: str
  sample: https://k8s.example.com:6443
"""

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import module as tfmodule
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.common_args import RETRY_ARG_SPEC
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.backends import helm_snapshot_info as backend


def main():
    module = tfmodule.new_module(
        dict(store=dict(type="str", default="both", choices=["cluster", "local", "both"]),
             dest=dict(type="path", default="~/tfops-snapshots"),
             name=dict(type="str", aliases=["release_name"]),
             namespace=dict(type="str", aliases=["release_namespace"]),
             verify_cluster=dict(type="bool", default=True),
             cluster_uid=dict(type="str"),
             only_this_cluster=dict(type="bool", default=False),
             signing_key=dict(type="str", no_log=True),
             allow_unsigned=dict(type="bool", default=False),
             **RETRY_ARG_SPEC),
        supports_check_mode=True)
    tfmodule.run(module, backend.run)


if __name__ == "__main__":
    main()
