# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test-only module: connects through the collection's auth layer and reads one object, so the
integration tests can prove each way of authenticating end to end through Ansible."""

from __future__ import annotations

DOCUMENTATION = r"""
module: tfops_auth_probe
short_description: Test-only probe of the tensorfusion.ops auth layer
description:
  - Connects with the shared auth options and reads the C(kube-system) Namespace.
options:
  namespace:
    description: Namespace to read.
    type: str
    default: kube-system
extends_documentation_fragment:
  - tensorfusion.ops.auth
author:
  - TensorFusion ops maintainers (@NexusGPU)
"""

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import module as tfmodule


def probe(module):
    kube = tfmodule.connect(module)
    try:
        ns = kube.call("get", "namespaces/%s" % module.params["namespace"],
                       kube.dynamic.resources.get(api_version="v1", kind="Namespace").get,
                       name=module.params["namespace"])
        return dict(changed=False, api_server=kube.server, uid=ns.metadata.uid)
    finally:
        kube.close()


def main():
    module = tfmodule.new_module(dict(namespace=dict(type="str", default="kube-system")),
                                 supports_check_mode=True)
    tfmodule.run(module, probe)


if __name__ == "__main__":
    main()
