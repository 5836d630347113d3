"""millpond.durations: one parser per notation, each as its upstream reads it.

Go rows are facts from Go's src/time/time_test.go (parseDurationTests, parseDurationErrorTests);
protobuf rows follow google.golang.org/protobuf's protojson (the KFP backend's reader) and
duration.proto's range; Alluxio rows follow FormatUtils.parseTimeSize.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from millpond.durations import (
    PROTOBUF_MAX_SECONDS,
    Duration,
    DurationError,
    parse_alluxio_duration,
    parse_go_duration,
    parse_protobuf_duration,
)
from millpond.errors import UserError, exit_code_of
from tests.fuzz_support import fuzz_settings

NS, US, MS, S, M, H = 1, 10**3, 10**6, 10**9, 60 * 10**9, 3600 * 10**9

GO: list[tuple[str, int]] = [
    # simple
    ("0", 0), ("5s", 5 * S), ("30s", 30 * S), ("1478s", 1478 * S),
    # sign
    ("-5s", -5 * S), ("+5s", 5 * S), ("-0", 0), ("+0", 0),
    # decimal
    ("5.0s", 5 * S), ("5.6s", 5 * S + 600 * MS), ("5.s", 5 * S), (".5s", 500 * MS), ("1.0s", S), ("1.00s", S),
    ("1.004s", S + 4 * MS), ("1.0040s", S + 4 * MS), ("100.00100s", 100 * S + MS),
    # different units
    ("10ns", 10 * NS), ("11us", 11 * US), ("12µs", 12 * US), ("12μs", 12 * US), ("13ms", 13 * MS), ("14s", 14 * S),
    ("15m", 15 * M), ("16h", 16 * H),
    # composite durations
    ("3h30m", 3 * H + 30 * M), ("10.5s4m", 4 * M + 10 * S + 500 * MS), ("-2m3.4s", -(2 * M + 3 * S + 400 * MS)),
    ("1h2m3s4ms5us6ns", H + 2 * M + 3 * S + 4 * MS + 5 * US + 6 * NS),
    ("39h9m14.425s", 39 * H + 9 * M + 14 * S + 425 * MS),
    # large value
    ("52763797000ns", 52763797000),
    # more than 9 digits after the point (golang.org/issue/6617)
    ("0.3333333333333333333h", 20 * M),
    # 1<<53+1 cannot be held by a float64
    ("9007199254740993ns", 2**53 + 1),
    # the largest and smallest int64 nanoseconds
    ("9223372036854775807ns", 2**63 - 1), ("9223372036854775.807us", 2**63 - 1),
    ("9223372036s854ms775us807ns", 2**63 - 1), ("-9223372036854775808ns", -(2**63)),
    ("-9223372036854775.808us", -(2**63)), ("-9223372036s854ms775us808ns", -(2**63)),
    ("-2562047h47m16.854775808s", -(2**63)),
    # a huge string (golang.org/issue/15011), and leadingFraction's first overflow check
    ("0.100000000000000000000h", 6 * M), ("0.830103483285477580700h", 49 * M + 48 * S + 372539827),
    # the forms this project's fields take
    ("1m30s", 90 * S), ("1.5h", 90 * M), ("300ms", 300 * MS), ("1h2m3.5s", H + 2 * M + 3 * S + 500 * MS),
    ("-1s", -S), ("2s", 2 * S),
]


@pytest.mark.parametrize(("text", "nanoseconds"), GO, ids=[row[0] for row in GO])
def test_go_parse_duration_table(text: str, nanoseconds: int) -> None:
    assert parse_go_duration(text) == Duration(nanoseconds)


GO_INVALID = [
    # Go's error table
    "", "3", "-", "s", ".", "-.", ".s", "+.s", "1d", "\x85\x85", "\xffff", "hello \xffff world", "\ufffd",
    "\ufffd hello \ufffd world",
    # overflow
    "9223372036854775810ns", "9223372036854775808ns", "-9223372036854775809ns", "9223372036854776us", "3000000h",
    "9223372036854775.808us", "9223372036854ms775us808ns",
    # what the old parsers took: bare numbers, other units, spaces
    "30", "-1", "1.5", "60000", "5min", "10sec", "1w", "1e3s", " 1s", "1s ", "1 s", "1h-1m", "1S", "--1s", "1.2.3s",
]


@pytest.mark.parametrize("text", GO_INVALID, ids=[repr(t) for t in GO_INVALID])
def test_not_a_go_duration(text: str) -> None:
    with pytest.raises(DurationError) as raised:
        parse_go_duration(text, "timeout:")
    assert str(raised.value).startswith(f"timeout: {text!r} is not a Go duration")
    assert exit_code_of(raised.value) == 2 and isinstance(raised.value, UserError)


@pytest.mark.parametrize("value", [30, 1.5, None, b"1s", ["1s"], True])
def test_a_go_duration_is_a_string(value: object) -> None:
    with pytest.raises(DurationError, match="not a string"):
        parse_go_duration(value)


GO_STRING = [
    (0, "0s"), (1, "1ns"), (1100, "1.1µs"), (2200 * US, "2.2ms"), (3300 * MS, "3.3s"), (4 * M + 5 * S, "4m5s"),
    (4 * M + 5001 * MS, "4m5.001s"), (5 * H + 6 * M + 7001 * MS, "5h6m7.001s"), (8 * M + 1, "8m0.000000001s"),
    (2**63 - 1, "2562047h47m16.854775807s"), (-(2**63), "-2562047h47m16.854775808s"), (-S, "-1s"), (90 * S, "1m30s"),
]


@pytest.mark.parametrize(("nanoseconds", "text"), GO_STRING, ids=[row[1] for row in GO_STRING])
def test_go_string(nanoseconds: int, text: str) -> None:
    """Go's Duration.String() (time_test.go durationTests), which parses back to the same duration."""
    assert str(Duration(nanoseconds)) == text
    assert parse_go_duration(text) == Duration(nanoseconds)


