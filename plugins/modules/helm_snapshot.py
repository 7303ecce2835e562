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
  - Writes a bundle folder with the release's revision, status, chart and app version, user and
    computed values, manifest and history; every TensorFusionCluster (without status and
    server-set metadata); each GPUPool's spec and C(componentStatus); for every Secret the release
    or the clusters reference, its name, type, keys and a keyed fingerprint of each value (never
    the value); the helm and API server versions, the cluster's identity (API server URL and the
    C(kube-system) namespace UID) and the time; and C(index.json) with the sha256 of every file,
    signed with HMAC-SHA256.
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
    Secret objects in the manifest keep only fingerprints. Files are 0600 and folders 0700; the bundle is written to a
    temporary folder and renamed, so a partial bundle never looks complete.
  - Each V(present) run writes a new bundle (C(changed=true)); O(keep) prunes the older ones.
  - O(helm_flags) records the helm flags of the upgrade this restore point precedes (such as
    C(--disable-openapi-validation) on an older API server); a rollback to the bundle with
    M(tensorfusion.ops.helm_release) uses them for each flag option that task leaves unset.
options:
  name:
    description: Release name.
    type: str
    default: tensor-fusion-sys
    aliases: [release_name]
  namespace:
    description: Release namespace.
    type: str
    default: tensor-fusion-sys
    aliases: [release_namespace]
  dest:
    description: Folder that holds the bundles (created 0700 if missing).
    type: path
    required: true
  state:
    description:
      - V(present) captures a new bundle; V(absent) removes O(bundle), or every bundle of the
        release in O(dest) when O(bundle) is not given.
    type: str
    choices: [present, absent]
    default: present
  bundle:
    description: With V(absent), the bundle to remove (a path, or a folder name inside O(dest)).
    type: str
  keep:
    description:
      - After capturing, keep only the newest O(keep) bundles of this release and cluster in O(dest).
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
  binary_path:
    description: Path of the helm binary; C(helm) on E(PATH) when left out.
    type: path
extends_documentation_fragment:
  - tensorfusion.ops.auth
attributes:
  check_mode:
    support: full
    description: Reads everything and returns what it would capture and prune; writes nothing (not even a missing key Secret).
  diff_mode:
    support: none
    description: Returns no diff.
  platform:
    platforms: kubernetes
    support: full
    description: Runs the helm CLI and talks to the Kubernetes API.
requirements:
  - helm 3 or helm 4
author:
  - TensorFusion ops maintainers (@NexusGPU)
"""

EXAMPLES = r"""
- name: Restore point before the upgrade, keeping the last five
  tensorfusion.ops.helm_snapshot:
    dest: /var/lib/tfops/snapshots
    keep: 5
  register: snapshot

- name: Restore point that records the upgrade's helm flags, for the rollback
  tensorfusion.ops.helm_snapshot:
    dest: /var/lib/tfops/snapshots
    helm_flags:
      disable_openapi_validation: true
      extra_args: [--history-max=20]

- name: Restore point signed with a key from the vault instead of the cluster's key Secret
  tensorfusion.ops.helm_snapshot:
    dest: /var/lib/tfops/snapshots
    signing_key: "{{ vault_tfops_snapshot_key }}"

- name: Remove one bundle
  tensorfusion.ops.helm_snapshot:
    dest: /var/lib/tfops/snapshots
    state: absent
    bundle: "{{ snapshot.bundle }}"
"""

RETURN = r"""
api_server:
  description: The API server the module talked to.
  returned: when state is present
  type: str
  sample: https://k8s.example.com:6443
bundle:
  description: Path of the bundle written (in check mode, the one that would be written).
  returned: when state is present
  type: str
  sample: /var/lib/tfops/snapshots/tensor-fusion-sys_tensor-fusion-sys_20261129T020001123456Z_rev4
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
    server_version: v1.20.2
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
  description: Bundles removed (or, in check mode, that would be removed) by O(keep).
  returned: when state is present
  type: list
  elements: str
  sample: []
removed:
  description: Bundles removed by V(absent).
  returned: when state is absent
  type: list
  elements: str
  sample: [/var/lib/tfops/snapshots/tensor-fusion-sys_tensor-fusion-sys_20261129T020001123456Z_rev4]
"""

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops import module as tfmodule
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm_tasks import run_snapshot


def main():
    module = tfmodule.new_module(
        dict(name=dict(type="str", default="tensor-fusion-sys", aliases=["release_name"]),
             namespace=dict(type="str", default="tensor-fusion-sys", aliases=["release_namespace"]),
             dest=dict(type="path", required=True),
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
    tfmodule.run(module, run_snapshot)


if __name__ == "__main__":
    main()
