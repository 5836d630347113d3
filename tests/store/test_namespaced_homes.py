"""An old home's Secrets, ConfigMaps and volumes (one per name, home-wide) move to the ``default`` namespace on
first use: every one stays readable, also when the process moving them is killed with SIGKILL in the middle."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

from millpond.store import volume_folders
from millpond.store.secrets import ConfigStore

SRC = str(Path(__file__).resolve().parents[2] / "src")
COUNT = 40


def _old_home(home: Path) -> None:
    """A home as millpond kept it before namespaces: secrets/NAME.json (0600 in 0700), volumes/NAME."""
    secrets = home / "secrets"
    secrets.mkdir(parents=True, mode=0o700)
    for number in range(COUNT):
        path = secrets / f"s{number}.json"
        path.write_text(json.dumps({"kind": "secret", "name": f"s{number}", "data": {"k": f"v{number}"}}))
        path.chmod(0o600)
    (home / "configmaps").mkdir()
    (home / "configmaps" / "settings.json").write_text(json.dumps({"kind": "configmap", "name": "settings",
                                                                   "data": {"level": "3"}}))
    for number in range(COUNT):
        (home / "volumes" / f"v{number}").mkdir(parents=True)
        (home / "volumes" / f"v{number}" / "file").write_text(f"volume {number}")


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _all_readable(home: Path) -> None:
    store = ConfigStore(home)
    assert [store.get("secret", f"s{number}") for number in range(COUNT)] == [{"k": f"v{n}"} for n in range(COUNT)]
    assert store.get("configmap", "settings") == {"level": "3"}
    for number in range(COUNT):
        folder = volume_folders.find(home / "volumes", "default", f"v{number}")
        assert (folder / "file").read_text() == f"volume {number}"


def test_an_old_home_moves_to_default_once_keeping_modes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _old_home(home)
    _all_readable(home)
    assert not list((home / "secrets").glob("*.json"))  # moved, not copied
    assert _mode(home / "secrets") == 0o700 and _mode(home / "secrets" / "default") == 0o700
    assert _mode(home / "secrets" / "default" / "s0.json") == 0o600
    assert sorted(p.name for p in (home / "volumes").iterdir() if not p.name.startswith(".")) == ["default"]
    assert ConfigStore(home).list("secret")[0] == ("s0", ["k"])
    _all_readable(home)  # again: nothing left to move, nothing changed
    assert ConfigStore(home).in_namespace("team-a", multi_user=True).list("secret") == []


def _killed_at(home: Path, call: str, at: int) -> None:
    """Run the move in a child that SIGKILLs itself as it makes its ``at``-th ``os.<call>``."""
    script = f"""
import os, signal, sys
sys.path.insert(0, {SRC!r})
from millpond.store import volume_folders
from millpond.store.secrets import ConfigStore
real, made = os.{call}, [0]
def dying(*args, **kwargs):
    made[0] += 1
    if made[0] == {at}:
        os.kill(os.getpid(), signal.SIGKILL)
    return real(*args, **kwargs)
os.{call} = dying
ConfigStore({str(home)!r}).list("secret")
volume_folders.ensure_layout({str(home / "volumes")!r})
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == -9, done.stderr


def test_a_kill_between_a_secret_s_link_and_its_unlink_leaves_every_secret_readable(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _old_home(home)
    _killed_at(home, "unlink", COUNT // 2)  # half moved; one in both places (the same file)
    old = {p.name for p in (home / "secrets").glob("*.json")}
    new = {p.name for p in (home / "secrets" / "default").glob("*.json")}
    assert old and new and old & new and old | new == {f"s{n}.json" for n in range(COUNT)}
    _all_readable(home)
    assert not list((home / "secrets").glob("*.json"))


def test_a_kill_in_the_middle_of_moving_volumes_leaves_every_volume_readable(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _old_home(home)
    _killed_at(home, "rename", COUNT // 2)  # the first rename is default's folder; then half the volumes
    left = [p for p in (home / "volumes").iterdir() if p.name.startswith("v")]
    assert left and len(left) < COUNT
    _all_readable(home)
    assert not [p for p in (home / "volumes").iterdir() if p.name.startswith("v")]


def test_only_single_user_mode_falls_back_to_default_for_a_name_the_namespace_lacks(tmp_path: Path) -> None:
    store = ConfigStore(tmp_path)
    store.create("secret", "creds", {"k": "default's"})
    store.create("secret", "creds", {"k": "team-a's"}, namespace="team-a")
    store.create("secret", "shared", {"k": "only default's"})
    assert store.in_namespace("team-a", multi_user=False).get("secret", "creds") == {"k": "team-a's"}
    assert store.in_namespace("team-a", multi_user=False).get("secret", "shared") == {"k": "only default's"}
    assert store.in_namespace("team-a", multi_user=True).get("secret", "creds") == {"k": "team-a's"}
    try:
        store.in_namespace("team-a", multi_user=True).get("secret", "shared")
    except KeyError as missing:
        assert str(missing) == 'secret "shared" not found in namespace "team-a"'
    else:
        raise AssertionError("a multi-user reader of team-a found default's Secret")
    volumes = tmp_path / "volumes"
    volume_folders.folder(volumes, "default", "data").mkdir()
    assert volume_folders.find(volumes, "team-a", "data", multi_user=False) == volumes / "default" / "data"
    assert volume_folders.find(volumes, "team-a", "data", multi_user=True) == volumes / "team-a" / "data"
