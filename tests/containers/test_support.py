"""The container tests' ground: the fixtures of tests/containers_support.py work for real, and the core's
pieces they exercise (image references, pulls with Kubernetes' reasons, the ``podman run`` words) hold.

The fixtures are proven by using them as millpond does: a process runs in the Python image through
``command.run_argv`` (its environment by name only), an image's own entrypoint and an image's own
module are there, and an image pushed to the local registry is pulled by ``images.ensure`` with a
pull Secret's credentials, refused with the registry's words for a wrong password.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import time
from pathlib import Path

import pytest

from millpond.errors import TaskFailure
from millpond.runners.base import Bind
from millpond.runners.containers import images, runtimes, sweep
from millpond.runners.containers.command import ENGINE_LABEL, ContainerLimits, ContainerRun, run_argv
from millpond.runners.containers.runtimes import ContainerRuntime
from tests.containers_support import (
    PYTHON_IMAGE,
    Registry,
    build_image,
    debian_mirror,
    dockerconfigjson,
    image_id,
    is_static_elf,
    millpond_containers,
    podman,
)

FAKE_PODMAN = ContainerRuntime("podman", "/usr/bin/podman", ("--runtime", "runc"), "4.3.1")


def _run(argv: list[str], env: dict[str, str] | None = None, cwd: Path | None = None,
         timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


# -- images.parse and the default pull policy: tables -----------------------------------------------------


@pytest.mark.parametrize(("image", "full", "domain", "path", "tag", "digest"), [
    ("python:3.11", "docker.io/library/python:3.11", "docker.io", "library/python", "3.11", None),
    ("python", "docker.io/library/python:latest", "docker.io", "library/python", "latest", None),
    ("team/app:2", "docker.io/team/app:2", "docker.io", "team/app", "2", None),
    ("docker.io/library/busybox:1", "docker.io/library/busybox:1", "docker.io", "library/busybox", "1", None),
    ("localhost/x", "localhost/x:latest", "localhost", "x", "latest", None),
    ("localhost:5000/x:3", "localhost:5000/x:3", "localhost:5000", "x", "3", None),
    ("127.0.0.1:5000/a/b:1", "127.0.0.1:5000/a/b:1", "127.0.0.1:5000", "a/b", "1", None),
    ("gcr.io/proj/img", "gcr.io/proj/img:latest", "gcr.io", "proj/img", "latest", None),
    ("Quay.IO/org/app:v1", "quay.io/org/app:v1", "quay.io", "org/app", "v1", None),
    ("python@sha256:" + "a" * 64, "docker.io/library/python@sha256:" + "a" * 64,
     "docker.io", "library/python", None, "sha256:" + "a" * 64),
    ("127.0.0.1:5000/a:1@sha256:" + "b" * 64, "127.0.0.1:5000/a:1@sha256:" + "b" * 64,
     "127.0.0.1:5000", "a", "1", "sha256:" + "b" * 64),
])
def test_an_image_reference_reads_as_docker_and_kubernetes_read_it(
        image: str, full: str, domain: str, path: str, tag: str | None, digest: str | None) -> None:
    ref = images.parse(image)
    assert (ref.full, ref.domain, ref.path, ref.tag, ref.digest) == (full, domain, path, tag, digest)
    assert ref.repository == f"{domain}/{path}"


@pytest.mark.parametrize("image", ["", "   ", "has space:1", "a..b", "a//b", "-leading", "x:1;rm -rf /"])
def test_what_is_no_image_reference_is_refused_naming_it(image: str) -> None:
    with pytest.raises(TaskFailure, match="is not a valid image reference"):
        images.parse(image)


@pytest.mark.parametrize(("image", "policy"), [
    ("python", "Always"),
    ("python:latest", "Always"),
    ("localhost/x", "Always"),
    ("python:3.11", "IfNotPresent"),
    ("127.0.0.1:5000/a/b:1", "IfNotPresent"),
    ("python@sha256:" + "c" * 64, "IfNotPresent"),
    ("python:latest@sha256:" + "c" * 64, "IfNotPresent"),
])
def test_the_default_pull_policy_is_kubernetes(image: str, policy: str) -> None:
    assert images.default_pull_policy(image) == policy
    assert images.pull_policy_of(image, None) == policy
    assert images.pull_policy_of(image, "") == policy
    assert images.pull_policy_of(image, "Never") == "Never"


def test_an_unknown_pull_policy_is_refused() -> None:
    with pytest.raises(TaskFailure, match="imagePullPolicy 'Sometimes' is not one of Always, IfNotPresent, Never"):
        images.pull_policy_of("python:3.11", "Sometimes")


# -- command.run_argv: the words of ``podman run`` ----------------------------------------------------------


def _container_run(tmp_path: Path, **changes: object) -> ContainerRun:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    fields: dict[str, object] = {
        "image": "python:3.11", "argv": ["python3", "-c", "print(1)"],
        "env": {"TOKEN": "s3cr3t-value", "PATH": "/host/bin", "GREETING": "hello world"},
        "cwd": work, "binds": [],
    }
    fields.update(changes)
    return ContainerRun(**fields)  # type: ignore[arg-type]


def test_environment_values_never_reach_the_command_line(tmp_path: Path) -> None:
    argv, env = run_argv(FAKE_PODMAN, _container_run(tmp_path))
    assert not any("s3cr3t-value" in word or "hello world" in word for word in argv)
    names = [argv[i + 1] for i, word in enumerate(argv) if word == "-e"]
    assert names == ["GREETING", "TOKEN"]  # PATH describes the host: the image has its own
    assert env["TOKEN"] == "s3cr3t-value" and env["GREETING"] == "hello world"
    assert env.get("PATH") == os.environ.get("PATH")  # the runtime's own PATH, not the task's


def test_a_command_becomes_the_entrypoint_and_args_only_keeps_the_images(tmp_path: Path) -> None:
    argv, _ = run_argv(FAKE_PODMAN, _container_run(tmp_path))
    assert argv[:3] == ["/usr/bin/podman", "--runtime", "runc"]
    at = argv.index("--entrypoint")
    assert json.loads(argv[at + 1]) == ["python3"]
    assert argv[-3:] == ["docker.io/library/python:3.11", "-c", "print(1)"]
    for word in ("--init", "--rm", "--pull", "never"):
        assert word in argv
    assert argv[argv.index("--network") + 1] == "host"

    argv, _ = run_argv(FAKE_PODMAN, _container_run(tmp_path, argv=["--epochs", "2"], args_only=True))
    assert "--entrypoint" not in argv
    assert argv[-3:] == ["docker.io/library/python:3.11", "--epochs", "2"]


def test_labels_limits_and_binds_are_the_runtimes_flags(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    run = _container_run(
        tmp_path, binds=[Bind(data, "/mnt/data", read_only=True), Bind(tmp_path / "out", "/tmp/outputs/")],
        labels={ENGINE_LABEL: "tok123", "io.millpond.owner": "run-1/task"},
        limits=ContainerLimits(memory_bytes=64 * 2**20, cpus=1.5, shm_bytes=2**30),
        same_paths=[tmp_path / "work" / "inner"],
    )
    argv, _ = run_argv(FAKE_PODMAN, run)

    def values(flag: str) -> list[str]:
        return [argv[i + 1] for i, word in enumerate(argv) if word == flag]

    assert values("--label") == [f"{ENGINE_LABEL}=tok123", "io.millpond.owner=run-1/task"]
    assert values("--memory") == [str(64 * 2**20)] and values("--memory-swap") == [str(64 * 2**20)]
    assert values("--cpus") == ["1.5"] and values("--shm-size") == [str(2**30)]
    assert "--rm" in argv  # removed by the runtime when it exits (a stopped client's container: sweep.remove)
    assert values("-v") == [f"{data}:/mnt/data:ro", f"{tmp_path / 'out'}:/tmp/outputs",
                            f"{tmp_path / 'work'}:{tmp_path / 'work'}"]  # the inner folder shows through it
    assert values("-w") == [str(tmp_path / "work")]
    ulimits = values("--ulimit")
    assert [u.split("=")[0] for u in ulimits] == ["nofile", "nproc"]


# -- the Debian mirror and the static busybox the images are made from ----------------------------------------


def test_the_mirror_is_apts_release_archive_from_deb822_or_one_line_sources(tmp_path: Path) -> None:
    sources_d = tmp_path / "sources.list.d"
    sources_d.mkdir()
    (sources_d / "debian.sources").write_text(
        "Types: deb\n# http://snapshot.debian.org/archive/debian-security/20250520T000000Z\n"
        "URIs: http://deb.debian.org/debian-security\nSuites: bookworm-security\nComponents: main\n\n"
        "Types: deb-src deb\nURIs: http://mirror.example/debian/\nSuites: bookworm bookworm-updates\n"
        "Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n")
    assert debian_mirror(sources_d, tmp_path / "none.list") == "http://mirror.example/debian"

    one_line = tmp_path / "sources.list"
    one_line.write_text("# deb http://commented.example/debian bookworm main\n"
                        "deb [arch=amd64 signed-by=/k.gpg] http://other.example/debian bookworm main\n")
    assert debian_mirror(tmp_path / "no.d", one_line) == "http://other.example/debian"
    assert debian_mirror(tmp_path / "no.d", tmp_path / "none.list") == "http://deb.debian.org/debian"


def test_only_a_static_elf_counts_as_a_static_busybox(tmp_path: Path) -> None:
    script = tmp_path / "script"
    script.write_text("#!/bin/sh\n")
    assert not is_static_elf(script)
    assert not is_static_elf(Path("/bin/sh"))  # dynamically linked: it needs a libc FROM scratch has not
    assert not is_static_elf(tmp_path / "missing")


@pytest.mark.parametrize(("env", "outcome"), [
    ({}, pytest.skip.Exception),
    ({"CI": "false", "MILLPOND_CI": "0"}, pytest.skip.Exception),
    ({"CI": "true"}, pytest.fail.Exception),
    ({"MILLPOND_CI": "1"}, pytest.fail.Exception),
])
def test_without_podman_a_test_is_skipped_saying_why_but_fails_in_ci(
        monkeypatch: pytest.MonkeyPatch, env: dict[str, str], outcome: type[BaseException]) -> None:
    for name in ("CI", "MILLPOND_CI"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(runtimes, "probe", lambda name: f"{name} is not installed (apt-get install -y podman)")
    with pytest.raises(outcome, match="podman is not installed"):
        podman()


# -- the images ----------------------------------------------------------------------------------------------


def test_the_python_image_runs_python3_with_the_runtimes_flags(podman: ContainerRuntime, python_image: str,
                                                                tmp_path: Path) -> None:
    assert python_image == PYTHON_IMAGE
    done = _run(podman.argv("run", "--rm", *podman.run_flags(), "--network", "host", python_image,
                            "python3", "-c", "import sys; print(sys.version_info[:2], sys.executable)"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "(3, 11) /usr/bin/python3"


def test_a_process_runs_in_the_image_as_run_argv_says(podman: ContainerRuntime, python_image: str,
                                                     tmp_path: Path) -> None:
    """The environment arrives by name, a read-only bind is read-only, the working folder is the host's."""
    shown = tmp_path / "shown"
    shown.mkdir()
    (shown / "input.txt").write_text("from the host")
    code = ("import os, pathlib; print(os.environ['TOKEN'], os.getcwd(), pathlib.Path('/in/input.txt').read_text());"
            "pathlib.Path('made.txt').write_text('in the image');"
            "open('/in/nope', 'w')")
    run = _container_run(tmp_path, image=python_image, argv=["python3", "-c", code],
                         binds=[Bind(shown, "/in", read_only=True)])
    argv, env = run_argv(podman, run)
    done = _run(argv, env=env, cwd=tmp_path)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stdout.strip() == f"s3cr3t-value {tmp_path / 'work'} from the host"
    assert "Read-only file system" in done.stderr
    assert (tmp_path / "work" / "made.txt").read_text() == "in the image"