PROTOBUF: list[tuple[str, int]] = [
    ("0s", 0), ("-0s", 0), ("1s", S), ("-1s", -S), ("+1s", S), ("3.5s", 3 * S + 500 * MS), ("90s", 90 * S),
    ("3600s", H), ("0.5s", 500 * MS), ("-0.5s", -500 * MS), ("1.000000001s", S + 1), ("-1.000000001s", -(S + 1)),
    ("1.s", S), (".5s", 500 * MS), ("-.1s", -100 * MS), (".s", 0), ("1.123456789s", 1123456789),
    ("3.500s", 3500 * MS), ("0.000001s", 1000), ("100.700s", 100 * S + 700 * MS), ("-100.700s", -100700 * MS),
    ("315576000000s", PROTOBUF_MAX_SECONDS * S), ("-315576000000s", -PROTOBUF_MAX_SECONDS * S),
    ("315576000000.999999999s", PROTOBUF_MAX_SECONDS * S + 999999999),
    ("9223372036.854775807s", 2**63 - 1),
]


@pytest.mark.parametrize(("text", "nanoseconds"), PROTOBUF, ids=[row[0] for row in PROTOBUF])
def test_protobuf_json_duration_table(text: str, nanoseconds: int) -> None:
    assert parse_protobuf_duration(text) == Duration(nanoseconds)


PROTOBUF_INVALID = [
    "1m30s", "1m", "1h", "90", "1.5", "", "s", "-s", "+s", "1ss", "1S", "01s", "-01s", "00s", "1.1234567890s",
    "1e3s", " 1s", "1s ", "1 s", "1_0s", "--1s", "+-1s", "1,5s", "1.-5s", "x.3s", "3.xs", "5.3.2s", "１s",
    "315576000001s", "-315576000001s", "315576000001.000000001s", "3155760000000s", "99999999999999999999s",
]


