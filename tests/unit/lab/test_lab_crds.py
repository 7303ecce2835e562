"""The lab's CRDs have upstream's structure (12 kinds, scopes, subresources, required fields at
every level, CEL rules, printer columns); the --compare tool finds differences and honours its
allow-list, which is empty."""
import copy
import re

import pytest
import yaml

from lab.tensorfusion import crds

KINDS = {"GPUNodeClaim": "gpunodeclaims", "GPUNodeClass": "gpunodeclasses", "GPUNode": "gpunodes",
         "GPUPool": "gpupools", "GPUResourceQuota": "gpuresourcequotas", "GPU": "gpus",
         "ProviderConfig": "providerconfigs",
         "SchedulingConfigTemplate": "schedulingconfigtemplates",
         "TensorFusionCluster": "tensorfusionclusters",
         "TensorFusionConnection": "tensorfusionconnections",
         "TensorFusionWorkload": "tensorfusionworkloads", "WorkloadProfile": "workloadprofiles"}
NAMESPACED = {"TensorFusionWorkload", "TensorFusionConnection", "WorkloadProfile",
              "GPUResourceQuota"}
CONDITION_REQUIRED = {"type", "status", "lastTransitionTime", "reason", "message"}


def schema(plural):
    return crds.all_crds()[plural]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def at(plural, path):
    """The schema at a dotted path; ``[]`` steps into array items, ``{}`` into map values."""
    node = schema(plural)
    for part in path.split("."):
        for step in filter(None, part.replace("[]", ".[]").replace("{}", ".{}").split(".")):
            node = {"[]": lambda n: n["items"], "{}": lambda n: n["additionalProperties"]}.get(
                step, lambda n: n["properties"][step])(node)
    return node


def required(plural, path):
    return set(at(plural, path).get("required") or [])


def walk(node, path=""):
    yield path, node
    for name, sub in (node.get("properties") or {}).items():
        yield from walk(sub, f"{path}.{name}")
    for key, suffix in (("items", "[]"), ("additionalProperties", "{}")):
        if isinstance(node.get(key), dict):
            yield from walk(node[key], path + suffix)


def all_nodes():
    for plural in KINDS.values():
        for path, node in walk(schema(plural)):
            yield plural, path, node


# ---------------------------------------------------------------------------- structure
def test_twelve_kinds_with_upstream_names():
    bodies = crds.all_crds()
    assert {b["spec"]["names"]["kind"]: p for p, b in bodies.items()} == KINDS
    for plural, body in bodies.items():
        spec, kind = body["spec"], body["spec"]["names"]["kind"]
        assert body["metadata"]["name"] == f"{plural}.tensor-fusion.ai"
        assert spec["group"] == "tensor-fusion.ai"
        assert spec["names"] == {"kind": kind, "listKind": kind + "List", "plural": plural,
                                 "singular": kind.lower()}
        assert [v["name"] for v in spec["versions"]] == ["v1"]
        assert spec["versions"][0]["served"] and spec["versions"][0]["storage"]


def test_scopes():
    scopes = {b["spec"]["names"]["kind"]: b["spec"]["scope"] for b in crds.all_crds().values()}
    assert {k for k, s in scopes.items() if s == "Namespaced"} == NAMESPACED
    assert {k for k, s in scopes.items() if s == "Cluster"} == set(KINDS) - NAMESPACED


def test_subresources_provider_config_has_no_status_subresource():
    subs = {b["spec"]["names"]["kind"]: b["spec"]["versions"][0]["subresources"]
            for b in crds.all_crds().values()}
    assert subs.pop("ProviderConfig") == {}
    assert all(s == {"status": {}} for s in subs.values())


def test_printer_columns():
    def cols(plural):
        version = crds.all_crds()[plural]["spec"]["versions"][0]
        return [(c["name"], c["jsonPath"], c["type"])
                for c in version.get("additionalPrinterColumns", [])]
    assert cols("gpunodes")[-1] == ("GPU Count", ".status.totalGPUs", "integer")
    assert ("Worker Count", ".status.workerCount", "string") in cols("tensorfusionworkloads")
    # A key with a dot in it, as upstream writes it: a double-quoted JSONPath key.
    assert ("Requests TFlops Used", '.status.used["requests.tflops"]', "string") in \
        cols("gpuresourcequotas")
    assert cols("providerconfigs")[-1] == ("Age", ".metadata.creationTimestamp", "date")
    assert cols("gpunodeclasses") == []
    assert "Age" not in [c[0] for c in cols("tensorfusionclusters") + cols("gpupools")]


