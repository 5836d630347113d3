"""What every algorithm reads from a request: its checked space, the observations, and this call's seed.

Katib's services keep a study in memory between calls; here a call rebuilds what it needs from the
request, so a reply depends only on ``request.trials``, ``request.state`` and the settings:

- observations are the trials Katib's ``Trial.convert`` keeps: Succeeded or EarlyStopped, with an
  objective value; a Failed trial teaches nothing (and is never suggested again: a new call draws anew);
- ``suggested`` counts the assignments handed out so far (carried in the state; never below the
  number of trials, so a lost state cannot make a call repeat an earlier one's draws);
- the seed of a call is derived from ``random_state`` and ``suggested``: a fixed ``random_state`` gives
  the same search whether or not the process restarted between calls.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field

from millpond.katib.suggestions.records import OBSERVED_STATES, SuggestionRequest, TrialResult
from millpond.katib.suggestions.space import Param, assigned

SUGGESTED = "suggested"  # the state key: how many assignments this experiment has been handed


@dataclass(frozen=True)
class Observation:
    """A finished trial an algorithm learns from: its values as assigned, and the loss to minimize."""

    name: str
    values: Mapping[str, str]
    loss: float


@dataclass(frozen=True)
class Search:
    """One GetSuggestions call, digested."""

    request: SuggestionRequest
    params: tuple[Param, ...]
    settings: Mapping[str, object]
    observations: tuple[Observation, ...]
    suggested: int
    minimize: bool
    _entropy: int = field(default_factory=lambda: secrets.randbits(31))

    @property
    def count(self) -> int:
        return self.request.count

    def seed(self, salt: int = 0) -> int:
        """A 31-bit seed for draw ``salt`` of this call: fixed by ``random_state``, fresh without it."""
        random_state = self.settings.get("random_state")
        base = int(random_state) if random_state is not None else self._entropy  # type: ignore[call-overload]
        mixed = (base * 1_000_003 + self.suggested * 7_919 + salt) * 2_654_435_761
        return mixed % (2**31 - 1)

    def state(self, handed_out: int, **extra: str) -> tuple[tuple[str, str], ...]:
        """The state to carry after this call handed out ``handed_out`` assignments."""
        return ((SUGGESTED, str(self.suggested + handed_out)), *extra.items())


def _in_space(params: tuple[Param, ...], values: Mapping[str, str]) -> bool:
    for param in params:
        value = values.get(param.name)
        if value is None:
            return False
        if param.numeric:
            try:
                float(value)
            except ValueError:
                return False
        elif value not in param.values:
            return False
    return True


def observations(params: tuple[Param, ...], trials: tuple[TrialResult, ...], minimize: bool) -> tuple[Observation, ...]:
    """The trials an algorithm learns from, with the loss to minimize (maximize negates, as Katib does)."""
    found = []
    for trial in trials:
        if trial.state not in OBSERVED_STATES or trial.objective_value is None:
            continue
        values = assigned(trial)
        if not _in_space(params, values):
            continue  # a trial of an older search space: Katib's services would fail on it; skip it
        loss = float(trial.objective_value)
        found.append(Observation(trial.name, values, loss if minimize else -loss))
    return tuple(found)


def suggested_so_far(request: SuggestionRequest) -> int:
    carried = dict(request.state).get(SUGGESTED, "0")
    try:
        count = int(carried)
    except ValueError:
        count = 0
    return max(count, len(request.trials))
