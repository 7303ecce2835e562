"""core/podtemplate.py: the Pod template field names read from the API server's OpenAPI v3
document."""
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import podtemplate


def test_field_names_are_read_from_the_openapi_v3_core_document():
    doc = {"components": {"schemas": {
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {"properties": {"labels": {}, "name": {}}},
        "io.k8s.api.core.v1.PodSpec": {"properties": {"containers": {}, "volumes": {}}},
        "io.k8s.api.core.v1.Container": {"properties": {"name": {}, "image": {}}}}}}
    assert podtemplate.field_names(doc) == {"ObjectMeta": ("labels", "name"),
                                            "PodSpec": ("containers", "volumes"),
                                            "Container": ("image", "name")}
    del doc["components"]["schemas"]["io.k8s.api.core.v1.Container"]
    assert podtemplate.field_names(doc) is None and podtemplate.field_names({}) is None
