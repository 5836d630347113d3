"""Under file systems: where a dataset's data really lives (S3, local folders, the web, …).

The cache engine needs only five things from a UFS — list, stat, read a range, write, remove —
so each kind of storage is one small class. S3 goes through obstore (Rust; a GET costs a
fraction of s3fs's Python time, which matters for thousands of small files); everything else
goes through fsspec, so any protocol fsspec knows works once its package is installed.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from millpond.datasets.storage_errors import describe
from millpond.errors import UnavailableError, UserError
from millpond.store import volume_folders

if TYPE_CHECKING:
    from obstore.store import ClientConfig, RetryConfig

# Every remote request is bounded, so an unreachable or failing store is reported in seconds, not
# minutes: the backends' defaults (obstore: 10 retries within 3 minutes; aiohttp: 30 s to connect,
# 5 minutes a request; botocore: 60 s to connect) would keep a data operation Executing that long.
CONNECT_TIMEOUT_S = 5
READ_TIMEOUT_S = 20  # a stalled connection: no byte for this long
REQUEST_TIMEOUT_S = 300  # a whole request, body included (a large block over a slow link)
BACKEND_RETRIES = 2  # retries of one request, by the backend itself, of transient failures only
BACKEND_RETRY_WINDOW_S = 10  # no retry starts later than this after the first try


@dataclass(frozen=True)
class UfsEntry:
    """One file of a UFS: its key relative to the mount root, and what tells a change."""

    key: str
    size: int
    mtime: float
    etag: str

    @property
    def version(self) -> str:
        """What identifies this content: a changed version invalidates cached copies."""
        return self.etag or f"{self.size}-{self.mtime:.6f}"


class UfsError(UnavailableError):
    """A UFS could not be reached or answered with an error (the message says which and why).

    ``transient``: the same request may succeed later (a 5xx, a refused or timed-out connection);
    False when it never will (no such file or bucket, access denied).
    """

    def __init__(self, message: str, transient: bool = True) -> None:
        super().__init__(message)
        self.transient = transient


class Ufs(Protocol):
    """The operations the cache engine uses; keys are relative to the mount root, '/'-separated."""

    uri: str

    def list(self) -> Iterator[UfsEntry]: ...

    def stat(self, key: str) -> UfsEntry | None: ...

    def read(self, key: str, start: int = 0, end: int | None = None) -> bytes: ...

    def write(self, key: str, source: Path) -> UfsEntry: ...

    def put(self, key: str, data: bytes) -> UfsEntry: ...

    def remove(self, key: str) -> None: ...


class LocalUfs:
    """A folder on this machine (``local://``, ``file://``, ``pvc://``)."""

    def __init__(self, uri: str, root: Path) -> None:
        self.uri = uri
        self.root = root

    def _path(self, key: str) -> Path:
        return self.root / key if key else self.root

    def list(self) -> Iterator[UfsEntry]:
        if not self.root.is_dir():
            raise UfsError(f"cannot list {self.uri}: no such folder {self.root}", transient=False)
        for folder, dirs, files in os.walk(self.root):
            dirs.sort()
            for name in sorted(files):
                path = Path(folder) / name
                try:
                    st = path.stat()
                except OSError:
                    continue
                yield UfsEntry(path.relative_to(self.root).as_posix(), st.st_size, st.st_mtime, "")

    def stat(self, key: str) -> UfsEntry | None:
        try:
            st = self._path(key).stat()
        except OSError:
            return None
        return UfsEntry(key, st.st_size, st.st_mtime, "")

    def read(self, key: str, start: int = 0, end: int | None = None) -> bytes:
        try:
            with open(self._path(key), "rb") as f:
                size = (end if end is not None else os.fstat(f.fileno()).st_size) - start
                return os.pread(f.fileno(), max(size, 0), start)
        except OSError as exc:
            raise UfsError(f"cannot read {_join(self.uri, key)}: {exc.strerror}", transient=False) from None

    def write(self, key: str, source: Path) -> UfsEntry:
        return self._replace(key, lambda partial: shutil.copyfile(source, partial))

    def put(self, key: str, data: bytes) -> UfsEntry:
        return self._replace(key, lambda partial: partial.write_bytes(data))

    def _replace(self, key: str, fill: Callable[[Path], object]) -> UfsEntry:
        """Write beside the target, then rename over it: a reader never sees half a file."""
        target = self._path(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{target.name}.{os.getpid()}-{threading.get_ident()}.millpond-partial")
        fill(partial)
        os.replace(partial, target)
        return _stat_written(self, key)

    def remove(self, key: str) -> None:
        try:
            self._path(key).unlink()
        except FileNotFoundError:
            pass


class ObstoreS3Ufs:
    """An S3-compatible bucket (AWS, MinIO, SeaweedFS, OSS's S3 endpoint) through obstore."""

    def __init__(self, uri: str, bucket: str, prefix: str, settings: S3Settings) -> None:
        from obstore.store import S3Store  # noqa: PLC0415 - obstore for S3 mounts only

        self.uri = uri
        self.prefix = prefix.strip("/")
        config: dict[str, Any] = {"virtual_hosted_style_request": not settings.path_style}
        if settings.endpoint:
            config["endpoint"] = settings.endpoint
        if settings.region:
            config["region"] = settings.region
        if settings.access_key:
            config["access_key_id"] = settings.access_key
            config["secret_access_key"] = settings.secret_key or ""
        else:
            config["skip_signature"] = True
        client: ClientConfig = {
            "allow_http": True, "timeout": f"{REQUEST_TIMEOUT_S}s", "connect_timeout": f"{CONNECT_TIMEOUT_S}s",
            "read_timeout": f"{READ_TIMEOUT_S}s", "pool_max_idle_per_host": "64",
        }
        retry: RetryConfig = {
            "max_retries": BACKEND_RETRIES, "retry_timeout": timedelta(seconds=BACKEND_RETRY_WINDOW_S),
            "backoff": {"init_backoff": timedelta(milliseconds=100), "max_backoff": timedelta(seconds=2), "base": 2},
        }
        self._store = S3Store(bucket, client_options=client, retry_config=retry, **config)

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def list(self) -> Iterator[UfsEntry]:
        import obstore  # noqa: PLC0415 - obstore for S3 mounts only

        cut = len(self.prefix) + 1 if self.prefix else 0
        try:
            for batch in obstore.list(self._store, prefix=self.prefix or None, chunk_size=1000):
                for meta in batch:
                    key = meta["path"][cut:]
                    if not key or key.endswith("/"):
                        continue  # a folder marker some tools write
                    yield UfsEntry(
                        key, int(meta["size"]), meta["last_modified"].timestamp(), (meta.get("e_tag") or "").strip('"')
                    )
        except Exception as exc:  # noqa: BLE001 - obstore raises its own exception family
            raise _error("list", self.uri, exc) from None

    def stat(self, key: str) -> UfsEntry | None:
        import obstore  # noqa: PLC0415 - obstore for S3 mounts only
        from obstore.exceptions import NotFoundError  # noqa: PLC0415 - obstore for S3 mounts only

        try:
            meta = obstore.head(self._store, self._key(key))
        except NotFoundError:
            return None
        except Exception as exc:  # noqa: BLE001
            raise _error("stat", _join(self.uri, key), exc) from None
        return UfsEntry(key, int(meta["size"]), meta["last_modified"].timestamp(), (meta.get("e_tag") or "").strip('"'))

    def read(self, key: str, start: int = 0, end: int | None = None) -> bytes:
        import obstore  # noqa: PLC0415 - obstore for S3 mounts only

        with _failures("read", _join(self.uri, key)):
            if start == 0 and end is None:
                return obstore.get(self._store, self._key(key)).bytes().to_bytes()
            return obstore.get_range(self._store, self._key(key), start=start, end=end).to_bytes()

    def write(self, key: str, source: Path) -> UfsEntry:
        import obstore  # noqa: PLC0415 - obstore for S3 mounts only

        with _failures("write", _join(self.uri, key)):
            obstore.put(self._store, self._key(key), source)
        return _stat_written(self, key)

    def put(self, key: str, data: bytes) -> UfsEntry:
        import obstore  # noqa: PLC0415 - obstore for S3 mounts only

        with _failures("write", _join(self.uri, key)):
            result = obstore.put(self._store, self._key(key), data)
        etag = (result.get("e_tag") or "").strip('"')
        return UfsEntry(key, len(data), 0.0, etag) if etag else _stat_written(self, key)

    def remove(self, key: str) -> None:
        import obstore  # noqa: PLC0415 - obstore for S3 mounts only

        with _failures("remove", _join(self.uri, key)):
            obstore.delete(self._store, self._key(key))


class FsspecUfs:
    """Any other protocol fsspec knows (http(s) web listings, gcs, hdfs, …)."""

    def __init__(self, uri: str, fs: Any, root: str) -> None:
        self.uri = uri
        self.fs = fs
        self.root = root.rstrip("/")

    def _path(self, key: str) -> str:
        return f"{self.root}/{key}" if key else self.root

    def _entry(self, key: str, info: dict[str, Any]) -> UfsEntry:
        mtime = info.get("mtime") or info.get("LastModified") or info.get("last_modified") or 0
        if hasattr(mtime, "timestamp"):
            mtime = mtime.timestamp()
        etag = str(info.get("ETag") or info.get("etag") or info.get("md5") or "").strip('"')
        return UfsEntry(key, int(info.get("size") or 0), float(mtime or 0), etag)

    def list(self) -> Iterator[UfsEntry]:
        try:
            # find() answers an unreachable or missing root with nothing at all; ls() says why.
            self.fs.ls(self.root, detail=False)
            found = self.fs.find(self.root, detail=True)
        except FileNotFoundError:
            raise UfsError(f"cannot list {self.uri}: not found or unreachable", transient=False) from None
        except Exception as exc:  # noqa: BLE001 - every fsspec backend has its own errors
            raise _error("list", self.uri, exc) from None
        prefix = self.fs._strip_protocol(self.root).rstrip("/") + "/"
        for path in sorted(found):
            info = found[path]
            if info.get("type") == "directory":
                continue
            if info.get("size") is None:  # web listings give names only: ask each file (a HEAD)
                try:
                    info = self.fs.info(path)
                except Exception as exc:  # noqa: BLE001
                    raise _error("stat", path, exc) from None
            stripped = self.fs._strip_protocol(path)
            key = stripped[len(prefix):] if stripped.startswith(prefix) else stripped.rsplit("/", 1)[-1]
            if key:
                yield self._entry(key, info)

    def stat(self, key: str) -> UfsEntry | None:
        try:
            return self._entry(key, self.fs.info(self._path(key)))
        except FileNotFoundError:
            return None
        except Exception as exc:  # noqa: BLE001
            raise _error("stat", _join(self.uri, key), exc) from None

    def read(self, key: str, start: int = 0, end: int | None = None) -> bytes:
        with _failures("read", _join(self.uri, key)):
            return bytes(self.fs.cat_file(self._path(key), start=start or None, end=end))

    def write(self, key: str, source: Path) -> UfsEntry:
        with _failures("write", _join(self.uri, key)):
            self.fs.put_file(str(source), self._path(key))
        return _stat_written(self, key)

    def put(self, key: str, data: bytes) -> UfsEntry:
        with _failures("write", _join(self.uri, key)):
            self.fs.pipe_file(self._path(key), data)
        return _stat_written(self, key)

    def remove(self, key: str) -> None:
        try:
            self.fs.rm_file(self._path(key))
        except FileNotFoundError:
            pass
        except Exception as exc:  # noqa: BLE001
            raise _error("remove", _join(self.uri, key), exc) from None


@dataclass(frozen=True)
class S3Settings:
    """How to reach an S3-compatible endpoint, from a mount's options and encryptOptions."""

    endpoint: str | None
    region: str | None
    path_style: bool
    access_key: str | None
    secret_key: str | None

    def __repr__(self) -> str:  # never print the keys
        return f"S3Settings(endpoint={self.endpoint!r}, region={self.region!r}, path_style={self.path_style})"


# Option names Fluid's engines use for the same setting (Alluxio, Hadoop s3a, JuiceFS, plain).
_ENDPOINT = (
    "alluxio.underfs.s3.endpoint", "fs.s3a.endpoint", "fs.oss.endpoint", "s3.endpoint", "aws.endpoint", "endpoint",
    "endpoint_url",
)
_REGION = ("alluxio.underfs.s3.endpoint.region", "fs.s3a.endpoint.region", "aws.region", "s3.region", "region")
_PATH_STYLE = (
    "alluxio.underfs.s3.disable.dns.buckets", "fs.s3a.path.style.access", "path-style", "path_style",
    "s3.path.style.access",
)
_ACCESS_KEY = (
    "aws.accessKeyId", "fs.s3a.access.key", "access-key", "access_key", "accessKeyId", "fs.oss.accessKeyId",
    "alluxio.underfs.s3.accessKeyId", "s3.accessKeyId",
)
_SECRET_KEY = (
    "aws.secretKey", "fs.s3a.secret.key", "secret-key", "secret_key", "secretKey", "aws.secretAccessKey",
    "fs.oss.accessKeySecret", "alluxio.underfs.s3.secretKey", "s3.secretKey",
)
_SECURE = ("alluxio.underfs.s3.secure.http.enabled", "fs.s3a.connection.ssl.enabled")

S3_SCHEMES = ("s3", "s3a", "minio", "oss")
# Every option name this module understands (the rest are recorded and reported as not applicable).
UNDERSTOOD_OPTIONS = frozenset(_ENDPOINT + _REGION + _PATH_STYLE + _ACCESS_KEY + _SECRET_KEY + _SECURE)


def _first(options: dict[str, str], names: tuple[str, ...]) -> str | None:
    for name in names:
        value = options.get(name)
        if value not in (None, ""):
            return str(value)
    return None


def s3_settings(options: dict[str, str], host_endpoint: str | None = None) -> S3Settings:
    """Endpoint, region, addressing and keys, from options first, then the usual AWS_* variables."""
    endpoint = (
        _first(options, _ENDPOINT) or host_endpoint
        or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    )
    secure = _first(options, _SECURE)
    if endpoint and "://" not in endpoint:
        endpoint = ("http://" if secure and secure.lower() == "false" else "https://") + endpoint
    path_style = _first(options, _PATH_STYLE)
    access = _first(options, _ACCESS_KEY)
    secret = _first(options, _SECRET_KEY)
    if access is None:
        access = os.environ.get("AWS_ACCESS_KEY_ID")
        secret = os.environ.get("AWS_SECRET_ACCESS_KEY")
    return S3Settings(
        endpoint=endpoint,
        region=(
            _first(options, _REGION) or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
            or "us-east-1"
        ),
        # A custom endpoint (MinIO, SeaweedFS) is path-style unless told otherwise, as juicefs and rclone assume.
        path_style=(path_style.lower() == "true") if path_style else bool(endpoint),
        access_key=access,
        secret_key=secret,
    )


def _split_bucket(netloc: str) -> tuple[str, str | None]:
    """``bucket`` or ``bucket.endpoint.host[:port]`` (the juicefs-style form) → (bucket, endpoint host)."""
    if "." in netloc:
        bucket, host = netloc.split(".", 1)
        return bucket, host
    return netloc, None


def open_ufs(uri: str, options: dict[str, str], volumes_dir: Path, namespace: str = "default") -> Ufs:
    """The UFS a mount point names; UserError for a scheme that cannot be served here.

    ``pvc://NAME`` is the PVC ``NAME`` of ``namespace`` (the dataset's or the operation's: ``store.volume_folders``)."""
    scheme, _, rest = uri.partition("://")
    scheme = scheme.lower()
    if scheme in ("local", "file"):
        return LocalUfs(uri, Path("/" + rest.lstrip("/")))
    if scheme == "pvc":
        name, _, sub = rest.partition("/")
        volume = volume_folders.find(volumes_dir, namespace, name)
        return LocalUfs(uri, volume / sub.strip("/") if sub.strip("/") else volume)
    if scheme in S3_SCHEMES:
        netloc, _, prefix = rest.partition("/")
        if scheme == "minio":  # minio://HOST:PORT/BUCKET/PATH, plain HTTP (as juicefs sync spells it)
            host = netloc
            bucket, _, prefix = prefix.partition("/")
            settings = s3_settings(options, f"http://{host}")
        else:
            settings = s3_settings(options)
            bucket = netloc
            if settings.endpoint is None or scheme == "oss":
                # s3://BUCKET.ENDPOINT/PATH names its endpoint (juicefs sync's form) when nothing else does.
                bucket, named_host = _split_bucket(netloc)
                if named_host:
                    settings = s3_settings(options, f"https://{named_host}")
            if scheme == "oss" and _first(options, _PATH_STYLE) is None:
                settings = replace(settings, path_style=False)  # OSS's S3 API answers virtual-hosted requests only
        try:
            return ObstoreS3Ufs(uri, bucket, prefix, settings)
        except ImportError:
            return _s3fs_ufs(uri, bucket, prefix, settings)
    if scheme == "juicefs":
        return _juicefs_ufs(uri, rest, options)
    return _fsspec_ufs(uri, scheme, options)


JUICEFS_STORAGES = ("s3", "minio", "oss", "ceph", "gs")


def _juicefs_ufs(uri: str, subdir: str, options: dict[str, str]) -> Ufs:
    """A ``juicefs:///SUBDIR`` mount: the files live as plain objects in the store its ``bucket`` option names.

    JuiceFS would chunk files and keep its metadata in Redis (``metaurl``); here the metadata is
    millpond's own index, so no metadata engine is needed, and the objects stay readable by any tool.
    """
    bucket_url = options.get("bucket")
    storage = (options.get("storage") or "s3").lower()
    if not bucket_url:
        raise UserError(f"{uri}: a juicefs:// mount needs options.bucket (the object store's URL, e.g. http://minio:9000/BUCKET)")
    if storage not in JUICEFS_STORAGES:
        raise UserError(f"{uri}: storage {storage!r} is not served here (use one of {', '.join(JUICEFS_STORAGES)})")
    parsed = urlsplit(bucket_url if "://" in bucket_url else f"https://{bucket_url}")
    path = parsed.path.strip("/")
    hostname = parsed.netloc.split(":")[0]
    if storage == "minio" or (path and "." not in hostname) or hostname.replace(".", "").isdigit():
        bucket, _, prefix = path.partition("/")  # http://HOST:PORT/BUCKET[/PREFIX]
        endpoint = f"{parsed.scheme}://{parsed.netloc}"
    else:
        bucket, _, host = parsed.netloc.partition(".")  # https://BUCKET.ENDPOINT[/PREFIX]
        endpoint, prefix = f"{parsed.scheme}://{host}", path
    if not bucket:
        raise UserError(f"{uri}: options.bucket {bucket_url!r} names no bucket")
    path_style = "true" if storage == "minio" else options.get("path-style", "")
    settings = s3_settings({**options, "endpoint": endpoint, "path-style": path_style})
    root = "/".join(part for part in (prefix, subdir.strip("/")) if part)
    try:
        return ObstoreS3Ufs(uri, bucket, root, settings)
    except ImportError:
        return _s3fs_ufs(uri, bucket, root, settings)


def _s3fs_ufs(uri: str, bucket: str, prefix: str, settings: S3Settings) -> Ufs:
    try:
        import s3fs  # noqa: PLC0415 - fsspec's backends when used
    except ImportError:
        raise UserError(f"{uri}: reading S3 needs obstore or s3fs; try: pip install 'millpond[s3]'") from None
    fs = s3fs.S3FileSystem(
        key=settings.access_key, secret=settings.secret_key, anon=settings.access_key is None,
        endpoint_url=settings.endpoint, client_kwargs={"region_name": settings.region},
        config_kwargs={
            "s3": {"addressing_style": "path" if settings.path_style else "virtual"},
            "connect_timeout": CONNECT_TIMEOUT_S, "read_timeout": READ_TIMEOUT_S,
            # Two tries of a request (botocore has no time window as obstore has: a third would
            # make a host that never answers cost 15 s instead of 10).
            "retries": {"total_max_attempts": 2, "mode": "standard"},
        },
        skip_instance_cache=True,
    )
    fs.retries = 1  # s3fs's own loop around botocore's retries (5 tries by default): once is enough
    return FsspecUfs(uri, fs, f"{bucket}/{prefix}".rstrip("/"))


def _fsspec_ufs(uri: str, scheme: str, options: dict[str, str]) -> Ufs:
    import fsspec  # noqa: PLC0415 - fsspec's backends when used

    try:
        fs = fsspec.filesystem(scheme, skip_instance_cache=True, **_bounded_client(scheme))
    except ValueError:
        raise UserError(f"{uri}: unknown mount scheme {scheme}://") from None
    except ImportError as exc:
        raise UserError(f"{uri}: the {scheme}:// filesystem needs an extra package ({exc})") from None
    root = uri if scheme in ("http", "https") else uri.partition("://")[2]
    return FsspecUfs(uri, fs, root)


def _bounded_client(scheme: str) -> dict[str, Any]:
    """The web filesystem's aiohttp timeouts, bounded (its defaults: 30 s to connect, 5 minutes a request)."""
    if scheme not in ("http", "https"):
        return {}
    import aiohttp  # noqa: PLC0415 - aiohttp for http(s) mounts only

    timeout = aiohttp.ClientTimeout(
        total=REQUEST_TIMEOUT_S, sock_connect=CONNECT_TIMEOUT_S, sock_read=READ_TIMEOUT_S
    )
    return {"client_kwargs": {"timeout": timeout}}


def _join(uri: str, key: str) -> str:
    return f"{uri.rstrip('/')}/{key}" if key else uri


def _error(verb: str, where: str, exc: BaseException) -> UfsError:
    """``cannot VERB WHERE: CAUSE``, the cause condensed from whatever the backend raised."""
    failure = describe(exc)
    return UfsError(f"cannot {verb} {where}: {failure.cause}", transient=failure.transient)


@contextmanager
def _failures(verb: str, where: str) -> Iterator[None]:
    """Any backend's exception (obstore, botocore, aiohttp…) as one UfsError line naming ``where``."""
    try:
        yield
    except UfsError:
        raise
    except Exception as exc:  # noqa: BLE001 - every backend has its own exception family
        raise _error(verb, where, exc) from None


def _stat_written(ufs: Ufs, key: str) -> UfsEntry:
    """The entry of a file just written (its new version is what the cache records)."""
    entry = ufs.stat(key)
    if entry is None:
        raise UfsError(f"cannot write {_join(ufs.uri, key)}: written but not found afterwards")
    return entry
