"""Start and stop the lab's processes, identifying each by pid *and* start time so that
``down`` never signals a process it did not start (pids get reused)."""
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Optional


def _start_ticks(pid: int) -> Optional[str]:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name may contain spaces; fields after the closing parenthesis are fixed.
    return stat.rsplit(")", 1)[1].split()[19]


def spawn(name: str, cmd: List[str], log_dir: Path, env: Optional[Dict[str, str]] = None) -> Dict:
    log_dir.mkdir(parents=True, exist_ok=True)
    log = open(log_dir / f"{name}.log", "ab")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True, env=env)
    log.close()
    # Only what differs from our own environment is kept (state.json must hold no stray secret).
    extra = {k: v for k, v in (env or {}).items() if os.environ.get(k) != v}
    return {"name": name, "pid": proc.pid, "start": _start_ticks(proc.pid), "cmd": cmd[0],
            "argv": list(cmd), "env_extra": extra}


def alive(record: Dict) -> bool:
    try:  # reap it if it is our own child, so that an exited one does not linger as a zombie
        os.waitpid(record["pid"], os.WNOHANG)
    except ChildProcessError:
        pass
    ticks = _start_ticks(record["pid"])
    if ticks is None or ticks != record.get("start"):
        return False
    # A zombie has exited; only its parent has not reaped it yet.
    try:
        state = Path(f"/proc/{record['pid']}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def stop(record: Dict, timeout: float = 10.0) -> None:
    if not alive(record):
        return
    os.kill(record["pid"], signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(record):
            return
        time.sleep(0.05)
    if alive(record):
        os.kill(record["pid"], signal.SIGKILL)
        deadline = time.monotonic() + 5
        while alive(record) and time.monotonic() < deadline:
            time.sleep(0.05)
