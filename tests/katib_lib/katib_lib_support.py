"""What the Katib library tests share: the upstream Experiments of the corpus, and "the error names this field"."""

from __future__ import annotations

import re
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
import yaml

from millpond.errors import UserError

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "conformance" / "platform-manifests"


def at(field: str) -> AbstractContextManager[Any]:
    """``pytest.raises(UserError)`` whose one-line message starts with ``field: ``."""
    return pytest.raises(UserError, match="^" + re.escape(field) + ": [^\n]*$")


def corpus_experiments() -> list[tuple[str, dict[str, Any]]]:
    """(file name, Experiment) for each Katib example of the conformance corpus; [] when it is not beside us."""
    found = []
    for path in sorted(CORPUS.glob("katib__*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if isinstance(document, dict) and document.get("kind") == "Experiment":
                found.append((path.name, document))
    return found
