"""Run ansible-playbook as a user would; read task results from the test-only callback.

The ansible-core matrix (tests/ansible-matrix.sh) runs the same tests with another ansible-core:
TFOPS_TEST_ANSIBLE_VENV names its virtual environment (its ansible-playbook and its Python run the
playbooks), TFOPS_TEST_COLLECTIONS_PATH the collection installed there from the built artifact, and
TFOPS_TEST_IN_PROCESS=false runs every module as a module process (tfops_in_process: false)."""
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

PLAYBOOKS = Path(__file__).resolve().parent / "playbooks"


class PlaybookRun:
    def __init__(self, proc, results_file):
        self.rc = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        try:
            self.results = json.loads(Path(results_file).read_text())
        except (OSError, ValueError):
            self.results = []

    def task_results(self, task_name, host="localhost"):
        """The last result of the named task on host; its ``failed`` is the callback's verdict (newer
        ansible-core leaves the key out of the result a callback sees, so that an assert of
        ``not result.get("failed")`` would hold whatever happened)."""
        found = [r for r in self.results if r["task"] == task_name and r["host"] == host]
        if not found:
            raise KeyError(f"task {task_name!r} not in the run; output: "
                           f"{self.stdout[-2000:]} {self.stderr[-2000:]}")
        return dict(found[-1]["result"], failed=found[-1]["status"] == "failed")


class BackgroundRun:
    """An ansible-playbook started with start_playbook(); finish() waits for it (bounded) and
    returns its PlaybookRun."""

    def __init__(self, proc, results_file):
        self.proc, self.results_file = proc, results_file
        self.finished = None  # the PlaybookRun, once finish() has read it

    def interrupt(self, sig, group=False, again_after=10.0):
        """Send ``sig`` to ansible-playbook (``group``: to its process group, as a terminal's Ctrl-C;
        the run must have been started with session=True). A SIGINT is sent again after
        ``again_after`` seconds if the run has not ended, as a user presses Ctrl-C again: measured,
        ansible-core misses a first SIGINT that lands as it starts a task's worker (1 or 2 in 10)."""
        send = (lambda: os.killpg(self.proc.pid, sig)) if group else (lambda: os.kill(self.proc.pid, sig))
        send()
        if sig != signal.SIGINT:
            return
        try:
            self.proc.wait(timeout=again_after)
        except subprocess.TimeoutExpired:
            send()

    def finish(self, timeout=600):
        """The run's PlaybookRun; a second call returns the first one's (a test that reports a
        failure with the run's output, then cleans up, asks twice)."""
        if self.finished is not None:
            return self.finished
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
        try:
            self.finished = PlaybookRun(subprocess.CompletedProcess(self.proc.args, self.proc.returncode, out, err),
                                        self.results_file)
            return self.finished
        finally:
            os.unlink(self.results_file)


def matrix_entry(environ=None):
    """(ansible-playbook, the Python of the modules, collections path or None, extra -e args) of
    the ansible-core the tests run with."""
    environ = os.environ if environ is None else environ
    venv = environ.get("TFOPS_TEST_ANSIBLE_VENV")
    bindir = Path(venv) / "bin" if venv else None
    playbook = str(bindir / "ansible-playbook") if bindir else "ansible-playbook"
    python = str(bindir / "python") if bindir else sys.executable
    extra = []
    if environ.get("TFOPS_TEST_IN_PROCESS", "").lower() in ("false", "0", "no"):
        extra = ["-e", json.dumps({"tfops_in_process": False})]
    return playbook, python, environ.get("TFOPS_TEST_COLLECTIONS_PATH"), extra


def start_playbook(playbook, extra_vars=None, env=None, args=(), clean_auth_env=True, session=False):
    """ansible-playbook with the json callback, in the background; K8S_AUTH_* from the caller's
    env are dropped unless the test passes them, so each test controls its auth exactly.
    ``session``: in a session of its own, as a terminal's job or an AWX job runs it (its process
    group, which a Ctrl-C reaches, is then its own)."""
    base = {k: v for k, v in os.environ.items()
            if not (clean_auth_env and k.startswith("K8S_AUTH_"))}
    results = tempfile.NamedTemporaryFile(prefix="tfops-results-", suffix=".json", delete=False)
    results.close()
    ansible_playbook, python, collections, matrix_args = matrix_entry()
    base.update({"ANSIBLE_CALLBACKS_ENABLED": "tfops_results", "TFOPS_RESULTS_FILE": results.name,
                 "ANSIBLE_CALLBACK_PLUGINS": str(Path(__file__).resolve().parent / "callback_plugins"),
                 "ANSIBLE_NOCOLOR": "1",
                 "ANSIBLE_LOCALHOST_WARNING": "false", "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false",
                 "ANSIBLE_PYTHON_INTERPRETER": python})
    if collections:
        base["ANSIBLE_COLLECTIONS_PATH"] = collections
    base.update(env or {})
    # A collection playbook runs by its name (tensorfusion.ops.upgrade), as users run it.
    target = playbook if playbook.startswith("tensorfusion.ops.") else str(PLAYBOOKS / playbook)
    cmd = [ansible_playbook, "-i", "localhost,", "-c", "local", target, *matrix_args, *args]
    if extra_vars:
        cmd += ["-e", json.dumps(extra_vars)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=base,
                            start_new_session=session)
    return BackgroundRun(proc, results.name)


def run_playbook(playbook, extra_vars=None, env=None, args=(), clean_auth_env=True, timeout=600):
    """start_playbook(), then wait for it (at most ``timeout`` seconds)."""
    return start_playbook(playbook, extra_vars, env, args, clean_auth_env).finish(timeout)
