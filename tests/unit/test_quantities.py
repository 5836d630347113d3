"""millpond.quantities reads Kubernetes quantities exactly as k8s.io/apimachinery's resource.ParseQuantity does.

The rows are facts from upstream's quantity_test.go (TestQuantityParse, TestParseQuantityString,
TestQuantityParseEmit, TestQuantityString, TestQuantityRoundUp), each with its expected exact value
and format; the one deliberate difference (no silent cap: beyond int64 is refused) has its own table.
"""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from millpond.errors import UserError, exit_code_of
from millpond.quantities import INT64_MAX, Format, Quantity, QuantityError, parse_bytes, parse_quantity
from tests.fuzz_support import fuzz_settings

DSI, BSI, DEX = Format.DECIMAL_SI, Format.BINARY_SI, Format.DECIMAL_EXPONENT
F = Fraction
KI, MI, GI, TI, PI, EI = (2**e for e in (10, 20, 30, 40, 50, 60))

# upstream TestQuantityParse: (input, exact value, format)
PARSED: list[tuple[str, Fraction | int, Format]] = [
    ("0", 0, DSI), ("0n", 0, DSI), ("0u", 0, DSI), ("0m", 0, DSI), ("0Ki", 0, BSI), ("0k", 0, DSI),
    ("0Mi", 0, BSI), ("0M", 0, DSI), ("0Gi", 0, BSI), ("0G", 0, DSI), ("0Ti", 0, BSI), ("0T", 0, DSI),
    # quantity-less numbers
    ("1", 1, DSI),
    # binary suffixes
    ("1Ki", KI, BSI), ("8Ki", 8 * KI, BSI), ("7Mi", 7 * MI, BSI), ("6Gi", 6 * GI, BSI), ("5Ti", 5 * TI, BSI),
    ("4Pi", 4 * PI, BSI), ("3Ei", 3 * EI, BSI), ("10Ti", 10 * TI, BSI), ("100Ti", 100 * TI, BSI),
    # decimal suffixes
    ("5n", F(5, 10**9), DSI), ("4u", F(4, 10**6), DSI), ("3m", F(3, 1000), DSI), ("9", 9, DSI),
    ("8k", 8000, DSI), ("50k", 50000, DSI), ("7M", 7 * 10**6, DSI), ("6G", 6 * 10**9, DSI),
    ("5T", 5 * 10**12, DSI), ("40T", 4 * 10**13, DSI), ("300T", 3 * 10**14, DSI), ("2P", 2 * 10**15, DSI),
    ("1E", 10**18, DSI),
    # decimal exponents
    ("1E-3", F(1, 1000), DEX), ("1e3", 1000, DEX), ("1E6", 10**6, DEX), ("1e9", 10**9, DEX),
    ("1E12", 10**12, DEX), ("1e15", 10**15, DEX), ("1E18", 10**18, DEX),
    # nonstandard but still parsable
    ("1e14", 10**14, DEX), ("1e13", 10**13, DEX), ("100.035k", 100035, DSI),
    # things that look like floating point
    ("0.001", F(1, 1000), DSI), ("0.0005k", F(1, 2), DSI), ("0.005", F(5, 1000), DSI), ("0.05", F(5, 100), DSI),
    ("0.5", F(1, 2), DSI), ("0.00050k", F(1, 2), DSI), ("0.00500", F(5, 1000), DSI), ("0.05000", F(5, 100), DSI),
    ("0.50000", F(1, 2), DSI), ("0.5e0", F(1, 2), DEX), ("0.5e-1", F(5, 100), DEX), ("0.5e-2", F(5, 1000), DEX),
    ("10.035M", 10035000, DSI),
    ("1.2e3", 1200, DEX), ("1.3E+6", 1300000, DEX), ("1.40e9", 14 * 10**8, DEX), ("1.53E12", 153 * 10**10, DEX),
    ("1.6e15", 16 * 10**14, DEX), ("1.7E18", 17 * 10**17, DEX),
    ("9.01", F(901, 100), DSI), ("8.1k", 8100, DSI), ("7.123456M", 7123456, DSI), ("6.987654321G", 6987654321, DSI),
    ("5.444T", 5444 * 10**9, DSI), ("40.1T", 401 * 10**11, DSI), ("300.2T", 3002 * 10**11, DSI),
    ("2.5P", 25 * 10**14, DSI), ("1.01E", 101 * 10**16, DSI),
    # things that saturate or round: kept to nanos, a finer non-zero value rounded away from zero
    ("3.001n", F(4, 10**9), DSI), ("1.1E-9", F(2, 10**9), DEX), ("0.0000000001", F(1, 10**9), DSI),
    ("0.0000000005", F(1, 10**9), DSI), ("0.00000000050", F(1, 10**9), DSI), ("0.5e-9", F(1, 10**9), DEX),
    ("0.9n", F(1, 10**9), DSI), ("0.00000012345", F(124, 10**9), DSI), ("0.00000012354", F(124, 10**9), DSI),
    # fractional binary
    ("100.035Ki", F(10243584, 100), BSI), ("0.5Mi", 524288, BSI), ("0.05Gi", F(536870912, 10), BSI),
    ("0.025Ti", F(274877906944, 10), BSI),
    # things written by trolls
    ("0.000000000001Ki", F(2, 10**9), DSI), (".001", F(1, 1000), DSI), (".0001k", F(1, 10), DSI),
    ("1.", 1, DSI), ("1.G", 10**9, DSI),
    # TestParseQuantityString's oddities: no digits at all is zero
    (".", 0, DSI), ("-.", 0, DSI), ("-", 0, DSI), ("+", 0, DSI), ("Ki", 0, BSI), ("e3", 0, DEX),
    # values at the int64 edge (kept: the largest magnitude upstream's Value() returns)
    ("9223372036854775807", INT64_MAX, DSI), ("7Ei", 7 * EI, BSI), ("8191Pi", 8191 * PI, BSI),
    ("9223372036854775807000m", INT64_MAX, DSI), ("-9223372036854775807", -INT64_MAX, DSI),
]


