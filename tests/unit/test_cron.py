"""millpond.cron reads a schedule as the robfig/cron of the program that takes it, fields in its order.

The times below were computed by robfig/cron itself, v1.2.0's ``cron.Parse`` (Kubeflow's API
server and ScheduledWorkflow controller) and v3.0.1's ``ParseStandard`` (the Kubernetes API
server, for a CronJob), calling ``Next`` from 2025-01-01T12:00:37Z again and again; the refusals
are those parsers' refusals. ``tools/robfig_oracle`` is the Go program that computes them.
"""

from __future__ import annotations

import datetime as dt

import pytest

from millpond.cron import CRONJOB, KUBEFLOW, Dialect, cron_problem, parse_schedule

FROM = dt.datetime(2025, 1, 1, 12, 0, 37, tzinfo=dt.UTC)  # a Wednesday

# (dialect, schedule, what it means, the times robfig's Next gives from FROM)
TIMES = [
    (KUBEFLOW, "0 */5 * * *", "five fields: second minute hour dom month, so every 5 minutes at second 0",
     ["Wed 01 12:05:00", "Wed 01 12:10:00", "Wed 01 12:15:00"]),
    (CRONJOB, "0 */5 * * *", "five fields: minute hour dom month dow, so every 5 hours",
     ["Wed 01 15:00:00", "Wed 01 20:00:00", "Thu 02 00:00:00"]),
    (KUBEFLOW, "0 0 * * * *", "Kubeflow's docs: hourly", ["Wed 01 13:00:00", "Wed 01 14:00:00", "Wed 01 15:00:00"]),
    (KUBEFLOW, "*/2 * * * *", "every 2 seconds", ["Wed 01 12:00:38", "Wed 01 12:00:40", "Wed 01 12:00:42"]),
    (KUBEFLOW, "*/2 * * * * *", "every 2 seconds", ["Wed 01 12:00:38", "Wed 01 12:00:40", "Wed 01 12:00:42"]),
    (KUBEFLOW, "@every 90s", "90 s after the last", ["Wed 01 12:02:07", "Wed 01 12:03:37", "Wed 01 12:05:07"]),
    (KUBEFLOW, "@every 1h30m", "a Go duration", ["Wed 01 13:30:37", "Wed 01 15:00:37"]),
    (KUBEFLOW, "@every 0.5s", "robfig's Every: at least a second", ["Wed 01 12:00:38", "Wed 01 12:00:39"]),
    (KUBEFLOW, "@hourly", "at second 0", ["Wed 01 13:00:00", "Wed 01 14:00:00", "Wed 01 15:00:00"]),
    (KUBEFLOW, "@weekly", "Sundays at midnight", ["Sun 05 00:00:00", "Sun 12 00:00:00"]),
    (KUBEFLOW, "0 0 * * 7 *", "the fifth field is the month: hourly in July", ["Tue 01 00:00:00", "Tue 01 01:00:00"]),
    (KUBEFLOW, "0 0 9 ? * 2-6", "the SDK's example: 9:00, Tuesday to Saturday",
     ["Thu 02 09:00:00", "Fri 03 09:00:00", "Sat 04 09:00:00"]),
    (KUBEFLOW, "0 0 0 */2 * 1", "v1: */2 is still a star, so odd days AND Mondays",
     ["Mon 13 00:00:00", "Mon 27 00:00:00", "Mon 03 00:00:00"]),
    (CRONJOB, "0 0 */2 * 1", "v3: */2 is no star, so odd days OR Mondays",
     ["Fri 03 00:00:00", "Sun 05 00:00:00", "Mon 06 00:00:00"]),
    (KUBEFLOW, "30 15 10 1 jan,JUL *", "names in any case", ["Tue 01 10:15:30", "Thu 01 10:15:30"]),
]

# (dialect, schedule, what the refusal says): robfig's refusals, and schedules that never fire.
REFUSED = [
    (KUBEFLOW, "* * * * * * *",
     "expected 5 to 6 fields (second minute hour day-of-month month [day-of-week]), found 7"),
    (KUBEFLOW, "0 * * *", "found 4"),
    (KUBEFLOW, "0 0 0 * * 7", "day of week field '7': 7 is above 6"),
    (KUBEFLOW, "60 * * * * *", "second field '60': 60 is above 59"),
    (KUBEFLOW, "0 0 0 L * *", "'L' is not a number"),
    (KUBEFLOW, "*/99999999999999999999 * * * * *", "out of range"),
    (KUBEFLOW, "@Hourly", "unknown descriptor"),
    (KUBEFLOW, "@every 1d", "not a Go duration"),
    (KUBEFLOW, "CRON_TZ=UTC 0 0 * * * *", "TZ"),
    (KUBEFLOW, "0 0 0 31 2 *", "never fires"),
    (KUBEFLOW, "", "empty"),
    (CRONJOB, "0 0 * * * *", "expected exactly 5 fields (minute hour day-of-month month day-of-week), found 6"),
]


def _times(dialect: Dialect, schedule: str, count: int) -> list[str]:
    parsed, moment, found = parse_schedule(schedule, dialect), FROM, []
    for _ in range(count):
        moment = parsed.next_after(moment, FROM)
        assert moment is not None
        found.append(moment.strftime("%a %d %H:%M:%S"))
    return found


@pytest.mark.parametrize(("dialect", "schedule", "meaning", "expected"), TIMES)
def test_times_are_robfigs(dialect: Dialect, schedule: str, meaning: str, expected: list[str]) -> None:
    assert cron_problem(schedule, dialect) is None
    assert _times(dialect, schedule, len(expected)) == expected, meaning


@pytest.mark.parametrize(("dialect", "schedule", "meaning", "expected"), TIMES)
def test_the_latest_time_at_or_before_a_moment_is_one_of_them(
    dialect: Dialect, schedule: str, meaning: str, expected: list[str]
) -> None:
    """What a recurring run without catch-up starts: the latest due time, found without walking to it."""
    parsed, moment, times = parse_schedule(schedule, dialect), FROM, []
    for _ in range(3):
        moment = parsed.next_after(moment, FROM)
        assert moment is not None
        times.append(moment)
    for earlier, later in zip(times, times[1:], strict=False):
        assert parsed.last_at_or_before(later, FROM) == later
        assert parsed.last_at_or_before(later - dt.timedelta(microseconds=1), FROM) == earlier
        assert parsed.last_at_or_before(later + dt.timedelta(milliseconds=300), FROM) == later


@pytest.mark.parametrize(("dialect", "schedule", "said"), REFUSED)
def test_what_robfig_refuses_is_refused_in_one_line(dialect: Dialect, schedule: str, said: str) -> None:
    problem = cron_problem(schedule, dialect)
    assert problem is not None and said in problem, problem
    assert "\n" not in problem
