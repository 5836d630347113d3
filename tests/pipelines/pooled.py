"""Tasks that report how they ran, to compare a task forked from the warm server with a plain one."""

from kfp import dsl, kubernetes


@dsl.component
def describe(greeting: str) -> dict:
    import os
    import sys

    print(f"to stdout: {greeting}")
    print(f"to stderr: {greeting}", file=sys.stderr)
    cmdline = open("/proc/self/cmdline", "rb").read().replace(b"\0", b" ").decode()
    return {
        "cwd_is_attempt_work_dir": os.getcwd().endswith("/work") and "/staging/" in os.getcwd(),
        "tmpdir_is_private": "/staging/" in os.environ.get("TMPDIR", ""),
        "custom_env": os.environ.get("MY_SETTING"),
        "kfp_runtime": os.environ.get("_KFP_RUNTIME"),
        "session_leader": os.getsid(0) == os.getpid(),
        "python_prefix": sys.prefix,
        "umask": oct(os.umask(0o022)),
        "stdin_is_empty": sys.stdin.read() == "",
        "forked_from_server": "millpond.runners.forkserver" in cmdline,
    }


@dsl.component
def exit_with(code: int) -> None:
    import sys

    sys.exit(code)


@dsl.component
def kill_self(signal_number: int) -> None:
    import os

    os.kill(os.getpid(), signal_number)


@dsl.component
def crash() -> None:
    import os

    os.abort()


@dsl.component
def with_children() -> str:
    import subprocess

    out = subprocess.run(["sh", "-c", "echo from-child; sh -c 'echo from-grandchild'"], capture_output=True, text=True)
    return out.stdout.replace("\n", "|")


@dsl.component
def nap(seconds: int) -> None:
    import time

    time.sleep(seconds)


@dsl.pipeline(name="pooled-describe")
def pooled_describe() -> dict:
    task = describe(greeting="hello")
    task.set_env_variable("MY_SETTING", "on")
    return task.output


@dsl.pipeline(name="pooled-exit")
def pooled_exit(code: int = 3) -> None:
    exit_with(code=code)


@dsl.pipeline(name="pooled-signal")
def pooled_signal(signal_number: int = 15) -> None:
    kill_self(signal_number=signal_number)


@dsl.pipeline(name="pooled-crash")
def pooled_crash() -> str:
    crash()
    return with_children().output  # independent of the crash: the server must still serve it


@dsl.pipeline(name="pooled-children")
def pooled_children() -> str:
    return with_children().output


@dsl.pipeline(name="pooled-timeout")
def pooled_timeout() -> None:
    task = nap(seconds=30)
    kubernetes.set_timeout(task, seconds=1)


@dsl.component
def litter() -> str:
    import os

    for folder in (".", os.environ["TMPDIR"]):
        os.makedirs(os.path.join(folder, "nested", "deeper"))
        with open(os.path.join(folder, "nested", "deeper", "left.txt"), "w") as left:
            left.write("left behind")
        with open(os.path.join(folder, "left.txt"), "w") as left:
            left.write("left behind")
    return os.getcwd()


@dsl.component
def look_around(after: str) -> dict:
    import os
    import sys

    module_folder = os.path.dirname(sys.modules[look_around.__module__].__file__)  # this component's module
    return {
        "same_folder": os.getcwd() == after,
        "cwd": sorted(os.listdir(".")),
        "tmp": sorted(os.path.join(os.environ["TMPDIR"], n) for n in os.listdir(os.environ["TMPDIR"])),
        "module_folder": module_folder,
        "module_alone": sorted(n for n in os.listdir(module_folder) if n != "__pycache__"),
    }


@dsl.pipeline(name="pooled-reused-folder")
def pooled_reused_folder() -> dict:
    return look_around(after=litter().output).output
