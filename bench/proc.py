"""Running contenders as child processes: wall time and the peak RSS of that child alone
(``os.wait4``), plus the small helpers every part shares (medians, tables, the lab's clients)."""
import os
import threading
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def run_accounted(cmd, env=None, cwd=None):
    """Run ``cmd`` to its end: wall seconds, the OS's CPU accounting of the child and every
    descendant it waited for (``os.wait4``: user and system seconds), its peak RSS, exit code,
    output."""
    started = time.monotonic()
    with open(os.devnull, "rb") as devnull:
        proc = subprocess.Popen(cmd, stdin=devnull, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=env, cwd=cwd)
        chunks_out, chunks_err = [], []
        t_err = threading.Thread(target=lambda: chunks_err.append(proc.stderr.read()))
        t_err.start()
        chunks_out.append(proc.stdout.read())
        t_err.join()
        _pid, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    return {"seconds": time.monotonic() - started, "cpu_user": usage.ru_utime, "cpu_system": usage.ru_stime,
            "cpu_seconds": usage.ru_utime + usage.ru_stime, "peak_rss_mib": usage.ru_maxrss / 1024.0,
            "rc": proc.returncode, "stdout": b"".join(chunks_out).decode(errors="replace"),
            "stderr": b"".join(chunks_err).decode(errors="replace")}


def run_measured(cmd, env=None, cwd=None):
    """Wall time and the peak RSS of the child alone (``run_accounted``), exit code, output."""
    r = run_accounted(cmd, env=env, cwd=cwd)
    return r["seconds"], r["peak_rss_mib"], r["rc"], r["stdout"], r["stderr"]


def processes_cpu_seconds(pids):
    """User plus system CPU-seconds the running processes ``pids`` have used so far (their own,
    from /proc/<pid>/stat; a process gone counts 0): read before and after a run, the difference
    is what they used during it."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            with open("/proc/%d/stat" % pid) as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return total / float(ticks)


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(value, digits=2):
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def table(title, header, rows):
    widths = [max(len(fmt(r[i])) for r in [header] + rows) for i in range(len(header))]
    lines = [title]
    for row in [header] + rows:
        lines.append("  ".join(fmt(c).ljust(w) if i == 0 else fmt(c).rjust(w)
                               for i, (c, w) in enumerate(zip(row, widths))))
    return "\n".join(lines)


def module_env():
    from lab import paths
    return dict(os.environ, PYTHONPATH=str(paths.collections_link(REPO)))
