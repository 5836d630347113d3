"""``millpond.training.TrainingClient`` (Arena SDK's shape): build, submit, wait, logs, list, delete."""

from __future__ import annotations

from pathlib import Path

import pytest

from millpond.errors import NotFoundError, UserError
from millpond.training import PytorchJobBuilder, TrainingClient

pytestmark = pytest.mark.usefixtures("database")  # on SQLite and on PostgreSQL


def test_client_submits_waits_and_reads_a_job(home: Path) -> None:
    job = (PytorchJobBuilder().with_name("sdk").with_workers(2).with_envs({"GREETING": "hi"})
           .with_command('echo "$GREETING from rank $RANK of $WORLD_SIZE"').build())
    client = TrainingClient()
    submitted = client.submit(job)
    assert (submitted.name, submitted.trainer) == ("sdk", "pytorchjob")
    done = client.wait("sdk", timeout=120, poll_s=0.2)
    assert done.status == "SUCCEEDED" and done.finished
    assert [(i.name, i.chief) for i in done.instances] == [("sdk-master-0", True), ("sdk-worker-0", False)]
    assert done.as_dict()["uuid"] == done.uuid
    assert client.logs("sdk") == "hi from rank 0 of 2\n"
    assert client.logs("sdk", instance="sdk-worker-0", tail=1) == "hi from rank 1 of 2\n"
    assert [info.name for info in client.list()] == ["sdk"]
    client.delete("sdk")
    assert client.list() == []
    with pytest.raises(NotFoundError):
        client.get("sdk")


def test_builder_refuses_what_arena_refuses(home: Path) -> None:
    with pytest.raises(UserError, match="--workers 0"):
        PytorchJobBuilder().with_name("x").with_workers(0).with_command("true").build()
    with pytest.raises(UserError, match="no command"):
        PytorchJobBuilder().with_name("x").build()
    with pytest.raises(UserError, match="with_name"):
        PytorchJobBuilder().with_command("true").build()
