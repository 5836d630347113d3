"""The MPI Operator's launcher: its command runs as given, always, with the hostfile in place, so a
launcher script that calls ``mpirun`` itself (seed 001's ``./launch-example.sh 4 8``, Horovod's
launch scripts) reaches the workers: both ranks run, each seeing the ``--data`` dataset."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from millpond.datasets.mounts import fuse_available, is_mounted
from tests.datasets_support import manifest
from tests.training_support import arena, wait_status

pytestmark = pytest.mark.skipif(not shutil.which("mpirun"), reason="mpirun is not installed (Debian's openmpi-bin)")

LAUNCH = """\
#!/bin/sh
# as seed 001's launch-example.sh: the launcher's own mpirun over the operator's hostfile
set -e
mpirun -np "$1" sh -c 'echo "rank $OMPI_COMM_WORLD_RANK of $OMPI_COMM_WORLD_SIZE read $(cat /data/hello.txt)"'
"""


def test_a_launcher_script_calling_mpirun_runs_both_ranks_with_the_dataset(cli, capsys, home: Path,
                                                                          tmp_path: Path) -> None:
    if fuse_available() is not None:
        pytest.skip(f"FUSE unavailable: {fuse_available()}")
    store = tmp_path / "store"
    store.mkdir()
    (store / "hello.txt").write_text("hello")
    (tmp_path / "ds.yaml").write_text(manifest("words", f"local://{store}", secret=False))
    assert cli("apply", "-f", tmp_path / "ds.yaml").code == 0
    script = tmp_path / "launch-example.sh"
    script.write_text(LAUNCH)
    script.chmod(0o755)
    try:
        submitted = arena(capsys, "submit", "mpi", "--name", "seed1", "--workers", "2", "--data", "words:/data",
                          "--working-dir", tmp_path, "./launch-example.sh", "2")
        assert submitted.code == 0, submitted.err
        info = wait_status(capsys, "seed1")
        launcher_log = arena(capsys, "logs", "seed1").out
        assert info["status"] == "SUCCEEDED", launcher_log
        assert "recursive" not in launcher_log, launcher_log
        for rank in (0, 1):
            shown = arena(capsys, "logs", "seed1", "-i", f"seed1-worker-{rank}").out.strip()
            assert shown == f"rank {rank} of 2 read hello", (shown, launcher_log)
    finally:
        folder = home / "mnt" / "default" / "words"
        if is_mounted(str(folder)):
            subprocess.run(["fusermount3", "-u", "-z", str(folder)], check=False)


def test_a_command_without_mpirun_runs_once_on_the_launcher(capsys, home: Path) -> None:
    """As on Kubernetes: the launcher pod runs its command; nothing puts it under mpirun."""
    line = 'echo "size=${OMPI_COMM_WORLD_SIZE:-none} hostfile=$(cat $OMPI_MCA_orte_default_hostfile)"'
    assert arena(capsys, "submit", "mpi", "--name", "plain", "--workers", "2", line).code == 0
    info = wait_status(capsys, "plain")
    log = arena(capsys, "logs", "plain").out
    assert info["status"] == "SUCCEEDED", log
    assert log.strip() == "size=none hostfile=localhost slots=2", log
