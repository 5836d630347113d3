"""A task of namespace A in its container image (multi-user mode, Podman): the runtime's own PID namespace and
only the task's explicit mounts — nothing of namespace B, of the home or of the host's processes."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import task
from tests.isolation.conftest import NEEDS_ISOLATION, PROBE, NamespaceB, assert_isolated, report_of

pytestmark = NEEDS_ISOLATION

PIPELINE = '''
from kfp import dsl


@dsl.container_component
def probe_in_image(source: str, targets: str):
    return dsl.ContainerSpec(image="IMAGE", command=["python3", "-c", source, targets])


@dsl.pipeline
def in_image(source: str, targets: str) -> None:
    probe_in_image(source=source, targets=targets)
'''


def test_a_task_in_its_image_reaches_nothing_of_namespace_b(cli, tmp_path: Path, python_image: str,
                                                            namespace_b: NamespaceB, monkeypatch) -> None:
    monkeypatch.setenv("MILLPOND_RUNTIME", "podman")
    pipeline = tmp_path / "in_image.py"
    pipeline.write_text(PIPELINE.replace("IMAGE", python_image))
    result = cli("run", pipeline, "--experiment", "team-a", "-p", f"source={PROBE.read_text()}",
                 "-p", f"targets={namespace_b.targets()}", "-o", "json")
    assert result.code == 0, result.err
    probed = task(result.json(), "probe-in-image")
    assert probed["ran_in"] == "podman", probed["ran_in"]  # in its image, not on the host
    assert_isolated(report_of(Path(probed["log"]).read_text()), namespace_b)
