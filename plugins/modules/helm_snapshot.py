#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: helm_snapshot
short_description: Capture a restore point of TensorFusion's Helm release and GPU-pool configuration
version_added: 0.1.0
description:
  - Stores a bundle with the release's revision, status, chart and app version, user and
    computed values, manifest and history; every TensorFusionCluster (without status and
    server-set metadata); each GPUPool's spec and C(componentStatus); for every Secret the release
    or the clusters reference, its name, type, keys and a keyed fingerprint of each value (never
    the value); the helm and API server versions, the cluster's identity (API server URL and the
    C(kube-system) namespace UID) and the time; and C(index.json) with the sha256 of every file,
    signed with HMAC-SHA256.
  - O(store=cluster) (the default) keeps the bundle next to what it protects, the way Helm keeps its
    releases - so that a rollback started later from another machine or another execution
    environment finds it - as Secrets of type C(tensorfusion.ops/snapshot) in O(namespace) - the
    files and the signed index as one gzip-compressed JSON document, cut into chunks of 700 KiB
    (a Secret holds at most 1 MiB), the first Secret named
    C(tfops-snapshot.<release>.<time>.rev<revision>) and the others C(<that name>.part-<n>),
    labelled C(app.kubernetes.io/managed-by=tensorfusion.ops),
    C(tensorfusion.ops/snapshot-of=<release>) and C(tensorfusion.ops/cluster-uid=<kube-system UID>).
    Its reference is C(secret://<namespace>/<first Secret's name>). A changed Secret fails the same
    checksum and signature checks as a changed file.
  - O(store=local) writes a bundle folder in O(dest) instead (for terminal use); O(store=both)
    writes the same bundle (the same signed index) to both.
  - The key lives in the cluster - the Secret C(tensorfusion-ops-snapshot-key) in O(namespace)
    (labelled C(app.kubernetes.io/managed-by=tensorfusion.ops)), created with 32 random bytes by
    the first snapshot - or is O(signing_key). The bundle holds the signature and the key's id (a
    fingerprint of it), never the key, so whoever can edit a bundle folder cannot make a forged
    bundle that M(tensorfusion.ops.helm_release) restores. Deleting the key Secret makes every
    bundle signed with it unusable.
  - Every Secret value the bundle stands in for (Secret data, secret-looking values and
    environment values) is an HMAC-SHA256 with that key (C(hmac-sha256:...)), not a bare hash, so
    a weak value cannot be guessed offline from the bundle.
  - A Helm revision alone may not cover GPU-pool configuration changed by hand; the bundle does,
    and M(tensorfusion.ops.helm_release) with O(tensorfusion.ops.helm_release#module:snapshot)
    rolls back to it.
  - Values whose keys look secret (passwords, tokens, keys, licences) and secret-looking
    environment values are replaced by their keyed fingerprint unless O(keep_secrets) is set;
    Secret objects in the manifest keep only fingerprints. Local files are 0600 and folders 0700; a
    local bundle is written to a temporary folder and renamed, a cluster bundle's first Secret is
    created last, so a partial bundle never looks complete.
  - Each V(present) run writes a new bundle (C(changed=true)); O(keep) prunes the older ones in
    each store written.
  - O(helm_flags) records the helm flags of the upgrade this restore point precedes (such as
    C(--disable-openapi-validation) on an older API server); a rollback to the bundle with
    M(tensorfusion.ops.helm_release) uses them for each flag option that task leaves unset.
options:
  store:
    description:
      - Where the bundle goes - V(cluster) (Secrets in O(namespace)), V(local) (a folder in O(dest))
        or V(both) (the same bundle in each; RV(bundle) is then the cluster one).
      - With V(absent), the stores to remove bundles from (a O(bundle) says its own store).
    type: str
    choices: [cluster, local, both]
    default: cluster
    version_added: 0.1.0
  dest:
    description: Folder that holds the local bundles (created 0700 if missing), with O(store=local) or V(both).
    type: path
    default: ~/tfops-snapshots
  state:
    description:
      - V(present) captures a new bundle; V(absent) removes O(bundle), or every bundle of the
        release in O(store) when O(bundle) is not given.
    type: str
    choices: [present, absent]
    default: present
  bundle:
    description:
      - With V(absent), the bundle to remove - a path, a folder name inside O(dest), or a
        C(secret://<namespace>/<name>) reference.
    type: str
  keep:
    description:
      - After capturing, keep only the newest O(keep) bundles of this release and cluster in each
        store written (O(dest), or the Secrets of O(namespace)).
    type: int
  keep_secrets:
    description:
      - Keep secret-looking Helm values and environment values in clear in the bundle. Secret
        objects' data is never stored either way.
    type: bool
    default: false
  helm_flags:
    description:
      - The helm flags the upgrade after this snapshot uses, recorded in the bundle's C(meta.json)
        (normalised, checked against the allow-list of
        M(tensorfusion.ops.helm_release) O(tensorfusion.ops.helm_release#module:extra_args)).
      - Not set - nothing is recorded, and a rollback to the bundle uses only its own flags.
    type: dict
    version_added: 0.1.0
    suboptions:
      disable_openapi_validation:
        description: As M(tensorfusion.ops.helm_release) O(tensorfusion.ops.helm_release#module:disable_openapi_validation).
        type: bool
        default: false
      skip_crds:
        description: As M(tensorfusion.ops.helm_release) O(tensorfusion.ops.helm_release#module:skip_crds).
        type: bool
        default: false
      no_hooks:
        description: As M(tensorfusion.ops.helm_release) O(tensorfusion.ops.helm_release#module:no_hooks).
        type: bool
        default: false
      extra_args:
        description: As M(tensorfusion.ops.helm_release) O(tensorfusion.ops.helm_release#module:extra_args).
        type: list
        elements: str
        default: []
  signing_key:
    description:
      - A key of your own (at least 16 characters) to sign the bundle and key its fingerprints with,
        instead of the key Secret in the cluster (which is then neither read nor created). The
        rollback needs the same key (M(tensorfusion.ops.helm_release)
        O(tensorfusion.ops.helm_release#module:signing_key)). Never shown in a result or a log.
    type: str
    version_added: 0.1.0
extends_documentation_fragment:
  - tensorfusion.ops.attributes
  - tensorfusion.ops.auth
  - tensorfusion.ops.helm
attributes:
  check_mode:
    details: Reads everything and returns what it would capture and prune; writes nothing (no Secret, no folder, not even a missing key Secret).
  diff_mode:
    support: none
    details: Returns no diff.
  platform:
    platforms: kubernetes
    support: full
    details: Runs the helm CLI and talks to the Kubernetes API.
  idempotent:
    support: none
    details: Each run with O(state=present) captures a new restore point; O(state=absent) is idempotent.
requirements:
  - helm 3 or helm 4
author:
  - TensorFusion ops maintainers (@NexusGPU)
"""

EXAMPLES = r"""
- name: Restore point before the upgrade, kept in the cluster, keeping the last five
  tensorfusion.ops.helm_snapshot:
    keep: 5
  register: snapshot

- name: Restore point in the cluster and a copy on this machine
  tensorfusion.ops.helm_snapshot:
    store: both
    dest: /var/lib/tfops/snapshots

- name: Restore point that records the upgrade's helm flags, for the rollback
  tensorfusion.ops.helm_snapshot:
    helm_flags:
      disable_openapi_validation: true
      extra_args: [--history-max=20]

- name: Restore point in a local folder, signed with a key from the vault instead of the cluster's key Secret
  tensorfusion.ops.helm_snapshot:
    store: local
    dest: /var/lib/tfops/snapshots
    signing_key: "{{ vault_tfops_snapshot_key }}"

- name: Remove one bundle
  tensorfusion.ops.helm_snapshot:
    state: absent
    bundle: "{{ snapshot.bundle }}"
"""

RETURN = r"""
api_server:
  description:
    - The API server the module talked to, also in a failed result. With C(changed) true in a
      failed result, something was written before the failure (a bundle, the key Secret).
  returned: when the module connected (state present; state absent with a cluster store)
  type: str
  sample: https://k8s.example.com:6443
bundle:
  description:
    - The bundle written (in check mode, the one that would be written) - its reference
      C(secret://<namespace>/<name>) in the cluster store (also with O(store=both)), or its
      path in the local store. What M(tensorfusion.ops.helm_release)
      O(tensorfusion.ops.helm_release#module:snapshot) takes.
  returned: when state is present
  type: str
  sample: secret://tensor-fusion-sys/tfops-snapshot.tensor-fusion-sys.20261129t020001123456z.rev4
locations:
  description: Every copy written (one per store, the cluster one first).
  returned: when state is present
  type: list
  elements: str
  sample:
    - secret://tensor-fusion-sys/tfops-snapshot.tensor-fusion-sys.20261129t020001123456z.rev4
    - /var/lib/tfops/snapshots/tensor-fusion-sys_tensor-fusion-sys_20261129T020001123456Z_rev4
store:
  description: The O(store) written to.
  returned: when state is present
  type: str
  sample: cluster
secrets:
  description: Names of the Secrets of a cluster bundle (one per chunk; empty with O(store=local)).
  returned: when state is present
  type: list
  elements: str
  sample: [tfops-snapshot.tensor-fusion-sys.20261129t020001123456z.rev4]
meta:
  description:
    - The bundle's C(meta.json) - release, revision, status, chart and app version, versions,
      cluster identity, time, and the recorded C(helm_flags) (null when none were given).
  returned: when state is present
  type: dict
  sample:
    release: tensor-fusion-sys
    namespace: tensor-fusion-sys
    revision: 4
    status: deployed
    chart: tensor-fusion
    chart_version: 1.8.6
    app_version: 2.16.0
    captured_at: "2026-11-29T02:00:01.123456Z"
    helm_version: 3.17.2
    server_version: v1.35.4
    api_server: https://k8s.example.com:6443
    cluster_uid: 5b0c7f8e-2a44-4d8c-9a51-0f7d6c1b2e3a
    key_id: 3f1c2a9b0d4e5f61
    helm_flags: {disable_openapi_validation: true, skip_crds: false, no_hooks: false, extra_args: []}
signing_key:
  description:
    - The key the bundle is signed with - its id (C(key_id), also in C(meta.json) and C(index.json)),
      whether this run created the key Secret (C(created); in check mode, whether it would), and
      the Secret (C(namespace/name); null for O(signing_key)). Never the key.
  returned: when state is present
  type: dict
  sample: {key_id: 3f1c2a9b0d4e5f61, created: false, secret: tensor-fusion-sys/tensorfusion-ops-snapshot-key}
files:
  description: Files of the bundle.
  returned: when state is present
  type: list
  elements: str
  sample:
    - computed-values.json
    - gpupools.json
    - history.json
    - index.json
    - manifest.yaml
    - meta.json
    - secrets.json
    - tensorfusionclusters.json
    - values.json
pruned:
  description: Bundles (references or paths) removed (or, in check mode, that would be removed) by O(keep).
  returned: when state is present
  type: list
  elements: str
  sample: []
removed:
  description: Bundles (references or paths) removed by V(absent) (in check mode, that would be removed).
  returned: when state is absent
  type: list
  elements: str
  sample: [secret://tensor-fusion-sys/tfops-snapshot.tensor-fusion-sys.20261129t020001123456z.rev4]
"""

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import module as tfmodule
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.backends import helm_snapshot as backend


def main():
    module = tfmodule.new_module(
        dict(name=dict(type="str", default="tensor-fusion-sys", aliases=["release_name"]),
             namespace=dict(type="str", default="tensor-fusion-sys", aliases=["release_namespace"]),
             store=dict(type="str", default="cluster", choices=["cluster", "local", "both"]),
             dest=dict(type="path", default="~/tfops-snapshots"),
             state=dict(type="str", default="present", choices=["present", "absent"]),
             bundle=dict(type="str"),
             keep=dict(type="int"),
             keep_secrets=dict(type="bool", default=False),
             signing_key=dict(type="str", no_log=True),
             helm_flags=dict(type="dict", options=dict(
                 disable_openapi_validation=dict(type="bool", default=False),
                 skip_crds=dict(type="bool", default=False),
                 no_hooks=dict(type="bool", default=False),
                 extra_args=dict(type="list", elements="str", default=[]))),
             binary_path=dict(type="path")),
        supports_check_mode=True)
    tfmodule.run(module, backend.run)


if __name__ == "__main__":
    main()