def test_an_entrypoint_that_only_the_image_has_runs(podman: ContainerRuntime, busybox_image: str,
                                                     tmp_path: Path) -> None:
    entry = "#!/bin/sh\necho \"custom entrypoint got: $*\"\n"
    tag = build_image("localhost/millpond-test/support-entrypoint:1",
                      f"FROM {busybox_image}\nCOPY custom-entrypoint.sh /bin/custom-entrypoint.sh\n"
                      'ENTRYPOINT ["/bin/custom-entrypoint.sh"]\n',
                      {"custom-entrypoint.sh": entry})
    assert not Path("/bin/custom-entrypoint.sh").exists()
    argv, env = run_argv(podman, _container_run(tmp_path, image=tag, argv=["a", "b"], args_only=True))
    done = _run(argv, env=env, cwd=tmp_path)
    assert (done.returncode, done.stdout.strip()) == (0, "custom entrypoint got: a b"), done.stderr
    argv, env = run_argv(podman, _container_run(tmp_path, image=tag, argv=["/bin/custom-entrypoint.sh", "c"]))
    done = _run(argv, env=env, cwd=tmp_path)
    assert (done.returncode, done.stdout.strip()) == (0, "custom entrypoint got: c"), done.stderr


def test_a_module_only_the_image_has_imports_and_a_changed_input_rebuilds(podman: ContainerRuntime,
                                                                           python_image: str) -> None:
    tag = "localhost/millpond-test/support-only-in-image:1"
    containerfile = f"FROM {python_image}\nCOPY only_in_image.py /usr/lib/python3/dist-packages/only_in_image.py\n"
    module = "WHERE = 'only in the image'\n"
    build_image(tag, containerfile, {"only_in_image.py": module})
    first = image_id(podman, tag)
    started = time.monotonic()
    build_image(tag, containerfile, {"only_in_image.py": module})
    assert image_id(podman, tag) == first  # unchanged inputs: nothing built
    assert time.monotonic() - started < 10
    done = _run(podman.argv("run", "--rm", *podman.run_flags(), tag, "python3", "-c",
                            "import only_in_image; print(only_in_image.WHERE)"))
    assert (done.returncode, done.stdout.strip()) == (0, "only in the image"), done.stderr
    with pytest.raises(ImportError):
        __import__("only_in_image")

    build_image(tag, containerfile, {"only_in_image.py": "WHERE = 'changed'\n"})
    assert image_id(podman, tag) != first
    done = _run(podman.argv("run", "--rm", *podman.run_flags(), tag, "python3", "-c",
                            "import only_in_image; print(only_in_image.WHERE)"))
    assert done.stdout.strip() == "changed", done.stderr


