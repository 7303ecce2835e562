# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    # Named and resolved as kubernetes.core names them, so AWX's Kubernetes credential works.
    DOCUMENTATION = r"""
options:
  kubeconfig:
    description:
      - Path to a kubeconfig file, or the kubeconfig itself as a dictionary.
      - Credential values inside a dictionary (tokens, client keys, passwords) are hidden from
        every log and result.
      - Can also be given with E(K8S_AUTH_KUBECONFIG).
      - When no authentication option is given at all, in-cluster configuration is tried first,
        then E(KUBECONFIG) or C(~/.kube/config).
    type: raw
  kubeconfig_allow_exec:
    description:
      - A kubeconfig given as a dictionary whose user runs a command to get its credentials
        (C(exec), C(auth-provider)) is refused before anything runs, unless this is V(true). A
        dictionary may come from an AWX survey answer or an extra variable, which must not run
        commands on the controller. A kubeconfig file's users run as they are.
      - A dictionary must also be a kubeconfig (C(clusters), C(contexts), C(users) lists).
    type: bool
    default: false
  context:
    description:
      - The kubeconfig context to use. Can also be given with E(K8S_AUTH_CONTEXT).
    type: str
  host:
    description:
      - URL of the Kubernetes API server. Can also be given with E(K8S_AUTH_HOST).
    type: str
  api_key:
    description:
      - Bearer token for the API server. Can also be given with E(K8S_AUTH_API_KEY).
    type: str
  ca_cert:
    description:
      - Path to a CA certificate that signed the API server's certificate.
      - Can also be given with E(K8S_AUTH_CA_CERT) or E(K8S_AUTH_SSL_CA_CERT) (which AWX's Kubernetes credential sets).
    type: path
    aliases: [ssl_ca_cert]
  client_cert:
    description:
      - Path to a client certificate. Needs O(client_key). Can also be given with E(K8S_AUTH_CLIENT_CERT) or
        E(K8S_AUTH_CERT_FILE).
    type: path
    aliases: [cert_file]
  client_key:
    description:
      - Path to the key of O(client_cert). Can also be given with E(K8S_AUTH_CLIENT_KEY) or E(K8S_AUTH_KEY_FILE).
    type: path
    aliases: [key_file]
  validate_certs:
    description:
      - Whether to verify the API server's certificate. Defaults to what the kubeconfig says,
        which is normally V(true). Can also be given with E(K8S_AUTH_VALIDATE_CERTS) or E(K8S_AUTH_VERIFY_SSL)
        (V(true)/V(false), V(yes)/V(no), V(1)/V(0), V(on)/V(off); anything else is refused).
    type: bool
    aliases: [verify_ssl]
  proxy:
    description:
      - URL of an HTTP proxy to reach the API server through. Can also be given with E(K8S_AUTH_PROXY).
    type: str
  impersonate_user:
    description:
      - User to impersonate for every request. Can also be given with E(K8S_AUTH_IMPERSONATE_USER).
    type: str
  impersonate_groups:
    description:
      - Group to impersonate, together with O(impersonate_user). One group is supported.
      - Can also be given with E(K8S_AUTH_IMPERSONATE_GROUPS).
    type: list
    elements: str
attributes:
  platform:
    platforms: kubernetes
    support: full
    description: Talks to the Kubernetes API.
requirements:
  - kubernetes >= 24.2.0 (Python library)
notes:
  - The result's C(api_server) is the resolved API server URL; credentials never appear in a result.
"""
