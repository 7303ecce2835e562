"""Run ansible-playbook as a user would, and read its results from the json callback."""
import json
import os
import subprocess
import sys
from pathlib import Path

PLAYBOOKS = Path(__file__).resolve().parent / "playbooks"


class PlaybookRun:
    def __init__(self, proc):
        self.rc = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        try:
            self.data = json.loads(proc.stdout[proc.stdout.index("{"):])
        except ValueError:
            self.data = {}

    def task_results(self, task_name, host="localhost"):
        for play in self.data.get("plays", []):
            for task in play.get("tasks", []):
                if task["task"]["name"] == task_name:
                    return task["hosts"].get(host)
        raise KeyError(f"task {task_name!r} not in the run; stderr: {self.stderr[-2000:]}")


def run_playbook(playbook, extra_vars=None, env=None, args=(), clean_auth_env=True):
    """ansible-playbook with the json callback; K8S_AUTH_* from the caller's env are dropped
    unless the test passes them, so each test controls its auth exactly."""
    base = {k: v for k, v in os.environ.items()
            if not (clean_auth_env and k.startswith("K8S_AUTH_"))}
    base.update({"ANSIBLE_STDOUT_CALLBACK": "json", "ANSIBLE_NOCOLOR": "1",
                 "ANSIBLE_LOCALHOST_WARNING": "false", "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false",
                 "ANSIBLE_PYTHON_INTERPRETER": sys.executable})
    base.update(env or {})
    cmd = ["ansible-playbook", "-i", "localhost,", "-c", "local", str(PLAYBOOKS / playbook), *args]
    if extra_vars:
        cmd += ["-e", json.dumps(extra_vars)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=base, timeout=600)
    return PlaybookRun(proc)
