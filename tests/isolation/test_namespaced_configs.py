"""Secrets, ConfigMaps and PVCs are objects of one namespace (multi-user mode, real `millpond run`s): the same
name in team-a and team-b is two objects and each run reads its own; a run of team-a naming an object only
team-b has fails with the kubelet's words in its namespace, and nothing of team-b's reaches it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult, task
from tests.isolation.conftest import NEEDS_ISOLATION

pytestmark = NEEDS_ISOLATION

PIPELINES = Path(__file__).parent / "namespaced_pipelines.py"
B_ONLY = "b-only-value"  # what team-b alone holds: never in anything team-a's run shows


def _claim(namespace: str, name: str) -> str:
    return (f"apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: {name}, namespace: {namespace}}}\n"
            "spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}\n")


@pytest.fixture
def two_teams(home: Path, cli: Callable[..., CliResult], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """creds, settings and data in team-a and in team-b (different values); b-only, b-settings, b-claim in team-b."""
    monkeypatch.setenv("MILLPOND_MULTI_USER", "1")
    claims = []
    for team in ("a", "b"):
        namespace = f"team-{team}"
        assert cli("secret", "create", "creds", "-n", namespace, "--from-literal", f"password={team}-pass").code == 0
        made = cli("configmap", "create", "settings", "-n", namespace, "--from-literal", f"level={team}-level")
        assert made.code == 0
        claims.append(_claim(namespace, "data"))
    assert cli("secret", "create", "b-only", "-n", "team-b", "--from-literal", f"password={B_ONLY}").code == 0
    assert cli("configmap", "create", "b-settings", "-n", "team-b", "--from-literal", f"level={B_ONLY}").code == 0
    claims.append(_claim("team-b", "b-claim"))
    manifest = tmp_path / "claims.yaml"
    manifest.write_text("---\n".join(claims))
    applied = cli("apply", "-f", manifest)
    assert applied.code == 0, applied.err
    for team in ("a", "b"):
        (home / "volumes" / f"team-{team}" / "data" / "file.txt").write_text(f"{team}-volume")
    (home / "volumes" / "team-b" / "b-claim" / "file.txt").write_text(B_ONLY)
    return home


def test_the_same_names_in_two_namespaces_are_two_objects_and_each_run_reads_its_own(cli, two_teams: Path) -> None:
    for team in ("a", "b"):
        result = cli("run", PIPELINES, "--pipeline", "reads_by_name", "--experiment", f"team-{team}", "-o", "json")
        assert result.code == 0, result.err
        assert result.json()["outputs"]["Output"] == f"{team}-pass|{team}-level|{team}-volume"


@pytest.mark.parametrize(("parameter", "words"), [
    ("secret=b-only", 'secret "b-only" not found in namespace "team-a"'),
    ("config_map=b-settings", 'configmap "b-settings" not found in namespace "team-a"'),
    ("claim=b-claim", 'persistentvolumeclaim "b-claim" not found in namespace "team-a"'),
])
def test_a_run_of_team_a_naming_team_b_s_object_fails_with_the_kubelet_s_words(cli, two_teams: Path, parameter: str,
                                                                                words: str) -> None:
    result = cli("run", PIPELINES, "--pipeline", "reads_by_name", "--experiment", "team-a", "-p", parameter,
                 "-o", "json")
    assert result.code != 0
    step = task(result.json(), "read-named")
    assert step["state"] == "FAILED" and words in step["error"], step["error"]
    log = Path(step["log"]).read_text() if step.get("log") and Path(step["log"]).exists() else ""
    for shown in (result.out, result.err, log):
        assert B_ONLY not in shown


def test_a_constant_name_of_team_b_s_secret_is_refused_when_team_a_submits(cli, two_teams: Path) -> None:
    result = cli("run", PIPELINES, "--pipeline", "names_a_constant_secret", "--experiment", "team-a")
    assert result.code == 2 and result.err.count("\n") == 1, result.err
    assert 'secret "b-only" (used by read-named) not found in namespace "team-a"' in result.err
    assert "millpond secret create b-only -n team-a" in result.err and B_ONLY not in result.err
    again = cli("run", PIPELINES, "--pipeline", "names_a_constant_secret", "--experiment", "team-b", "-o", "json")
    assert again.code == 0, again.err  # team-b's own Secret: found
