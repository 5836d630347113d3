"""Every parameter type, in and out: the component checks the Python types it receives."""

from kfp import dsl


@dsl.component
def echo_all(i: int, f: float, s: str, b: bool, l: list, d: dict) -> dict:
    checks = {"i": int, "f": float, "s": str, "b": bool, "l": list, "d": dict}
    got = {"i": i, "f": f, "s": s, "b": b, "l": l, "d": d}
    for name, kind in checks.items():
        assert isinstance(got[name], kind), f"{name} is {type(got[name]).__name__}, want {kind.__name__}"
    assert not isinstance(i, bool)
    return got


@dsl.component
def add_one(i: int) -> int:
    return i + 1


@dsl.pipeline(name="typed-params")
def typed_params(i: int, f: float = 1.5, s: str = "text", b: bool = False, l: list = [1, "two"], d: dict = {"k": "v"}) -> dict:
    echo_all(i=i, f=f, s=s, b=b, l=l, d=d)
    return echo_all(i=i, f=f, s=s, b=b, l=l, d=d).output


@dsl.pipeline(name="returns-int")
def returns_int(i: int = 41) -> int:
    return add_one(i=i).output
