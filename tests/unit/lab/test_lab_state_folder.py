"""`lab down` removes only a state folder that the lab made (it carries a marker), so a --state
that points at a source folder is refused instead of deleted; `lab up` will not fill one either."""
import pytest

from lab import cluster, state
from lab.errors import LabError


def test_down_refuses_a_folder_without_the_marker(tmp_path):
    (tmp_path / "Chart.yaml").write_text("name: precious\n")
    with pytest.raises(LabError, match="not a lab state folder"):
        cluster.down(tmp_path)
    assert (tmp_path / "Chart.yaml").read_text() == "name: precious\n"


def test_up_refuses_a_non_empty_folder_without_the_marker(tmp_path):
    (tmp_path / "values.yaml").write_text("a: 1\n")
    with pytest.raises(LabError, match="not empty and is not a lab state folder"):
        cluster.up(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["values.yaml"]


def test_down_removes_a_marked_folder_and_ignores_a_missing_one(tmp_path):
    folder = tmp_path / "lab"
    state.claim(folder)
    (folder / "logs").mkdir()
    cluster.down(folder)
    assert not folder.exists()
    cluster.down(tmp_path / "never-made")


@pytest.mark.parametrize("inside", [".", "lab-state", "tests/output/lab"])
def test_up_refuses_a_state_folder_inside_the_repository(inside):
    """#36: ansible-galaxy collection build packs every file it does not ignore; a state folder in
    the tree would ship the lab's keys and token file."""
    folder = state.REPOSITORY / inside
    existed = folder.exists()
    with pytest.raises(LabError, match="is inside the repository"):
        state.claim(folder)
    assert folder.exists() == existed


def test_free_ports_are_all_different_and_free():
    # Asked one at a time they can repeat: a CI run gave kube-scheduler the API server's port.
    ports = state.free_ports(200)
    assert len(set(ports)) == 200
    import socket
    for port in ports[:20]:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))
