"""kfp 1.x volumes beyond the corpus: a VolumeOp named from a pipeline parameter, a VolumeOp restoring a
VolumeSnapshotOp (``data_source``) sized by the snapshot's ``size`` output, and an exit handler whose op takes
a pipeline parameter (Argo hands the onExit template the workflow's arguments)."""

from __future__ import annotations

import json
from pathlib import Path

WORKFLOW = Path(__file__).parents[1] / "pipelines" / "kfp_v1" / "volume_restore_exit_param.yaml"


def test_a_restored_volume_holds_the_snapshot_and_the_exit_handler_gets_its_parameter(cli, home: Path) -> None:
    result = cli("run", WORKFLOW, "-p", "name=scratch", "-p", "msg=ciao", "-o", "json")
    run = json.loads(result.out)
    assert run["state"] == "SUCCEEDED", result.err
    by_name = {t["name"]: t for t in run["tasks"]}
    volume = by_name["make-vol"]["outputs"]["name"]
    assert volume.endswith("-scratch-pvc") and volume.startswith("exit-with-param-"), volume  # the parameter
    assert by_name["snap"]["outputs"]["size"] == "1Mi"  # the data it holds, rounded up
    restored = by_name["restore"]["outputs"]["name"]
    assert (home / "volumes" / "default" / restored / "x").read_text() == "hi\n"  # a copy of the snapshot
    logs = cli("runs", "logs", run["run_id"]).out
    assert "==> exit-with-param/exit-handler-1/read <==\nhi" in logs, logs
    assert "==> exit-echo <==\nexit ciao" in logs, logs  # the workflow's argument, as Argo passes it


def test_an_exit_handler_parameter_the_workflow_lacks_is_refused(cli, tmp_path: Path) -> None:
    echo, rest = WORKFLOW.read_text().split("  - name: exit-handler-1\n", 1)
    echo = echo.replace("{{inputs.parameters.msg}}", "{{inputs.parameters.farewell}}")
    echo = echo.replace("      - {name: msg}\n", "      - {name: farewell}\n")
    text = echo + "  - name: exit-handler-1\n" + rest
    assert text.count("farewell") == 3  # the args, the annotation, the input
    (tmp_path / "broken.yaml").write_text(text)
    result = cli("run", tmp_path / "broken.yaml")
    assert result.code == 2 and result.err.count("\n") == 1, result.err
    assert "onExit template 'echo' takes parameter 'farewell'" in result.err
