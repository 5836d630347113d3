"""Cron schedules read as robfig/cron reads them, timed by croniter: the one parser millpond has.

Two Go programs read the cron schedules millpond takes, both with robfig/cron, each with its own
parser options and version; a :class:`Dialect` is one of those:

- :data:`CRONJOB`, a data operation's ``spec.schedule`` (``policy: Cron``): Fluid puts it into a
  batch/v1 CronJob, which the Kubernetes API server checks with robfig/cron v3's
  ``ParseStandard`` (``Minute | Hour | Dom | Month | Dow | Descriptor``), refusing any
  ``TZ=``/``CRON_TZ=`` prefix. Five fields, minute first: ``0 */5 * * *`` is every five hours.
- :data:`KUBEFLOW`, a recurring run's ``cron_schedule.cron``: Kubeflow's API server checks it with
  robfig/cron v1.2.0's ``cron.Parse`` and its ScheduledWorkflow controller times it with the same
  (``Second | Minute | Hour | Dom | Month | DowOptional | Descriptor``). Six fields, seconds
  first (``0 0 * * * *`` is hourly), or five: the same order with the day of week left out (it
  is ``*``), so ``0 */5 * * *`` is every five minutes, at second 0. v1 has no time zones: a
  ``TZ`` in it is no field or duration, and is refused.

A field (second 0-59, minute 0-59, hour 0-23, day of month 1-31, month 1-12 or ``jan``-``dec``,
day of week 0-6 or ``sun``-``sat``, names in any case) is a comma list of ``*``, ``?`` (the same
as ``*``, in any field), ``N``, ``N-M``, each with an optional ``/STEP`` (``N/STEP`` runs from N
to the field's end). Both dialects also take a descriptor, spelled exactly: ``@yearly``,
``@annually``, ``@monthly``, ``@weekly``, ``@daily``, ``@midnight``, ``@hourly`` (at second 0),
or ``@every DURATION`` (a Go duration, ``1h30m``; whole seconds, at least one, as robfig's
``Every``).

:func:`parse_schedule` accepts exactly what its dialect's parser accepts, and is what both the
check at ``apply`` or creation (:func:`cron_problem`) and the schedulers call, so a schedule
that was accepted always runs. Each field is expanded here into the values robfig selects, and
croniter computes the times from that expansion with robfig's day rule (day of month OR day of
week, unless either is a star: ``*`` or ``?``, which v3 stops counting as a star when it has a
step above 1 and v1 does not) and its horizon of five years. Times are UTC.

One refusal goes beyond both: a schedule with no time in the next five years (``0 0 31 2 *``)
parses there and then never runs (a CronJob logs ``InvalidSchedule`` at every sync; Kubeflow's
controller reads robfig's zero time as due); here it is refused, since it would never run.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from croniter import CroniterBadCronError, CroniterBadDateError, croniter

from millpond.durations import parse_go_duration
from millpond.errors import UserError

HORIZON_YEARS = 5  # robfig's SpecSchedule.Next gives up after five years; so does croniter here
# robfig's parseDescriptor, as six fields, seconds first (each a star where robfig sets all bits).
DESCRIPTORS = {
    "@yearly": "0 0 0 1 1 *", "@annually": "0 0 0 1 1 *", "@monthly": "0 0 0 1 * *",
    "@weekly": "0 0 0 * * 0", "@daily": "0 0 0 * * *", "@midnight": "0 0 0 * * *", "@hourly": "0 0 * * * *",
}
_EVERY = "@every "
_MONTHS = {name: number for number, name in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), start=1)}
_DAYS = {name: number for number, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
_INT64 = 1 << 63  # Go's strconv.Atoi refuses what does not fit an int (64 bits)


@dataclass(frozen=True, eq=False)  # each field is one object, compared by identity
class _Field:
    name: str
    low: int
    high: int
    default: str  # robfig's value for the field when its parser leaves it out
    names: dict[str, int] | None = None


SECOND, MINUTE, HOUR, DOM, MONTH, DOW = (
    _Field("second", 0, 59, "0"), _Field("minute", 0, 59, "0"), _Field("hour", 0, 23, "0"),
    _Field("day of month", 1, 31, "*"), _Field("month", 1, 12, "*", _MONTHS), _Field("day of week", 0, 6, "*", _DAYS),
)
_ALL_FIELDS = (SECOND, MINUTE, HOUR, DOM, MONTH, DOW)


@dataclass(frozen=True)
class Dialect:
    """One robfig/cron parser: the fields it reads, in order, and how its version reads a field."""

    reader: str  # who reads schedules so, for messages
    tz_refusal: str  # why a TZ= or CRON_TZ= prefix is refused
    fields: tuple[_Field, ...]  # robfig's ParseOption fields, in robfig's order
    dow_optional: bool  # DowOptional: the last field, day of week, may be left out (it is "*")
    step_keeps_star: bool  # v1: "*/N" in a day field still counts as "*" in the day rule (v3: not for N > 1)
    example: str  # an hourly schedule, for messages

    @property
    def usage(self) -> str:
        words = [field.name.replace(" ", "-") for field in self.fields]
        if self.dow_optional:
            words[-1] = f"[{words[-1]}]"
        return " ".join(words)


CRONJOB = Dialect("a Kubernetes CronJob (robfig/cron v3 ParseStandard)", "as Kubernetes refuses it",
                  (MINUTE, HOUR, DOM, MONTH, DOW), dow_optional=False, step_keeps_star=False, example="0 * * * *")
KUBEFLOW = Dialect("Kubeflow Pipelines (robfig/cron v1.2.0 Parse)", "Kubeflow's robfig/cron v1.2.0 has no time zones",
                   (SECOND, MINUTE, HOUR, DOM, MONTH, DOW), dow_optional=True, step_keeps_star=True,
                   example="0 0 * * * *")

# Go's unicode.IsSpace, which strings.Fields splits on (Python's str.split also splits on \x1c-\x1f).
_GO_SPACE = re.compile("[\t\n\v\f\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+")
_GO_INT = re.compile(r"[+-]?[0-9]+")


@dataclass(frozen=True)
class Schedule:
    """A parsed schedule: croniter fields of explicit values with robfig's day rule, or a fixed interval."""

    text: str
    expression: str | None = None  # six fields, seconds first, for croniter
    day_or: bool = True  # robfig's day rule: OR, unless a day field is a star (then AND)
    every: dt.timedelta | None = None  # ``@every``: whole seconds, at least one

    def next_after(self, moment: dt.datetime, anchor: dt.datetime) -> dt.datetime | None:
        """The first time after ``moment`` (aware), or None when none comes within five years.

        ``@every`` times are ``anchor`` (to the second) plus whole intervals: robfig adds the
        interval to the previous time, starting from the schedule's creation or start, so a
        restarted scheduler keeps the same beat.
        """
        if self.every is not None:
            start = anchor.replace(microsecond=0)
            steps = max(0, (moment - start) // self.every) + 1
            return start + steps * self.every
        try:
            found: dt.datetime = self._croniter(moment).get_next(dt.datetime)
        except CroniterBadDateError:
            return None
        return found

    def last_at_or_before(self, moment: dt.datetime, anchor: dt.datetime) -> dt.datetime | None:
        """The latest time at or before ``moment``, or None when none is within five years before it.

        For ``@every``, none is before the first interval after ``anchor`` has passed.
        """
        if self.every is not None:
            start = anchor.replace(microsecond=0)
            steps = (moment - start) // self.every
            return start + steps * self.every if steps >= 1 else None
        try:  # croniter's previous time is strictly before its start: start a second on
            found: dt.datetime = self._croniter(moment.replace(microsecond=0) + dt.timedelta(seconds=1)).get_prev(
                dt.datetime)
        except CroniterBadDateError:
            return None
        return found.replace(fold=0)  # croniter marks what it found going back as a second reading

    def _croniter(self, moment: dt.datetime) -> croniter:
        assert self.expression is not None
        return croniter(self.expression, moment, day_or=self.day_or, max_years_between_matches=HORIZON_YEARS,
                        second_at_beginning=True)


def parse_schedule(text: object, dialect: Dialect) -> Schedule:
    """The schedule ``text`` names, read as ``dialect`` reads it; UserError (one line) says why not."""
    if not isinstance(text, str):
        raise UserError(f"a schedule is text, not {type(text).__name__}")
    if text == "":
        raise UserError("empty schedule")
    if "TZ" in text:  # Kubernetes refuses it; v1 has no TZ prefix, and no field or duration holds "TZ"
        raise UserError(f"cannot use TZ or CRON_TZ in a schedule ({dialect.tz_refusal}): times are UTC")
    if text.startswith("@"):
        if text.startswith(_EVERY):
            return Schedule(text, every=_every(text[len(_EVERY):]))
        if text not in DESCRIPTORS:
            raise UserError(f"unknown descriptor {text!r} (use {', '.join(DESCRIPTORS)} or '@every DURATION')")
        return _spec(text, DESCRIPTORS[text].split(), step_keeps_star=False)
    words = [word for word in _GO_SPACE.split(text) if word]
    most = len(dialect.fields)
    least = most - 1 if dialect.dow_optional else most
    if not least <= len(words) <= most:
        counted = f"exactly {most}" if least == most else f"{least} to {most}"
        raise UserError(f"expected {counted} fields ({dialect.usage}), found {len(words)}")
    given = dict(zip(dialect.fields, words, strict=False))  # a left-out day of week is its default, "*"
    return _spec(text, [given.get(field, field.default) for field in _ALL_FIELDS], dialect.step_keeps_star)


def cron_problem(expression: object, dialect: Dialect) -> str | None:
    """Why ``expression`` cannot be a schedule of ``dialect``, or None when it runs.

    It must parse (:func:`parse_schedule`) and name a time within the next five years.
    """
    try:
        schedule = parse_schedule(expression, dialect)
    except UserError as exc:
        return str(exc)
    now = dt.datetime.now(dt.timezone.utc)
    if schedule.next_after(now, now) is None:
        return f"it never fires: no time matches it within the next {HORIZON_YEARS} years"
    return None


def _spec(text: str, words: list[str], step_keeps_star: bool) -> Schedule:
    """Six fields, seconds first, as robfig's getField reads each, written out for croniter."""
    expanded = [_expand(word, field, step_keeps_star) for word, field in zip(words, _ALL_FIELDS, strict=True)]
    day_or = not (expanded[3][1] or expanded[5][1])
    schedule = Schedule(text, expression=" ".join(values for values, _ in expanded), day_or=day_or)
    try:
        schedule._croniter(dt.datetime.now(dt.timezone.utc))
    except CroniterBadCronError as exc:  # not expected: the expansion is plain numbers
        raise UserError(f"croniter refuses {schedule.expression!r}: {exc}") from None
    return schedule


def _expand(word: str, field: _Field, step_keeps_star: bool) -> tuple[str, bool]:
    """One field's values as croniter's explicit list (``*`` for all of a time field), and robfig's star bit.

    The star bit, not the values, decides AND or OR between the two day fields, so those are
    always written out: croniter would read its own ``*`` there as a star.
    """
    values: set[int] = set()
    star = False
    for item in (part for part in word.split(",") if part):  # Go's FieldsFunc drops empty parts
        picked, item_star = _range(item, field, step_keeps_star)
        values |= picked
        star = star or item_star
    if not values:
        raise UserError(f"{field.name} field {word!r} selects no value: it never fires")
    if len(values) == field.high - field.low + 1 and field not in (DOM, DOW):
        return "*", star
    return ",".join(str(value) for value in sorted(values)), star


def _range(item: str, field: _Field, step_keeps_star: bool) -> tuple[set[int], bool]:
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
        if step > 1 and not step_keeps_star:
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
    """A value as robfig's parseIntOrName reads it: a name of the field, or a Go int ≥ 0 (64 bits)."""
    if field is not None and field.names and text.lower() in field.names:
        return field.names[text.lower()]
    where = field.name if field is not None else name
    if not _GO_INT.fullmatch(text):
        raise UserError(f"{where} field {item!r}: {text!r} is not a number")
    value = int(text)
    if not -_INT64 <= value < _INT64:
        raise UserError(f"{where} field {item!r}: {text} is out of range")
    if value < 0:
        raise UserError(f"{where} field {item!r}: negative number {value}")
    return value


def _every(text: str) -> dt.timedelta:
    """``@every``'s interval: a Go duration, then robfig's ``Every`` (under a second is one second)."""
    nanoseconds = parse_go_duration(text, "@every").nanoseconds
    return dt.timedelta(seconds=max(1, nanoseconds // 1_000_000_000) if nanoseconds > 0 else 1)
