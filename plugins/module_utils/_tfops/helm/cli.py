# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Helm CLI: finding the binary, telling helm 3 from helm 4 and mapping the flags that differ,
running it against a temporary 0600 kubeconfig made from the resolved auth options (removed in
every case), reading a release (history, values, manifest), and the command shown with its
secrets masked."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import tempfile

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.auth import (
    build_configuration,
    resolve_auth,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import (
    HelmError,
    InvalidInput,
    ReleaseNotFound,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.redact import (
    MASK,
    mask_set_expression,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm.storage import stored_release

PENDING = ("pending-install", "pending-upgrade", "pending-rollback")
# Environment that would make helm talk to another cluster than the resolved one.
_HELM_KUBE_ENV = ("KUBECONFIG", "HELM_KUBECONTEXT", "HELM_KUBETOKEN", "HELM_KUBEAPISERVER",
                  "HELM_KUBECAFILE", "HELM_KUBEASUSER", "HELM_KUBEASGROUPS",
                  "HELM_KUBEINSECURE_SKIP_TLS_VERIFY", "HELM_KUBETLS_SERVER_NAME")
_VERSION_RE = re.compile(r"v?(\d+)\.(\d+)\.(\d+)")
SET_FLAGS = {"raw": "--set", "string": "--set-string", "json": "--set-json", "file": "--set-file",
             "literal": "--set-literal"}


# ---- the helm flags a task may add (extra_args): an explicit allow-list -------------------------
UPGRADE, ROLLBACK, SHOW = "upgrade", "rollback", "show"
_UR, _URS, _US = (UPGRADE, ROLLBACK), (UPGRADE, ROLLBACK, SHOW), (UPGRADE, SHOW)
# flag -> (takes a value, the helm commands it belongs to, helm majors that have it)
EXTRA_FLAGS = {
    "--cleanup-on-fail": (False, _UR, (3, 4)),
    "--history-max": (True, _UR, (3, 4)),
    "--wait-for-jobs": (False, _UR, (3, 4)),
    "--force": (False, _UR, (3, 4)),            # helm 4 calls it --force-replace
    "--force-replace": (False, _UR, (3, 4)),    # helm 3 calls it --force
    "--server-side": (True, _UR, (4,)),
    "--force-conflicts": (False, _UR, (4,)),
    "--recreate-pods": (False, (ROLLBACK,), (3,)),
    "--take-ownership": (False, (UPGRADE,), (3, 4)),
    "--skip-schema-validation": (False, (UPGRADE,), (3, 4)),
    "--enable-dns": (False, (UPGRADE,), (3, 4)),
    "--dependency-update": (False, (UPGRADE,), (3, 4)),
    "--labels": (True, (UPGRADE,), (3, 4)),
    "--hide-notes": (False, (UPGRADE,), (3, 4)),
    "--render-subchart-notes": (False, (UPGRADE,), (3, 4)),
    "--devel": (False, _US, (3, 4)),
    "--ca-file": (True, _US, (3, 4)),
    "--cert-file": (True, _US, (3, 4)),
    "--key-file": (True, _US, (3, 4)),
    "--keyring": (True, _US, (3, 4)),
    "--insecure-skip-tls-verify": (False, _US, (3, 4)),
    "--plain-http": (False, _US, (3, 4)),
    "--pass-credentials": (False, _US, (3, 4)),
    "--verify": (False, _US, (3, 4)),
    "--qps": (True, _URS, (3, 4)),
    "--burst-limit": (True, _URS, (3, 4)),
}
_SHORT_FLAGS = {"-l": "--labels", "-i": "--install", "-n": "--namespace", "-o": "--output",
                "-f": "--values", "-h": "--help"}
# Same meaning, another name in the other major.
_RENAMED = {3: {"--force-replace": "--force"}, 4: {"--force": "--force-replace"}}
_NUMERIC = ("--history-max", "--qps", "--burst-limit")
_SERVER_SIDE = ("true", "false", "auto")
_AUTH = "the authentication options (kubeconfig, context, host, api_key, ...)"
# Flags helm_release sets itself, with what sets them instead.
CONTROLLED_FLAGS = {
    "--install": "state", "--namespace": "namespace", "--kubeconfig": _AUTH,
    "--kube-context": _AUTH, "--kube-token": _AUTH, "--kube-apiserver": _AUTH,
    "--kube-ca-file": _AUTH, "--kube-as-user": _AUTH, "--kube-as-group": _AUTH,
    "--kube-insecure-skip-tls-verify": _AUTH, "--kube-tls-server-name": _AUTH,
    "--dry-run": "check mode", "--wait": "wait", "--timeout": "wait_timeout and deadline",
    "--atomic": "atomic", "--rollback-on-failure": "atomic", "--output": "the module (it reads helm's JSON)",
    "--repo": "chart_repo_url", "--version": "chart_version", "--values": "values_files",
    "--set": "set_values", "--set-string": "set_values", "--set-json": "set_values",
    "--set-file": "set_values", "--set-literal": "set_values", "--reset-values": "reset_values",
    "--reuse-values": "reuse_values", "--reset-then-reuse-values": "reset_then_reuse_values",
    "--create-namespace": "create_namespace", "--skip-crds": "skip_crds", "--no-hooks": "no_hooks",
    "--disable-openapi-validation": "disable_openapi_validation",
    "--description": "the module (it writes its own)", "--help": "the module",
}
REFUSED_FLAGS = {
    "--debug": "helm's debug output prints the rendered manifest, Secrets included",
    "--username": "a chart repository credential on the command line; use helm's repository configuration",
    "--password": "a chart repository credential on the command line; use helm's repository configuration",
    "--post-renderer": "it rewrites the manifest outside the module's comparison, and helm 3 and helm 4 "
                       "read it differently (an executable / a plugin)",
    "--post-renderer-args": "see --post-renderer",
}
FLAG_OPTIONS = ("disable_openapi_validation", "skip_crds", "no_hooks", "extra_args")


def parse_extra_args(args, option="extra_args"):
    """Normalised ``--flag`` / ``--flag=value`` strings of a task's extra helm flags, each checked
    against the allow-list (a flag that takes a value may also be given as two items). Raises
    InvalidInput naming the option and the value."""
    out = []
    items = list(args or [])
    index = 0
    while index < len(items):
        raw = items[index]
        index += 1
        if not isinstance(raw, str) or not raw.startswith("-"):
            raise InvalidInput("%s: %r is not a helm flag (write --flag or --flag=value)" % (option, raw))
        name, sep, value = raw.partition("=")
        name = _SHORT_FLAGS.get(name, name)
        if name in CONTROLLED_FLAGS:
            raise InvalidInput("%s: %r is a flag helm_release sets itself (from %s)" % (
                option, raw, CONTROLLED_FLAGS[name]))
        if name in REFUSED_FLAGS:
            raise InvalidInput("%s: %r is not accepted: %s" % (option, raw, REFUSED_FLAGS[name]))
        if name not in EXTRA_FLAGS:
            raise InvalidInput("%s: %r is not a helm upgrade or rollback flag that helm_release "
                               "accepts; accepted: %s" % (option, raw, ", ".join(sorted(EXTRA_FLAGS))))
        takes_value = EXTRA_FLAGS[name][0]
        if takes_value and not sep:
            if index >= len(items) or not isinstance(items[index], str) or items[index].startswith("--"):
                raise InvalidInput("%s: %r needs a value (--flag=value)" % (option, raw))
            value, sep = items[index], "="
            index += 1
        if takes_value:
            if name in _NUMERIC and not re.match(r"^\d+(\.\d+)?$", value):
                raise InvalidInput("%s: %r needs a number" % (option, raw))
            if name == "--server-side" and value not in _SERVER_SIDE:
                raise InvalidInput("%s: %r must be one of %s" % (option, raw, ", ".join(_SERVER_SIDE)))
            out.append("%s=%s" % (name, value))
        elif sep:
            if value not in ("true", "false"):
                raise InvalidInput("%s: %r takes no value (true or false at most)" % (option, raw))
            if value == "true":
                out.append(name)
        else:
            out.append(name)
    return out


def _flag_name(arg):
    return arg.partition("=")[0]


def help_flags(text):
    """The long flags a ``helm <command> --help`` text lists (its own and the global ones)."""
    return set(re.findall(r"(?m)^\s+(?:-\w, )?(--[a-z][a-z0-9-]*)", text or ""))


def extra_for(extra_args, command, version, known=None, option="extra_args"):
    """The extra flags one helm command takes, mapped to this helm major. ``known`` is the set of
    flags this helm binary lists for the command (``--help``), None when unknown. A flag this helm
    major does not have is refused (InvalidInput), never dropped silently, unless it only
    repeats what this major does anyway (--server-side=false or auto on helm 3)."""
    major = version[0]
    out = []
    for arg in extra_args or []:
        name = _flag_name(arg)
        spec = EXTRA_FLAGS.get(name)
        if spec is None:
            raise InvalidInput("%s: %r is not a flag helm_release accepts" % (option, arg))
        if command not in spec[1]:
            continue
        name = _RENAMED.get(major, {}).get(name, name)
        if major not in EXTRA_FLAGS[name][2]:
            if name == "--server-side" and arg.partition("=")[2] in ("false", "auto"):
                continue  # helm 3 always applies client-side
            raise InvalidInput("%s: %r exists only in helm %s; this helm is %s" % (
                option, arg, " and ".join(str(m) for m in EXTRA_FLAGS[name][2]), version_text(version)))
        if known is not None and name not in known:
            raise InvalidInput("%s: %r is not a flag of this helm's %s (helm %s)" % (
                option, arg, command, version_text(version)))
        out.append(name + arg[len(_flag_name(arg)):])
    return out


def flag_args(flags, command, version, known=None):
    """The helm arguments of the task's flags for one command (``upgrade``, ``rollback``,
    ``show``): disable_openapi_validation and skip_crds for upgrades, no_hooks for upgrades and
    rollbacks, then the extra flags that command takes.

    helm 4 applies server-side by default for a new release (and keeps a release's method
    afterwards). Server-side apply refuses any field the API server's schema does not know
    (``field not declared in schema``), whatever --disable-openapi-validation says, and helm's
    server dry run does not show it: a chart that needs that flag needs client-side apply too, so
    with helm 4 the flag comes with --server-side=false unless extra_args chooses --server-side."""
    flags = flags or {}
    out = []
    if command == UPGRADE and flags.get("disable_openapi_validation"):
        out.append("--disable-openapi-validation")
    if command == UPGRADE and flags.get("skip_crds"):
        out.append("--skip-crds")
    if command in (UPGRADE, ROLLBACK) and flags.get("no_hooks"):
        out.append("--no-hooks")
    extra = extra_for(flags.get("extra_args"), command, version, known)
    if version[0] >= 4 and command in (UPGRADE, ROLLBACK) and flags.get("disable_openapi_validation") \
            and not any(_flag_name(a) == "--server-side" for a in extra):
        out.append("--server-side=false")
    return out + extra


def check_flags(flags, version, known_by_command=None, commands=(UPGRADE, ROLLBACK)):
    """Refuse (InvalidInput) extra flags that this helm cannot take for any of ``commands``;
    returns nothing. Run before any write."""
    known_by_command = known_by_command or {}
    for command in commands:
        flag_args(flags, command, version, known_by_command.get(command))
    for arg in (flags or {}).get("extra_args") or []:
        name = _flag_name(arg)
        if not set(EXTRA_FLAGS[name][1]) & set(commands):
            raise InvalidInput("extra_args: %r is a flag of helm %s only, which this task does not run"
                               % (arg, " and ".join(EXTRA_FLAGS[name][1])))


# ---- pure helpers -------------------------------------------------------------------------------
def parse_version(text):
    """(major, minor, patch) from ``helm version`` output such as v3.17.2+gcc0bbbd or v4.1.4."""
    match = _VERSION_RE.search(text or "")
    if not match:
        raise HelmError("cannot read the helm version from %r" % (text or "")[:200])
    return tuple(int(g) for g in match.groups())


def version_text(version):
    return "%d.%d.%d" % version


def atomic_flag(version):
    """helm 3 --atomic became --rollback-on-failure in helm 4 (kubernetes.core#1143)."""
    return "--atomic" if version[0] < 4 else "--rollback-on-failure"


def require_server_dry_run(version):
    if version[0] == 3 and version[1] < 13:
        raise InvalidInput("check mode and the idempotence check need helm >= 3.13 "
                           "(--dry-run=server); this helm is %s" % version_text(version))


def seconds_flag(seconds):
    return "%ds" % max(1, int(seconds))


def chart_version_of(chart_field):
    """'tensor-fusion-1.8.7' (helm history's chart column) -> ('tensor-fusion', '1.8.7')."""
    match = re.match(r"^(.*)-(v?\d+\.\d+\.\d+.*)$", chart_field or "")
    if not match:
        return chart_field, None
    return match.group(1), match.group(2)


def last_deployed_revision(history):
    """The newest revision whose status is deployed or superseded, below the newest one."""
    ordered = sorted(history, key=lambda r: r["revision"])
    for entry in reversed(ordered[:-1]):
        if entry.get("status") in ("deployed", "superseded"):
            return entry["revision"]
    return None


def pending_state(history):
    """(status, revision) of the newest revision when it is pending-*, else None."""
    if not history:
        return None
    last = max(history, key=lambda r: r["revision"])
    if last.get("status") in PENDING:
        return last["status"], last["revision"]
    return None


def masked_command(argv, temp_dir=None):
    """The command as a string for results: --set values with secret-looking keys masked, the
    temporary kubeconfig and values files named, never their content."""
    shown = []
    previous = None
    for arg in argv:
        text = arg
        if previous in SET_FLAGS.values():
            text = mask_set_expression(arg)
        elif previous in ("--kube-token", "--password", "--username"):
            text = MASK
        if temp_dir and temp_dir in text:
            text = text.replace(temp_dir, "<tmp>")
        shown.append(text)
        previous = arg
    return " ".join(_quote(a) for a in shown)


def _quote(arg):
    if arg == "" or re.search(r"[^\w@%+=:,./<>*-]", arg):
        return "'" + arg.replace("'", "'\"'\"'") + "'"
    return arg


def kubeconfig_from_configuration(cfg, impersonate_user=None, impersonate_groups=None):
    """A self-contained kubeconfig dict equivalent to a kubernetes.client Configuration."""
    cluster = {"server": cfg.host}
    if getattr(cfg, "ssl_ca_cert", None):
        cluster["certificate-authority-data"] = _b64_file(cfg.ssl_ca_cert)
    if getattr(cfg, "verify_ssl", True) is False:
        cluster["insecure-skip-tls-verify"] = True
    if getattr(cfg, "proxy", None):
        cluster["proxy-url"] = cfg.proxy
    if getattr(cfg, "tls_server_name", None):
        cluster["tls-server-name"] = cfg.tls_server_name
    user = {}
    hook = getattr(cfg, "refresh_api_key_hook", None)
    if hook is not None:
        hook(cfg)
    token = (cfg.api_key or {}).get("authorization") or (cfg.api_key or {}).get("BearerToken")
    if token:
        user["token"] = token.split(" ", 1)[1] if token.lower().startswith("bearer ") else token
    if getattr(cfg, "cert_file", None):
        user["client-certificate-data"] = _b64_file(cfg.cert_file)
    if getattr(cfg, "key_file", None):
        user["client-key-data"] = _b64_file(cfg.key_file)
    if getattr(cfg, "username", None) and getattr(cfg, "password", None):
        user["username"], user["password"] = cfg.username, cfg.password
    if impersonate_user:
        user["as"] = impersonate_user
    if impersonate_groups:
        user["as-groups"] = list(impersonate_groups)
    return {"apiVersion": "v1", "kind": "Config", "current-context": "tfops",
            "clusters": [{"name": "tfops", "cluster": cluster}],
            "users": [{"name": "tfops", "user": user}],
            "contexts": [{"name": "tfops", "context": {"cluster": "tfops", "user": "tfops"}}]}


def _b64_file(path):
    with open(path, "rb") as handle:
        return base64.b64encode(handle.read()).decode("ascii")


def find_binary(binary_path=None):
    if binary_path:
        path = os.path.expanduser(binary_path)
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise InvalidInput("binary_path %s is not an executable file" % binary_path)
        return path
    found = shutil.which("helm")
    if not found:
        raise InvalidInput("no helm binary: install helm 3 or 4 on the host that runs the module "
                           "or set binary_path")
    return found


# ---- the CLI ------------------------------------------------------------------------------------
class Helm:
    """One helm binary against one cluster, for the length of a module run (use with ``with``)."""

    def __init__(self, binary, auth=None, kubeconfig=None):
        self.binary = binary
        self.temp_dir = tempfile.mkdtemp(prefix="tfops-helm-")
        os.chmod(self.temp_dir, 0o700)
        self.kubeconfig = None
        self.commands = []
        self._known = {}
        # Set by a caller for every later run (the post-renderer plugin folder of helm 4).
        self.extra_env = {}
        try:
            if kubeconfig is None and auth is not None:
                from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.auth import (
                    build_configuration,
                )
                kubeconfig = kubeconfig_from_configuration(
                    build_configuration(auth), auth.get("impersonate_user"),
                    auth.get("impersonate_groups"))
            if kubeconfig is not None:
                self.kubeconfig = self.write_file("kubeconfig", json.dumps(kubeconfig))
            self.version = parse_version(self.run(["version", "--template", "{{.Version}}"],
                                                  timeout=60, kube=False, record=False))
        except Exception:
            self.close()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def close(self):
        shutil.rmtree(self.temp_dir, ignore_errors=True)

    @property
    def major(self):
        return self.version[0]

    def write_file(self, name, content):
        """A 0600 file in the private temporary folder (values, kubeconfig)."""
        path = os.path.join(self.temp_dir, name)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(content)
        return path

    def env(self):
        env = dict((k, v) for k, v in os.environ.items() if k not in _HELM_KUBE_ENV)
        if self.kubeconfig:
            env["KUBECONFIG"] = self.kubeconfig
        env.update(self.extra_env)
        return env

    def argv(self, args, kube=True):
        argv = [self.binary] + list(args)
        if kube and self.kubeconfig:
            argv += ["--kubeconfig", self.kubeconfig]
        return argv

    def shown(self, args, kube=True):
        return masked_command(self.argv(args, kube), self.temp_dir)

    def run(self, args, timeout=300, kube=True, record=True, check=True, started=None):
        """helm's stdout; HelmError with the masked command and stderr on failure. ``started(pid)``
        is called once helm runs (a write marks it in the lock, maintenance/fence.py).

        helm runs in a session of its own, and a module that ends meanwhile (Ctrl-C reaches a
        terminal's whole process group, a cancelled AWX job's pseudo-terminal hangs up) leaves it
        running: a release write cut off halfway stays pending-upgrade, one left alone finishes
        within its --timeout (and the run's lock warden waits for it). Only the timeout here ends it."""
        argv = self.argv(args, kube)
        if record:
            self.commands.append(masked_command(argv, self.temp_dir))
        try:
            # Not AnsibleModule.run_command: it has no timeout, and every helm call here is bounded.
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,  # pylint: disable=ansible-bad-function
                                    text=True, env=self.env(), start_new_session=True)
        except OSError as exc:
            raise HelmError("cannot run %s: %s" % (self.binary, exc))
        with proc:
            if started is not None:
                started(proc.pid)
            try:
                out, err = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                raise HelmError("helm did not finish within %ds: %s" % (
                    timeout, masked_command(argv, self.temp_dir)))
        if proc.returncode and check:
            err = (err or out or "").strip().replace(self.temp_dir, "<tmp>")
            raise HelmError("helm failed (exit %d): %s" % (proc.returncode, err[-4000:]),
                            command=masked_command(argv, self.temp_dir), rc=proc.returncode)
        return out

    def known_flags(self, command):
        """The flags this binary lists in ``helm <command> --help`` (None when it cannot tell)."""
        if command not in self._known:
            args = {UPGRADE: ["upgrade"], ROLLBACK: ["rollback"], SHOW: ["show", "crds"]}[command]
            try:
                found = help_flags(self.run(args + ["--help"], timeout=60, kube=False, record=False))
            except HelmError:
                found = set()
            self._known[command] = found or None
        return self._known[command]

    def check_flags(self, flags, commands=(UPGRADE, ROLLBACK)):
        """check_flags() against this binary's version and --help."""
        known = dict((c, self.known_flags(c)) for c in commands) \
            if (flags or {}).get("extra_args") else {}
        check_flags(flags, self.version, known, commands)

    def flag_args(self, flags, command):
        return flag_args(flags, command, self.version,
                         self.known_flags(command) if (flags or {}).get("extra_args") else None)

    # -- reading a release --
    def history(self, name, namespace):
        """[{revision, status, chart, app_version, description, updated}], [] when there is none."""
        try:
            out = self.run(["history", name, "-n", namespace, "-o", "json", "--max", "256"],
                           record=False)
        except HelmError as exc:
            if "not found" in exc.msg:
                return []
            raise
        return json.loads(out or "[]") or []

    def values(self, name, namespace, revision=None, all_values=False):
        args = ["get", "values", name, "-n", namespace, "-o", "json"]
        if revision is not None:
            args += ["--revision", str(revision)]
        if all_values:
            args.append("--all")
        return json.loads(self.run(args, record=False) or "null") or {}

    def manifest(self, name, namespace, revision=None):
        args = ["get", "manifest", name, "-n", namespace]
        if revision is not None:
            args += ["--revision", str(revision)]
        return self.run(args, record=False)

    def release(self, name, namespace, revision=None, all_values=False):
        """What one revision holds: chart, app version, status, user values, manifest."""
        history = self.history(name, namespace)
        if not history:
            raise ReleaseNotFound("release %s has no revision in namespace %s" % (name, namespace))
        if revision is None:
            entry = max(history, key=lambda r: r["revision"])
        else:
            found = [r for r in history if r["revision"] == revision]
            if not found:
                raise InvalidInput("release %s has no revision %s; its history has %s" % (
                    name, revision, ", ".join(str(r["revision"]) for r in history)))
            entry = found[0]
        chart, version = chart_version_of(entry.get("chart"))
        info = {"revision": entry["revision"], "status": entry.get("status"), "chart": chart,
                "chart_version": version, "app_version": entry.get("app_version"),
                "description": entry.get("description"), "updated": entry.get("updated"),
                "values": self.values(name, namespace, entry["revision"]),
                "manifest": self.manifest(name, namespace, entry["revision"])}
        if all_values:
            info["computed_values"] = self.values(name, namespace, entry["revision"], True)
        return info, history


def values_yaml(values):
    """Text of a values dict for a -f file (JSON is YAML, so no PyYAML is needed)."""
    return json.dumps(values or {})


# ---- a revision's stored chart (for a rollback that helm rollback cannot do) -------------------


def write_stored_chart(folder, release):
    """Write the chart a revision was made from (metadata, values, schema, templates, files)."""
    chart = release["chart"]
    os.makedirs(folder, mode=0o700)

    def put(rel_path, data):
        path = os.path.normpath(os.path.join(folder, rel_path))
        if not path.startswith(folder + os.sep):
            raise HelmError("stored chart names a file outside the chart: %s" % rel_path)
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)

    put("Chart.yaml", json.dumps(chart["metadata"]).encode("utf-8"))
    put("values.yaml", json.dumps(chart.get("values") or {}).encode("utf-8"))
    if chart.get("schema"):
        put("values.schema.json", base64.b64decode(chart["schema"]))
    for item in (chart.get("templates") or []) + (chart.get("files") or []):
        put(item["name"], base64.b64decode(item.get("data") or ""))
    if chart.get("lock"):
        put("Chart.lock", json.dumps(chart["lock"]).encode("utf-8"))
    return folder


def stored_chart_upgrade(helm, kube, name, namespace, revision, values, description):
    """``helm upgrade`` arguments that re-render revision ``revision``'s stored chart with
    ``values`` (None: the values of that revision), replacing the user values (--reset-values).
    Refused for a chart with dependencies: helm does not store them with a release.

    With --disable-openapi-validation: that chart was deployed on this cluster already, and helm
    rollback, for which this stands in, checks nothing against the OpenAPI schema either (an API
    server older than the chart may not know every field it sets); the API server still validates
    what it receives. The apply method stays
    the release's (helm 4 --server-side=auto): a release with such fields exists only if it was
    applied client-side."""
    stored = stored_release(kube, name, namespace, revision)
    if (stored.get("chart") or {}).get("metadata", {}).get("dependencies"):
        raise HelmError("the chart of revision %s has dependencies, which helm does not store with "
                        "a release" % revision)
    folder = tempfile.mkdtemp(prefix="chart-r%s-" % revision, dir=helm.temp_dir)
    os.rmdir(folder)  # write_stored_chart creates it, 0700
    chart_dir = write_stored_chart(folder, stored)
    values_file = helm.write_file(os.path.basename(folder) + "-values.json",
                                  values_yaml(stored.get("config") if values is None else values))
    return ["upgrade", name, chart_dir, "--namespace", namespace, "--reset-values", "-f", values_file,
            "--description", description, "--disable-openapi-validation"]


# ---- the CLI of a module run: its auth options, its secrets masked -----------------------------
def open_helm(ctx):
    """The helm CLI for the module's auth options and binary_path (its own kubeconfig, from the
    same options as the module's connection; the credentials in it are masked)."""
    auth = resolve_auth(ctx.params)
    cfg = build_configuration(auth)
    kubeconfig = kubeconfig_from_configuration(cfg, auth.get("impersonate_user"),
                                               auth.get("impersonate_groups"))
    on_secret(ctx)([u.get(k) for u in [kubeconfig["users"][0]["user"]]
                    for k in ("token", "client-key-data", "password")])
    return Helm(find_binary(ctx.params.get("binary_path")), kubeconfig=kubeconfig)


def on_secret(ctx):
    """How the helm tasks register secret-looking strings: masked wherever they show (three
    characters or more: shorter fragments would mask unrelated text)."""
    return lambda values: ctx.hide(values, min_length=3)
