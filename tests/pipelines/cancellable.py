"""Tasks that sleep long and leave their pids (and a grandchild's) behind, for the cancellation tests.

Each kind of task process the engine starts is here: a lightweight component (forked by the
fork server), a container command (a shell with a background child, so a grandchild shares
its process group), a container with an output artifact (run in a bubblewrap sandbox where
one is available), and more lightweight tasks than there are slots, so some wait for one.
"""

from kfp import dsl
from kfp.dsl import Artifact, Output


@dsl.component
def sleeper(folder: str, name: str, seconds: float) -> str:
    import os
    import subprocess
    import time

    os.makedirs(folder, exist_ok=True)
    child = subprocess.Popen(["sleep", str(seconds)])
    with open(os.path.join(folder, f"{name}.pids"), "w") as marks:
        marks.write(f"{os.getpid()} {child.pid}\n")
    time.sleep(seconds)
    with open(os.path.join(folder, f"{name}.done"), "w") as marks:
        marks.write("done\n")
    return name


@dsl.container_component
def shell_sleeper(folder: str, name: str, seconds: float):
    return dsl.ContainerSpec(
        image="alpine",
        command=["sh", "-c", 'mkdir -p "$0"; sleep "$2" & echo "$$ $!" > "$0/$1.pids"; wait; echo done > "$0/$1.done"'],
        args=[folder, name, seconds],
    )


@dsl.container_component
def sandboxed_sleeper(folder: str, name: str, seconds: float, out: Output[Artifact]):
    return dsl.ContainerSpec(
        image="alpine",
        command=["sh", "-c", ('mkdir -p "$0"; sleep "$2" & echo "$$ $!" > "$0/$1.pids"; wait; echo x > "$3"; '
                              'echo done > "$0/$1.done"')],
        args=[folder, name, seconds, out.path],
    )


@dsl.pipeline(name="cancellable")
def cancellable(folder: str, seconds: float = 300.0):
    sleeper(folder=folder, name="forked", seconds=seconds)
    shell_sleeper(folder=folder, name="container", seconds=seconds)
    sandboxed_sleeper(folder=folder, name="sandboxed", seconds=seconds)
    with dsl.ParallelFor(["a", "b", "c"]) as item:
        sleeper(folder=folder, name=item, seconds=seconds)


@dsl.container_component
def stubborn_sleeper(folder: str, name: str, seconds: float):
    """A shell that ignores SIGTERM, as does its background child: only SIGKILL stops them."""
    return dsl.ContainerSpec(
        image="alpine",
        command=["sh", "-c", ('trap "" TERM; mkdir -p "$0"; sleep "$2" & echo "$$ $!" > "$0/$1.pids"; wait; '
                              'echo done > "$0/$1.done"')],
        args=[folder, name, seconds],
    )


@dsl.component(packages_to_install=["humanize==4.9.0"])
def venv_sleeper(folder: str, name: str, seconds: float) -> str:
    """Runs with a cached venv's interpreter (a process of its own, not a fork of the fork server)."""
    import os
    import subprocess
    import time

    import humanize

    os.makedirs(folder, exist_ok=True)
    child = subprocess.Popen(["sleep", str(seconds)])
    with open(os.path.join(folder, f"{name}.pids"), "w") as marks:
        marks.write(f"{os.getpid()} {child.pid}\n")
    time.sleep(seconds)
    with open(os.path.join(folder, f"{name}.done"), "w") as marks:
        marks.write("done\n")
    return humanize.intcomma(int(seconds))


@dsl.pipeline(name="stubborn")
def stubborn(folder: str, seconds: float = 300.0):
    stubborn_sleeper(folder=folder, name="stubborn", seconds=seconds)
    venv_sleeper(folder=folder, name="venv", seconds=seconds)


@dsl.component
def quick(folder: str, index: int, data: Output[Artifact]) -> int:
    import os

    with open(data.path, "w") as out:
        out.write(str(index) * 1000)
    os.makedirs(folder, exist_ok=True)
    open(os.path.join(folder, f"quick-{index}.done"), "w").close()
    return index


@dsl.pipeline(name="many-quick")
def many_quick(folder: str):
    with dsl.ParallelFor(list(range(40))) as index:
        quick(folder=folder, index=index)


@dsl.pipeline(name="wide")
def wide(folder: str, seconds: float = 300.0):
    """Many more loop iterations than slots: most wait, queued for a worker thread, when the run is cancelled."""
    with dsl.ParallelFor([f"item-{i}" for i in range(60)]) as item:
        sleeper(folder=folder, name=item, seconds=seconds)
