"""What the fuzz tests (tests/*/test_fuzz_*.py) share: one hypothesis profile, hostile values, document mutations.

The profile is derandomized (examples derive from the test's name and strategies, no example
database), so CI explores the same inputs every time and a failure reproduces on any machine.
``MILLPOND_FUZZ_EXAMPLES`` scales the number of examples for a longer local hunt.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

SEEDS = Path(__file__).parent / "fuzz_seeds"
_SCALE = float(os.environ.get("MILLPOND_FUZZ_EXAMPLES", "1"))


def fuzz_settings(examples: int) -> settings:
    """A derandomized profile with ``examples`` examples; a 5 s deadline catches a hang or a blow-up."""
    return settings(
        max_examples=max(1, int(examples * _SCALE)),
        deadline=5_000,
        derandomize=True,
        database=None,
        print_blob=True,
        # no explain phase: it traces every line (sys.settrace), which is slow on big documents
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
    )


# Values that broke, or could break, code that trusts a document's shape.
HOSTILE_SCALARS = [
    None, True, 0, -1, 2**31, 2**63 - 1, 2**63, -(2**63) - 1, 10**400, 1.5, float("nan"), float("inf"),
    "", "x" * 300, "../../../../tmp/x", "/etc", "a\x00b", "{{$}}", "{{$.inputs.parameters['x']}}", "comp-missing",
    "NUMBER_INTEGER", "LIST", "STRUCT", "2024-01-01",
]


def deep(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20), st.sampled_from(HOSTILE_SCALARS),
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=12,
)
hostile_values = st.one_of(
    json_values, st.sampled_from([[], {}, deep(150), {"a": deep(99)}, [None], {"": None}]),
)


def _slots(doc: Any) -> list[tuple[Any, Any]]:
    """(container, key or index) for every value inside ``doc``, found without recursion."""
    slots: list[tuple[Any, Any]] = []
    stack = [doc]
    while stack:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, child in items:
            slots.append((node, key))
            if isinstance(child, (dict, list)):
                stack.append(child)
    return slots


def _fresh(draw: st.DrawFn, strategy: st.SearchStrategy[Any]) -> Any:
    """A drawn value copied.

    ``sampled_from`` hands out the same list each time, and edits must not leak between examples.
    """
    return copy.deepcopy(draw(strategy))


@st.composite
def mutated(draw: st.DrawFn, seeds: list[Any], rounds: int = 3) -> Any:
    """A copy of one seed document with 1..``rounds`` edits: a value replaced, a key removed, added or renamed."""
    doc = copy.deepcopy(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, rounds))):
        slots = _slots(doc)
        if not slots:
            return _fresh(draw, hostile_values)
        container, key = draw(st.sampled_from(slots))
        operation = draw(st.sampled_from(["replace", "replace", "remove", "add", "rename", "copy"]))
        if operation == "replace":
            container[key] = _fresh(draw, hostile_values)
        elif operation == "remove":
            del container[key]
        elif operation == "add" and isinstance(container, dict):
            container[draw(st.one_of(st.text(max_size=12), st.sampled_from(["x" * 300, "a\x00", ".."])))] = (
                _fresh(draw, hostile_values))
        elif operation == "add":
            container.insert(key, _fresh(draw, hostile_values))
        elif operation == "rename" and isinstance(container, dict):
            container[draw(st.sampled_from(["../x", "x" * 300, "", "a\x00b", "root", "dag"]))] = container.pop(key)
        else:  # copy another value of the document here (a task into a component, a list into a map...)
            source, source_key = draw(st.sampled_from(slots))
            container[key] = copy.deepcopy(source[source_key])
    return doc


_YAML_NOISE = list("[]{}:,-&*!|>'\"#%@`?\n \t\\") + ["&a ", "*a", "<<: ", "!!binary ", "!!set ", "!!python/object ",
                                                   "---\n", "...\n", "\\0", "\x00", "\ufeff", "9" * 30]


@st.composite
def mutated_text(draw: st.DrawFn, seeds: list[str]) -> str:
    """A seed text with a few characters or YAML tokens inserted, deleted or replaced."""
    text = draw(st.sampled_from(seeds))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        piece = draw(st.one_of(st.sampled_from(_YAML_NOISE), st.text(max_size=3)))
        operation = draw(st.sampled_from(["insert", "delete", "replace"]))
        if operation == "insert":
            text = text[:at] + piece + text[at:]
        elif operation == "delete":
            text = text[:at] + text[at + draw(st.integers(1, 40)):]
        else:
            text = text[:at] + piece + text[at + len(piece):]
    return text
