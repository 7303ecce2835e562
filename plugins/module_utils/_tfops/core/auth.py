# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Authentication: the options kubernetes.core users know, their K8S_AUTH_* fallbacks, and the
API client built from them.

Resolution order, as kubernetes.core does it (so AWX's Kubernetes credential works unchanged):
task option, then ``K8S_AUTH_<NAME>``; then host plus a token or client cert is enough on its own;
otherwise a kubeconfig (path or dict) and context; otherwise in-cluster config, then ~/.kube/config.
"""

from __future__ import annotations

import os

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import (
    AuthError,
    MissingDependency,
)

# kubernetes is imported on first use, not with this file: importing it costs about as much as
# the rest of a module's start-up, and a task that needs no cluster (an explicit maintenance
# window) or fails validation never pays it (bench/, part 5).
k8s_client = k8s_config = ConfigException = None


def _import_kubernetes():
    global k8s_client, k8s_config, ConfigException  # pylint: disable=global-statement
    if k8s_client is None:
        from kubernetes import client
        from kubernetes import config
        from kubernetes.config.config_exception import ConfigException as config_exception
        k8s_client, k8s_config, ConfigException = client, config, config_exception


AUTH_ARG_SPEC = dict(
    kubeconfig=dict(type="raw"),
    context=dict(type="str"),
    host=dict(type="str"),
    api_key=dict(type="str", no_log=True),
    ca_cert=dict(type="path", aliases=["ssl_ca_cert"]),
    client_cert=dict(type="path", aliases=["cert_file"]),
    client_key=dict(type="path", aliases=["key_file"], no_log=False),
    validate_certs=dict(type="bool", aliases=["verify_ssl"]),
    proxy=dict(type="str"),
    impersonate_user=dict(type="str"),
    impersonate_groups=dict(type="list", elements="str"),
    kubeconfig_allow_exec=dict(type="bool", default=False),
)

# option -> environment variables, first set wins. kubernetes.core reads K8S_AUTH_<option name>,
# then K8S_AUTH_<its kubernetes-client name> (K8S_AUTH_CA_CERT, then K8S_AUTH_SSL_CA_CERT, which AWX's
# Kubernetes credential injects), so a credential type written for kubernetes.core works here too.
AUTH_ENV = dict(
    kubeconfig=("K8S_AUTH_KUBECONFIG",),
    context=("K8S_AUTH_CONTEXT",),
    host=("K8S_AUTH_HOST",),
    api_key=("K8S_AUTH_API_KEY",),
    ca_cert=("K8S_AUTH_CA_CERT", "K8S_AUTH_SSL_CA_CERT"),
    client_cert=("K8S_AUTH_CLIENT_CERT", "K8S_AUTH_CERT_FILE"),
    client_key=("K8S_AUTH_CLIENT_KEY", "K8S_AUTH_KEY_FILE"),
    validate_certs=("K8S_AUTH_VALIDATE_CERTS", "K8S_AUTH_VERIFY_SSL"),
    proxy=("K8S_AUTH_PROXY",),
    impersonate_user=("K8S_AUTH_IMPERSONATE_USER",),
    impersonate_groups=("K8S_AUTH_IMPERSONATE_GROUPS",),
)

# Keys whose values in a kubeconfig are credentials; kubernetes.core PR #1014 redacts the same set.
SENSITIVE_KUBECONFIG_KEYS = frozenset([
    "token", "client-key-data", "client-certificate-data", "password", "access-token",
    "refresh-token", "id-token", "client-secret", "secret", "api-key", "apikey",
])

_TRUE = ("1", "true", "yes", "on", "y")
_FALSE = ("0", "false", "no", "off", "n")


def require_kubernetes():
    try:
        _import_kubernetes()
    except ImportError as exc:
        raise MissingDependency(
            "the Python library 'kubernetes' is required on the host that runs this module "
            "(pip install -r requirements.txt of tensorfusion.ops): %s" % exc)


def _env_value(option, env_name, raw):
    if option == "validate_certs":
        lowered = raw.strip().lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise AuthError("%s=%r is not a boolean" % (env_name, raw))
    if option == "impersonate_groups":
        return [g.strip() for g in raw.split(",") if g.strip()]
    return raw


def resolve_auth(params, environ=None):
    """Pure: the effective auth settings from task options, falling back to K8S_AUTH_*."""
    environ = os.environ if environ is None else environ
    resolved = {}
    for option, env_names in AUTH_ENV.items():
        value = params.get(option)
        if value is None:
            env_name = next((name for name in env_names if environ.get(name) not in (None, "")), None)
            if env_name:
                value = _env_value(option, env_name, environ[env_name])
        resolved[option] = value
    if (resolved["client_cert"] is None) != (resolved["client_key"] is None):
        raise AuthError("client_cert and client_key go together; only one of them was given")
    resolved["kubeconfig_allow_exec"] = bool(params.get("kubeconfig_allow_exec"))
    if isinstance(resolved["kubeconfig"], dict):
        check_inline_kubeconfig(resolved["kubeconfig"], resolved["kubeconfig_allow_exec"])
    return resolved


def check_inline_kubeconfig(doc, allow_exec=False, option="kubeconfig"):
    """A kubeconfig given as a dictionary (an AWX survey answer, an extra variable) is data: its
    parts are lists of mappings, and a user that runs a command on the controller to get its
    credentials (``exec``, an ``auth-provider``) is refused unless ``allow_exec``. Pure; says
    which user, never a value."""
    for key in ("clusters", "contexts", "users"):
        items = doc.get(key)
        if items is not None and not (isinstance(items, list) and all(isinstance(i, dict) for i in items)):
            raise AuthError("%s: %s is not a list of mappings: not a kubeconfig" % (option, key))
    if not doc.get("clusters"):
        raise AuthError("%s: no clusters: not a kubeconfig" % option)
    runs = [str(u.get("name")) for u in doc.get("users") or []
            if isinstance(u.get("user"), dict) and (u["user"].get("exec") or u["user"].get("auth-provider"))]
    if runs and not allow_exec:
        raise AuthError("%s: user %s would run a command on the controller to get its credentials (exec or "
                        "auth-provider); a kubeconfig given as data may not, unless kubeconfig_allow_exec is "
                        "true (a kubeconfig file may)" % (option, ", ".join(runs)))


def kubeconfig_secrets(kubeconfig):
    """Every credential value inside a dict kubeconfig, to be added to no_log_values."""
    found = []

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if str(key).lower() in SENSITIVE_KUBECONFIG_KEYS and isinstance(value, str) and value:
                    found.append(value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    if isinstance(kubeconfig, dict):
        walk(kubeconfig)
    return found


def _load_kubeconfig(cfg, kubeconfig, context):
    try:
        if isinstance(kubeconfig, dict):
            k8s_config.load_kube_config_from_dict(kubeconfig, context=context,
                                                  client_configuration=cfg)
        else:
            path = os.path.expanduser(kubeconfig) if kubeconfig else None
            if path and not os.path.exists(path):
                raise AuthError("kubeconfig file %s does not exist" % path)
            # KUBECONFIG as it is now: the client's own default was read when it was imported,
            # and a task run in ansible-playbook's worker may set another (its environment).
            k8s_config.load_kube_config(config_file=path or os.environ.get("KUBECONFIG", "~/.kube/config"),
                                        context=context, client_configuration=cfg)
    except ConfigException as exc:
        raise AuthError("cannot load kubeconfig%s: %s" % (
            " context %r" % context if context else "", exc))


def build_configuration(auth):
    """A kubernetes.client.Configuration from resolved auth settings."""
    require_kubernetes()
    cfg = k8s_client.Configuration()
    has_direct_creds = auth["host"] and (auth["api_key"] or auth["client_cert"])
    if has_direct_creds:
        cfg.host = auth["host"]
    elif auth["kubeconfig"] is not None or auth["context"]:
        _load_kubeconfig(cfg, auth["kubeconfig"], auth["context"])
    else:
        try:
            k8s_config.load_incluster_config(client_configuration=cfg)
        except ConfigException:
            default = os.path.expanduser(os.environ.get("KUBECONFIG", "~/.kube/config").split(os.pathsep)[0])
            if not os.path.exists(default):
                raise AuthError(
                    "no Kubernetes credentials: give kubeconfig/context, host with api_key or "
                    "client_cert, the K8S_AUTH_* environment variables, run in a Pod, or "
                    "provide %s" % default)
            _load_kubeconfig(cfg, default, None)
    if auth["host"]:
        cfg.host = auth["host"]
    if auth["api_key"]:
        cfg.api_key = {"authorization": "Bearer " + auth["api_key"]}
        cfg.api_key_prefix = {}
    if auth["ca_cert"]:
        cfg.ssl_ca_cert = auth["ca_cert"]
    if auth["client_cert"]:
        cfg.cert_file = auth["client_cert"]
        cfg.key_file = auth["client_key"]
    if auth["validate_certs"] is not None:
        cfg.verify_ssl = auth["validate_certs"]
    if auth["proxy"]:
        cfg.proxy = auth["proxy"]
    if not cfg.host:
        raise AuthError("the resolved configuration names no API server")
    return cfg


def remove_client_temp_files():
    """The kubernetes client writes a kubeconfig's certificate and key data to temporary files that
    it removes only when the interpreter exits; remove them now (the connection made keeps what
    it read)."""
    import sys
    kube_config = sys.modules.get("kubernetes.config.kube_config")
    if kube_config is not None:
        try:
            kube_config._cleanup_temp_files()  # pylint: disable=protected-access
        except Exception:  # pylint: disable=broad-except  # a file already gone is no matter
            pass


def build_api_client(auth):
    """(ApiClient, server URL) for resolved auth settings; impersonation as request headers."""
    cfg = build_configuration(auth)
    api = k8s_client.ApiClient(configuration=cfg)
    if auth["impersonate_user"]:
        api.set_default_header("Impersonate-User", auth["impersonate_user"])
    if auth["impersonate_groups"]:
        # The API server splits neither; one group per request is what a header carries here.
        if len(auth["impersonate_groups"]) > 1:
            raise AuthError("impersonate_groups takes one group with this client library")
        api.set_default_header("Impersonate-Group", auth["impersonate_groups"][0])
    return api, cfg.host.rstrip("/")
