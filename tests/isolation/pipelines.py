"""The pipelines of the isolation tests: namespace B's (an artifact, a task that keeps running) and A's probe."""

from kfp import dsl, kubernetes
from kfp.dsl import Dataset, Input, Output


@dsl.component
def b_produce(data: Output[Dataset]) -> None:
    with open(data.path, "w") as out:
        out.write("b-artifact")
    print("b's task log line")


@dsl.component
def b_sleeper(seconds: float) -> None:
    import subprocess
    import time

    subprocess.Popen(["sleep", "987.654"])
    time.sleep(seconds)


@dsl.component
def a_produce(data: Output[Dataset]) -> None:
    with open(data.path, "w") as out:
        out.write("a-input")


@dsl.component
def a_probe(probe_path: str, targets: str, data: Input[Dataset], result: Output[Dataset]) -> str:
    import json
    import subprocess
    import sys

    with open(data.path) as handle:
        own = handle.read()
    with open(result.path, "w") as out:
        out.write("a-output")
    done = subprocess.run([sys.executable, probe_path, targets], capture_output=True, text=True)
    return json.dumps({"own_input": own, "stdout": done.stdout, "stderr": done.stderr})


@dsl.pipeline
def team_b() -> None:
    b_produce()


@dsl.pipeline
def team_b_sleeping(seconds: float = 300.0) -> None:
    """B's secret reaches its task as kfp-kubernetes gives it: a variable and a file."""
    sleeping = b_sleeper(seconds=seconds)
    kubernetes.use_secret_as_env(sleeping, secret_name="b-secret", secret_key_to_env={"password": "B_PASSWORD"})
    kubernetes.use_secret_as_volume(sleeping, secret_name="b-secret", mount_path="/mnt/b-secret")


@dsl.pipeline
def team_a(probe_path: str, targets: str) -> str:
    made = a_produce()
    return a_probe(probe_path=probe_path, targets=targets, data=made.outputs["data"]).outputs["Output"]


@dsl.component
def a_consume(data: Input[Dataset]) -> str:
    with open(data.path) as handle:
        return handle.read()


@dsl.pipeline
def team_a_imports(uri: str) -> str:
    imported = dsl.importer(artifact_uri=uri, artifact_class=Dataset, reimport=False)
    return a_consume(data=imported.output).outputs["Output"]


@dsl.component
def read_mounted(path: str) -> str:
    with open(path) as handle:
        return handle.read()


@dsl.pipeline
def team_a_mounts(claim: str) -> str:
    """A dataset mounted as Fluid shows it to a pod: the PVC of the dataset's name, in the pod's namespace."""
    reading = read_mounted(path="/mnt/d/input.txt")
    kubernetes.mount_pvc(reading, pvc_name=claim, mount_path="/mnt/d")
    return reading.output
