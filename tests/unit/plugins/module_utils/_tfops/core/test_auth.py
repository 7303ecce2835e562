"""The auth layer's pure parts: option/env resolution and kubeconfig redaction."""
import pytest

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import auth
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import AuthError

EMPTY = {k: None for k in auth.AUTH_ARG_SPEC}


def test_option_wins_over_environment():
    params = dict(EMPTY, host="https://from-task:6443")
    resolved = auth.resolve_auth(params, {"K8S_AUTH_HOST": "https://from-env:6443"})
    assert resolved["host"] == "https://from-task:6443"


@pytest.mark.parametrize("option,env,raw,expected", [
    ("host", "K8S_AUTH_HOST", "https://h:6443", "https://h:6443"),
    ("api_key", "K8S_AUTH_API_KEY", "tok", "tok"),
    ("kubeconfig", "K8S_AUTH_KUBECONFIG", "/k", "/k"),
    ("context", "K8S_AUTH_CONTEXT", "ctx", "ctx"),
    ("ca_cert", "K8S_AUTH_SSL_CA_CERT", "/ca", "/ca"),
    ("proxy", "K8S_AUTH_PROXY", "http://p:3128", "http://p:3128"),
    ("impersonate_user", "K8S_AUTH_IMPERSONATE_USER", "alice", "alice"),
    ("impersonate_groups", "K8S_AUTH_IMPERSONATE_GROUPS", "a, b", ["a", "b"]),
    ("validate_certs", "K8S_AUTH_VERIFY_SSL", "no", False),
    ("validate_certs", "K8S_AUTH_VERIFY_SSL", "True", True),
])
def test_environment_fallback_uses_kubernetes_core_names(option, env, raw, expected):
    assert auth.resolve_auth(dict(EMPTY), {env: raw})[option] == expected


@pytest.mark.parametrize("option,first,second", [
    ("ca_cert", "K8S_AUTH_CA_CERT", "K8S_AUTH_SSL_CA_CERT"),
    ("client_cert", "K8S_AUTH_CLIENT_CERT", "K8S_AUTH_CERT_FILE"),
    ("client_key", "K8S_AUTH_CLIENT_KEY", "K8S_AUTH_KEY_FILE"),
    ("validate_certs", "K8S_AUTH_VALIDATE_CERTS", "K8S_AUTH_VERIFY_SSL"),
])
def test_both_kubernetes_core_names_are_read_the_option_name_first(option, first, second):
    """kubernetes.core reads K8S_AUTH_<option>, then K8S_AUTH_<client name>; a blank one is unset."""
    one, other = ("false", "true") if option == "validate_certs" else ("/one", "/other")
    expected = (one == "true") if option == "validate_certs" else one
    env = {"K8S_AUTH_CERT_FILE": "/c", "K8S_AUTH_KEY_FILE": "/k"}  # client cert and key go together
    assert auth.resolve_auth(dict(EMPTY), dict(env, **{first: one}))[option] == expected
    assert auth.resolve_auth(dict(EMPTY), dict(env, **{first: one, second: other}))[option] == expected
    assert auth.resolve_auth(dict(EMPTY), dict(env, **{first: "", second: one}))[option] == expected


def test_what_awx_kubernetes_credential_injects_is_enough():
    """AWX's "OpenShift or Kubernetes API Bearer Token" credential: host, token, verify, CA file."""
    resolved = auth.resolve_auth(dict(EMPTY), {"K8S_AUTH_HOST": "https://h:6443", "K8S_AUTH_API_KEY": "tok",
                                               "K8S_AUTH_VERIFY_SSL": "True", "K8S_AUTH_SSL_CA_CERT": "/runner/env/tmpca"})
    cfg = auth.build_configuration(resolved)
    assert (cfg.host, cfg.api_key, cfg.ssl_ca_cert, cfg.verify_ssl) == (
        "https://h:6443", {"authorization": "Bearer tok"}, "/runner/env/tmpca", True)


def test_client_cert_env_pair():
    resolved = auth.resolve_auth(dict(EMPTY), {"K8S_AUTH_CERT_FILE": "/c", "K8S_AUTH_KEY_FILE": "/k"})
    assert (resolved["client_cert"], resolved["client_key"]) == ("/c", "/k")


def test_client_cert_without_key_is_refused():
    with pytest.raises(AuthError, match="client_cert and client_key go together"):
        auth.resolve_auth(dict(EMPTY, client_cert="/c"), {})


@pytest.mark.parametrize("name", ["K8S_AUTH_VERIFY_SSL", "K8S_AUTH_VALIDATE_CERTS"])
def test_bad_boolean_in_environment_is_refused(name):
    with pytest.raises(AuthError, match=name):
        auth.resolve_auth(dict(EMPTY), {name: "maybe"})


def test_kubeconfig_secrets_are_found_at_any_depth():
    kubeconfig = {
        "users": [{"name": "u", "user": {"token": "T0K", "client-key-data": "S0M3KEY",
                                         "client-certificate-data": "CERT",
                                         "auth-provider": {"config": {"refresh-token": "R3F",
                                                                      "id-token": "ID"}}}}],
        "clusters": [{"name": "c", "cluster": {"server": "https://s"}}],
    }
    found = set(auth.kubeconfig_secrets(kubeconfig))
    assert found == {"T0K", "S0M3KEY", "CERT", "R3F", "ID"}
    assert "https://s" not in found


def test_kubeconfig_path_has_no_secrets():
    assert auth.kubeconfig_secrets("/home/me/.kube/config") == []


def test_nothing_given_and_nothing_found_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    with pytest.raises(AuthError, match="no Kubernetes credentials"):
        auth.build_configuration(dict(EMPTY))


def test_missing_kubeconfig_file_is_named(tmp_path):
    with pytest.raises(AuthError, match="does not exist"):
        auth.build_configuration(dict(EMPTY, kubeconfig=str(tmp_path / "nope")))


def test_a_kubeconfig_given_as_data_runs_no_command_unless_allowed():
    """#46: every module refuses an inline kubeconfig whose user runs a command (exec,
    auth-provider) before anything runs, unless kubeconfig_allow_exec."""
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.auth import AuthError, resolve_auth
    inline = {"clusters": [{"name": "c", "cluster": {"server": "https://k"}}],
              "users": [{"name": "ci", "user": {"exec": {"command": "/bin/sh"}}},
                        {"name": "gcp", "user": {"auth-provider": {"name": "gcp"}}}]}
    with pytest.raises(AuthError, match="user ci, gcp would run a command on the controller"):
        resolve_auth({"kubeconfig": inline}, environ={})
    assert resolve_auth({"kubeconfig": inline, "kubeconfig_allow_exec": True}, environ={})["kubeconfig_allow_exec"]
    with pytest.raises(AuthError, match="no clusters: not a kubeconfig"):
        resolve_auth({"kubeconfig": {"users": []}}, environ={})
    assert resolve_auth({"kubeconfig": "/some/file"}, environ={})["kubeconfig"] == "/some/file"
