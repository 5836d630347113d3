"""Small truths (issue 12, defect 8), over real S3 (SeaweedFS) datasets.

``-o yaml`` prints what kubectl prints: no YAML anchors (``&id001``/``*id001``), even where the
same value appears twice (a mount's options in spec and in status). ``dataset path`` and
``dataset ls`` take paths as the FUSE mount shows them; one that misses its mount's folder
(a named mount sits at ``/<mount name>``, as in Fluid) is refused with where the file is.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from millpond.store.secrets import ConfigStore
from tests.datasets_support import SECRET, create_s3_dataset, payload, s3_options

pytestmark = pytest.mark.s3

FILES = {"a.txt": payload("a.txt", 3_000), "sub/b.txt": payload("sub/b.txt", 5_000)}


def _keys() -> str:
    """The S3 keys' encryptOptions in flow style: names of the millpond secret that holds them."""
    refs = [f"{{name: {option}, valueFrom: {{secretKeyRef: {{name: {SECRET}, key: {option}}}}}}}"
            for option in ("aws.accessKeyId", "aws.secretKey")]
    return "[" + ", ".join(refs) + "]"


def _no_anchors(text: str) -> None:
    assert "&id0" not in text and "*id0" not in text, text


def test_get_o_yaml_prints_no_anchors(cli, home: Path, tmp_path: Path, s3_server) -> None:
    create_s3_dataset(cli, home, tmp_path, s3_server, FILES)
    create_s3_dataset(cli, home, tmp_path, s3_server, FILES, name="other")
    one = cli("get", "dataset", "ds", "-o", "yaml")
    assert one.code == 0, one.err
    _no_anchors(one.out)
    shown = yaml.safe_load(one.out)
    as_json = cli("get", "dataset", "ds", "-o", "json").json()
    # the options a mount names appear twice, in spec and in status, written out both times
    assert shown["status"]["mounts"][0]["options"] == shown["spec"]["mounts"][0]["options"]
    assert shown["spec"] == as_json["spec"] and shown["status"]["mounts"] == as_json["status"]["mounts"]
    listing = cli("get", "datasets", "-o", "yaml")
    assert listing.code == 0, listing.err
    _no_anchors(listing.out)
    assert [item["metadata"]["name"] for item in yaml.safe_load(listing.out)["items"]] == ["ds", "other"]
    # what -o yaml prints applies back unchanged, as with kubectl
    (tmp_path / "shown.yaml").write_text(one.out)
    again = cli("apply", "-f", tmp_path / "shown.yaml")
    assert again.code == 0 and "unchanged" in again.out, (again.out, again.err)


def test_a_manifest_written_with_anchors_is_printed_without(cli, home: Path, tmp_path: Path, s3_server) -> None:
    bucket = s3_server.create_bucket()
    s3_server.filesystem().pipe_file(f"{bucket}/one/a.txt", b"a")
    ConfigStore(home).create(
        "secret", SECRET, {"aws.accessKeyId": s3_server.access_key, "aws.secretKey": s3_server.secret_key}
    )
    options = "".join(f'\n        {key}: "{value}"' for key, value in s3_options(s3_server).items())
    keys = f"\n      encryptOptions: &keys {_keys()}"
    (tmp_path / "anchored.yaml").write_text(
        "apiVersion: data.fluid.io/v1alpha1\nkind: Dataset\nmetadata: {name: anchored}\nspec:\n  mounts:\n"
        f"    - mountPoint: s3://{bucket}/one\n      name: one\n      options: &opts{options}{keys}\n"
        f"    - mountPoint: s3://{bucket}/one\n      name: two\n      options: *opts\n      encryptOptions: *keys\n"
        "---\napiVersion: data.fluid.io/v1alpha1\nkind: AlluxioRuntime\nmetadata: {name: anchored}\nspec: {}\n"
    )
    applied = cli("apply", "-f", tmp_path / "anchored.yaml")
    assert applied.code == 0, applied.err
    shown = cli("get", "dataset", "anchored", "-o", "yaml")
    assert shown.code == 0, shown.err
    _no_anchors(shown.out)
    mounts = yaml.safe_load(shown.out)["spec"]["mounts"]
    assert mounts[0]["options"] == mounts[1]["options"] == s3_options(s3_server)


def _one_error_line(result: Any) -> str:
    lines = result.err.strip().splitlines()
    assert result.code == 2, (result.code, result.out, result.err)
    assert len(lines) == 1 and lines[0].startswith("error: "), result.err
    return lines[0]


def test_dataset_path_says_where_a_file_under_a_named_mount_is(cli, home: Path, tmp_path: Path, s3_server) -> None:
    """The mount ``data`` has no ``path``: its files sit under /data, as in Fluid's FUSE mount and DataLoad targets."""
    ds = create_s3_dataset(cli, home, tmp_path, s3_server, FILES, name="mnist", path=None)
    line = _one_error_line(cli("dataset", "path", "mnist", "a.txt"))
    assert line == ("error: dataset mnist has no file 'a.txt'; did you mean /data/a.txt? "
                    "(mount 'data' sits at /data, as in Fluid)")
    folder = _one_error_line(cli("dataset", "ls", "mnist", "sub"))
    assert "did you mean /data/sub?" in folder, folder
    nowhere = _one_error_line(cli("dataset", "path", "mnist", "absent.txt"))
    assert nowhere == "error: dataset mnist has no file 'absent.txt'"
    # the path it names is the one that works, once the file is cached
    loaded = cli("dataset", "load", "mnist")
    assert loaded.code == 0, loaded.err
    for path in ("/data/a.txt", "data/a.txt"):
        found = cli("dataset", "path", "mnist", path)
        assert found.code == 0, found.err
        assert Path(found.out.strip()).read_bytes() == ds.files["a.txt"]
    listed = cli("dataset", "ls", "mnist", "/data/sub")
    assert listed.code == 0 and "b.txt" in listed.out, listed.err


def test_dataset_path_names_every_mount_that_holds_the_file(cli, home: Path, tmp_path: Path, s3_server) -> None:
    bucket = s3_server.create_bucket()
    fs = s3_server.filesystem()
    for prefix in ("one", "two"):
        fs.pipe_file(f"{bucket}/{prefix}/a.txt", prefix.encode())
    ConfigStore(home).create(
        "secret", SECRET, {"aws.accessKeyId": s3_server.access_key, "aws.secretKey": s3_server.secret_key}
    )
    options = json.dumps(s3_options(s3_server))
    mounts = "".join(f"    - mountPoint: s3://{bucket}/{name}\n      name: {name}\n      options: {options}\n"
                     f"      encryptOptions: {_keys()}\n" for name in ("one", "two"))
    (tmp_path / "two.yaml").write_text(
        "apiVersion: data.fluid.io/v1alpha1\nkind: Dataset\nmetadata: {name: twomounts}\nspec:\n  mounts:\n" + mounts
        + "---\napiVersion: data.fluid.io/v1alpha1\nkind: AlluxioRuntime\nmetadata: {name: twomounts}\nspec: {}\n"
    )
    applied = cli("apply", "-f", tmp_path / "two.yaml")
    assert applied.code == 0, applied.err
    line = _one_error_line(cli("dataset", "path", "twomounts", "a.txt"))
    assert line == ("error: dataset twomounts has no file 'a.txt'; "
                    "it is under more than one mount: /one/a.txt, /two/a.txt")
