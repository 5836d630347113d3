"""kfp-kubernetes on one machine: secrets, config maps, volumes, pod metadata, and their CLI.

The platform configs come from real pipelines compiled with kfp and ``kfp.kubernetes``
(tests/pipelines/platform_*.py); mounts are checked in a real bubblewrap sandbox, and the
host is checked to be unchanged afterwards. Secret values must never show in any output.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import threading
from pathlib import Path
from typing import Any, Callable

import pytest

from millpond.errors import UserError
from millpond.pipelines import ir
from millpond.pipelines.loader import load_pipeline
from millpond.pipelines.platform import PlatformError, PodInfo, TaskPlatform, builtin_task, prepare_platform
from millpond.runners.base import Bind, ProcessSpec
from millpond.runners.local import LocalRunner
from millpond.runners.sandbox import sandbox_problem, wrap
from millpond.store.secrets import ConfigStore, MissingConfig
from tests.conftest import PIPELINES, task

USER = "pond-user-4711"
PASSWORD = "pw-Zq81-never-printed"
LEVEL = "debug-level-9"
VALUES = (USER, PASSWORD, LEVEL)

needs_sandbox = pytest.mark.skipif(sandbox_problem() is not None, reason=f"no sandbox: {sandbox_problem()}")


# --- helpers ------------------------------------------------------------------------------------


def executor_config(file: str, pipeline: str, label: str) -> dict[str, Any]:
    """The KubernetesExecutorConfig kfp compiles for one executor of a test pipeline."""
    loaded = load_pipeline(PIPELINES / file, pipeline)
    return ir.kubernetes_config(loaded.platform_spec, label)


def resolver(
    inputs: dict[str, Any] | None = None, outputs: dict[str, dict[str, Any]] | None = None
) -> Callable[[dict[str, Any]], Any]:
    """What the engine supplies: a binding's value in the task's scope, None when it has none."""
    inputs, outputs = inputs or {}, outputs or {}

    def resolve(binding: dict[str, Any]) -> Any:
        if "runtimeValue" in binding:
            return binding["runtimeValue"].get("constant")
        if "componentInputParameter" in binding:
            return inputs.get(binding["componentInputParameter"])
        if "taskOutputParameter" in binding:
            ref = binding["taskOutputParameter"]
            return outputs.get(ref["producerTask"], {}).get(ref["outputParameterKey"])
        raise ValueError(f"unsupported binding {sorted(binding)}")

    return resolve


@pytest.fixture
def configs(tmp_path: Path) -> ConfigStore:
    store = ConfigStore(tmp_path / "home")
    store.create("secret", "db-creds", {"username": USER, "password": PASSWORD})
    store.create("configmap", "app-settings", {"level": LEVEL})
    return store


def prepare(config: dict[str, Any], configs: ConfigStore, tmp_path: Path, **resolve_args: Any) -> TaskPlatform:
    return prepare_platform(
        config, resolve=resolver(**resolve_args), configs=configs, volumes_dir=tmp_path / "volumes",
        scratch_dir=tmp_path / "scratch", pod=PodInfo(name="run-1-task", uid="uid-1", node="node-1"),
    )


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def assert_no_values(*texts: str) -> None:
    for text in texts:
        for value in VALUES:
            assert value not in text


# --- the store ----------------------------------------------------------------------------------


def test_store_round_trip_with_private_files(tmp_path: Path) -> None:
    store = ConfigStore(tmp_path / "home")
    store.create("secret", "db-creds", {"username": USER, "password": PASSWORD})
    store.create("configmap", "app.settings-1", {"level": LEVEL, "a_b.c-d": ""})

    assert store.get("secret", "db-creds") == {"username": USER, "password": PASSWORD}
    assert store.list("secret") == [("db-creds", ["password", "username"])]
    assert store.list("configmap") == [("app.settings-1", ["a_b.c-d", "level"])]
    secrets_dir = tmp_path / "home" / "secrets"
    assert mode(secrets_dir) == 0o700 and mode(secrets_dir / "default") == 0o700  # one folder per namespace
    assert mode(secrets_dir / "default" / "db-creds.json") == 0o600
    assert mode(tmp_path / "home" / "configmaps" / "default" / "app.settings-1.json") == 0o644
    assert sorted(p.name for p in (secrets_dir / "default").iterdir()) == ["db-creds.json"]  # no temporary files

    with pytest.raises(UserError, match="already exists"):
        store.create("secret", "db-creds", {"username": "other"})
    assert store.get("secret", "db-creds")["username"] == USER
    store.create("secret", "db-creds", {"token": "t"}, replace=True)
    assert store.get("secret", "db-creds") == {"token": "t"}

    store.delete("secret", "db-creds")
    assert store.list("secret") == []
    with pytest.raises(MissingConfig) as missing:
        store.get("secret", "db-creds")
    assert str(missing.value) == "secret 'db-creds' not found"
    assert isinstance(missing.value, KeyError)
    with pytest.raises(MissingConfig):
        store.delete("configmap", "nope")


@pytest.mark.parametrize("name", ["Upper", "under_score", "-dash", "dash-", "a..b", "", "x" * 254, "a/b"])
def test_store_rejects_names_kubernetes_rejects(tmp_path: Path, name: str) -> None:
    with pytest.raises(UserError, match="invalid secret name") as error:
        ConfigStore(tmp_path).create("secret", name, {"k": "v"})
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("key", ["", ".", "..", "..x", "a/b", "a b", "é"])
def test_store_rejects_keys_kubernetes_rejects(tmp_path: Path, key: str) -> None:
    with pytest.raises(UserError, match="invalid configmap key"):
        ConfigStore(tmp_path).create("configmap", "ok", {key: "v"})
    assert not (tmp_path / "configmaps" / "ok.json").exists()


# --- the CLI --------------------------------------------------------------------------------------


def test_secret_cli_never_shows_values(cli, home: Path, tmp_path: Path) -> None:
    password_file = tmp_path / "password.txt"
    password_file.write_text(PASSWORD)
    level_file = tmp_path / "level"
    level_file.write_text(LEVEL)
    results = [
        cli("secret", "create", "db-creds", "--from-literal", f"username={USER}",
            "--from-file", f"password={password_file}", "--from-file", level_file),
    ]
    assert results[-1].code == 0, results[-1].err
    assert ConfigStore(home).get("secret", "db-creds") == {"username": USER, "password": PASSWORD, "level": LEVEL}
    assert mode(home / "secrets") == 0o700 and mode(home / "secrets" / "default" / "db-creds.json") == 0o600

    results.append(cli("secret", "list"))
    assert results[-1].code == 0
    assert "db-creds" in results[-1].out and "level,password,username" in results[-1].out
    results.append(cli("secret", "list", "-o", "json"))
    assert results[-1].json() == [{"name": "db-creds", "keys": ["level", "password", "username"]}]

    again = cli("secret", "create", "db-creds", "--from-literal", f"username={PASSWORD}")
    assert again.code == 2
    assert again.err.strip() == "error: secret 'db-creds' already exists (use --replace to overwrite it)"
    results.append(again)
    no_key = cli("secret", "create", "other", "--from-literal", PASSWORD)  # forgot KEY=: the value is not echoed
    assert no_key.code == 2 and no_key.err.count("\n") == 1 and "KEY=VALUE" in no_key.err
    results.append(no_key)
    twice = cli("secret", "create", "other", "--from-literal", f"k={USER}", "--from-literal", f"k={PASSWORD}")
    assert twice.code == 2 and "given twice" in twice.err
    results.append(twice)
    results.append(cli("secret", "create", "db-creds", "--replace", "--from-literal", f"username={USER}"))
    assert results[-1].code == 0
    assert ConfigStore(home).get("secret", "db-creds") == {"username": USER}

    results.append(cli("secret", "delete", "db-creds"))
    assert results[-1].code == 0
    gone = cli("secret", "delete", "db-creds")
    assert gone.code == 2 and gone.err == "error: secret 'db-creds' not found\n"
    results.append(gone)
    results.append(cli("secret", "list", "-o", "json"))
    assert results[-1].json() == []
    for result in results:
        assert_no_values(result.out, result.err)


def test_configmap_cli(cli, home: Path, tmp_path: Path) -> None:
    created = cli("configmap", "create", "app-settings", "--from-literal", f"level={LEVEL}")
    assert created.code == 0, created.err
    assert mode(home / "configmaps" / "default" / "app-settings.json") == 0o644
    listed = cli("configmap", "list", "-o", "json")
    assert listed.json() == [{"name": "app-settings", "keys": ["level"]}]
    assert_no_values(created.out, created.err, listed.out, listed.err)
    assert cli("secret", "list", "-o", "json").json() == []  # kinds are kept apart

    bad = cli("configmap", "create", "App_Settings", "--from-literal", "a=b")
    assert bad.code == 2
    assert bad.err.startswith("error: invalid configmap name 'App_Settings'") and bad.err.count("\n") == 1
    bad_key = cli("configmap", "create", "ok", "--from-literal", "a/b=c")
    assert bad_key.code == 2 and "invalid configmap key 'a/b'" in bad_key.err
    missing_file = cli("configmap", "create", "ok", "--from-file", f"k={tmp_path / 'nope'}")
    assert missing_file.code == 2 and "no such file" in missing_file.err
    assert cli("configmap", "delete", "app-settings").code == 0
    gone = cli("configmap", "delete", "app-settings")
    assert gone.code == 2 and gone.err == "error: configmap 'app-settings' not found\n"


# --- prepare_platform ---------------------------------------------------------------------------


def test_secrets_and_config_maps_as_env(configs: ConfigStore, tmp_path: Path) -> None:
    config = executor_config("platform_secrets.py", "platform_secrets", "exec-env-digest")
    platform = prepare(
        config, configs, tmp_path,
        inputs={"secret": "db-creds", "settings": "app-settings"}, outputs={"secret-name": {"Output": "db-creds"}},
    )
    assert platform.env == {"DB_USER": USER, "DB_PASSWORD": PASSWORD, "DB_USER_AGAIN": USER, "LEVEL": LEVEL}
    assert platform.binds == [] and platform.notes == [] and platform.timeout_s is None
    assert_no_values(repr(platform))


def test_secrets_and_config_maps_as_files(configs: ConfigStore, tmp_path: Path) -> None:
    config = executor_config("platform_secrets.py", "platform_secrets", "exec-files-digest")
    platform = prepare(config, configs, tmp_path, inputs={"secret": "db-creds", "settings": "app-settings"})
    binds = {bind.target: bind for bind in platform.binds}
    assert sorted(binds) == ["/etc/millpond-settings", "/mnt/creds"]
    assert all(bind.read_only for bind in binds.values())
    secret_dir = binds["/mnt/creds"].source
    assert secret_dir.parent == tmp_path / "scratch" and mode(secret_dir) == 0o700
    assert (secret_dir / "password").read_text() == PASSWORD and mode(secret_dir / "password") == 0o600
    assert (secret_dir / "username").read_text() == USER
    config_dir = binds["/etc/millpond-settings"].source
    assert (config_dir / "level").read_text() == LEVEL and mode(config_dir / "level") == 0o644
    platform.cleanup()
    assert not secret_dir.exists() and not config_dir.exists()


def test_missing_optional_ones_are_skipped(configs: ConfigStore, tmp_path: Path) -> None:
    config = executor_config("platform_secrets.py", "platform_optional", "exec-optional-env")
    assert prepare(config, configs, tmp_path, inputs={"missing": ""}).env == {}
    platform = prepare(config, configs, tmp_path)  # the name's pipeline input has no value at all
    assert platform.env == {} and platform.binds == []

    def no_value(binding: dict[str, Any]) -> Any:
        raise KeyError("missing")  # an engine may say "no value" with KeyError instead of None

    platform = prepare_platform(
        config, resolve=no_value, configs=configs, volumes_dir=tmp_path, scratch_dir=tmp_path, pod=PodInfo("p")
    )
    assert platform.env == {} and platform.binds == []


def test_missing_required_secret_or_key_is_one_clear_line(configs: ConfigStore, tmp_path: Path) -> None:
    config = executor_config("platform_secrets.py", "platform_missing_secret", "exec-env-digest")
    with pytest.raises(PlatformError) as error:
        prepare(config, configs, tmp_path)
    assert str(error.value) == (
        "secret 'no-such-secret' not found "
        "(create it with: millpond secret create no-such-secret --from-literal KEY=VALUE)"
    )

    configs.create("secret", "no-such-secret", {"password": PASSWORD})
    with pytest.raises(PlatformError) as error:
        prepare(config, configs, tmp_path)
    message = str(error.value)
    assert message.startswith("secret 'no-such-secret' has no key 'username' (its keys: password;")
    assert "\n" not in message
    assert_no_values(message)

    required = {"configMapAsEnv": [{"configMapNameParameter": {"componentInputParameter": "cm"},
                                    "keyToEnv": [{"configMapKey": "k", "envVar": "K"}]}]}
    with pytest.raises(PlatformError, match="configMapAsEnv: the configmap name has no value"):
        prepare(required, configs, tmp_path)
    with pytest.raises(PlatformError, match="invalid configmap name 'Bad_Name'"):
        prepare(required, configs, tmp_path, inputs={"cm": "Bad_Name"})
    with pytest.raises(PlatformError, match="the name must be a string"):
        prepare(required, configs, tmp_path, inputs={"cm": {"not": "a name"}})

    def broken(binding: dict[str, Any]) -> Any:
        raise ValueError("binding ['weird'] is not supported\nmore detail")

    with pytest.raises(PlatformError) as error:
        prepare_platform(
            required, resolve=broken, configs=configs, volumes_dir=tmp_path, scratch_dir=tmp_path, pod=PodInfo("p")
        )
    assert str(error.value) == "configMapAsEnv: binding ['weird'] is not supported"


def test_legacy_constant_forms(configs: ConfigStore, tmp_path: Path) -> None:
    """Older kfp-kubernetes wrote plain names (secretName, pvcMount.constant) without a parameter."""
    (tmp_path / "volumes" / "default" / "vol-a").mkdir(parents=True)
    config = {
        "secretAsEnv": [{"secretName": "db-creds", "keyToEnv": [{"secretKey": "username", "envVar": "U"}]}],
        "configMapAsVolume": [{"configMapName": "app-settings", "mountPath": "/etc/cfg/"}],
        "pvcMount": [
            {"constant": "vol-a", "mountPath": "/data"},
            {"componentInputParameter": "pvc", "mountPath": "/data2"},
            {"taskOutputParameter": {"producerTask": "make", "outputParameterKey": "name"}, "mountPath": "/data3"},
        ],
    }
    platform = prepare(config, configs, tmp_path, inputs={"pvc": "vol-a"}, outputs={"make": {"name": "vol-a"}})
    assert platform.env == {"U": USER}
    assert [b.target for b in platform.binds] == ["/etc/cfg", "/data", "/data2", "/data3"]
    assert {b.source for b in platform.binds[1:]} == {tmp_path / "volumes" / "default" / "vol-a"}


def test_pvc_and_empty_dir_mounts(configs: ConfigStore, tmp_path: Path) -> None:
    write_config = executor_config("platform_volumes.py", "platform_volumes", "exec-write")
    made = {"createpvc": {"name": "run-1-shared"}}
    with pytest.raises(PlatformError) as error:
        prepare(write_config, configs, tmp_path, outputs=made)
    assert str(error.value).startswith("volume 'run-1-shared' not found (a kubernetes.CreatePVC task makes it")

    volume = tmp_path / "volumes" / "default" / "run-1-shared"
    volume.mkdir(parents=True)
    platform = prepare(write_config, configs, tmp_path, outputs=made)
    binds = {b.target: b for b in platform.binds}
    assert binds["/data"] == Bind(volume, "/data", read_only=False)
    scratch = binds["/scratch"].source
    assert scratch.parent == tmp_path / "scratch" and not binds["/scratch"].read_only and list(scratch.iterdir()) == []

    read_config = executor_config("platform_volumes.py", "platform_volumes", "exec-read")
    platform = prepare(read_config, configs, tmp_path, outputs=made)
    binds = {b.target: b for b in platform.binds}
    assert binds["/from-pvc"].source == volume / "out" and (volume / "out").is_dir()  # subPath made, as kubelet does
    memory = binds["/scratch"].source
    if Path("/dev/shm").is_dir() and os.access("/dev/shm", os.W_OK):
        assert memory.parent == Path("/dev/shm")
    platform.cleanup()
    assert not memory.exists() and volume.is_dir()  # the PVC outlives the task


def test_pod_metadata_field_paths_timeout_and_notes(configs: ConfigStore, tmp_path: Path) -> None:
    config = executor_config("platform_pod.py", "platform_pod", "exec-describe")
    platform = prepare(config, configs, tmp_path)
    assert platform.env == {
        "POD_NAME": "run-1-task", "POD_NAMESPACE": "default", "NODE": "node-1", "POD_IP": "127.0.0.1",
        "TEAM": "ponds", "OWNER": "millpond", "ABSENT": "",
    }
    assert platform.labels == {"team": "ponds"} and platform.annotations == {"owner": "millpond"}
    assert platform.timeout_s == 600.0
    ignored = [note.split(" ", 1)[0] for note in platform.notes]
    # imagePullSecret and imagePullPolicy are honoured now, when the task runs in its image (issue 31)
    assert ignored == ["nodeSelector", "tolerations", "securityContext"]
    assert all("\n" not in note for note in platform.notes)
    assert PodInfo("p").node and PodInfo("p").uid != PodInfo("p").uid


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            {"fieldPathAsEnv": [{"name": "X", "fieldPath": "spec.containers"}]},
            "field path 'spec.containers' is not supported",
        ),
        (
            {"emptyDirMounts": [{"volumeName": "e", "mountPath": "relative"}]},
            "mountPath 'relative' must be an absolute path",
        ),
        ({"emptyDirMounts": [{"volumeName": "e", "mountPath": "/"}]}, "must be an absolute path other than '/'"),
        ({"emptyDirMounts": [{"volumeName": "e", "mountPath": "/a/../etc"}]}, "without '..'"),
        ({"emptyDirMounts": [{"volumeName": "a", "mountPath": "/x"}, {"volumeName": "b", "mountPath": "/x/"}]},
         "two volumes mount at /x"),
        ({"pvcMount": [{"constant": "vol-a", "mountPath": "/d", "subPath": "../escape"}]}, "subPath '../escape'"),
        ({"pvcMount": [{"constant": "Not/A/Name", "mountPath": "/d"}]}, "invalid PVC name"),
    ],
)
def test_settings_that_cannot_work_are_refused(
    configs: ConfigStore, tmp_path: Path, config: dict[str, Any], message: str
) -> None:
    (tmp_path / "volumes" / "default" / "vol-a").mkdir(parents=True, exist_ok=True)
    with pytest.raises(PlatformError, match=re.escape(message)):
        prepare(config, configs, tmp_path)
    assert not any((tmp_path / "scratch").glob("*"))  # a refusal leaves no folders behind


def test_builtin_pvc_tasks(tmp_path: Path) -> None:
    volumes = tmp_path / "volumes"
    made = builtin_task("argostub/createpvc", {"pvc_name_suffix": "-my-pvc", "size": "5Mi"}, volumes, "My Run 2024")
    assert made == {"name": "my-run-2024-my-pvc"} and (volumes / "default" / "my-run-2024-my-pvc").is_dir()
    assert builtin_task("argostub/createpvc", {"pvc_name": "static"}, volumes, "r") == {"name": "static"}
    (volumes / "default" / "static" / "kept").write_text("data")
    assert builtin_task("argostub/createpvc", {"pvc_name": "static"}, volumes, "r") == {"name": "static"}
    assert (volumes / "default" / "static" / "kept").read_text() == "data"  # an existing volume is reused
    random = builtin_task("argostub/createpvc", {}, volumes, "r")
    assert random is not None and (volumes / "default" / random["name"]).is_dir()
    with pytest.raises(PlatformError, match="not both"):
        builtin_task("argostub/createpvc", {"pvc_name": "a", "pvc_name_suffix": "b"}, volumes, "r")
    with pytest.raises(PlatformError, match="invalid PVC name"):
        builtin_task("argostub/createpvc", {"pvc_name": "../escape"}, volumes, "r")

    assert builtin_task("argostub/deletepvc", {"pvc_name": "static"}, volumes, "r") == {}
    assert not (volumes / "default" / "static").exists()
    with pytest.raises(PlatformError, match="volume 'static' not found"):
        builtin_task("argostub/deletepvc", {"pvc_name": "static"}, volumes, "r")
    elsewhere = tmp_path / "user-data"
    elsewhere.mkdir()
    (volumes / "linked").symlink_to(elsewhere)
    builtin_task("argostub/deletepvc", {"pvc_name": "linked"}, volumes, "r")
    assert elsewhere.is_dir() and not (volumes / "linked").exists()  # a hand-made link loses only the link
    assert builtin_task("python:3.11", {}, volumes, "r") is None


# --- the sandbox --------------------------------------------------------------------------------


def snapshot(*folders: Path) -> dict[str, list[str]]:
    return {str(folder): sorted(os.listdir(folder)) for folder in folders if folder.is_dir()}


@needs_sandbox
def test_mounts_in_a_real_sandbox_leave_the_host_unchanged(configs: ConfigStore, tmp_path: Path) -> None:
    host = tmp_path / "host"
    (host / "existing").mkdir(parents=True)
    (tmp_path / "volumes" / "default" / "vol-a").mkdir(parents=True)
    mnt_target = f"/mnt/millpond-test-{os.getpid()}/secret"
    config = {
        "secretAsEnv": [{"secretName": "db-creds", "keyToEnv": [{"secretKey": "password", "envVar": "DB_PASSWORD"}]}],
        "secretAsVolume": [{"secretName": "db-creds", "mountPath": mnt_target}],
        "configMapAsVolume": [{"configMapName": "app-settings", "mountPath": str(host / "new" / "cfg")}],
        "pvcMount": [{"constant": "vol-a", "mountPath": "/data"}],
        "emptyDirMounts": [{"volumeName": "e", "mountPath": "/var/millpond-test-scratch"}],
    }
    platform = prepare(config, configs, tmp_path)
    before = snapshot(Path("/"), Path("/mnt"), Path("/var"), host)
    script = f"""
        set -e
        [ "$DB_PASSWORD" = "$EXPECTED_PASSWORD" ]
        [ "$(cat {mnt_target}/password)" = "$EXPECTED_PASSWORD" ]
        [ "$(cat {host}/new/cfg/level)" = "{LEVEL}" ]
        if touch {mnt_target}/extra 2>/dev/null; then echo "secret volume is writable"; exit 3; fi
        echo from-task > /data/out.txt
        echo scratch > /var/millpond-test-scratch/s.txt
        echo through > {host}/existing/through.txt
        ls /mnt /var > /dev/null
        echo done-marker
    """
    env = {"PATH": os.environ["PATH"], **platform.env, "EXPECTED_PASSWORD": PASSWORD}
    log = tmp_path / "task.log"
    result = LocalRunner().run(
        ProcessSpec(argv=["sh", "-c", script], env=env, cwd=tmp_path, log_path=log, binds=platform.binds),
        threading.Event(),
    )
    assert result.exit_code == 0 and result.error is None, log.read_text()
    assert log.read_text().strip() == "done-marker"
    assert (tmp_path / "volumes" / "default" / "vol-a" / "out.txt").read_text() == "from-task\n"
    assert (host / "existing" / "through.txt").read_text() == "through\n"  # the rest of the host is still there
    assert snapshot(Path("/"), Path("/mnt"), Path("/var"), host) == before
    assert not Path("/data").exists() or "/data" in before
    platform.cleanup()


def test_wrap_makes_parents_private_only_where_a_mount_point_is_missing(tmp_path: Path) -> None:
    if sandbox_problem():
        pytest.skip(sandbox_problem() or "")
    (tmp_path / "exists").mkdir()
    source = tmp_path / "source"
    source.mkdir()

    def tmpfs_targets(binds: list[Bind]) -> list[str]:
        words = wrap(["true"], binds, tmp_path)
        return [words[i + 1] for i, word in enumerate(words) if word == "--tmpfs" and words[i + 1] != "/"]

    assert tmpfs_targets([Bind(source, str(tmp_path / "exists"))]) == []  # nothing to create
    assert tmpfs_targets([Bind(source, "/brand-new-top-level")]) == []  # made in the private root
    assert tmpfs_targets([Bind(source, str(tmp_path / "a" / "b"))]) == [str(tmp_path)]
    # A mount point inside another bind lands in that bind's source, as in Kubernetes.
    assert tmpfs_targets([Bind(source, "/data"), Bind(source, "/data/inner")]) == []


# --- whole pipelines through the CLI (the engine wires prepare_platform and builtin_task in) ---


def _home_texts(home: Path) -> str:
    """Everything millpond wrote into its home but the secrets and config maps (db, logs, artifacts)."""
    chunks = []
    for path in home.rglob("*"):
        if path.is_file() and path.relative_to(home).parts[0] not in ("secrets", "configmaps"):
            chunks.append(path.read_bytes().decode("utf-8", errors="replace"))
    return "\n".join(chunks)


def test_pipeline_reads_secrets_and_config_maps(cli, home: Path) -> None:
    created = cli(
        "secret", "create", "db-creds", "--from-literal", f"username={USER}", "--from-literal", f"password={PASSWORD}"
    )
    assert created.code == 0
    assert cli("configmap", "create", "app-settings", "--from-literal", f"level={LEVEL}").code == 0
    result = cli("run", PIPELINES / "platform_secrets.py", "--pipeline", "platform_secrets", "-o", "json")
    assert result.code == 0, result.err
    data = result.json()
    assert data["state"] == "SUCCEEDED"
    expected_env = hashlib.sha256("|".join([USER, PASSWORD, USER, LEVEL]).encode()).hexdigest()
    assert task(data, "env-digest")["outputs"]["Output"] == expected_env
    files = [
        f"/mnt/creds/password={PASSWORD}|0o600", f"/mnt/creds/username={USER}|0o600",
        f"/etc/millpond-settings/level={LEVEL}|0o644", "read-only",
    ]
    assert task(data, "files-digest")["outputs"]["Output"] == hashlib.sha256("\n".join(files).encode()).hexdigest()
    runs = cli("runs", "get", data["run_id"], "-o", "json")
    logs = cli("runs", "logs", data["run_id"])
    assert_no_values(result.out, result.err, runs.out, logs.out, _home_texts(home))
    assert not Path("/mnt/creds").exists() and not Path("/etc/millpond-settings").exists()


def test_pipeline_skips_missing_optional_ones(cli) -> None:
    result = cli("run", PIPELINES / "platform_secrets.py", "--pipeline", "platform_optional", "-o", "json")
    assert result.code == 0, result.err
    assert result.json()["tasks"][0]["outputs"]["Output"] == "<unset>|"


def test_unknown_secret_is_bad_input_before_the_run(cli) -> None:
    result = cli("run", PIPELINES / "platform_secrets.py", "--pipeline", "platform_missing_secret", "-o", "json")
    assert result.code == 2
    line = result.err.strip()
    assert "\n" not in line and "Traceback" not in line
    assert "secret 'no-such-secret' (used by env-digest) not found" in line
    assert "create it with: millpond secret create no-such-secret --from-literal KEY=VALUE" in line
    assert cli("runs", "list", "-o", "json").json() == []


def test_secret_named_at_run_time_fails_its_task_naming_it(cli) -> None:
    result = cli(
        "run", PIPELINES / "platform_secrets.py", "--pipeline", "platform_missing_secret_at_run_time", "-o", "json"
    )
    assert result.code == 1
    data = result.json()
    assert data["state"] == "FAILED"
    error = task(data, "env-digest")["error"]
    assert "secret 'made-up-at-run-time' not found (create it with: millpond secret create made-up-at-run-time" in error


def test_pipeline_shares_a_pvc_between_tasks(cli, home: Path) -> None:
    result = cli(
        "run", PIPELINES / "platform_volumes.py", "--pipeline", "platform_volumes", "--run-name", "vols", "-o", "json"
    )
    assert result.code == 0, result.err
    data = result.json()
    assert data["outputs"]["Output"] == "through a volume|scratch-empty=True"
    # As on KFP: <workflow name>-<suffix>, the workflow name being the pipeline's plus the run id's start.
    volume = f"platform-volumes-{data['run_id'][:8]}-shared"
    assert task(data, "createpvc")["outputs"]["name"] == volume
    assert task(data, "deletepvc")["state"] == "SUCCEEDED"
    assert not (home / "volumes" / "default" / volume).exists()
    for path in ("/data", "/from-pvc", "/scratch"):
        assert not Path(path).exists()


def test_pipeline_mounts_a_volume_made_by_hand(cli, home: Path) -> None:
    missing = cli("run", PIPELINES / "platform_volumes.py", "--pipeline", "platform_existing_volume", "-o", "json")
    assert missing.code == 1
    assert "volume 'my-data' not found" in missing.json()["tasks"][0]["error"]
    (home / "volumes" / "default" / "my-data").mkdir(parents=True)
    (home / "volumes" / "default" / "my-data" / "message.txt").write_text("by hand")
    result = cli("run", PIPELINES / "platform_volumes.py", "--pipeline", "platform_existing_volume", "-o", "json")
    assert result.code == 0, result.err
    assert result.json()["outputs"]["Output"] == "by hand|scratch-empty=True"


def test_pipeline_pod_metadata_downward_api_and_notes(cli) -> None:
    result = cli("run", PIPELINES / "platform_pod.py", "--pipeline", "platform_pod", "-o", "json")
    assert result.code == 0, result.err
    data = result.json()
    described = json.loads(data["outputs"]["Output"])
    assert described["POD_NAMESPACE"] == "default" and described["POD_IP"] == "127.0.0.1"
    assert described["TEAM"] == "ponds" and described["OWNER"] == "millpond" and described["ABSENT"] == ""
    assert described["POD_NAME"] and described["NODE"]
    log = Path(task(data, "describe")["log"]).read_text()
    assert "nodeSelector is ignored" in log and "tolerations are ignored" in log


def test_pipeline_task_deadline(cli) -> None:
    result = cli("run", PIPELINES / "platform_pod.py", "--pipeline", "platform_timeout", "-o", "json")
    assert result.code == 1
    assert "timed out after 1s" in task(result.json(), "sleepy")["error"]