# -- the registry and pulls as the kubelet pulls ---------------------------------------------------------------


@pytest.fixture
def pulls_from(registry: Registry, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Registry:
    """The registry, reachable by millpond's pulls (insecure: plain HTTP), with no credentials of the user's."""
    for name, value in registry.env().items():
        monkeypatch.setenv(name, value)
    no_auths = tmp_path / "auth.json"  # podman refuses a REGISTRY_AUTH_FILE that is not there
    no_auths.write_text('{"auths": {}}')
    monkeypatch.setenv("REGISTRY_AUTH_FILE", str(no_auths))
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "no-docker-config"))
    return registry


def _fresh_repo(registry: Registry, busybox_image: str) -> str:
    """A repository of its own per test (the back-off is kept per image), holding the busybox image."""
    return registry.push(busybox_image, f"test/busybox-{secrets.token_hex(4)}:1")


def test_a_pushed_image_pulls_with_a_pull_secrets_credentials(podman: ContainerRuntime, busybox_image: str,
                                                               pulls_from: Registry) -> None:
    remote = _fresh_repo(pulls_from, busybox_image)
    assert remote.startswith(f"{pulls_from.host}/test/busybox-")
    secret = [json.loads(pulls_from.dockerconfigjson())]
    assert images.ensure(podman, remote, "Always", pull_secrets=secret) == "pulled"
    assert images.is_present(podman, remote)
    assert images.ensure(podman, remote, "IfNotPresent") == "present"
    assert image_id(podman, remote) == image_id(podman, busybox_image)


