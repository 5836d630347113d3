"""A pipeline that reads a Secret, a ConfigMap and a PVC by name: each namespace's run gets its own."""

from kfp import dsl, kubernetes


@dsl.component
def read_named(path: str) -> str:
    import os

    with open(path) as handle:
        volume = handle.read()
    return f"{os.environ.get('CREDS', '-')}|{os.environ.get('LEVEL', '-')}|{volume}"


@dsl.pipeline
def reads_by_name(secret: str = "creds", config_map: str = "settings", claim: str = "data") -> str:
    """The names are parameters: decided when the task starts, in its run's namespace."""
    step = read_named(path="/mnt/data/file.txt")
    kubernetes.use_secret_as_env(step, secret_name=secret, secret_key_to_env={"password": "CREDS"})
    kubernetes.use_config_map_as_env(step, config_map_name=config_map, config_map_key_to_env={"level": "LEVEL"})
    kubernetes.mount_pvc(step, pvc_name=claim, mount_path="/mnt/data")
    return step.output


@dsl.pipeline
def names_a_constant_secret() -> str:
    """A constant name: checked when the run is submitted."""
    step = read_named(path="/etc/hostname")
    kubernetes.use_secret_as_env(step, secret_name="b-only", secret_key_to_env={"password": "CREDS"})
    return step.output