# Each row as written, with an explicit "+", and negated: upstream runs its table all three ways.
SIGNED = [(sign + text, -value if sign == "-" else value, form)
          for text, value, form in PARSED for sign in ("", "+", "-") if not (sign and text[:1] in "+-")]


@pytest.mark.parametrize(("text", "value", "form"), SIGNED, ids=[row[0] for row in SIGNED])
def test_upstream_parse_table(text: str, value: Fraction | int, form: Format) -> None:
    quantity = parse_quantity(text)
    assert quantity.amount == value
    assert quantity.format is form


INVALID = [
    # upstream's invalid table
    "1.1.M", "1+1.0M", "0.1mi", "0.1am", "aoeu", ".5i", "1i", "-3.01i", "-3.01e-",
    " 1", "1 ",  # whitespace is forbidden, leading or trailing
    "",
    # what millpond's old parsers took and upstream does not
    "2GiB", "1KiB", "4GB", "1B", "1K", "10KB", "1kb", "5 Gi", "1\n", "0x10", "1_000", "1,5", "1e", "1E+",
    "1Mi3", "1Gi1", "inf", "nan", "１", "1.5.5", "--1", "+-1", "1e1.5", "1ee3", "1Eii", "μ", "1n1",
]


@pytest.mark.parametrize("text", INVALID, ids=[repr(t) for t in INVALID])
def test_not_a_quantity(text: str) -> None:
    with pytest.raises(QuantityError) as raised:
        parse_quantity(text, "quota")
    assert str(raised.value).startswith(f"quota {text!r} ")
    assert exit_code_of(raised.value) == 2 and isinstance(raised.value, UserError)


