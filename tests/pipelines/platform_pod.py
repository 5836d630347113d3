"""Pod metadata, the downward API, a deadline, and settings that mean nothing on one machine."""

from kfp import dsl, kubernetes


@dsl.component
def describe() -> str:
    import json
    import os

    names = ("POD_NAME", "POD_NAMESPACE", "NODE", "POD_IP", "TEAM", "OWNER", "ABSENT")
    return json.dumps({name: os.environ.get(name) for name in names})


@dsl.component
def sleepy(seconds: int) -> None:
    import time

    time.sleep(seconds)


@dsl.pipeline(name="platform-pod")
def platform_pod() -> str:
    task = describe()
    kubernetes.add_pod_label(task, "team", "ponds")
    kubernetes.add_pod_annotation(task, "owner", "millpond")
    kubernetes.use_field_path_as_env(task, env_name="POD_NAME", field_path="metadata.name")
    kubernetes.use_field_path_as_env(task, env_name="POD_NAMESPACE", field_path="metadata.namespace")
    kubernetes.use_field_path_as_env(task, env_name="NODE", field_path="spec.nodeName")
    kubernetes.use_field_path_as_env(task, env_name="POD_IP", field_path="status.podIP")
    kubernetes.use_field_path_as_env(task, env_name="TEAM", field_path="metadata.labels['team']")
    kubernetes.use_field_path_as_env(task, env_name="OWNER", field_path="metadata.annotations['owner']")
    kubernetes.use_field_path_as_env(task, env_name="ABSENT", field_path="metadata.labels['absent']")
    kubernetes.add_node_selector(task, "disktype", "ssd")
    kubernetes.add_toleration(task, key="gpu", operator="Exists", effect="NoSchedule")
    kubernetes.set_image_pull_policy(task, "Always")
    kubernetes.set_image_pull_secrets(task, ["registry-creds"])
    kubernetes.set_security_context(task, run_as_user=1000)
    kubernetes.set_timeout(task, 600)
    return task.output


@dsl.pipeline(name="platform-timeout")
def platform_timeout(seconds: int = 30) -> None:
    task = sleepy(seconds=seconds)
    kubernetes.set_timeout(task, 1)
