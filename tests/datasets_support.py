"""Helpers for dataset tests: a bucket with files, a Dataset + runtime manifest on it, applied."""

from __future__ import annotations

import os
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from millpond.store.secrets import ConfigStore
from tests.s3_server import S3Server

SECRET = "s3-keys"


def payload(name: str, size: int) -> bytes:
    """Deterministic, distinct bytes per file name (a wrong file or offset shows as a mismatch)."""
    seed = name.encode()
    block = (seed * (64 // len(seed) + 1))[:64]
    return (block * (size // 64 + 1))[:size]


@dataclass
class S3Dataset:
    """A dataset over ``s3://BUCKET/PREFIX`` and the objects it holds."""

    name: str
    bucket: str
    prefix: str
    server: S3Server
    files: dict[str, bytes]

    def put(self, key: str, data: bytes) -> None:
        self.server.filesystem().pipe_file(f"{self.bucket}/{self.prefix}/{key}", data)
        self.files[key] = data

    def remove(self, key: str) -> None:
        self.server.filesystem().rm_file(f"{self.bucket}/{self.prefix}/{key}")
        self.files.pop(key, None)

    def object(self, key: str) -> bytes:
        return self.server.filesystem().cat_file(f"{self.bucket}/{self.prefix}/{key}")


def manifest(
    name: str, mount_point: str, *, options: dict[str, str] | None = None, secret: bool = True,
    levels: list[dict[str, Any]] | None = None, access: str = "ReadOnlyMany", annotations: dict[str, str] | None = None,
    path: str | None = "/",
) -> str:
    """A Dataset and an AlluxioRuntime of the same name, as Fluid's docs write them.

    The mount is named ``data``; with ``path=None`` it has no ``path`` and sits at ``/data`` (Fluid's rule).
    """
    option_lines = "".join(f'\n        {k}: "{v}"' for k, v in (options or {}).items())
    encrypt = textwrap.indent(textwrap.dedent(f"""\
        encryptOptions:
          - name: aws.accessKeyId
            valueFrom: {{secretKeyRef: {{name: {SECRET}, key: aws.accessKeyId}}}}
          - name: aws.secretKey
            valueFrom: {{secretKeyRef: {{name: {SECRET}, key: aws.secretKey}}}}
        """), "      ") if secret else ""
    annotation_lines = "".join(f'\n    {k}: "{v}"' for k, v in (annotations or {}).items())
    level_lines = ""
    for level in levels or [{"mediumtype": "SSD", "quota": "256Mi"}]:
        level_lines += "\n      - " + "\n        ".join(
            f'{k}: "{v}"' if k in ("high", "low") else f"{k}: {v}" for k, v in level.items()
        )
    return (
        f"apiVersion: data.fluid.io/v1alpha1\nkind: Dataset\nmetadata:\n  name: {name}"
        + (f"\n  annotations:{annotation_lines}" if annotations else "")
        + f"\nspec:\n  accessModes: [{access}]\n  mounts:\n    - mountPoint: {mount_point}\n"
        + "      name: data" + (f"\n      path: {path}" if path is not None else "")
        + (f"\n      options:{option_lines}" if options else "")
        + ("\n" + encrypt.rstrip() if secret else "")
        + f"\n---\napiVersion: data.fluid.io/v1alpha1\nkind: AlluxioRuntime\nmetadata:\n  name: {name}\n"
        + "spec:\n  replicas: 1\n"
        + f"  tieredstore:\n    levels:{level_lines}\n"
    )


def s3_options(server: S3Server) -> dict[str, str]:
    return {
        "alluxio.underfs.s3.endpoint": server.endpoint_url,
        "alluxio.underfs.s3.endpoint.region": server.region,
        "alluxio.underfs.s3.disable.dns.buckets": "true",
    }


def create_s3_dataset(
    cli: Any, home: Path, tmp_path: Path, server: S3Server, files: dict[str, bytes], name: str = "ds", **kwargs: Any
) -> S3Dataset:
    """Upload ``files`` to a fresh bucket and apply a dataset over it.

    The levels default to one SSD tier under tmp_path.
    """
    bucket = server.create_bucket()
    prefix = "data"
    fs = server.filesystem()
    for key, data in files.items():
        fs.pipe_file(f"{bucket}/{prefix}/{key}", data)
    ConfigStore(home).create(
        "secret", SECRET, {"aws.accessKeyId": server.access_key, "aws.secretKey": server.secret_key}, replace=True
    )
    kwargs.setdefault("levels", [{"mediumtype": "SSD", "path": str(tmp_path / "cache-ssd"), "quota": "256Mi"}])
    text = manifest(name, f"s3://{bucket}/{prefix}", options=s3_options(server), **kwargs)
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    result = cli("apply", "-f", path)
    assert result.code == 0, result.err
    return S3Dataset(name, bucket, prefix, server, dict(files))


def cache_files(root: Path) -> list[Path]:
    """Every completely cached file under a tier folder."""
    return sorted(p for p in root.rglob("*") if p.is_file() and "files" in p.relative_to(root).parts)


def env_for(home: Path) -> dict[str, str]:
    return {**os.environ, "MILLPOND_HOME": str(home)}


def local_dataset(cli: Any, tmp_path: Path, files: dict[str, bytes], name: str = "ds") -> Path:
    """Dataset ``name`` over a local folder holding ``files``, applied and loaded into a 256Mi SSD tier; the folder."""
    source = tmp_path / "ufs"
    for key, data in files.items():
        (source / key).parent.mkdir(parents=True, exist_ok=True)
        (source / key).write_bytes(data)
    levels = [{"mediumtype": "SSD", "path": str(tmp_path / "cache"), "quota": "256Mi"}]
    (tmp_path / f"{name}.yaml").write_text(manifest(name, f"local://{source}", secret=False, levels=levels))
    applied = cli("apply", "-f", tmp_path / f"{name}.yaml")
    assert applied.code == 0, applied.err
    loaded = cli("dataset", "load", name)
    assert loaded.code == 0, loaded.err
    return source
