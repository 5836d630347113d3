"""The conformance runner judges each file by its folder and ends with 'N passed, M failed'."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from kfp import compiler

from tests.pipelines import cached_loops, control_flow, typed_params

KFP_V1 = Path(__file__).resolve().parents[3] / "shared" / "conformance" / "kfp-v1"
if not KFP_V1.is_dir():
    KFP_V1 = Path("/work/shared/conformance/kfp-v1")


def test_runner_passes_and_fails_by_folder(cli, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    (corpus / "essential").mkdir(parents=True)
    (corpus / "failing").mkdir()
    compiler.Compiler().compile(typed_params.returns_int, str(corpus / "essential" / "ok.yaml"))
    compiler.Compiler().compile(typed_params.typed_params, str(corpus / "essential" / "required_params.yaml"))
    compiler.Compiler().compile(control_flow.cleanup_after_failure, str(corpus / "failing" / "fails.yaml"))
    (corpus / "essential" / "x_GH-1234.yaml").write_text("not even yaml: [")
    result = cli("conformance", corpus)
    assert result.code == 0, result.out
    lines = result.out.strip().splitlines()
    assert lines[-1] == "3 passed, 0 failed, 1 skipped"


def test_runner_exits_non_zero_when_a_file_fails(cli, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus" / "critical"
    corpus.mkdir(parents=True)
    compiler.Compiler().compile(control_flow.cleanup_after_failure, str(corpus / "fails.yaml"))
    result = cli("conformance", corpus.parent)
    assert result.code == 1
    assert result.out.strip().splitlines()[-1] == "0 passed, 1 failed"
    assert "exploded on purpose" in result.out


def test_twice_runs_each_case_again_from_the_cache(cli, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    (corpus / "essential").mkdir(parents=True)
    (corpus / "failing").mkdir()
    compiler.Compiler().compile(cached_loops.plain_loop, str(corpus / "essential" / "loop.yaml"))
    compiler.Compiler().compile(cached_loops.collected, str(corpus / "essential" / "collected.yaml"))
    compiler.Compiler().compile(control_flow.cleanup_after_failure, str(corpus / "failing" / "fails.yaml"))
    result = cli("conformance", "--twice", corpus)
    assert result.code == 0, result.out
    assert "essential/loop.yaml  SUCCEEDED, then SUCCEEDED (3 cached)" in result.out
    assert "essential/collected.yaml  SUCCEEDED, then SUCCEEDED (4 cached)" in result.out
    assert "failing/fails.yaml  FAILED, then FAILED" in result.out
    assert result.out.strip().splitlines()[-1] == "3 passed, 0 failed"


def test_twice_fails_a_case_whose_second_run_ends_otherwise(cli, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus" / "essential"
    corpus.mkdir(parents=True)
    compiler.Compiler().compile(cached_loops.once(str(tmp_path / "flag")), str(corpus / "once.yaml"))
    result = cli("conformance", "--twice", corpus.parent)
    assert result.code == 1
    assert "SUCCEEDED, then FAILED" in result.out and "second run (FAILED)" in result.out
    assert result.out.strip().splitlines()[-1] == "0 passed, 1 failed"


def test_twice_fails_a_case_whose_second_run_misses_the_cache(cli, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus" / "essential"
    corpus.mkdir(parents=True)
    compiler.Compiler().compile(cached_loops.lost_cache, str(corpus / "lost_cache.yaml"))
    result = cli("conformance", "--twice", corpus.parent)
    assert result.code == 1
    assert "SUCCEEDED, then SUCCEEDED (0 cached)" in result.out and "'make' was not a cache hit" in result.out


def test_twice_demands_no_hit_from_a_task_whose_inputs_name_the_run(cli, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus" / "essential"
    corpus.mkdir(parents=True)
    compiler.Compiler().compile(cached_loops.run_specific, str(corpus / "run_specific.yaml"))
    result = cli("conformance", "--twice", corpus.parent)
    assert result.code == 0, result.out
    assert "SUCCEEDED, then SUCCEEDED (0 cached)" in result.out


@pytest.mark.skipif(not KFP_V1.is_dir(), reason="the kfp-v1 corpus is not here")
def test_a_corpus_with_expected_tsv_is_judged_by_its_rows(cli, tmp_path: Path) -> None:
    """The kfp-v1 protocol: each row's state (REFUSED: before running), its parameters, its preconditions."""
    corpus = tmp_path / "kfp-v1"
    corpus.mkdir()
    rows = ["# file\texpected\tparams\twhat"]
    for line in (KFP_V1 / "EXPECTED.tsv").read_text().splitlines():
        if line.split("\t")[0] in ("hello_world.yaml", "condition.yaml", "fail.yaml", "volume.yaml",
                                    "fail_parameter_value_missing.yaml", "resource_ops.yaml"):
            rows.append(line)
            shutil.copy(KFP_V1 / line.split("\t")[0], corpus)
    shutil.copy(KFP_V1 / "hello_world.yaml", corpus / "wrongly_expected.yaml")
    rows.append("wrongly_expected.yaml\tFAILED\t-\ta row whose state is not the run's")
    (corpus / "EXPECTED.tsv").write_text("\n".join(rows) + "\n")
    result = cli("conformance", corpus)
    assert result.code == 1, result.out
    assert result.out.strip().splitlines()[-1] == "6 passed, 1 failed", result.out
    assert "FAIL wrongly_expected.yaml  SUCCEEDED" in result.out
    # Twice on one home: the same ends, and the second run's hello_world step is a cache hit.
    (corpus / "EXPECTED.tsv").write_text("\n".join(r for r in rows if not r.startswith("wrongly")) + "\n")
    twice = cli("conformance", "--twice", corpus)
    assert twice.code == 0 and twice.out.strip().splitlines()[-1] == "6 passed, 0 failed", twice.out
    assert "SUCCEEDED, then SUCCEEDED (1 cached)" in twice.out and "FAILED, then FAILED" in twice.out, twice.out
