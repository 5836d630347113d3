"""What Fluid's CRDs cannot say about a manifest, checked before it is stored.

Each check raises a UserError that starts with the field's path (``spec.tieredstore.levels[0].quota: …``);
the caller puts the file and the object in front. Sizes parse, watermarks are fractions in
order, paths are absolute and stay inside their root, placeholders are filled, schedules
parse, a data operation names a valid dataset (a DataMigrate on one side at least, as
Fluid requires), and every secret an ``encryptOptions`` names exists with its key.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from millpond.cron import CRONJOB, cron_problem
from millpond.datasets.fields import field_path, show
from millpond.datasets.kinds import KINDS
from millpond.datasets.mount_points import REFERENCE_SCHEME, escapes_root, parse_mount_point
from millpond.datasets.placeholders import placeholder_message, unfilled
from millpond.datasets.ufs import S3_SCHEMES, UNDERSTOOD_OPTIONS
from millpond.errors import UserError
from millpond.kind_handler import SecretLookup
from millpond.manifest_envelope import check_name
from millpond.quantities import parse_quantity
from millpond.store.secrets import MissingConfig

Path = list[str | int]

# A DataMigrate's copies at once (threads of one process here, not Fluid's worker pods): past a few hundred
# they only queue on the same link and disk, and each holds a thread and a connection.
MAX_MIGRATE_PARALLELISM = 256

# Fields that hold a URI, where a "<name>" anywhere is a placeholder (elsewhere only a whole value is).
URI_FIELDS = frozenset({"mountPoint", "uri", "backupPath"})


def _fail(path: Path, problem: str) -> UserError:
    return UserError(f"{field_path(path)}: {problem}")


def _walk(value: Any, path: Path) -> Iterator[tuple[Path, Any]]:
    yield path, value
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _walk(child, [*path, key])
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _walk(child, [*path, index])


def check_placeholders(body: dict[str, Any]) -> None:
    """No string of the spec, labels or annotations is a ``{{…}}`` or ``<name>`` left from a sample."""
    for path, value in _walk(body, []):
        if isinstance(value, str) and path and path[0] in ("spec", "metadata"):
            placeholder = unfilled(value, angle_anywhere=path[-1] in URI_FIELDS)
            if placeholder:
                raise _fail(path, placeholder_message(value, placeholder))


def check_absolute(path: Path, value: str, what: str = "path") -> None:
    if not value.startswith("/"):
        raise _fail(path, f"{show(value)}: the {what} must be absolute (start with /)")
    if escapes_root(value):
        raise _fail(path, f"{show(value)}: '..' climbs above /")


def _fraction(path: Path, value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise _fail(path, f"{show(value)} is not a number") from None
    if not 0.0 <= number <= 1.0:
        raise _fail(path, f"{show(value)} is outside 0-1 (a fraction of the quota)")
    return number


def _size(path: Path, value: object) -> int:
    try:
        size = parse_quantity(value).bytes
    except ValueError as exc:
        raise _fail(path, str(exc)) from None
    if size <= 0:
        raise _fail(path, f"{show(value)}: a cache tier needs a size above 0")
    return size


def check_tieredstore(spec: dict[str, Any]) -> None:
    """Each cache tier: sizes parse, watermarks within 0-1 with low <= high, absolute paths."""
    for index, level in enumerate((spec.get("tieredstore") or {}).get("levels") or []):
        at: Path = ["spec", "tieredstore", "levels", index]
        paths = [p.strip() for p in level["path"].split(",")] if "path" in level else []
        for path in paths:
            check_absolute([*at, "path"], path)
        if "quota" in level:
            _size([*at, "quota"], level["quota"])
        if "quotaList" in level:
            quotas = [q.strip() for q in level["quotaList"].split(",")]
            for quota in quotas:
                _size([*at, "quotaList"], quota)
            if paths and len(quotas) != len(paths):
                raise _fail([*at, "quotaList"], f"{len(quotas)} quotas for {len(paths)} paths: give one quota per path")
        high = _fraction([*at, "high"], level["high"]) if "high" in level else None
        low = _fraction([*at, "low"], level["low"]) if "low" in level else None
        if high is not None and low is not None and low > high:
            raise _fail([*at, "low"], f"{show(level['low'])} is above high {show(level['high'])}: "
                                      "eviction starts at high and stops at low")


def check_dataset(spec: dict[str, Any]) -> None:
    """Mount points parse; a mount's ``path`` inside the dataset does not climb out of it; a reference to another
    dataset (``dataset://``) is the dataset's only mount, as Fluid requires."""
    mounts = spec.get("mounts") or []
    for index, mount in enumerate(mounts):
        at: Path = ["spec", "mounts", index]
        point = parse_mount_point(mount["mountPoint"], field_path([*at, "mountPoint"]))
        if point.scheme == REFERENCE_SCHEME and len(mounts) != 1:
            raise _fail([*at, "mountPoint"], f"{show(mount['mountPoint'])}: a Dataset that references another "
                                             "(dataset://) has that one mount only")
        if escapes_root(mount.get("path", "")):
            raise _fail([*at, "path"], f"{show(mount['path'])}: '..' climbs out of the dataset")


def _dataset_refs(kind: str, spec: dict[str, Any]) -> Iterator[tuple[Path, str, object]]:
    """(field path, "dataset" or "namespace", value) of each dataset name or namespace the operation names."""
    if kind == "DataBackup":
        if "dataset" in spec:
            yield ["spec", "dataset"], "dataset", spec["dataset"]
        return
    if kind == "DataMigrate":
        refs: list[tuple[Path, Any]] = [
            (["spec", side, "dataset"], (spec.get(side) or {}).get("dataset")) for side in ("from", "to")
        ]
    else:
        refs = [(["spec", "dataset"], spec.get("dataset"))]
    for at, ref in refs:
        if isinstance(ref, dict):
            for key, what in (("name", "dataset"), ("namespace", "namespace")):
                if key in ref:
                    yield [*at, key], what, ref[key]


def check_dataset_refs(kind: str, spec: dict[str, Any]) -> None:
    """The dataset an operation works on has a valid name (an empty one is never applied, so it would wait forever)."""
    for at, what, value in _dataset_refs(kind, spec):
        try:
            check_name(what, str(value))
        except UserError as exc:
            raise _fail(at, str(exc)) from None


def check_migrate_sides(spec: dict[str, Any]) -> None:
    """Each side is a dataset or an external storage, and one side is a dataset (Fluid refuses the spec otherwise)."""
    datasets = 0
    for side in ("from", "to"):
        named = [key for key in ("dataset", "externalStorage") if (spec.get(side) or {}).get(key)]
        if not named:
            raise _fail(["spec", side], "names neither a dataset nor an externalStorage: give one")
        if len(named) == 2:
            raise _fail(["spec", side], "names both a dataset and an externalStorage: give one")
        datasets += named == ["dataset"]
    if not datasets:
        raise _fail(["spec"], "either spec.from.dataset or spec.to.dataset must be set "
                              "(a DataMigrate copies into or out of a dataset, as in Fluid)")


def check_operation(kind: str, spec: dict[str, Any]) -> None:
    """The dataset is named; targets are absolute paths inside it; URIs parse; a Cron schedule is valid."""
    check_dataset_refs(kind, spec)
    if kind == "DataMigrate":
        check_migrate_sides(spec)
        parallelism = spec.get("parallelism")
        if isinstance(parallelism, int) and parallelism > MAX_MIGRATE_PARALLELISM:
            raise _fail(["spec", "parallelism"], f"{parallelism} is more copies at once than one machine runs "
                                                 f"(at most {MAX_MIGRATE_PARALLELISM})")
    for index, target in enumerate(spec.get("target") or []):
        check_absolute(["spec", "target", index, "path"], target["path"])
    dataset = spec.get("dataset")
    if kind == "DataProcess" and isinstance(dataset, dict):
        check_absolute(["spec", "dataset", "mountPath"], dataset["mountPath"], "mount path")
    for side in ("from", "to"):
        sided = spec.get(side) or {}
        if "externalStorage" in sided:
            parse_mount_point(sided["externalStorage"]["uri"], field_path(["spec", side, "externalStorage", "uri"]))
        if "path" in (sided.get("dataset") or {}) and escapes_root(sided["dataset"]["path"]):
            raise _fail(
                ["spec", side, "dataset", "path"], f"{show(sided['dataset']['path'])}: '..' climbs out of the dataset"
            )
    if kind == "DataBackup" and spec.get("backupPath"):
        parse_mount_point(spec["backupPath"], "spec.backupPath")
    policy = spec.get("policy", "Once")
    if policy == "Cron":
        if not spec.get("schedule"):
            raise _fail(["spec", "schedule"], "required with policy: Cron (a cron expression such as \"0 * * * *\")")
        problem = cron_problem(spec["schedule"], CRONJOB)
        if problem:
            raise _fail(["spec", "schedule"], f"{show(spec['schedule'])} is not a cron schedule: {problem}")
    elif spec.get("schedule"):
        raise _fail(["spec", "schedule"], f"only used with policy: Cron (this operation's policy is {policy})")


def _encrypt_options(spec: dict[str, Any]) -> Iterator[tuple[Path, dict[str, Any]]]:
    for path, value in _walk(spec, ["spec"]):
        if path[-1] in ("encryptOptions", "sharedEncryptOptions") and isinstance(value, list):
            for index, option in enumerate(value):
                yield [*path, index], option


def check_secret_refs(spec: dict[str, Any], secrets: SecretLookup) -> None:
    """Every ``encryptOptions[].valueFrom.secretKeyRef`` names a millpond secret that has the key.

    Only names and keys are ever shown; the values are read to learn the keys and dropped.
    """
    keys: dict[str, set[str]] = {}
    for at, option in _encrypt_options(spec):
        ref = (option.get("valueFrom") or {}).get("secretKeyRef")
        if not ref:
            raise _fail(
                [*at, "valueFrom", "secretKeyRef"], f"option {show(option.get('name'))} names no secret to read"
            )
        ref_at = [*at, "valueFrom", "secretKeyRef"]
        name, key = ref["name"], ref.get("key")
        if not key:
            raise _fail(
                [*ref_at, "key"], f"required: which key of secret {show(name)} holds {show(option.get('name'))}"
            )
        if name not in keys:
            try:
                keys[name] = set(secrets.get("secret", name))
            except MissingConfig:
                raise _fail([*ref_at, "name"], f"secret {show(name)} not found: create it with "
                                               f"millpond secret create {name} --from-literal {key}=…") from None
        if key not in keys[name]:
            raise _fail([*ref_at, "key"], f"secret {show(name)} has no key {show(key)} "
                                          f"(add it with millpond secret create {name} --replace …)")


def recorded_only(kind: str, spec: dict[str, Any]) -> list[str]:
    """The spec fields millpond records but does not act on, in the manifest's order."""
    applicable = KINDS[kind].applicable
    fields = [name for name in spec if name not in applicable]
    replicas = spec.get("replicas")
    if KINDS[kind].category == "runtime" and isinstance(replicas, int) and replicas > 1:
        fields.insert(0, f"replicas: {replicas} (one machine holds one cache)")
    if kind == "Dataset":
        for position, mount in enumerate(spec.get("mounts") or []):
            if str(mount.get("mountPoint", "")).split("://", 1)[0].lower() in S3_SCHEMES:
                fields += [
                    f"mounts[{position}].options.{key}"
                    for key in mount.get("options") or {}
                    if key not in UNDERSTOOD_OPTIONS
                ]
    return fields
