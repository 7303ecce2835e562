"""core/deadline.py without a cluster: a relative timeout and an absolute end in one Deadline (the
earlier wins), measured on an injected clock; a past end; the time helpers (parse_time,
micro_time)."""
import datetime

import pytest

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import deadline as dl
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.deadline import Deadline, micro_time, parse_time
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput

UTC = datetime.timezone.utc
WALL = datetime.datetime(2026, 11, 30, 2, 0, 0, tzinfo=UTC)


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self, start=1000.0):
        self.now = start

    def __call__(self):
        return self.now

    def advance(self, seconds):
        self.now += seconds


def test_timeout_alone_counts_down_on_the_injected_clock():
    clock = Clock()
    deadline = Deadline(timeout=30, now=WALL, clock=clock)
    assert deadline.bounded
    assert deadline.reason == "timeout of 30s"
    assert deadline.remaining() == 30.0
    assert not deadline.expired()
    clock.advance(12.5)
    assert deadline.remaining() == 17.5
    clock.advance(17.4)
    assert deadline.remaining() == pytest.approx(0.1)
    assert not deadline.expired()
    clock.advance(0.1)
    assert deadline.remaining() == 0.0
    assert deadline.expired()


def test_remaining_never_goes_negative():
    clock = Clock()
    deadline = Deadline(timeout=5, now=WALL, clock=clock)
    clock.advance(3600)
    assert deadline.remaining() == 0.0
    assert deadline.expired()


def test_end_alone_is_measured_from_the_wall_time_at_creation():
    clock = Clock()
    deadline = Deadline(end="2026-11-30T03:00:00Z", now=WALL, clock=clock)
    assert deadline.bounded
    assert deadline.remaining() == 3600.0
    assert deadline.reason == "deadline 2026-11-30T03:00:00+00:00"
    clock.advance(3599)
    assert deadline.remaining() == 1.0 and not deadline.expired()
    clock.advance(1)
    assert deadline.expired()


def test_end_as_datetime_and_with_an_offset():
    clock = Clock()
    plus_two = datetime.timezone(datetime.timedelta(hours=2))
    # 04:30 at +02:00 is 02:30 UTC: 30 minutes after WALL
    deadline = Deadline(end=datetime.datetime(2026, 11, 30, 4, 30, tzinfo=plus_two), now=WALL, clock=clock)
    assert deadline.remaining() == 1800.0
    text = Deadline(end="2026-11-30T04:30:00+02:00", now=WALL, clock=clock)
    assert text.remaining() == 1800.0


def test_naive_end_means_utc():
    clock = Clock()
    deadline = Deadline(end="2026-11-30T02:10:00", now=WALL, clock=clock)
    assert deadline.remaining() == 600.0
    naive_dt = Deadline(end=datetime.datetime(2026, 11, 30, 2, 10), now=WALL, clock=clock)
    assert naive_dt.remaining() == 600.0


def test_the_earlier_of_timeout_and_end_wins_timeout_first():
    clock = Clock()
    deadline = Deadline(timeout=60, end="2026-11-30T03:00:00Z", now=WALL, clock=clock)
    assert deadline.remaining() == 60.0
    assert deadline.reason == "timeout of 60s"
    clock.advance(60)
    assert deadline.expired()


def test_the_earlier_of_timeout_and_end_wins_end_first():
    clock = Clock()
    deadline = Deadline(timeout=7200, end="2026-11-30T02:05:00Z", now=WALL, clock=clock)
    assert deadline.remaining() == 300.0
    assert deadline.reason == "deadline 2026-11-30T02:05:00+00:00"
    clock.advance(299)
    assert not deadline.expired()
    clock.advance(1)
    assert deadline.expired()


def test_a_past_end_is_expired_at_once_and_says_which_end():
    clock = Clock()
    deadline = Deadline(timeout=600, end="2026-11-30T01:00:00Z", now=WALL, clock=clock)
    assert deadline.bounded
    assert deadline.expired()
    assert deadline.remaining() == 0.0
    # the reason names the absolute end (what a timeout message then quotes), not the timeout
    assert deadline.reason == "deadline 2026-11-30T01:00:00+00:00"


def test_an_end_exactly_now_is_expired():
    deadline = Deadline(end=WALL, now=WALL, clock=Clock())
    assert deadline.expired() and deadline.remaining() == 0.0


def test_a_wall_clock_jump_after_creation_changes_nothing(monkeypatch):
    """Only the monotonic clock counts once the deadline exists: the end was converted then."""
    clock = Clock()
    monkeypatch.setattr(dl, "utcnow", lambda: WALL)
    deadline = Deadline(end="2026-11-30T03:00:00Z", clock=clock)
    monkeypatch.setattr(dl, "utcnow", lambda: WALL + datetime.timedelta(hours=5))  # NTP step
    clock.advance(10)
    assert deadline.remaining() == 3590.0
    assert not deadline.expired()