def test_required_status_fields():
    assert {"virtualTFlops", "virtualVRAM", "retryCount", "totalPools", "totalNodes",
            "totalGPUs", "totalTFlops", "totalVRAM", "availableTFlops", "availableVRAM"} == \
        required("tensorfusionclusters", "status")
    assert {"phase", "componentStatus", "readyNodes", "notReadyNodes", "totalTFlops",
            "totalVRAM", "virtualTFlops", "virtualVRAM", "availableTFlops",
            "availableVRAM"} == required("gpupools", "status")
    assert {"phase", "totalTFlops", "totalVRAM", "totalGPUs", "managedGPUs"} == \
        required("gpunodes", "status")
    assert {"message", "phase", "capacity", "available", "uuid", "gpuModel", "vendor",
            "nodeSelector"} == required("gpus", "status")
    assert required("gpus", "status.capacity") == {"tflops", "vram"}
    assert required("gpus", "status.runningApps[]") == {"count"}
    assert required("tensorfusionworkloads", "status") == {"workerCount"}
    assert required("tensorfusionconnections", "status") == {"phase", "connectionURL",
                                                             "workerName"}
    assert required("gpunodeclaims", "status") == {"phase"}
    # A required field with a default is filled in by the API server.
    assert at("tensorfusionclusters", "status.retryCount")["default"] == 0
    assert at("gpupools", "status.phase")["default"] == "Pending"


def test_required_spec_fields_at_every_level():
    assert required("gpupools", "spec") == {"nodeManagerConfig"}
    assert required("tensorfusionclusters", "spec.gpuPools[]") == {"specTemplate"}
    assert at("tensorfusionclusters", "spec.gpuPools[].specTemplate") == at("gpupools", "spec")
    assert required("gpupools", "spec.nodeManagerConfig.nodeSelector") == {"nodeSelectorTerms"}
    assert required("gpupools", "spec.nodeManagerConfig.nodeSelector.nodeSelectorTerms[]"
                    ".matchExpressions[]") == {"key", "operator"}
    assert required("gpupools", "spec.nodeManagerConfig.isolationModeRules[]") == \
        {"mode", "selector"}
    assert required("gpupools", "spec.nodeManagerConfig.nodeCompaction.defrag") == {"timezone"}
    assert required("providerconfigs", "spec") == {"images", "vendor"}
    assert required("providerconfigs", "spec.images") == {"middleware"}
    assert required("providerconfigs", "spec.hardwareMetadata[]") == \
        {"model", "fullModelName", "fp16TFlops"}
    assert required("schedulingconfigtemplates", "spec") == {"placement"}
    assert required("schedulingconfigtemplates", "spec.placement") == {"mode"}
    assert required("gpunodeclaims", "spec") == {"tflopsOffered", "vramOffered",
                                                 "gpuDeviceOffered"}
    assert required("tensorfusionconnections", "spec") == {"workloadName", "clientPod"}
    for plural in ("tensorfusionworkloads", "workloadprofiles"):
        assert required(plural, "spec.resources") == {"requests", "limits"}
        assert required(plural, "spec.resources.requests") == {"tflops", "vram"}
        assert at(plural, "spec.gpuCount") == {"type": "integer", "format": "int32",
                                               "minimum": 1, "maximum": 128}


def test_condition_items_are_metav1_conditions():
    seen = set()
    for plural, path, node in all_nodes():
        if not path.endswith(".conditions"):
            continue
        seen.add(plural)
        item = node["items"]
        assert set(item["required"]) == CONDITION_REQUIRED, (plural, path)
        props = item["properties"]
        assert props["status"]["enum"] == ["True", "False", "Unknown"]
        assert props["type"]["maxLength"] == 316 and props["type"]["pattern"]
        assert props["reason"]["minLength"] == 1 and props["reason"]["maxLength"] == 1024
        assert props["message"]["maxLength"] == 32768
        assert props["lastTransitionTime"]["format"] == "date-time"
        assert props["observedGeneration"]["minimum"] == 0
    assert seen == {"tensorfusionclusters", "gpupools", "gpunodes", "gpuresourcequotas",
                    "tensorfusionworkloads"}


def test_quantities_are_int_or_string_with_the_quantity_pattern():
    node = at("gpupools", "status.totalTFlops")
    assert node["x-kubernetes-int-or-string"] is True
    assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}]
    pattern = re.compile(node["pattern"])
    assert all(pattern.match(v) for v in ("312", "80Gi", "1.5", "100m", "1e3", "-2Ki"))
    assert not any(pattern.match(v) for v in ("80 Gi", "lots", "1.2.3", "Gi"))