@pytest.mark.parametrize("value", [True, False, None, [], {}, b"1", 1j])
def test_only_strings_and_numbers_are_quantities(value: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(value)


# Upstream caps a binary-SI quantity at 2^63-1 silently and lets a decimal one grow past int64
# (where Value() overflows); millpond refuses both, naming the value.
BEYOND_INT64 = [
    "999999999999Ei", "9Ei", "8Ei", "8192Pi", "9223372036854775807Ki", "12E", "1000E", "1e19", "1e30",
    "9223372036854775808", "-9223372036854775808", "-999999999999Ei", "1e2147483647", "9223372036854775807001m",
    "1" + "0" * 5000,
]


@pytest.mark.parametrize("text", BEYOND_INT64, ids=[t[:30] for t in BEYOND_INT64])
def test_beyond_int64_is_refused_not_overflowed(text: str) -> None:
    with pytest.raises(QuantityError, match="too large: Kubernetes quantities stop at 2\\^63-1"):
        parse_quantity(text, "quota")


@pytest.mark.parametrize("text", ["1e2147483648", "1e-2147483649", "0e99999999999"])
def test_an_exponent_beyond_int32_is_refused(text: str) -> None:
    with pytest.raises(QuantityError, match="exponent does not fit in 32 bits"):
        parse_quantity(text)


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1073741824, 1073741824), (0, 0), (1.5, Fraction(3, 2)), (1e9, 10**9), (-2, -2), (2**63 - 1, INT64_MAX)],
)
def test_yaml_numbers_read_as_their_text(value: float, expected: Fraction | int) -> None:
    assert parse_quantity(value).amount == expected


@pytest.mark.parametrize("value", [2**63, 10**5000, float("inf"), float("nan"), 1e300], ids=["2^63", "10^5000", "inf",
                                                                                          "nan", "1e300"])
def test_yaml_numbers_beyond_int64(value: float) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(value)


# upstream TestQuantityParseEmit and TestQuantityString (its alternate spellings): input → canonical String()
CANONICAL = [
    ("1Ki", "1Ki"), ("1Mi", "1Mi"), ("1Gi", "1Gi"), ("1024Mi", "1Gi"), ("1000M", "1G"), (".001Ki", "1024m"),
    (".000001Ki", "1024u"), (".000000001Ki", "1024n"), (".000000000001Ki", "2n"),
    ("307200Ki", "300Mi"), ("6Ki", "6Ki"), ("1025024Mi", "1001Gi"), ("1024Gi", "1Ti"), ("5000m", "5"),
    ("0.5", "500m"), ("0.001T", "1G"), ("1000u", "1m"), ("80m", "80m"), ("1.08", "1080m"),
    ("1080000000n", "1080m"), ("300M", "300M"), ("1T", "1T"), ("1234567M", "1234567M"), ("1234567m", "1234567m"),
    ("3k", "3k"), ("1025", "1025"), ("0", "0"), (".001e12", "1e9"), ("0.001e0", "1e-3"), ("1000e-12", "1e-9"),
    ("80e-3", "80e-3"), ("300e6", "300e6"), ("1e12", "1e12"), ("3e3", "3e3"), ("00", "0"), ("1n", "1n"),
    ("80n", "80n"), ("1080n", "1080n"), ("1u", "1u"), ("1080u", "1080u"), ("1E", "1E"),
    # more from this project: the forms quotas and requests are written in
    ("1.5Gi", "1536Mi"), ("1.5", "1500m"), ("2Gi", "2Gi"), ("150Gi", "150Gi"), ("500m", "500m"), ("4Gi", "4Gi"),
    ("0.5Ki", "512"), ("1023", "1023"), ("1024", "1024"), ("1.5Ki", "1536"), ("100.035Ki", "102435840m"),
]


@pytest.mark.parametrize(("text", "canonical"), CANONICAL, ids=[row[0] for row in CANONICAL])
def test_canonical_form(text: str, canonical: str) -> None:
    assert str(parse_quantity(text)) == canonical
    assert str(parse_quantity(canonical)) == canonical  # the canonical form is its own canonical form
    if canonical != "0":
        assert str(parse_quantity("-" + text)) == "-" + canonical


