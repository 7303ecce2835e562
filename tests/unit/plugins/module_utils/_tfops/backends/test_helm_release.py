"""backends/helm_release.py's pure parts: the revision check compares keyed fingerprints."""
import hashlib

import pytest
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import snapshots
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import UnusableBundle
from ..helm.test_signing import KEY, OTHER  # helpers shared with that file


def test_the_revision_check_compares_keyed_fingerprints_and_refuses_typed():
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.backends import helm_release
    target = {"manifest": "kind: ConfigMap\n", "values": {"auth": {"password": "hunter2"}}}
    meta = {"revision": 3, "release": "r", "manifest_fingerprint": KEY.fingerprint(target["manifest"]),
            "values_fingerprint": KEY.fingerprint(snapshots.dumps(target["values"]))}
    helm_release._snapshot_expectation(meta, KEY)(target)  # holds what was recorded
    with pytest.raises(UnusableBundle) as err:
        helm_release._snapshot_expectation(meta, OTHER)(target)
    assert err.value.details == {"refused": True, "changed": False}
    assert "manifest and values" in err.value.msg
    changed = dict(target, values={"auth": {"password": "hunter3"}})
    with pytest.raises(UnusableBundle) as err:
        helm_release._snapshot_expectation(meta, KEY)(changed)
    assert "the values the snapshot" in err.value.msg
    # A bundle from before keyed fingerprints (allow_unsigned): the bare sha256 it recorded.
    legacy = {"revision": 3, "release": "r",
              "manifest_sha256": hashlib.sha256(target["manifest"].encode()).hexdigest(),
              "values_sha256": hashlib.sha256(snapshots.dumps(target["values"]).encode()).hexdigest()}
    helm_release._snapshot_expectation(legacy, None)(target)
