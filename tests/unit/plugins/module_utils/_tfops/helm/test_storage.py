"""helm/storage.py: a revision's stored release decoded (and the chart a rollback rebuilds from it,
helm/cli.py's write_stored_chart)."""
import base64
import gzip
import json

import pytest

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import HelmError
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import cli as helmcli
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import storage


def test_decode_release_and_write_its_chart(tmp_path):
    body = {"chart": {"metadata": {"name": "c", "version": "0.1.0", "apiVersion": "v2"},
                      "values": {"a": 1},
                      "templates": [{"name": "templates/cm.yaml", "data": base64.b64encode(b"kind: X").decode()}],
                      "files": [{"name": "crds/crd.yaml", "data": base64.b64encode(b"kind: CRD").decode()}]}}
    stored = base64.b64encode(base64.b64encode(gzip.compress(json.dumps(body).encode()))).decode()
    assert storage.decode_release(stored) == body
    folder = helmcli.write_stored_chart(str(tmp_path / "chart"), body)
    assert json.loads((tmp_path / "chart" / "Chart.yaml").read_text())["name"] == "c"
    assert (tmp_path / "chart" / "templates" / "cm.yaml").read_text() == "kind: X"
    assert (tmp_path / "chart" / "crds" / "crd.yaml").read_text() == "kind: CRD"
    assert folder == str(tmp_path / "chart")
    evil = {"chart": dict(body["chart"], templates=[{"name": "../../escape", "data": ""}])}
    with pytest.raises(HelmError):
        helmcli.write_stored_chart(str(tmp_path / "chart2"), evil)
