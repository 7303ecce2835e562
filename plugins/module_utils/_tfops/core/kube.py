# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Kubernetes client: discovery and the dynamic client (never a hard-coded API version beyond
the group), and API errors turned into typed exceptions that name the verb and the resource."""

from __future__ import annotations

import copy
import json
import ssl
import time

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.auth import (
    build_api_client,
    require_kubernetes,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import podtemplate, retry
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import (
    ApiError,
    Forbidden,
    InvalidInput,
)

try:
    from kubernetes.client.rest import ApiException
    from kubernetes.dynamic import DynamicClient
    from kubernetes.dynamic.exceptions import DynamicApiError, ResourceNotFoundError
    from urllib3.exceptions import HTTPError as Urllib3Error
    from urllib3.exceptions import NewConnectionError
except ImportError:  # require_kubernetes() reports it
    ApiException = DynamicApiError = ResourceNotFoundError = Urllib3Error = NewConnectionError = None


def _status_message(exc):
    body = getattr(exc, "body", None)
    if body:
        try:
            return json.loads(body).get("message") or str(body)
        except (ValueError, TypeError, AttributeError):
            return str(body)
    return getattr(exc, "reason", None) or str(exc)


def route_missing(exc):
    """A 404 from the API server's router rather than about an object: its body is not a Status.
    A kube-apiserver that has just started answers so for custom resources until it serves its
    CustomResourceDefinitions; a missing object is a Status with reason NotFound."""
    if getattr(exc, "status", None) != 404:
        return False
    if isinstance(exc, ApiError):  # already typed: api_error() has decided
        return bool(exc.details.get("route_missing"))
    try:
        return json.loads(getattr(exc, "body", None) or "").get("kind") != "Status"
    except (ValueError, TypeError, AttributeError):
        return True


def api_error(exc, verb, resource):
    """Typed error for a failed request; 403 says exactly which permission is missing."""
    status = getattr(exc, "status", None)
    message = _status_message(exc)
    if status == 403:
        return Forbidden("forbidden: %s %s (%s)" % (verb, resource, message),
                         status=status, reason="Forbidden", verb=verb, resource=resource)
    suffix = " (HTTP %s)" % status if status else ""
    extra = {"route_missing": True} if route_missing(exc) else {}
    return ApiError("%s %s failed: %s%s" % (verb, resource, message, suffix),
                    status=status, reason=getattr(exc, "reason", None), verb=verb,
                    resource=resource, **extra)


def _causes(exc):
    """``exc`` and its causes, as urllib3 and the ssl module chain them."""
    seen = set()
    while isinstance(exc, BaseException) and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        # urllib3 keeps the cause in .reason (an exception; ssl.SSLError's .reason is a string)
        reason = getattr(exc, "reason", None)
        exc = reason if isinstance(reason, BaseException) else (exc.__cause__ or exc.__context__)


def certificate_rejected(exc):
    """The server's certificate failed verification: a wrong CA or server, which no retry heals."""
    return any(isinstance(e, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY_FAILED" in str(e)
               for e in _causes(exc))


def refused(exc):
    """The request was never sent (safe to send again): the connection was refused, could not be
    opened, or its TLS handshake broke off (a restarting API server), but not a certificate that
    failed verification."""
    if certificate_rejected(exc):
        return False
    return any(isinstance(e, (ConnectionRefusedError, ssl.SSLError)) or "Connection refused" in str(e)
               or (NewConnectionError is not None and isinstance(e, NewConnectionError))
               for e in _causes(exc))


def may_resend(verb, exc):
    """Whether a request that got no answer (``exc``: a connection error) may be sent again, by
    core/retry.py's rule; a certificate that failed verification never heals."""
    return not certificate_rejected(exc) and retry.retriable(verb, unreachable=True, refused=refused(exc))


def unreachable(server, verb, resource_desc, exc):
    return ApiError("cannot reach the API server %s to %s %s: %s" % (server, verb, resource_desc, exc),
                    verb=verb, resource=resource_desc, api_server=server, unreachable=True,
                    refused=refused(exc))


class Kube:
    """One cluster connection for the length of a module run."""

    def __init__(self, auth):
        require_kubernetes()
        self.api_client, self.server = build_api_client(auth)
        self._dynamic = None
        self.requests = 0  # raw list pages fetched (the benchmarks report it)
        # Set by a task: until then a failed request fails at once; after, it is retried
        # (core/retry.py) until this deadline. ``written``: a write went through (honest ``changed``
        # also when the task then fails); ``writes`` counts them (whether one step of a task wrote).
        self.retry_deadline = None
        self.outages = retry.Outages()
        self.written = False
        self.writes = 0
        # Set by a task run under a runbook's lock (maintenance/fence.py): every write first checks that the
        # lock is still the run's.
        self.fence = None
        self._pod_fields = None

    @property
    def dynamic(self):
        if self._dynamic is None:
            self._dynamic = self.call("discover", "APIs", DynamicClient, self.api_client)
        return self._dynamic

    def resource(self, kind, api_version=None, group=None):
        """The served resource for a kind, found by discovery (any version of ``group``)."""
        try:
            if api_version:
                return self.dynamic.resources.get(kind=kind, api_version=api_version)
            found = self.dynamic.resources.search(kind=kind, group=group) if group is not None \
                else self.dynamic.resources.search(kind=kind)
            found = [r for r in found if not r.name.count("/")]  # not subresources
            if not found:
                raise ResourceNotFoundError("no served resource of kind %s" % kind)
            preferred = [r for r in found if getattr(r, "preferred", False)]
            return (preferred or found)[0]
        except ResourceNotFoundError:
            raise ApiError("the API server serves no %s%s" % (
                kind, " in %s" % (api_version or group) if (api_version or group) else ""),
                status=404, verb="discover", resource=kind)
        except (ApiException, DynamicApiError) as exc:
            raise api_error(exc, "discover", kind)

    def call(self, verb, resource_desc, fn, *args, **kwargs):
        """Run one API call, translating its failure (connection failures included); with a
        ``retry_deadline``, a failure that can heal is retried until then (core/retry.py). Under a
        ``fence``, a write is sent only while the run still holds its lock."""
        if self.fence is not None and not retry.is_read(verb):
            self.fence.check()
        backoff = retry.Backoff()
        while True:
            sent = time.monotonic()
            try:
                result = fn(*args, **kwargs)
            except (ApiException, DynamicApiError) as exc:
                error = api_error(exc, verb, resource_desc)
                again = self.heals(verb, error)
            except (Urllib3Error, OSError) as exc:
                error = unreachable(self.server, verb, resource_desc, exc)
                again = may_resend(verb, exc)
            else:
                self.outages.recovered()
                if verb in ("get", "list"):  # a watch is long by design
                    self.outages.answered(time.monotonic() - sent, "%s %s" % (verb, resource_desc))
                if not retry.is_read(verb) and not kwargs.get("dry_run"):
                    self.written = True  # a server-side dry run (check mode) writes nothing
                    self.writes += 1
                return result
            if not again or self.retry_deadline is None:
                raise error
            self.outages.failed(error)
            if not retry.pause(self.retry_deadline, backoff):
                raise error

    def for_thread(self):
        """This connection for a helper thread of the task (a watch that runs beside the task's own
        wait): the same client and discovery, but its own outage record and request count, no
        retries (the thread's own loop tries again) and no fence (it only reads)."""
        other = copy.copy(self)
        other.retry_deadline, other.fence = None, None
        other.outages, other.requests = retry.Outages(), 0
        return other

    def heals(self, verb, error):
        """Whether a request that failed with ``error`` (typed, or the client's own exception)
        may be sent again, by core/retry.py's rule and the outages seen so far."""
        details = error.details if isinstance(error, ApiError) else {}
        return retry.retriable(verb, status=getattr(error, "status", None),
                               unreachable=bool(details.get("unreachable")),
                               refused=bool(details.get("refused")),
                               just_back=self.outages.just_back(), route_missing=route_missing(error))

    def pod_field_names(self):
        """The field names of object metadata, a Pod spec and a container that this API server
        knows (core/podtemplate.py ``field_names``), read once from its OpenAPI v3 document of the
        core group - so a pod_template is checked against the Kubernetes it will run on. When it
        publishes none, or these credentials may not read it, Kubernetes 1.35's."""
        if self._pod_fields is None:
            try:
                response = self.call("get", "openapi/v3/api/v1", self.dynamic.request, "GET",
                                     "/openapi/v3/api/v1", serialize=False)
                self._pod_fields = podtemplate.field_names(json.loads(response.data))
            except ApiError as exc:
                if exc.status not in (403, 404):
                    raise
            self._pod_fields = self._pod_fields or podtemplate.BUILTIN_FIELDS
        return self._pod_fields

    def namespace_exists(self, name):
        """True or False; None when these credentials may not read it (a runbook's RBAC reads
        only the namespaces it names): then the RBAC preflight or the first request says so."""
        api = self.resource("Namespace", api_version="v1")
        try:
            self.call("get", "namespaces/%s" % name, api.get, name=name)
        except Forbidden:
            return None
        except ApiError as exc:
            if exc.status == 404 and not exc.details.get("route_missing"):
                return False
            raise
        return True

    def require_namespace(self, name, option="namespace"):
        """Refuse, before anything is written, a namespace that does not exist (the API server's
        own answer would name whatever object was asked for first, not the namespace)."""
        if self.namespace_exists(name) is False:
            raise InvalidInput("%s: namespace %s does not exist; nothing was written" % (option, name))

    def close(self):
        self.api_client.close()


PAGE_SIZE = 500
TABLE_PAGE_SIZE = 5000  # Table rows hold a few short cells, not whole objects
_METADATA_ONLY = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
_TABLE = "application/json;as=Table;g=meta.k8s.io;v=v1,application/json"


def _pages(kube, resource, accept, namespace=None, label_selector=None, field_selector=None,
           limit=PAGE_SIZE, extra=(), cached=False, at=None):
    """Each page of a list (limit/continue) as a decoded dict. ``cached``: one response from the
    API server's watch cache (resourceVersion=0: no etcd read, as fresh as the cache - normally
    milliseconds behind - and never paginated by the server). ``at``: the list as it was at that
    resourceVersion exactly (410 Gone once etcd has compacted it; later pages follow the first)."""
    path = resource.path(namespace=namespace)
    token = None
    while True:
        query = ([("resourceVersion", "0")] if cached else [("limit", limit)]) + list(extra)
        if at and not token:
            query += [("resourceVersion", str(at)), ("resourceVersionMatch", "Exact")]
        if label_selector:
            query.append(("labelSelector", label_selector))
        if field_selector:
            query.append(("fieldSelector", field_selector))
        if token:
            query.append(("continue", token))
        response = kube.call("list", resource.name, kube.dynamic.request, "GET", path,
                             query_params=query, header_params={"Accept": accept}, serialize=False)
        kube.requests += 1
        page = json.loads(response.data)
        yield page
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return


def list_pages(kube, resource, namespace=None, label_selector=None, field_selector=None,
               limit=PAGE_SIZE, metadata_only=False, project=None, cached=False):
    """Every object of a list, a page at a time (limit/continue), as plain dicts.

    Raw JSON keeps big lists cheap (no model objects); ``project`` slims each item as it
    arrives so memory holds only what the caller needs; ``metadata_only`` asks the server for
    metadata alone (for Secrets: their data never reaches this process); ``cached`` reads the
    API server's watch cache instead of etcd (see _pages)."""
    for page in _pages(kube, resource, _METADATA_ONLY if metadata_only else "application/json",
                       namespace, label_selector, field_selector, limit, cached=cached):
        items = page.get("items") or []
        if cached:  # the watch cache answers in no particular order; etcd in key order
            items.sort(key=_key_order)
        for item in items:
            yield project(item) if project else item


def list_versioned(kube, resource, namespace=None, label_selector=None, field_selector=None, cached=False,
                   at=None):
    """(every object as a dict, the list's resourceVersion): what a watch starts from.
    Raw JSON pages, not the dynamic client's objects, which cost more to build than the request.
    ``cached``: from the watch cache, as client-go's reflectors list - a list a little behind is
    made good by the watch that follows it from the list's resourceVersion. ``at``: as it was at
    that resourceVersion (see _pages)."""
    items, version = [], None
    for page in _pages(kube, resource, "application/json", namespace, label_selector, field_selector,
                       cached=cached and not at, at=at):
        if version is None:  # later pages are served from the first page's snapshot
            version = (page.get("metadata") or {}).get("resourceVersion")
        items.extend(page.get("items") or [])
    return items, version


def _key_order(obj):
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or "")


def list_column(kube, resource, column, namespace=None, label_selector=None, limit=TABLE_PAGE_SIZE,
                cached=False):
    """One printer column (additionalPrinterColumns) of every object, from the server's Table
    view without the objects: a small fraction of the bytes and of the decoding of full objects.
    None when the server does not serve that column (the caller lists the objects instead)."""
    values, index = [], None
    for page in _pages(kube, resource, _TABLE, namespace, label_selector, limit=limit,
                       extra=[("includeObject", "None")], cached=cached):
        if page.get("kind") != "Table":
            return None
        if index is None:
            names = [c.get("name") for c in page.get("columnDefinitions") or []]
            if column not in names:
                return None
            index = names.index(column)
        values.extend((row.get("cells") or [None] * (index + 1))[index] for row in page.get("rows") or [])
    return values
