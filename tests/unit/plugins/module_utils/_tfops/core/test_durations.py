"""core/durations.py: Go durations (time.ParseDuration) as seconds, and what is refused."""
import pytest

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.durations import go_duration_seconds
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput


@pytest.mark.parametrize("text,seconds", [
    ("0", 0.0), ("+0", 0.0), ("-0", 0.0), ("0s", 0.0),
    ("1s", 1.0), ("90s", 90.0), ("1m30s", 90.0), ("1.5h", 5400.0), ("2h45m", 9900.0),
    (".5s", 0.5), ("5.s", 5.0), ("+5s", 5.0), ("1h1m1s", 3661.0),
    ("250ms", 0.25), ("1500us", 0.0015), ("1500\u00b5s", 0.0015), ("1500\u03bcs", 0.0015), ("20ns", 2e-8),
])
def test_go_durations_in_seconds(text, seconds):
    assert go_duration_seconds(text) == pytest.approx(seconds)


@pytest.mark.parametrize("value", [
    "", " 1s", "1s ", "1", "00", "1d", "1s2", "s", "+", "1 s", "1S", "1.2.3s", "1e3s", "forever",
])
def test_what_go_refuses_is_refused_with_examples(value):
    with pytest.raises(InvalidInput) as err:
        go_duration_seconds(value, "batch_interval")
    assert err.value.msg == "batch_interval: %r is not a Go duration such as 1s, 90s, 1m30s or 1.5h " \
                            "(units h, m, s, ms, us, ns)" % value


@pytest.mark.parametrize("value", [5, 1.5, None, True, ["1s"]])
def test_a_value_that_is_not_text_is_refused(value):
    with pytest.raises(InvalidInput, match=r"^duration: .* is not a Go duration"):
        go_duration_seconds(value)


def test_a_negative_duration_is_refused_with_its_own_message():
    with pytest.raises(InvalidInput) as err:
        go_duration_seconds("-5m", "window_duration")
    assert err.value.msg == "window_duration: '-5m' is negative; it must be 0 or more"
