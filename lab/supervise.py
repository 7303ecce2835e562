"""Keep one control-plane process running, as the kubelet keeps a static Pod running.

``python -m lab.supervise NAME -- COMMAND...`` starts COMMAND and starts it again whenever it
exits on its own (after 1 s, doubling to 10 s while it keeps exiting within a minute). On
SIGTERM or SIGINT it passes the signal on, waits for COMMAND to end and ends itself: the lab stops
it like any of its processes.

Why: kube-scheduler ends itself (exit 1) when its cache sees a Pod bound elsewhere than it had
assumed, which an API server outage in the middle of a binding can cause; a real cluster's
kubelet starts it again, and so must the lab, or every later Pod stays Pending.
"""
import signal
import subprocess
import sys
import time
from typing import List

FIRST_DELAY, MAX_DELAY, STABLE_SECONDS = 1.0, 10.0, 60.0


def next_delay(previous: float, ran_for: float) -> float:
    """The pause before a restart: short again after a run that lasted, doubling while it crashes."""
    if ran_for >= STABLE_SECONDS:
        return FIRST_DELAY
    return min(MAX_DELAY, max(FIRST_DELAY, previous * 2))


def supervise(name: str, command: List[str]) -> int:
    stopping = []
    child = None

    def stop(signum, _frame):
        stopping.append(signum)
        if child is not None and child.poll() is None:
            child.send_signal(signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    delay = FIRST_DELAY / 2
    while not stopping:
        started = time.monotonic()
        child = subprocess.Popen(command)
        code = child.wait()
        if stopping:
            return code
        delay = next_delay(delay, time.monotonic() - started)
        print(f"[lab supervise] {name} exited with {code}; starting it again in {delay:.0f}s",
              file=sys.stderr, flush=True)
        deadline = time.monotonic() + delay
        while not stopping and time.monotonic() < deadline:
            time.sleep(0.1)
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m lab.supervise NAME -- COMMAND...", file=sys.stderr)
        return 2
    return supervise(argv[0], argv[2:])


if __name__ == "__main__":
    sys.exit(main())
