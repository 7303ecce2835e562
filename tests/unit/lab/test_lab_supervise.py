"""lab.supervise: how long it waits before starting a crashed control-plane process again."""
from lab.supervise import FIRST_DELAY, MAX_DELAY, STABLE_SECONDS, next_delay


def test_the_pause_doubles_while_it_keeps_crashing_up_to_the_cap():
    delay, seen = FIRST_DELAY / 2, []
    for _ in range(6):
        delay = next_delay(delay, ran_for=2)
        seen.append(delay)
    assert seen == [1.0, 2.0, 4.0, 8.0, MAX_DELAY, MAX_DELAY]


def test_a_run_that_lasted_starts_the_count_again():
    assert next_delay(MAX_DELAY, ran_for=STABLE_SECONDS) == FIRST_DELAY