def test_without_timeout_or_end_it_is_unbounded():
    deadline = Deadline(clock=Clock())
    assert not deadline.bounded
    assert deadline.reason == "no deadline"
    assert deadline.remaining() == float("inf")
    assert not deadline.expired()


def test_zero_timeout_is_expired_at_once():
    deadline = Deadline(timeout=0, now=WALL, clock=Clock())
    assert deadline.bounded and deadline.expired()
    assert deadline.reason == "timeout of 0s"


def test_fractional_timeout():
    clock = Clock()
    deadline = Deadline(timeout=1.5, now=WALL, clock=clock)
    assert deadline.remaining() == 1.5
    assert deadline.reason == "timeout of 1.5s"


def test_negative_timeout_is_refused():
    with pytest.raises(InvalidInput, match=r"a timeout cannot be negative \(-1\)"):
        Deadline(timeout=-1, now=WALL, clock=Clock())


def test_a_refusal_names_the_options_it_comes_from():
    with pytest.raises(InvalidInput, match=r"^wait_timeout: a timeout cannot be negative \(-1\)"):
        Deadline(timeout=-1, now=WALL, clock=Clock(), options=("wait_timeout", "deadline"))
    with pytest.raises(InvalidInput, match=r"^deadline: 'soon' is not an ISO 8601 time"):
        Deadline(end="soon", now=WALL, clock=Clock(), options=("wait_timeout", "deadline"))


def test_bad_end_is_refused_with_an_example():
    with pytest.raises(InvalidInput, match="is not an ISO 8601 time such as 2026-11-30T03:00:00Z"):
        Deadline(end="tomorrow at three", now=WALL, clock=Clock())


def test_the_clock_is_read_once_at_creation_and_at_each_question():
    calls = []

    def clock():
        calls.append(1)
        return 50.0

    deadline = Deadline(timeout=10, now=WALL, clock=clock)
    assert len(calls) == 1
    deadline.remaining()
    deadline.expired()
    assert len(calls) == 3


def test_default_wall_time_is_now(monkeypatch):
    """Without ``now`` the end is measured from utcnow() at creation."""
    monkeypatch.setattr(dl, "utcnow", lambda: WALL)
    deadline = Deadline(end="2026-11-30T02:00:42Z", clock=Clock())
    assert deadline.remaining() == 42.0


def test_parse_time_forms():
    assert dl.parse_time("2026-11-30T03:00:00Z") == datetime.datetime(2026, 11, 30, 3, tzinfo=UTC)
    assert dl.parse_time(" 2026-11-30T03:00:00Z ").tzinfo is not None
    assert dl.parse_time("2026-11-30T03:00:00").tzinfo == UTC
    aware = datetime.datetime(2026, 11, 30, 5, tzinfo=datetime.timezone(datetime.timedelta(hours=2)))
    assert dl.parse_time(aware) is aware
    assert dl.parse_time(datetime.datetime(2026, 1, 1)) == datetime.datetime(2026, 1, 1, tzinfo=UTC)
    with pytest.raises(InvalidInput, match="'30/11/2026'"):
        dl.parse_time("30/11/2026")


def test_utcnow_is_aware_utc():
    now = dl.utcnow()
    assert now.tzinfo is not None and now.utcoffset() == datetime.timedelta(0)


def test_micro_time_is_utc_with_six_fractional_digits():
    assert dl.micro_time(datetime.datetime(2026, 11, 30, 3, 0, 0, tzinfo=UTC)) == \
        "2026-11-30T03:00:00.000000Z"
    assert dl.micro_time(datetime.datetime(2026, 11, 30, 3, 0, 0, 1234, tzinfo=UTC)) == \
        "2026-11-30T03:00:00.001234Z"
    plus_two = datetime.timezone(datetime.timedelta(hours=2))
    assert dl.micro_time(datetime.datetime(2026, 11, 30, 1, 30, tzinfo=plus_two)) == \
        "2026-11-29T23:30:00.000000Z"


def test_micro_time_round_trips_through_parse_time():
    instant = datetime.datetime(2026, 11, 30, 3, 4, 5, 678901, tzinfo=UTC)
    assert dl.parse_time(dl.micro_time(instant)) == instant


def test_micro_time_is_kubernetes_micro_time():
    assert micro_time(parse_time("2026-11-30T03:04:05.5+01:00")) == "2026-11-30T02:04:05.500000Z"
