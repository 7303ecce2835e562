"""backends/maintenance_lock.py: where a run's record goes, checked before anything is written."""
import pytest

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.backends import maintenance_lock
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput

REPORT = dict(namespace="tensor-fusion-sys", release="tensor-fusion", playbook="upgrade", inventory_host="prod",
              started="2026-12-07T02:00:00.123456Z", keep=10, store="both", dest="/tmp/r")


def test_the_record_goes_where_run_report_puts_the_run_s_report():
    ref = maintenance_lock.record_ref(REPORT, "abc")
    assert ref["configmap"] == "tfops-report-upgrade-prod-20261207t020000z-abc"
    assert ref["host"] == "prod" and ref["run_id"] == "abc" and "dest" not in ref


@pytest.mark.parametrize("change, says", [
    (dict(started="yesterday"), "report.started: .yesterday. is not an ISO 8601 time"),
    (dict(playbook="up grade"), "cannot label a report ConfigMap"),
    (dict(keep=0), "report.keep must be 1 or more"),
])
def test_a_bad_report_place_is_refused(change, says):
    with pytest.raises(InvalidInput, match=says):
        maintenance_lock.record_ref(dict(REPORT, **change), "abc")
