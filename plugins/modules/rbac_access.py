#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: rbac_access
short_description: A ServiceAccount bound to the collection's RBAC, and a kubeconfig for its token
version_added: 0.1.0
description:
  - Creates (or removes) a ServiceAccount, the ClusterRoles and Roles given in O(manifests) (the
    files of C(roles/rbac/files), one per runbook; the role C(tensorfusion.ops.rbac) picks them) and one
    binding per role to the ServiceAccount, named C(<role>.<namespace>.<service account>), so a
    second ServiceAccount granted the same roles (an upgrader and a read-only prechecker) gets
    bindings of its own and never takes the first's. A binding named after its role (earlier
    versions) that binds only this ServiceAccount is replaced by its own.
  - With O(kubeconfig_path), also a C(kubernetes.io/service-account-token) Secret for the
    ServiceAccount (filled by Kubernetes' token controller; the module waits for it, watch-based,
    within O(wait_timeout)) and a kubeconfig for that token, written with mode C(0600).
  - The token never appears in the result, a diff or a message; only the kubeconfig file holds it.
  - Idempotent; objects that differ are updated (a binding whose C(roleRef) changed is
    re-created, as C(roleRef) cannot change).
options:
  state:
    description:
      - V(present) creates or updates; V(absent) removes the ServiceAccount, its token Secret and
        its bindings, and a role only when no other binding of this collection still uses it.
      - >-
        V(verified) writes nothing and checks that the credentials this module runs with hold every
        rule of O(manifests) (one C(SelfSubjectAccessReview) per verb, resource and name, which any
        authenticated user may create). It fails with C(forbidden: <verb> <resource> ...) naming the
        first missing permission and lists all of them in RV(missing). Runbooks run it first, so a
        missing permission stops them before they change anything.
    type: str
    choices: [present, absent, verified]
    default: present
  service_account:
    description: Name of the ServiceAccount.
    type: str
    default: tensorfusion-ops
  namespace:
    description: Namespace of the ServiceAccount and its token Secret. It must exist.
    type: str
    default: tensor-fusion-sys
  manifests:
    description:
      - ClusterRole and Role objects (as dictionaries) to apply and bind, or C(List) objects
        holding them (the form of the files of C(roles/rbac/files)). A role given twice (by two runbooks)
        is applied once.
    type: list
    elements: dict
    default: []
  role_namespace:
    description:
      - The release's namespace, for the Roles of O(manifests) written for C(tensor-fusion-sys)
        (or without a namespace); Roles of other namespaces keep theirs.
    type: str
  kubeconfig_path:
    description:
      - Write a kubeconfig for the ServiceAccount's token to this file (mode C(0600)). With
        O(state=absent) the file is removed.
    type: path
  token_secret:
    description: Name of the token Secret; defaults to C(<service_account>-token).
    type: str
  server:
    description:
      - API server URL written into the kubeconfig; defaults to the one this module talks to.
    type: str
  wait_timeout:
    default: 60
extends_documentation_fragment:
  - tensorfusion.ops.attributes
  - tensorfusion.ops.auth
  - tensorfusion.ops.wait.TIMEOUT
attributes:
  check_mode:
    details: Reads every object and says what it would create, change or delete; writes nothing.
  diff_mode:
    support: full
    details: Shows names, labels, rules, role references and subjects before and after (never a token).
  idempotent:
    support: full
    details: Objects already as desired are left alone.
notes:
  - The credentials running this module need to create ServiceAccounts, Secrets, ClusterRoles,
    Roles and their bindings, and to hold (or be allowed to C(escalate) and C(bind)) every
    permission the manifests grant; a cluster administrator runs it once.
seealso:
  - ref: ansible_collections.tensorfusion.ops.docsite.rbac
    description: The collection's RBAC per runbook (its manifests are in C(roles/rbac/files)).
author:
  - TensorFusion ops maintainers (@NexusGPU)
"""

EXAMPLES = r"""
- name: A ServiceAccount for AWX with the precheck runbook's read-only rights
  tensorfusion.ops.rbac_access:
    service_account: tfops-precheck
    manifests: "{{ lookup('ansible.builtin.file', 'roles/rbac/files/precheck.yml') | ansible.builtin.from_yaml_all }}"
    kubeconfig_path: /secure/tfops-precheck.kubeconfig

- name: Before the upgrade runbook changes anything, check that this token may do all of it
  tensorfusion.ops.rbac_access:
    state: verified
    manifests: "{{ lookup('ansible.builtin.file', 'roles/rbac/files/upgrade.yml') | ansible.builtin.from_yaml_all }}"

- name: Remove it again
  tensorfusion.ops.rbac_access:
    state: absent
    service_account: tfops-precheck
    manifests: "{{ lookup('ansible.builtin.file', 'roles/rbac/files/precheck.yml') | ansible.builtin.from_yaml_all }}"
    kubeconfig_path: /secure/tfops-precheck.kubeconfig
"""

RETURN = r"""
changes:
  description: What was (or in check mode would be) created, updated, re-created or deleted.
  returned: always
  type: list
  elements: dict
  sample: [{"action": "create", "kind": "ClusterRole", "name": "tensorfusion-ops-precheck", "namespace": null}]
roles:
  description: The roles bound to the ServiceAccount, as C(Kind/name) or C(Kind/namespace/name).
  returned: always
  type: list
  elements: str
  sample: ["ClusterRole/tensorfusion-ops-precheck", "Role/tensor-fusion-sys/tensorfusion-ops-precheck"]
service_account:
  description: C(namespace/name) of the ServiceAccount (none with O(state=verified)).
  returned: always
  type: str
  sample: tensor-fusion-sys/tensorfusion-ops
missing:
  description: With O(state=verified), every permission the credentials lack, as C(verb resource[/name] in namespace).
  returned: when O(state=verified)
  type: list
  elements: str
  sample: ["list secrets in tensor-fusion-sys"]
kubeconfig_path:
  description: The kubeconfig file written (or removed), when O(kubeconfig_path) was given.
  returned: when O(kubeconfig_path) was given
  type: str
api_server:
  description: The API server this module talked to.
  returned: always
  type: str
"""
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import module as tfmodule
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.common_args import deadline_from, wait_arg_spec
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.backends import rbac_access as backend


def main():
    module = tfmodule.new_module(
        dict(state=dict(type="str", default="present", choices=["present", "absent", "verified"]),
             service_account=dict(type="str", default="tensorfusion-ops"),
             namespace=dict(type="str", default="tensor-fusion-sys"),
             manifests=dict(type="list", elements="dict", default=[]),
             role_namespace=dict(type="str"),
             kubeconfig_path=dict(type="path"),
             token_secret=dict(type="str", no_log=False),
             server=dict(type="str"),
             **wait_arg_spec(wait=False, timeout=60)),
        supports_check_mode=True)
    tfmodule.run(module, backend.run, deadline=deadline_from)


if __name__ == "__main__":
    main()
