"""``millpond conformance --manifests``: a manifest corpus' EXPECTED.tsv row by row, and its allow-list.

A small corpus written here (a ResourceFlavor that applies, a kind millpond does not know that is
refused) stands in for the shared ones, which .ci/run runs whole.
"""

from __future__ import annotations

from pathlib import Path

from millpond.cli.manifest_corpus import APPLY_PROTOCOL

FLAVOR = "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata:\n  name: default-flavor\n"
UNKNOWN = "apiVersion: example.com/v1\nkind: Gadget\nmetadata:\n  name: one\n"


def corpus(root: Path, rows: list[tuple[str, str, str]], readme: str = APPLY_PROTOCOL) -> Path:
    """A corpus folder ``root/small`` of (file, text, expected) rows."""
    folder = root / "small"
    folder.mkdir()
    (folder / "README.md").write_text(f"# small\n\nProtocol. {readme}:\n")
    lines = ["# file\texpected\tkinds"]
    for name, text, expected in rows:
        (folder / name).write_text(text)
        lines.append(f"{name}\t{expected}\tsome kind")
    (folder / "EXPECTED.tsv").write_text("\n".join(lines) + "\n")
    return folder


def allowlist(root: Path, *keys: str) -> Path:
    path = root / "allowlist.tsv"
    path.write_text("# corpus/file\tissue\twhy\n" + "".join(f"{key}\t99\twaits for issue 99\n" for key in keys))
    return path


def test_rows_that_follow_the_protocol_pass(cli, tmp_path: Path) -> None:
    folder = corpus(tmp_path, [("flavor.yaml", FLAVOR, "apply"), ("gadget.yaml", UNKNOWN, "refuse")])
    result = cli("conformance", folder)
    assert result.code == 0, result.out + result.err
    assert "2 passed, 0 known failures (allow-listed), 0 failed" in result.out


def test_a_row_against_its_expectation_fails_the_run_naming_it(cli, tmp_path: Path) -> None:
    folder = corpus(tmp_path, [("gadget.yaml", UNKNOWN, "apply")])
    result = cli("conformance", "--manifests", folder)
    assert result.code == 1, result.out
    assert "small/gadget.yaml: expected apply, got exit 2" in result.out
    assert 'unknown kind "Gadget"' in result.out  # its error line, to see why


def test_an_allow_listed_row_must_fail_cleanly_and_one_that_passes_fails_the_run(cli, tmp_path: Path) -> None:
    folder = corpus(tmp_path, [("flavor.yaml", FLAVOR, "apply"), ("gadget.yaml", UNKNOWN, "apply")])
    known = cli("conformance", "--allowlist", allowlist(tmp_path, "small/gadget.yaml"), folder)
    assert known.code == 0, known.out
    assert "1 passed, 1 known failures (allow-listed), 0 failed" in known.out
    passing = cli("conformance", "--allowlist", allowlist(tmp_path, "small/flavor.yaml", "small/gadget.yaml"), folder)
    assert passing.code == 1, passing.out
    assert "small/flavor.yaml: now passes: remove it from the allow-list (issue 99)" in passing.out


def test_an_allow_list_entry_naming_no_row_fails_the_run(cli, tmp_path: Path) -> None:
    folder = corpus(tmp_path, [("flavor.yaml", FLAVOR, "apply")])
    result = cli("conformance", "--allowlist", allowlist(tmp_path, "small/gone.yaml"), folder)
    assert result.code == 1 and "small/gone.yaml is allow-listed but is no row of" in result.out, result.out


def test_a_folder_that_is_no_manifest_corpus_is_one_error_line(cli, tmp_path: Path) -> None:
    folder = corpus(tmp_path, [("flavor.yaml", FLAVOR, "apply")], readme="Compile each pipeline")
    result = cli("conformance", "--manifests", folder)
    assert result.code == 2 and result.out == "", result.out
    assert result.err.strip().splitlines() == [
        f"error: {folder}: not a manifest corpus millpond knows (no README with the `millpond apply -f FILE` "
        "protocol and EXPECTED.tsv, and no --expected file)"
    ]


def test_a_corpus_file_without_a_row_is_one_error_line(cli, tmp_path: Path) -> None:
    folder = corpus(tmp_path, [("flavor.yaml", FLAVOR, "apply")])
    (folder / "extra.yaml").write_text(FLAVOR)
    result = cli("conformance", folder)
    assert result.code == 2, result.out
    assert result.err.strip().splitlines() == [
        f"error: {folder / 'EXPECTED.tsv'}: 1 file(s) of {folder} have no row, first extra.yaml"]


def test_before_is_applied_in_every_rows_home_and_not_counted_as_stored(cli, tmp_path: Path) -> None:
    """A refused row's "nothing stored" ignores what --before put in its home."""
    before = tmp_path / "before.yaml"
    before.write_text("apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\nstringData:\n  k: v\n")
    folder = corpus(tmp_path, [("gadget.yaml", UNKNOWN, "refuse"), ("flavor.yaml", FLAVOR, "apply")])
    result = cli("conformance", "--before", before, "--jobs", "1", folder)
    assert result.code == 0, result.out
    assert "2 passed" in result.out
