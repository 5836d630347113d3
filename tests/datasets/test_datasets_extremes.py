"""Fluid objects driven to extremes (issue 28): every number a user writes is bounded before anything runs.

A runtime's ``replicas`` (int32; more than one is recorded only, one machine holds one cache), a
tier's ``quota`` (a quantity, above 0, at most 2^63-1), its ``high``/``low`` watermarks (fractions
in order), the metadata TTL annotation (a Go duration), and a DataMigrate's ``parallelism`` (its
copies run as threads here: at most ``MAX_MIGRATE_PARALLELISM``): ``millpond apply`` takes the
objects or refuses them with one ``error:`` line (exit 2), never a traceback, and what it took is
read back by ``get`` and ``dataset ls``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from millpond.datasets.manifest_checks import MAX_MIGRATE_PARALLELISM, check_operation
from millpond.datasets.schema_check import check_schema
from millpond.errors import UserError

PROPERTY = settings(max_examples=30, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

big_ints = st.one_of(st.integers(-(2**70), 2**70), st.sampled_from([0, 1, -1, 2**31 - 1, 2**31, 2**63]))
quantities = st.one_of(
    big_ints, st.floats(allow_nan=True, allow_infinity=True),
    st.builds(lambda mantissa, exponent, suffix: f"{mantissa}{exponent}{suffix}",
              st.sampled_from(["1", "9.5", "-3", "0.0000001", "999999999999999999999"]),
              st.sampled_from(["", "e18", "e400", "e-400"]), st.sampled_from(["", "Ki", "Mi", "Gi", "Ei", "k"])),
)
fractions = st.one_of(st.floats(allow_nan=True, allow_infinity=True).map(str),
                      st.sampled_from(["0", "1", "0.95", "0.7", "1e308", "-0", "2", "1e-400", "x"]))
durations = st.one_of(st.sampled_from(["30s", "1h30m", "-1s", "0s", "9999999999999999h", "1e9h", "never", ""]),
                      st.builds(lambda n, unit: f"{n}{unit}", big_ints, st.sampled_from(["ns", "s", "m", "h"])))


def _checked(result: Any) -> bool:
    """True when the command succeeded; else it failed in one ``error:`` line with exit 2. Never a traceback."""
    assert "Traceback" not in result.err, result.err
    if result.code == 0:
        return True
    lines = result.err.strip().splitlines()
    assert result.code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (result.code, result.err)
    return False


@PROPERTY
@example(replicas=1, quota="1Gi", high="0.95", low="0.7", ttl="30s")  # taken: then read back
@given(replicas=big_ints, quota=quantities, high=fractions, low=fractions, ttl=durations)
def test_extreme_dataset_numbers_are_taken_or_refused_in_one_line(cli, home: Path, tmp_path: Path, replicas, quota,
                                                                   high, low, ttl) -> None:
    source = tmp_path / "ufs"
    source.mkdir(exist_ok=True)
    (source / "a.txt").write_text("a")
    documents = [
        {"apiVersion": "data.fluid.io/v1alpha1", "kind": "Dataset",
         "metadata": {"name": "ds", "annotations": {"data.millpond.io/metadata-ttl": ttl}},
         "spec": {"mounts": [{"mountPoint": f"local://{source}", "name": "m", "path": "/"}]}},
        {"apiVersion": "data.fluid.io/v1alpha1", "kind": "AlluxioRuntime", "metadata": {"name": "ds"},
         "spec": {"replicas": replicas, "tieredstore": {"levels": [
             {"mediumtype": "SSD", "path": str(tmp_path / "cache"), "quota": quota, "high": high, "low": low}]}}},
    ]
    path = tmp_path / "ds.yaml"
    path.write_text(yaml.safe_dump_all(documents))
    if _checked(cli("apply", "-f", path)):
        shown = cli("get", "dataset", "ds", "-o", "json")
        assert _checked(shown)
        json.loads(shown.out)
        assert _checked(cli("dataset", "ls", "ds"))
    for kind in ("dataset", "alluxioruntime"):
        cli("delete", kind, "ds")


@PROPERTY
@given(parallelism=st.one_of(big_ints, st.integers(1, 2 * MAX_MIGRATE_PARALLELISM)))
def test_a_data_migrate_runs_no_more_copies_at_once_than_the_machine_holds(parallelism: int) -> None:
    """The schema (int32, at least 1) and then the machine's bound, as ``apply`` checks a DataMigrate."""
    spec = {"from": {"dataset": {"name": "ds", "namespace": "default"}},
            "to": {"externalStorage": {"uri": "local:///tmp/out"}}, "parallelism": parallelism}
    try:
        check_schema("DataMigrate", {"apiVersion": "data.fluid.io/v1alpha1", "kind": "DataMigrate",
                                     "metadata": {"name": "m"}, "spec": spec})
        check_operation("DataMigrate", spec)
    except UserError as exc:
        assert not 1 <= parallelism <= MAX_MIGRATE_PARALLELISM, exc
        assert "\n" not in str(exc)
        if 1 <= parallelism <= 2**31 - 1:
            assert str(exc) == (f"spec.parallelism: {parallelism} is more copies at once than one machine runs "
                                f"(at most {MAX_MIGRATE_PARALLELISM})")
    else:
        assert 1 <= parallelism <= MAX_MIGRATE_PARALLELISM


def test_apply_refuses_a_data_migrate_of_a_hundred_thousand_copies_at_once(cli, home: Path, tmp_path: Path) -> None:
    source = tmp_path / "ufs"
    source.mkdir()
    (tmp_path / "ds.yaml").write_text(yaml.safe_dump_all([
        {"apiVersion": "data.fluid.io/v1alpha1", "kind": "Dataset", "metadata": {"name": "ds"},
         "spec": {"mounts": [{"mountPoint": f"local://{source}", "name": "m", "path": "/"}]}},
        {"apiVersion": "data.fluid.io/v1alpha1", "kind": "AlluxioRuntime", "metadata": {"name": "ds"},
         "spec": {"tieredstore": {"levels": [{"mediumtype": "SSD", "path": str(tmp_path / "cache"), "quota": "1Gi"}]}}},
    ]))
    assert cli("apply", "-f", tmp_path / "ds.yaml").code == 0
    migrate = {"apiVersion": "data.fluid.io/v1alpha1", "kind": "DataMigrate", "metadata": {"name": "m"},
               "spec": {"from": {"dataset": {"name": "ds", "namespace": "default"}},
                        "to": {"externalStorage": {"uri": f"local://{tmp_path / 'out'}"}}, "parallelism": 100000}}
    (tmp_path / "migrate.yaml").write_text(yaml.safe_dump(migrate))
    result = cli("apply", "-f", tmp_path / "migrate.yaml")
    assert result.code == 2 and result.err.count("\n") == 1, result.err
    assert "spec.parallelism: 100000 is more copies at once than one machine runs (at most 256)" in result.err
    assert cli("get", "datamigrates").out.strip() in ("", "No resources found in default namespace.")