def test_raw_extensions_stay_preserve_unknown():
    cc = "spec.componentConfig"
    for path in (f"{cc}.hypervisor.podTemplate", f"{cc}.worker.podTemplate",
                 f"{cc}.nodeDiscovery.podTemplate", f"{cc}.client.patchToPod",
                 f"{cc}.client.patchToContainer", f"{cc}.client.patchToEmbeddedWorkerContainer",
                 f"{cc}.client.patchEmbeddedWorkerToPod"):
        assert at("gpupools", path) == {"type": "object",
                                        "x-kubernetes-preserve-unknown-fields": True}, path
    assert at("tensorfusionworkloads", "spec.workerPodTemplate")[
        "x-kubernetes-preserve-unknown-fields"] is True
    assert at("schedulingconfigtemplates", "spec.placement.gpuFilters[].params")[
        "x-kubernetes-preserve-unknown-fields"] is True
    # Modelled objects prune: the retired autoUpdate flag and unknown image keys disappear.
    assert "x-kubernetes-preserve-unknown-fields" not in at("providerconfigs", "spec.images")
    assert "x-kubernetes-preserve-unknown-fields" not in at(
        "gpupools", "spec.nodeManagerConfig.nodeSelector")


# ---------------------------------------------------------------------------- schema rules
def test_cel_rules_are_upstreams_and_nothing_defaults_to_null():
    rules = {(plural, path): [r["rule"] for r in node["x-kubernetes-validations"]]
             for plural, path, node in all_nodes() if "x-kubernetes-validations" in node}
    for plural in ("tensorfusionworkloads", "workloadprofiles"):
        assert rules.pop((plural, ".spec.gangScheduling")) == [
            "self.minMembers == 0 || self.minMembers >= 2"]
        assert rules.pop((plural, ".spec")) == [
            "!has(self.gangScheduling) || self.gangScheduling.minMembers == 0 || "
            "!has(self.replicas) || self.gangScheduling.minMembers <= self.replicas"]
    assert rules == {}
    for plural, path, node in all_nodes():
        assert not ("default" in node and node["default"] is None), (plural, path)


def test_nothing_is_allowed_to_differ_from_upstream():
    assert crds.ALLOWED == []


JUNCTOR_FORBIDDEN = {"type", "default", "description", "additionalProperties", "nullable",
                     "x-kubernetes-preserve-unknown-fields", "x-kubernetes-int-or-string"}


def test_schemas_are_structural():
    """Every node names its type (or is int-or-string / preserve-unknown); junctors (allOf,
    anyOf) only add value checks, apart from int-or-string's integer-or-string anyOf."""
    for plural, path, node in all_nodes():
        if node.get("x-kubernetes-int-or-string"):
            assert "type" not in node and node["anyOf"] == [{"type": "integer"},
                                                            {"type": "string"}], (plural, path)
            continue
        assert node.get("type") in ("object", "array", "string", "integer", "number",
                                    "boolean"), (plural, path)
        for junctor in ("allOf", "anyOf", "oneOf"):
            for sub in node.get(junctor) or []:
                assert not set(sub) & JUNCTOR_FORBIDDEN, (plural, path)
        if node["type"] == "array":
            assert isinstance(node["items"], dict), (plural, path)


def _valid(node, value):
    kinds = {"string": str, "boolean": bool, "integer": int, "object": dict, "array": list}
    typ = node.get("type")
    if typ == "integer" and isinstance(value, bool):
        return False
    if typ and not isinstance(value, kinds[typ]):
        return False
    if "enum" in node and value not in node["enum"]:
        return False
    return (node.get("minimum", value) <= value <= node.get("maximum", value)
            if typ == "integer" else True)


def test_defaults_satisfy_their_own_schema():
    defaults = [(plural, path, node) for plural, path, node in all_nodes() if "default" in node]
    assert len(defaults) > 40
    for plural, path, node in defaults:
        assert _valid(node, node["default"]), (plural, path, node["default"])


def test_generated_files_have_the_header_and_no_yaml_aliases(tmp_path):
    crds.write(tmp_path)
    files = sorted(p.name for p in tmp_path.glob("*.yaml"))
    assert files == sorted(f"tensor-fusion.ai_{p}.yaml" for p in KINDS.values())
    for name in files:
        text = (tmp_path / name).read_text()
        assert text.startswith(crds.HEADER) and "&id" not in text and "*id" not in text
        assert text == (crds.CRD_DIR / name).read_text(), f"regenerate lab/crds/{name}"


# ---------------------------------------------------------------------------- --compare
def tiny(kind="Widget", **spec_props):
    status = crds.obj({"phase": crds.s(enum=["A", "B"]), "count": crds.i32()},
                      required=["phase"])
    return crds.crd(kind, kind.lower() + "s", crds.obj(spec_props or {"size": crds.i32()}),
                    status, [crds.col("Phase", ".status.phase")])