def test_a_wrong_password_is_err_image_pull_with_the_registrys_words_then_back_off(
        podman: ContainerRuntime, busybox_image: str, pulls_from: Registry) -> None:
    remote = _fresh_repo(pulls_from, busybox_image)
    wrong = [json.loads(pulls_from.dockerconfigjson(password="not-the-password"))]
    with pytest.raises(images.ImagePullError) as failed:
        images.ensure(podman, remote, "Always", pull_secrets=wrong)
    assert failed.value.reason == "ErrImagePull"
    assert "unauthorized" in failed.value.detail.lower(), failed.value.detail
    assert not images.is_present(podman, remote)

    with pytest.raises(images.ImagePullError) as again:  # within the kubelet's back-off: no pull at all
        images.ensure(podman, remote, "Always", pull_secrets=[json.loads(pulls_from.dockerconfigjson())])
    assert again.value.reason == "ImagePullBackOff"
    assert remote in str(again.value) and "unauthorized" in str(again.value).lower()


def test_no_credentials_at_all_is_refused_by_the_registry(podman: ContainerRuntime, busybox_image: str,
                                                           pulls_from: Registry) -> None:
    remote = _fresh_repo(pulls_from, busybox_image)
    with pytest.raises(images.ImagePullError) as failed:
        images.ensure(podman, remote, "IfNotPresent")
    assert failed.value.reason == "ErrImagePull"
    assert "unauthorized" in failed.value.detail.lower() or "authentication" in failed.value.detail.lower()


