# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The shape of a Kubernetes PodTemplate (``apiVersion``, ``kind``, ``metadata``, ``template``
with its ``metadata`` and Pod ``spec``), checked before it is written anywhere.

TensorFusion keeps a component's ``podTemplate`` as a raw object (docs/operator-behaviour.md 1.1):
the API server stores whatever it is given, so a misspelt key (``spex`` for ``spec``) or a mapping
where a list belongs would be stored, and only the operator would fail on it, later.

Two passes, both before any write. Without the cluster (``validate``): the shape - a PodTemplate's
and its template's own keys, lists where lists belong, named containers and environment
variables. With it (``validate`` given ``fields``): every key of the metadata, the Pod spec and
each container against the names the API server itself publishes (``field_names``, from its
OpenAPI v3 document), so a field a newer Kubernetes adds is taken and a misspelt one is refused
with its path. ``BUILTIN_FIELDS`` (Kubernetes 1.35) stands in for a server that publishes none."""

from __future__ import annotations

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.values import kind_of

POD_TEMPLATE = ("apiVersion", "kind", "metadata", "template")
TEMPLATE = ("metadata", "spec")
OBJECT_META = ("annotations", "creationTimestamp", "deletionGracePeriodSeconds", "deletionTimestamp",
               "finalizers", "generateName", "generation", "labels", "managedFields", "name",
               "namespace", "ownerReferences", "resourceVersion", "selfLink", "uid")
POD_SPEC = ("activeDeadlineSeconds", "affinity", "automountServiceAccountToken", "containers",
            "dnsConfig", "dnsPolicy", "enableServiceLinks", "ephemeralContainers", "hostAliases",
            "hostIPC", "hostNetwork", "hostPID", "hostUsers", "hostname", "hostnameOverride",
            "imagePullSecrets", "initContainers", "nodeName", "nodeSelector", "os", "overhead",
            "preemptionPolicy", "priority", "priorityClassName", "readinessGates", "resourceClaims",
            "resources", "restartPolicy", "runtimeClassName", "schedulerName", "schedulingGates",
            "securityContext", "serviceAccount", "serviceAccountName", "setHostnameAsFQDN",
            "shareProcessNamespace", "subdomain", "terminationGracePeriodSeconds", "tolerations",
            "topologySpreadConstraints", "volumes", "workloadRef")
CONTAINER = ("args", "command", "env", "envFrom", "image", "imagePullPolicy", "lifecycle",
             "livenessProbe", "name", "ports", "readinessProbe", "resizePolicy", "resources",
             "restartPolicy", "restartPolicyRules", "securityContext", "startupProbe", "stdin",
             "stdinOnce", "targetContainerName", "terminationMessagePath",
             "terminationMessagePolicy", "tty", "volumeDevices", "volumeMounts", "workingDir")
CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")
# Pod spec fields that are lists of named items (merged by name) or plain lists.
SPEC_LISTS = ("volumes", "tolerations", "imagePullSecrets", "hostAliases", "readinessGates",
              "resourceClaims", "schedulingGates", "topologySpreadConstraints")
CONTAINER_LIST_FIELDS = ("args", "command", "env", "envFrom", "ports", "volumeMounts", "volumeDevices",
                         "resizePolicy", "restartPolicyRules")
MAPPINGS = ("nodeSelector", "affinity", "securityContext", "dnsConfig", "os", "overhead", "resources")
# The schemas whose field names the second pass checks, by their OpenAPI names.
SCHEMAS = {"ObjectMeta": "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
           "PodSpec": "io.k8s.api.core.v1.PodSpec", "Container": "io.k8s.api.core.v1.Container"}
BUILTIN_FIELDS = {"ObjectMeta": OBJECT_META, "PodSpec": POD_SPEC, "Container": CONTAINER}


def field_names(openapi_v3_core):
    """{ObjectMeta|PodSpec|Container: sorted field names} from the API server's OpenAPI v3
    document of the core group (``/openapi/v3/api/v1``); None when it lacks one of them."""
    schemas = ((openapi_v3_core or {}).get("components") or {}).get("schemas") or {}
    found = {}
    for what, name in SCHEMAS.items():
        properties = (schemas.get(name) or {}).get("properties")
        if not properties:
            return None
        found[what] = tuple(sorted(properties))
    return found


def _mapping(value, path, what):
    if not isinstance(value, dict):
        raise InvalidInput("%s: %s, not %s" % (path, kind_of(value), what))


def _known(value, path, names, what):
    if names is None:  # the pass without the cluster: these names are the server's to say
        return
    unknown = sorted(str(k) for k in value if k not in names)
    if unknown:
        raise InvalidInput("%s: unknown key%s %s; %s has %s" % (
            path, "s" if len(unknown) > 1 else "", ", ".join(unknown), what, ", ".join(names)))


def _list(value, path, what):
    if not isinstance(value, (list, tuple)):
        hint = " (write each item as - name: ...)" if isinstance(value, dict) else ""
        raise InvalidInput("%s: %s, not a list of %s%s" % (path, kind_of(value), what, hint))


def _metadata(value, path, fields):
    _mapping(value, path, "a mapping of object metadata (labels, annotations)")
    _known(value, path, fields.get("ObjectMeta"), "object metadata")
    for field in ("labels", "annotations"):
        if value.get(field) is not None:
            _mapping(value[field], "%s.%s" % (path, field), "a mapping of names to strings")


def _container(value, path, fields):
    _mapping(value, path, "a container (a mapping with name, image, ...)")
    _known(value, path, fields.get("Container"), "a container")
    if not isinstance(value.get("name"), str) or not value.get("name"):
        raise InvalidInput("%s: a container needs a name; containers are merged into the current "
                           "template by name (for example tensor-fusion-hypervisor)" % path)
    for field in CONTAINER_LIST_FIELDS:
        if value.get(field) is not None:
            _list(value[field], "%s.%s" % (path, field), field)
    for index, env in enumerate(value.get("env") or []):
        where = "%s.env[%d]" % (path, index)
        _mapping(env, where, "an environment variable (name, value or valueFrom)")
        if not isinstance(env.get("name"), str) or not env.get("name"):
            raise InvalidInput("%s: an environment variable needs a name" % where)


def _pod_spec(value, path, fields):
    _mapping(value, path, "a Pod spec (a mapping with containers, volumes, ...)")
    _known(value, path, fields.get("PodSpec"), "a Pod spec")
    for field in CONTAINER_LISTS:
        if value.get(field) is not None:
            _list(value[field], "%s.%s" % (path, field), "containers")
            for index, container in enumerate(value[field]):
                _container(container, "%s.%s[%d]" % (path, field, index), fields)
    for field in SPEC_LISTS:
        if value.get(field) is not None:
            _list(value[field], "%s.%s" % (path, field), field)
    for field in MAPPINGS:
        if value.get(field) is not None:
            _mapping(value[field], "%s.%s" % (path, field), "a mapping")


def validate(value, path="pod_template", fields=None):
    """Refuse (InvalidInput naming ``path`` and the key) what is not a PodTemplate: an unknown key
    of the template's own levels, a mapping where a list belongs, a container without a name;
    with ``fields`` ({ObjectMeta|PodSpec|Container: names}) also a key of the metadata, the Pod
    spec or a container that is not one of those names."""
    fields = fields or {}
    _mapping(value, path, "a Pod template (a mapping with template.spec)")
    _known(value, path, POD_TEMPLATE, "a Pod template")
    if value.get("metadata") is not None:
        _metadata(value["metadata"], path + ".metadata", fields)
    template = value.get("template")
    if template is None:
        return
    _mapping(template, path + ".template", "a mapping with metadata and spec")
    _known(template, path + ".template", TEMPLATE, "a Pod template's template")
    if template.get("metadata") is not None:
        _metadata(template["metadata"], path + ".template.metadata", fields)
    if template.get("spec") is not None:
        _pod_spec(template["spec"], path + ".template.spec", fields)
