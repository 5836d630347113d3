"""A container task over its memory limit (the runtime kills it: OOMKilled), one past its time limit, and one
that runs long (``TEST_CASE=long``: for a kill of the engine)."""

import os

from kfp import dsl, kubernetes

IMAGE = os.environ.get("TEST_IMAGE", "localhost/millpond-test/python:3.11")
WHICH = os.environ.get("TEST_CASE", "oom")


@dsl.container_component
def hog():
    return dsl.ContainerSpec(image=IMAGE, command=["python3", "-c", "x = bytearray(400 * 1024 * 1024); print(len(x))"])


@dsl.container_component
def sleeper():
    return dsl.ContainerSpec(image=IMAGE, command=["sh", "-c", "echo started; sleep 300"])


@dsl.pipeline(name="limits")
def limits():
    if WHICH == "oom":
        hog().set_memory_limit("64Mi")
    elif WHICH == "long":
        sleeper()
    else:
        kubernetes.set_timeout(sleeper(), seconds=3)
