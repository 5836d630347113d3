"""A container task whose image comes from a registry that asks for credentials (an imagePullSecret)."""

import os

from kfp import dsl, kubernetes

IMAGE = os.environ["TEST_IMAGE"]
SECRET = os.environ.get("TEST_SECRET", "regcred")
POLICY = os.environ.get("TEST_PULL_POLICY", "Always")


@dsl.container_component
def hello(said: dsl.OutputPath(str)):
    return dsl.ContainerSpec(image=IMAGE, command=["sh", "-c", 'echo "from the registry" > "$0"'], args=[said])


@dsl.pipeline(name="pull-secret")
def pull_secret() -> str:
    task = hello()
    kubernetes.set_image_pull_secrets(task, [SECRET])
    kubernetes.set_image_pull_policy(task, POLICY)
    return task.output