# Value() (ceil away from zero) and MilliValue(); bytes and cores are their uses
ROUNDED = [
    ("1", 1, 1000), ("1.5", 2, 1500), ("-1.5", -2, -1500), ("500m", 1, 500), ("0.1m", 1, 1), ("-0.1m", -1, -1),
    ("1n", 1, 1), ("-1n", -1, -1), ("9.01", 10, 9010), ("-9.01", -10, -9010), ("1Gi", GI, GI * 1000),
    ("1e3", 1000, 10**6), ("100.035Ki", 102436, 102435840), ("7.123456M", 7123456, 7123456000), ("0", 0, 0),
    ("1.0001m", 1, 2), ("999m", 1, 999), ("1001m", 2, 1001),
]


@pytest.mark.parametrize(("text", "value", "milli"), ROUNDED, ids=[row[0] for row in ROUNDED])
def test_value_and_milli_value_round_away_from_zero(text: str, value: int, milli: int) -> None:
    quantity = parse_quantity(text)
    assert (quantity.value(), quantity.milli_value(), quantity.bytes) == (value, milli, value)
    assert quantity.cores == milli / 1000


def test_bytes_refuses_a_negative_size() -> None:
    assert parse_bytes("2Gi", "quota") == 2 * GI
    with pytest.raises(QuantityError, match="quota '-1Gi' is negative"):
        parse_bytes("-1Gi", "quota")


def test_the_refusal_names_what_is_wrong() -> None:
    with pytest.raises(QuantityError, match="sizes take no B: write '2Gi'"):
        parse_quantity("2GiB")
    with pytest.raises(QuantityError, match="unknown suffix 'K'"):
        parse_quantity("1K")


# --- properties ----------------------------------------------------------------------------------------

NANO_BOUND = INT64_MAX * 10**9
nanos = st.integers(min_value=-NANO_BOUND, max_value=NANO_BOUND)
formats = st.sampled_from(list(Format))


@fuzz_settings(300)
@given(nanos, formats)
def test_canonical_form_parses_back_to_the_same_amount(count: int, form: Format) -> None:
    quantity = Quantity(Fraction(count, 10**9), form)
    again = parse_quantity(str(quantity))
    assert again.amount == quantity.amount
    assert str(again) == str(quantity) or form is Format.BINARY_SI


@fuzz_settings(300)
@given(st.integers(min_value=-(2**63) + 1, max_value=2**63 - 1), st.sampled_from(["", "k", "M", "Ki", "Mi", "Gi"]))
def test_integer_and_suffix_is_the_product(number: int, suffix: str) -> None:
    factor = {"": 1, "k": 1000, "M": 10**6, "Ki": KI, "Mi": MI, "Gi": GI}[suffix]
    if abs(number * factor) > INT64_MAX:
        with pytest.raises(QuantityError):
            parse_quantity(f"{number}{suffix}")
    else:
        assert parse_quantity(f"{number}{suffix}").amount == number * factor


quantity_like = st.builds(
    lambda sign, whole, point, frac, suffix: f"{sign}{whole}{point}{frac}{suffix}",
    st.sampled_from(["", "+", "-"]), st.text("0123456789", max_size=25), st.sampled_from(["", "."]),
    st.text("0123456789", max_size=25),
    st.sampled_from(["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "K", "e",
                     "e3", "E-7", "e+25", "e-40", "iB", "GiB"]),
)


@fuzz_settings(300)
@given(quantity_like)
def test_quantity_like_text_parses_exactly_or_is_refused(text: str) -> None:
    """Never an exception but QuantityError; a parsed amount is whole nanos, and its canonical form is stable."""
    try:
        quantity = parse_quantity(text)
    except QuantityError:
        return
    assert (quantity.amount * 10**9).denominator == 1
    assert abs(quantity.amount) <= INT64_MAX
    assert parse_quantity(str(quantity)).amount == quantity.amount


@fuzz_settings(300)
@given(st.text(max_size=40))
def test_any_text_parses_or_is_refused_as_a_quantity_error(text: str) -> None:
    try:
        parse_quantity(text)
    except QuantityError:
        pass
