"""Tasks that leave a process behind in a session of its own, as a careless script does: it must end with them."""

from kfp import dsl


@dsl.component
def escape_forked(seconds: str) -> str:
    """A Python task (forked from the warm server): its child moves to a new session and outlives it."""
    import subprocess

    subprocess.Popen(["setsid", "sleep", seconds], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True)
    return "done"


@dsl.container_component
def escape_shell(seconds: str):
    return dsl.ContainerSpec(image="alpine", command=["sh", "-c"], args=[f"setsid sleep {seconds} & echo done"])


@dsl.pipeline(name="orphans")
def orphans(python_seconds: str, shell_seconds: str) -> None:
    escape_forked(seconds=python_seconds)
    escape_shell(seconds=shell_seconds)
