"""From inside a KFP lightweight component of namespace A (a real `millpond run`, multi-user mode): every
attempt on namespace B's artifacts, logs, Secret, PVC, dataset caches, mounts, the database and the TLS key
fails, B's processes are invisible and cannot be signalled; the task reads its input and writes its output.
In single-user mode the same task still sees the home, as before."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.conftest import spawn_cli, task
from tests.isolation.conftest import (
    NEEDS_ISOLATION,
    PIPELINES,
    PROBE,
    NamespaceB,
    assert_isolated,
    local_dataset_yaml,
    report_of,
)

pytestmark = NEEDS_ISOLATION


def test_a_kfp_task_of_namespace_a_reaches_nothing_of_namespace_b(cli, namespace_b: NamespaceB) -> None:
    result = cli("run", PIPELINES, "--pipeline", "team_a", "--experiment", "team-a", "-p", f"probe_path={PROBE}",
                 "-p", f"targets={namespace_b.targets()}", "-o", "json")
    assert result.code == 0, result.err
    data = result.json()
    said = json.loads(data["outputs"]["Output"])
    assert said["own_input"] == "a-input"
    assert Path(task(data, "a-probe")["outputs"]["result"]).read_text() == "a-output"
    assert_isolated(report_of(said["stdout"]), namespace_b)
    assert Path(namespace_b.paths["artifact"]).read_text() == "b-artifact"  # untouched
    assert not (Path(namespace_b.paths["pvc folder"]) / "written-by-a").exists()


def test_an_importer_of_namespace_b_s_artifact_fails_the_task(cli, namespace_b: NamespaceB) -> None:
    result = cli("run", PIPELINES, "--pipeline", "team_a_imports", "--experiment", "team-a",
                 "-p", f"uri={namespace_b.paths['artifact']}", "-o", "json")
    assert result.code != 0
    consumer = task(result.json(), "a-consume")
    assert consumer["state"] == "FAILED"
    assert "belongs to namespace 'team-b'" in consumer["error"], consumer["error"]


def test_the_same_namespace_reads_its_earlier_run_s_artifact(cli, namespace_b: NamespaceB) -> None:
    result = cli("run", PIPELINES, "--pipeline", "team_a_imports", "--experiment", "team-b",
                 "-p", f"uri={namespace_b.paths['artifact']}", "-o", "json")
    assert result.code == 0, result.err
    assert result.json()["outputs"]["Output"] == "b-artifact"


def test_a_single_user_task_still_sees_the_home(cli, home: Path) -> None:
    """Single-user mode (the default) is as before: one user, no cover over the home, the fork server."""
    assert cli("secret", "create", "mine", "--from-literal", "k=v").code == 0
    targets = {"paths": {"secret": str(home / "secrets" / "default" / "mine.json")}, "list": {"home": str(home)}}
    result = cli("run", PIPELINES, "--pipeline", "team_a", "-p", f"probe_path={PROBE}",
                 "-p", f"targets={json.dumps(targets)}", "-o", "json")
    assert result.code == 0, result.err
    report = report_of(json.loads(result.json()["outputs"]["Output"])["stdout"])
    assert report["paths"]["secret"] == {"read": "ok", "write": "ok"}
    assert {"secrets", "millpond.db"} <= set(report["listings"]["home"])
    assert report["processes"] > 8  # the host's processes


def test_without_bubblewrap_a_multi_user_task_is_refused_saying_what_to_install(home: Path, tmp_path: Path) -> None:
    """No bare-host fallback: the task fails with one line naming the package, and nothing of it ran."""
    tools = tmp_path / "bin"  # a PATH with a shell and the usual tools, but no bwrap
    tools.mkdir()
    for name in ("sh", "bash", "env", "ls", "cat", "mkdir", "rm", "sleep", "uname", "ldconfig"):
        found = shutil.which(name)
        if found:
            (tools / name).symlink_to(found)
    marker = tmp_path / "ran"
    runner = spawn_cli(home, "run", PIPELINES, "--pipeline", "team_a", "-p", f"probe_path={marker}",
                       "-p", "targets={}", "-o", "json", env={"MILLPOND_MULTI_USER": "1", "PATH": str(tools)})
    out, err = runner.communicate(timeout=300)
    assert runner.returncode != 0, out
    failed = task(json.loads(out), "a-produce")
    assert failed["state"] == "FAILED"
    assert failed["error"].startswith(  # then why its image was not used: the other way to isolate it
        "multi-user mode runs every namespace's processes isolated from the others, and cannot here: bubblewrap "
        "(bwrap) is not installed; install it: apt-get install -y bubblewrap"), failed["error"]
    assert not marker.exists()


def test_a_task_mounts_its_own_namespace_s_dataset_and_not_namespace_b_s(cli, tmp_path: Path,
                                                                        namespace_b: NamespaceB) -> None:
    for namespace, name in (("team-a", "a-data"), ("team-b", "b-data")):
        text = local_dataset_yaml(tmp_path, name, namespace, {"input.txt": f"{namespace}-dataset"})
        (tmp_path / f"{name}.yaml").write_text(text)
        assert cli("apply", "-f", tmp_path / f"{name}.yaml").code == 0
    own = cli("run", PIPELINES, "--pipeline", "team_a_mounts", "--experiment", "team-a", "-p", "claim=a-data",
              "-o", "json")
    assert own.code == 0, own.err
    assert own.json()["outputs"]["Output"] == "team-a-dataset"
    other = cli("run", PIPELINES, "--pipeline", "team_a_mounts", "--experiment", "team-a", "-p", "claim=b-data",
                "--no-cache", "-o", "json")
    assert other.code != 0
    assert "volume 'b-data' not found" in task(other.json(), "read-mounted")["error"]


def test_the_cache_is_each_namespace_s_own(cli, namespace_b: NamespaceB) -> None:
    """B ran ``team_b`` already: the same task in namespace A runs (no hit on B's outputs), then A's rerun hits."""
    first = cli("run", PIPELINES, "--pipeline", "team_b", "--experiment", "team-a", "-o", "json")
    assert first.code == 0, first.err
    assert task(first.json(), "b-produce")["cached"] is False
    again = cli("run", PIPELINES, "--pipeline", "team_b", "--experiment", "team-a", "-o", "json")
    assert again.code == 0, again.err
    assert task(again.json(), "b-produce")["cached"] is True


def test_namespace_b_s_dataset_is_shared_only_through_a_fluid_reference(cli, tmp_path: Path,
                                                                        namespace_b: NamespaceB) -> None:
    """Fluid's way across namespaces: a Dataset of A's whose one mount point is ``dataset://team-b/b-data``."""
    (tmp_path / "b.yaml").write_text(local_dataset_yaml(tmp_path, "b-data", "team-b", {"input.txt": "shared-by-b"}))
    assert cli("apply", "-f", tmp_path / "b.yaml").code == 0
    (tmp_path / "ref.yaml").write_text(
        "apiVersion: data.fluid.io/v1alpha1\nkind: Dataset\nmetadata: {name: from-b, namespace: team-a}\n"
        "spec:\n  mounts:\n  - {mountPoint: 'dataset://team-b/b-data', name: b}\n")
    applied = cli("apply", "-f", tmp_path / "ref.yaml")
    assert applied.code == 0, applied.err
    shared = cli("run", PIPELINES, "--pipeline", "team_a_mounts", "--experiment", "team-a", "-p", "claim=from-b",
                 "-o", "json")
    assert shared.code == 0, shared.err
    assert shared.json()["outputs"]["Output"] == "shared-by-b"


def test_a_dataset_reference_is_the_dataset_s_only_mount(cli, tmp_path: Path) -> None:
    (tmp_path / "ref.yaml").write_text(
        "apiVersion: data.fluid.io/v1alpha1\nkind: Dataset\nmetadata: {name: mixed, namespace: team-a}\n"
        "spec:\n  mounts:\n  - {mountPoint: 'dataset://team-b/b-data', name: b}\n"
        "  - {mountPoint: 'local:///tmp', name: t}\n")
    refused = cli("apply", "-f", tmp_path / "ref.yaml")
    assert refused.code == 2
    assert "a Dataset that references another (dataset://) has that one mount only" in refused.err
    (tmp_path / "bad.yaml").write_text(
        "apiVersion: data.fluid.io/v1alpha1\nkind: Dataset\nmetadata: {name: bad, namespace: team-a}\n"
        "spec:\n  mounts:\n  - {mountPoint: 'dataset://team-b/b-data/sub', name: b}\n")
    refused = cli("apply", "-f", tmp_path / "bad.yaml")
    assert refused.code == 2
    assert "expected dataset://NAMESPACE/NAME" in refused.err
