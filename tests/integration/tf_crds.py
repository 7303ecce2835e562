"""Install the lab's TensorFusion CRDs (lab/crds/) into the lab's API server when absent, and wait
until they are served."""
import time
from pathlib import Path

import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

CRD_DIR = Path(__file__).resolve().parents[2] / "lab" / "crds"


def ensure_tensorfusion_crds(api_client, timeout=60):
    ext = client.ApiextensionsV1Api(api_client)
    names = []
    for path in sorted(CRD_DIR.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        names.append(crd["metadata"]["name"])
        try:
            ext.create_custom_resource_definition(crd)
        except ApiException as exc:
            if exc.status != 409:
                raise
    deadline = time.monotonic() + timeout
    for name in names:
        while True:
            conditions = ext.read_custom_resource_definition(name).status.conditions or []
            if any(c.type == "Established" and c.status == "True" for c in conditions):
                break
            if time.monotonic() > deadline:
                raise AssertionError("CRD %s not established within %ss" % (name, timeout))
            time.sleep(0.2)
