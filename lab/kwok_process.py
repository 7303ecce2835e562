"""kwok as a child process of the kubelet stand-in (lab/kubelet.py), and the loop that keeps it
running with the Stages wanted: restarted when they change, when the API server comes back after
an outage, and (with a back-off) when it dies."""
import logging
import queue
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import List, Optional

from . import kwok_stages as ks

log = logging.getLogger("kubelet")


def kwok_command(binary: Path, kubeconfig: Path, config_file: Path) -> List[str]:
    cmd = [str(binary), f"--kubeconfig={kubeconfig}", f"--config={config_file}",
           f"--manage-nodes-with-label-selector={ks.MANAGED_NODES}", f"--cidr={ks.POD_CIDR}",
           # kwok's own lease controller would hold every Lease in its process id; the lease
           # Stage renews them in each node's name, as kubelets do.
           "--node-lease-duration-seconds=0", "-v=INFO"]
    # kwok dies with the stand-in, even a stand-in killed with SIGKILL (``lab down`` stops only
    # the processes it recorded; kwok is not one of them).
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "TERM", "--", *cmd] if setpriv else cmd


class Kwok:
    """kwok, its Stages in ``config_file``, its output appended to ``log_file``."""

    def __init__(self, binary: Path, kubeconfig: Path, config_file: Path, log_file: Path):
        self.binary, self.kubeconfig = binary, kubeconfig
        self.config_file, self.log_file = config_file, log_file
        self.proc: Optional[subprocess.Popen] = None
        self.stages = ""
        self.started = 0.0

    def start(self, stages: str) -> None:
        tmp = self.config_file.with_name(self.config_file.name + ".tmp")
        tmp.write_text(stages)
        tmp.rename(self.config_file)
        with open(self.log_file, "ab") as out:
            self.proc = subprocess.Popen(kwok_command(self.binary, self.kubeconfig, self.config_file),
                                         stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        self.stages, self.started = stages, time.monotonic()
        log.info("kwok started (pid %d)", self.proc.pid)

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)

    def exited(self) -> Optional[int]:
        """Its exit code once it has exited; None while it runs (or before its first start)."""
        return None if self.proc is None else self.proc.poll()

    def log_tail(self, lines: int = 5) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


class Supervisor:
    """Runs ``kwok`` with the newest Stages put into ``wanted``. ``api_back`` is set when the API
    server answers again after an outage: kwok backs a failed write off (1 s, doubling, up to
    32 min), so what fell due meanwhile (a Pod's start, a lease renewal) could wait for minutes;
    restarted, kwok lists everything again and plays what is due at once, as a kubelet's status
    sync (every 10 s) would."""

    def __init__(self, kwok: Kwok, poll: float = 0.25, startup_grace: float = 10.0,
                 backoff_first: float = 1.0, backoff_max: float = 30.0):
        self.kwok = kwok
        self.wanted: "queue.Queue[str]" = queue.Queue()
        self.api_back = threading.Event()
        self.poll, self.startup_grace = poll, startup_grace
        self.backoff_first, self.backoff_max = backoff_first, backoff_max

    def _newest(self) -> Optional[str]:
        """The newest Stages wanted (several quick changes count once), after at most ``poll``."""
        stages = None
        try:
            stages = self.wanted.get(timeout=self.poll)
            while True:
                stages = self.wanted.get_nowait()
        except queue.Empty:
            return stages

    def run(self, stop: threading.Event) -> int:
        """Until ``stop``; then kwok is stopped and 0 returned. 1 when kwok exits within
        ``startup_grace`` of its first start: a broken setup (its log says why), not a crash to
        restart from."""
        backoff, first, restart_at = self.backoff_first, True, 0.0
        while not stop.is_set():
            stages = self._newest()
            if stop.is_set():
                break
            changed = stages is not None and stages != self.kwok.stages
            if changed or (self.api_back.is_set() and self.kwok.exited() is None):
                self.api_back.clear()
                if self.kwok.proc is not None:
                    log.info("restarting kwok: %s", "the Stages changed" if changed
                             else "the API server is back")
                    first = False
                self.kwok.stop()
                self.kwok.start(stages if changed else self.kwok.stages)
                restart_at = 0.0
                continue
            if self.kwok.proc is None:
                continue  # nothing wanted yet
            rc = self.kwok.exited()
            ran = time.monotonic() - self.kwok.started
            if rc is None:
                first = first and ran < self.startup_grace
                if ran > 60:  # it ran well: the next crash starts the back-off afresh
                    backoff = self.backoff_first
                continue
            if first and ran < self.startup_grace:
                log.error("kwok exited (rc %s) right after its start; its log (%s) ends:\n%s",
                          rc, self.kwok.log_file, self.kwok.log_tail())
                return 1
            first = False
            if not restart_at:
                log.error("kwok exited (rc %s); starting it again in %.0fs; its log ends:\n%s",
                          rc, backoff, self.kwok.log_tail())
                restart_at = time.monotonic() + backoff
                backoff = min(backoff * 2, self.backoff_max)
            elif time.monotonic() >= restart_at:
                restart_at = 0.0
                self.kwok.start(self.kwok.stages)
        self.kwok.stop()
        return 0