@pytest.mark.parametrize("text", PROTOBUF_INVALID, ids=[repr(t) for t in PROTOBUF_INVALID])
def test_not_a_protobuf_duration(text: str) -> None:
    with pytest.raises(DurationError) as raised:
        parse_protobuf_duration(text, "retryPolicy.backoffDuration")
    assert str(raised.value).startswith(f"retryPolicy.backoffDuration {text!r} is not a protobuf Duration")


@pytest.mark.parametrize(
    ("nanoseconds", "text"),
    [(0, "0s"), (S, "1s"), (3500 * MS, "3.500s"), (S + 1000, "1.000001s"), (S + 1, "1.000000001s"),
     (-500 * MS, "-0.500s"), (-1, "-0.000000001s"), (90 * S, "90s")],
)
def test_protobuf_json_form(nanoseconds: int, text: str) -> None:
    """protojson prints 0, 3, 6 or 9 decimals."""
    assert Duration(nanoseconds).protobuf_json() == text


ALLUXIO: list[tuple[object, int]] = [
    ("-1", -MS), ("0", 0), ("60000", 60 * S), ("10ms", 10 * MS), ("10millisecond", 10 * MS), ("30s", 30 * S),
    ("30sec", 30 * S), ("30second", 30 * S), ("5m", 5 * M), ("5min", 5 * M), ("5minute", 5 * M), ("5MIN", 5 * M),
    ("2h", 2 * H), ("2hr", 2 * H), ("2hour", 2 * H), ("1d", 24 * H), ("1day", 24 * H), ("1D", 24 * H),
    ("-5min", -5 * M), ("007s", 7 * S), (60000, 60 * S), (-1, -MS),
]


@pytest.mark.parametrize(("text", "nanoseconds"), ALLUXIO, ids=[repr(row[0]) for row in ALLUXIO])
def test_alluxio_time_size_table(text: object, nanoseconds: int) -> None:
    assert parse_alluxio_duration(text) == Duration(nanoseconds)


ALLUXIO_INVALID = [
    "", "-", "ms", "1.5s", "+5", "5 s", " 5", "1m30s", "1w", "1e3", "--1", "5µs", "5sec ", None, 1.5, True,
]


@pytest.mark.parametrize("text", ALLUXIO_INVALID, ids=[repr(t) for t in ALLUXIO_INVALID])
def test_not_an_alluxio_duration(text: object) -> None:
    with pytest.raises(DurationError, match="is not an Alluxio duration"):
        parse_alluxio_duration(text)


# --- properties ----------------------------------------------------------------------------------------

int64_nanos = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@fuzz_settings(300)
@given(int64_nanos)
def test_go_string_parses_back(nanoseconds: int) -> None:
    assert parse_go_duration(str(Duration(nanoseconds))) == Duration(nanoseconds)


@fuzz_settings(300)
@given(st.integers(min_value=-PROTOBUF_MAX_SECONDS * S - 999999999, max_value=PROTOBUF_MAX_SECONDS * S + 999999999))
def test_protobuf_json_parses_back(nanoseconds: int) -> None:
    assert parse_protobuf_duration(Duration(nanoseconds).protobuf_json()) == Duration(nanoseconds)


@fuzz_settings(300)
@given(st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from(["h", "m", "s", "ms", "us", "µs", "ns"])),
                min_size=1, max_size=6))
def test_go_parts_add_up(parts: list[tuple[int, str]]) -> None:
    unit = {"h": H, "m": M, "s": S, "ms": MS, "us": US, "µs": US, "ns": NS}
    text = "".join(f"{number}{name}" for number, name in parts)
    assert parse_go_duration(text).nanoseconds == sum(number * unit[name] for number, name in parts)


@fuzz_settings(300)
@given(st.text(max_size=30))
def test_any_text_parses_or_is_refused_as_a_duration_error(text: str) -> None:
    for parse in (parse_go_duration, parse_protobuf_duration, parse_alluxio_duration):
        try:
            parse(text)
        except DurationError:
            pass
