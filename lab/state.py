"""A lab's state folder and its ``state.json``: what the cluster core and the add-ons share.

The folder holds the PKI, kubeconfigs, logs and the state record (server, token, ports, the
processes started, the add-ons started, and whatever each add-on keeps under its own key). It
carries a marker file, so that ``down`` deletes only folders the lab made."""
import json
import socket
from pathlib import Path
from typing import Dict, List, Optional

from .errors import LabError

# Written into every state folder the lab creates; ``down`` deletes only folders that have it, so
# a --state pointing at a source folder is refused instead of deleted.
MARKER = ".tfops-lab-state"
STATE_FILE = "state.json"


def free_ports(count: int) -> List[int]:
    """``count`` different loopback ports nobody listens on right now. All are held open until
    every one is chosen: ports asked for one at a time can repeat (a CI run gave kube-scheduler
    the API server's port, and it exited on every start until helm's --wait timed out)."""
    socks = [socket.socket() for _ in range(count)]
    try:
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def port_free(port: int) -> bool:
    """Whether nothing listens on ``port`` on any interface (a server that binds every interface
    clashes with one on loopback too)."""
    with socket.socket() as sock:
        try:
            sock.bind(("", port))
        except OSError:
            return False
    return True


def load_state(state_dir: Path) -> Optional[Dict]:
    """The state record of the lab in ``state_dir``, or None when there is none (or it is unreadable)."""
    try:
        return json.loads((Path(state_dir) / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None


def save_state(state: Dict) -> None:
    """Write ``state`` into its folder (``state['state_dir']``) atomically, readable by its owner only."""
    path = Path(state["state_dir"]) / STATE_FILE
    tmp = path.with_name(STATE_FILE + ".tmp")
    tmp.write_text(json.dumps(state, indent=2))
    tmp.chmod(0o600)
    tmp.rename(path)


def logs_dir(state: Dict) -> Path:
    return Path(state["state_dir"]) / "logs"


def is_lab_folder(state_dir: Path) -> bool:
    return (Path(state_dir) / MARKER).exists()


# The source tree this lab belongs to: ansible-galaxy collection build packs every file of it that
# is not ignored, and a state folder holds the lab's private keys, token file and kubeconfigs.
REPOSITORY = Path(__file__).resolve().parent.parent


def claim(state_dir: Path) -> None:
    """Make ``state_dir`` the lab's: a new or empty folder gets the marker; a folder with other
    content and no marker is not ours to fill or to delete later; a folder inside the repository
    is refused (its keys and tokens would ship in the collection artifact)."""
    state_dir = Path(state_dir)
    resolved = state_dir.resolve()
    if resolved == REPOSITORY or REPOSITORY in resolved.parents:
        raise LabError(f"{state_dir} is inside the repository {REPOSITORY}: a lab's state (private keys, "
                       "token file, kubeconfigs) there would be packed into the collection artifact; "
                       "pick a folder outside it for --state")
    if state_dir.exists() and not is_lab_folder(state_dir) and any(state_dir.iterdir()):
        raise LabError(f"{state_dir} is not empty and is not a lab state folder (no {MARKER}); "
                       "pick an empty or new folder for --state")
    state_dir.mkdir(parents=True, exist_ok=True)
    state_dir.chmod(0o700)
    (state_dir / MARKER).write_text("created by python -m lab up; python -m lab down removes "
                                    "this folder\n")
