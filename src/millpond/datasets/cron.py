"""A data operation's ``schedule``: read as Kubernetes reads a CronJob's, timed by croniter.

Fluid puts ``spec.schedule`` of a ``policy: Cron`` operation into a batch/v1 CronJob. The API
server checks it with robfig/cron's ``ParseStandard`` and refuses any ``TZ=``/``CRON_TZ=``
prefix; what it accepts is:

- five fields, minute first (minute 0-59, hour 0-23, day of month 1-31, month 1-12 or
  ``jan``-``dec``, day of week 0-6 or ``sun``-``sat``, names in any case); each a comma list of
  ``*``, ``?`` (the same as ``*``, in any field), ``N``, ``N-M``, each with an optional ``/STEP``
  (``N/STEP`` runs from N to the field's end);
- a descriptor, spelled exactly: ``@yearly``, ``@annually``, ``@monthly``, ``@weekly``,
  ``@daily``, ``@midnight``, ``@hourly``, or ``@every DURATION`` (a Go duration, ``1h30m``;
  whole seconds, at least one, as robfig's ``Every``).

:func:`parse_schedule` accepts exactly that, and is what both ``apply`` (through
:func:`cron_problem`) and the scheduler call, so a schedule that passed ``apply`` always runs.
Each field is expanded here into the values robfig would select, and croniter computes the times
from that expansion: robfig's day rule holds (day of month OR day of week, unless either began
with ``*`` or ``?``), and so does its horizon of five years. Times are UTC.

One refusal goes beyond Kubernetes: a schedule with no time in the next five years
(``0 0 31 2 *``) parses there and then only logs ``InvalidSchedule`` at every sync; here it is
refused at ``apply``, since it would never run.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from croniter import CroniterBadCronError, CroniterBadDateError, croniter

from millpond.durations import parse_go_duration
from millpond.errors import UserError

HORIZON_YEARS = 5  # robfig's SpecSchedule.Next gives up after five years; so does croniter here
DESCRIPTORS = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}
_EVERY = "@every "
_MONTHS = {name: number for number, name in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), start=1)}
_DAYS = {name: number for number, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}


@dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    names: dict[str, int] | None = None


_FIELDS = (
    _Field("minute", 0, 59), _Field("hour", 0, 23), _Field("day of month", 1, 31),
    _Field("month", 1, 12, _MONTHS), _Field("day of week", 0, 6, _DAYS),
)
# Go's unicode.IsSpace, which strings.Fields splits on (Python's str.split also splits on \x1c-\x1f).
_GO_SPACE = re.compile("[\t\n\v\f\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+")
_GO_INT = re.compile(r"[+-]?[0-9]+")


@dataclass(frozen=True)
class Schedule:
    """A parsed schedule: either a croniter expression of explicit values, or a fixed interval."""

    text: str
    expression: str | None = None  # five fields of numbers or "*", for croniter
    every: dt.timedelta | None = None  # ``@every``: whole seconds, at least one

    def next_after(self, moment: dt.datetime, anchor: dt.datetime) -> dt.datetime | None:
        """The first time after ``moment`` (aware), or None when none comes within five years.

        ``@every`` times are ``anchor`` plus whole intervals, as a CronJob's count from its
        creation, so a restarted scheduler keeps the same beat.
        """
        if self.every is not None:
            start = anchor.replace(microsecond=0)
            steps = max(0, (moment - start) // self.every) + 1
            return start + steps * self.every
        assert self.expression is not None
        try:
            found: dt.datetime = croniter(
                self.expression, moment, max_years_between_matches=HORIZON_YEARS
            ).get_next(dt.datetime)
        except CroniterBadDateError:
            return None
        return found


def parse_schedule(text: str) -> Schedule:
    """The schedule ``text`` names, as a CronJob would read it; UserError (one line) says why not."""
    if not isinstance(text, str) or text == "":
        raise UserError("empty schedule")
    if "TZ" in text:
        raise UserError("cannot use TZ or CRON_TZ in a schedule (as Kubernetes refuses it): times are UTC")
    if text.startswith("@"):
        if text.startswith(_EVERY):
            return Schedule(text, every=_every(text[len(_EVERY):]))
        if text not in DESCRIPTORS:
            raise UserError(f"unknown descriptor {text!r} (use {', '.join(DESCRIPTORS)} or '@every DURATION')")
        text, shown = DESCRIPTORS[text], text
    else:
        shown = text
    fields = [word for word in _GO_SPACE.split(text) if word]
    if len(fields) != 5:
        raise UserError(
            f"expected exactly 5 fields (minute hour day-of-month month day-of-week), found {len(fields)}"
        )
    parts = [_expand(word, field) for word, field in zip(fields, _FIELDS, strict=True)]
    schedule = Schedule(shown, expression=" ".join(parts))
    try:
        croniter(schedule.expression, dt.datetime.now(dt.timezone.utc))  # type: ignore[arg-type]
    except CroniterBadCronError as exc:  # not expected: the expansion is plain numbers
        raise UserError(f"croniter refuses {schedule.expression!r}: {exc}") from None
    return schedule


def cron_problem(expression: str) -> str | None:
    """Why ``expression`` cannot be a data operation's schedule, or None when it runs.

    It must parse (:func:`parse_schedule`) and name a time within the next five years.
    """
    try:
        schedule = parse_schedule(expression)
    except UserError as exc:
        return str(exc)
    now = dt.datetime.now(dt.timezone.utc)
    if schedule.next_after(now, now) is None:
        return f"it never fires: no time matches it within the next {HORIZON_YEARS} years"
    return None


def _expand(word: str, field: _Field) -> str:
    """One field as robfig's getField reads it, written out as croniter's explicit values.

    ``*`` stays ``*`` in the day fields when robfig would mark it a star (``*`` or ``?``
    without a step above 1): that, not the values, decides AND or OR between the two.
    """
    values: set[int] = set()
    star = False
    for item in (part for part in word.split(",") if part):  # Go's FieldsFunc drops empty parts
        picked, item_star = _range(item, field)
        values |= picked
        star = star or item_star
    if not values:
        raise UserError(f"{field.name} field {word!r} selects no value: it never fires")
    if star:
        return "*"
    return ",".join(str(value) for value in sorted(values))


def _range(item: str, field: _Field) -> tuple[set[int], bool]:
    """``N``, ``N-M``, ``*`` or ``?``, with an optional ``/STEP``: the values, and robfig's star bit."""
    range_and_step = item.split("/")
    low_and_high = range_and_step[0].split("-")
    star = low_and_high[0] in ("*", "?")
    if star:  # robfig ignores what follows a star's hyphen
        start, end = field.low, field.high
    else:
        start = _number(low_and_high[0], field, item)
        if len(low_and_high) > 2:
            raise UserError(f"{field.name} field: too many hyphens in {item!r}")
        end = _number(low_and_high[1], field, item) if len(low_and_high) == 2 else start
    if len(range_and_step) > 2:
        raise UserError(f"{field.name} field: too many slashes in {item!r}")
    step = 1
    if len(range_and_step) == 2:
        step = _number(range_and_step[1], None, item, field.name)
        if len(low_and_high) == 1:
            end = field.high  # "N/STEP" is "N-MAX/STEP"
        if step > 1:
            star = False
    if start < field.low:
        raise UserError(f"{field.name} field {item!r}: {start} is below {field.low}")
    if end > field.high:
        raise UserError(f"{field.name} field {item!r}: {end} is above {field.high}")
    if start > end:
        raise UserError(f"{field.name} field {item!r}: the range begins ({start}) after it ends ({end})")
    if step == 0:
        raise UserError(f"{field.name} field {item!r}: the step must be a positive number")
    return set(range(start, end + 1, step)), star


def _number(text: str, field: _Field | None, item: str, name: str = "") -> int:
    """A value as robfig's parseIntOrName reads it: a name of the field, or a Go integer ≥ 0."""
    if field is not None and field.names and text.lower() in field.names:
        return field.names[text.lower()]
    where = field.name if field is not None else name
    if not _GO_INT.fullmatch(text):
        raise UserError(f"{where} field {item!r}: {text!r} is not a number")
    value = int(text)
    if value < 0:
        raise UserError(f"{where} field {item!r}: negative number {value}")
    return value


def _every(text: str) -> dt.timedelta:
    """``@every``'s interval: a Go duration, then robfig's ``Every`` (under a second is one second)."""
    nanoseconds = parse_go_duration(text, "@every").nanoseconds
    return dt.timedelta(seconds=max(1, nanoseconds // 1_000_000_000) if nanoseconds > 0 else 1)
