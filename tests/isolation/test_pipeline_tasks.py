"""From inside a KFP lightweight component of namespace A (a real `millpond run`, multi-user mode): every
attempt on namespace B's artifacts, logs, Secret, PVC, dataset caches, mounts, the database and the TLS key
fails, B's processes are invisible and cannot be signalled; the task reads its input and writes its output.
In single-user mode the same task still sees the home, as before."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import task
from tests.isolation.conftest import NEEDS_ISOLATION, PIPELINES, PROBE, NamespaceB, assert_isolated, report_of

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
    targets = {"paths": {"secret": str(home / "secrets" / "mine.json")}, "list": {"home": str(home)}}
    result = cli("run", PIPELINES, "--pipeline", "team_a", "-p", f"probe_path={PROBE}",
                 "-p", f"targets={json.dumps(targets)}", "-o", "json")
    assert result.code == 0, result.err
    report = report_of(json.loads(result.json()["outputs"]["Output"])["stdout"])
    assert report["paths"]["secret"] == {"read": "ok", "write": "ok"}
    assert {"secrets", "millpond.db"} <= set(report["listings"]["home"])
    assert report["processes"] > 8  # the host's processes