def test_an_image_the_registry_has_not_is_err_image_pull_with_its_words(podman: ContainerRuntime,
                                                                         pulls_from: Registry) -> None:
    missing = f"{pulls_from.host}/test/never-pushed-{secrets.token_hex(4)}:1"
    with pytest.raises(images.ImagePullError) as failed:
        images.ensure(podman, missing, "IfNotPresent", pull_secrets=[json.loads(pulls_from.dockerconfigjson())])
    assert failed.value.reason == "ErrImagePull"
    assert "manifest unknown" in failed.value.detail, failed.value.detail


def test_pull_policy_never_with_a_missing_image_is_err_image_never_pull(podman: ContainerRuntime,
                                                                          pulls_from: Registry) -> None:
    missing = f"{pulls_from.host}/test/never-pushed-{secrets.token_hex(4)}:1"
    with pytest.raises(images.ImagePullError) as failed:
        images.ensure(podman, missing, "Never")
    assert failed.value.reason == "ErrImageNeverPull"
    assert failed.value.detail == f'Container image "{missing}" is not present with pull policy of Never'


def test_as_docker_ios_mirror_a_docker_hub_name_pulls_from_the_registry(
        podman: ContainerRuntime, busybox_image: str, pulls_from: Registry, monkeypatch: pytest.MonkeyPatch) -> None:
    name = f"millpond-support-{secrets.token_hex(4)}:1"  # as a pipeline names it: docker.io/library/NAME
    pulls_from.push(busybox_image, f"library/{name}")
    for variable, value in pulls_from.env(mirror_docker_io=True).items():
        monkeypatch.setenv(variable, value)
    secret = [json.loads(pulls_from.dockerconfigjson())]
    try:
        assert images.ensure(podman, name, "Always", pull_secrets=secret) == "pulled"
        assert image_id(podman, f"docker.io/library/{name}") == image_id(podman, busybox_image)
    finally:
        _run(podman.argv("rmi", f"docker.io/library/{name}"))


def test_dockerconfigjson_is_a_pull_secrets_text() -> None:
    text = dockerconfigjson("127.0.0.1:5000", "user", "pa:ss")
    auths = images.dockerconfig_of({".dockerconfigjson": text}, "secret s")["auths"]
    assert auths == {"127.0.0.1:5000": {"username": "user", "password": "pa:ss", "auth": "dXNlcjpwYTpzcw=="}}


# -- what is left running -------------------------------------------------------------------------------------


def test_millpond_containers_lists_a_running_labelled_container_until_it_is_removed(
        podman: ContainerRuntime, busybox_image: str, tmp_path: Path) -> None:
    token = secrets.token_hex(6)
    name = f"millpond-test-{token}"
    started = _run(podman.argv("run", "-d", "--name", name, *podman.run_flags(), "--label", f"{ENGINE_LABEL}={token}",
                               busybox_image, "sleep", "300"), cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    try:
        ids = millpond_containers(token)
        assert ids == [started.stdout.strip()]
        assert ids[0] in millpond_containers()
        assert millpond_containers(secrets.token_hex(6)) == []
    finally:
        sweep.remove_engine(podman, token)
    assert millpond_containers(token) == []
    assert sweep.labelled(podman, f"{ENGINE_LABEL}={token}") == []  # removed, not only stopped
