"""A component with packages_to_install: they go into a cached venv, not millpond's own."""

from kfp import dsl


@dsl.component(packages_to_install=["humanize==4.9.0"])
def natural(n: int) -> str:
    import humanize

    return humanize.intcomma(n)


@dsl.pipeline(name="with-packages")
def with_packages(n: int = 1234567) -> str:
    return natural(n=n).output
