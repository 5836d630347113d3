"""Every parameter type, in and out: the component checks the Python types it receives."""

from kfp import dsl


@dsl.component
def echo_all(i: int, f: float, s: str, b: bool, l: list, d: dict) -> dict:  # noqa: E741 - `l` is the input's name
    checks = {"i": int, "f": float, "s": str, "b": bool, "l": list, "d": dict}
    got = {"i": i, "f": f, "s": s, "b": b, "l": l, "d": d}
    for name, kind in checks.items():
        assert isinstance(got[name], kind), f"{name} is {type(got[name]).__name__}, want {kind.__name__}"
    assert not isinstance(i, bool)
    return got


@dsl.component
def add_one(i: int) -> int:
    return i + 1


# KFP compiles a pipeline's signature defaults into its spec: the list and dict defaults are the pipeline's own
# default values (never mutated), so they stay literals (B006), and `l` is the input's name (E741).
@dsl.pipeline(name="typed-params")
def typed_params(
    i: int,
    f: float = 1.5,
    s: str = "text",
    b: bool = False,
    l: list = [1, "two"],  # noqa: E741, B006 - the input's name and its compiled default
    d: dict = {"k": "v"},  # noqa: B006 - KFP compiles this default into the pipeline spec
) -> dict:
    echo_all(i=i, f=f, s=s, b=b, l=l, d=d)
    return echo_all(i=i, f=f, s=s, b=b, l=l, d=d).output


@dsl.pipeline(name="returns-int")
def returns_int(i: int = 41) -> int:
    return add_one(i=i).output