def status_of(body):
    return body["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]


def diffs(upstream, lab):
    return crds.compare({"Widget": upstream}, {"Widget": lab})


def test_compare_same_is_empty_and_the_lab_matches_itself():
    assert diffs(tiny(), tiny()) == []
    lab = {b["spec"]["names"]["kind"]: b for b in crds.all_crds().values()}
    assert crds.compare(lab, copy.deepcopy(lab)) == []


def test_compare_reports_a_changed_type():
    up = tiny()
    status_of(up)["properties"]["count"] = crds.s()
    assert set(diffs(up, tiny())) == {
        crds.Difference("Widget", ".status.count", "type", "string", "integer"),
        crds.Difference("Widget", ".status.count", "format", crds.ABSENT, "int32")}


def test_compare_reports_a_missing_required_field_and_a_missing_property():
    up = tiny()
    status_of(up)["required"] = ["count", "phase"]
    status_of(up)["properties"]["message"] = crds.obj({"text": crds.s()})
    found = diffs(up, tiny())
    assert crds.Difference("Widget", ".status", "required", ["count", "phase"], ["phase"]) in found
    # A missing subtree is reported once, at its top.
    assert crds.Difference("Widget", ".status.message", "present", True, False) in found
    assert len(found) == 2


def test_compare_reports_enum_default_bounds_pattern_and_preserve_unknown():
    up = tiny(size=crds.i32(minimum=1, default=3), name=crds.s(pattern="^a"),
              blob=crds.raw())
    lab = tiny(size=crds.i32(), name=crds.s(), blob=crds.obj())
    status_of(up)["properties"]["phase"]["enum"] = ["A", "B", "C"]
    what = {(d.path, d.what) for d in diffs(up, lab)}
    assert what == {(".spec.size", "minimum"), (".spec.size", "default"),
                    (".spec.name", "pattern"),
                    (".spec.blob", "x-kubernetes-preserve-unknown-fields"),
                    (".status.phase", "enum")}


def test_compare_reports_scope_names_subresources_and_columns():
    up = tiny()
    up["spec"]["scope"] = "Namespaced"
    up["spec"]["names"]["singular"] = "wid"
    up["spec"]["versions"][0]["subresources"] = {}
    up["spec"]["versions"][0]["additionalPrinterColumns"].append(
        crds.col("Count", ".status.count", "integer"))
    what = {d.path for d in diffs(up, tiny())}
    assert what == {"scope", "names.singular", "subresources", "columns[Count]"}
    assert {d.path for d in crds.compare({"Widget": tiny()}, {})} == {"kind"}


def test_allow_list_is_honoured_by_path_prefix_kind_and_keyword(capsys):
    up = tiny()
    status_of(up)["properties"]["count"] = crds.s()
    status_of(up)["x-kubernetes-validations"] = [{"rule": "true"}]
    found = diffs(up, tiny())
    assert crds.report(found, {"Widget"}, allowed=[]) == 3
    allowed = [crds.Allowed("Widget", ".status", "x-kubernetes-validations", "no CEL in 1.20"),
               crds.Allowed("*", ".status.count", "*", "shallow here")]
    assert crds.report(found, {"Widget"}, allowed=allowed) == 0
    out = capsys.readouterr().out
    assert "allowed .status.count type" in out and "(shallow here)" in out
    # The keyword must match: a CEL allowance does not excuse a type change at the same path.
    assert crds.report(found, {"Widget"}, allowed=allowed[:1]) == 2
    # A prefix covers the paths below it, not a sibling that merely starts the same way.
    sibling = crds.Difference("Widget", ".statusx", "type", "a", "b")
    assert crds.is_allowed(sibling, [crds.Allowed("*", ".status", "*", "r")]) is None


def test_allow_list_entries_have_one_line_reasons():
    for entry in crds.ALLOWED:
        assert entry.reason and "\n" not in entry.reason and entry.kind in KINDS


def write_crds(directory, bodies):
    directory.mkdir(exist_ok=True)
    for body in bodies:
        (directory / f"{body['metadata']['name']}.yaml").write_text(yaml.safe_dump(body))


def test_main_compare_exit_codes(tmp_path, capsys):
    lab = list(crds.all_crds().values())
    write_crds(tmp_path / "same", lab)
    assert crds.main(["--compare", str(tmp_path / "same")]) == 0
    changed = copy.deepcopy(lab)
    gpu = next(b for b in changed if b["spec"]["names"]["kind"] == "GPU")
    status_of(gpu)["required"].remove("message")
    write_crds(tmp_path / "changed", changed)
    assert crds.main(["--compare", str(tmp_path / "changed")]) == 1
    assert "DIFFERS .status required" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--compare"], "--compare needs DIR"),
    (["--compare", "/nonexistent/crds"], "not a directory"),
])
def test_main_compare_needs_a_directory(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        crds.main(argv)
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_main_compare_needs_crds_in_the_directory(tmp_path, capsys):
    with pytest.raises(SystemExit):
        crds.main(["--compare", str(tmp_path)])
    assert "no CustomResourceDefinition" in capsys.readouterr().err
