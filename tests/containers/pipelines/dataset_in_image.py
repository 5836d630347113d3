"""A task in its image reads a Fluid dataset through its PVC mount, and writes into a ReadWrite one."""

import os

from kfp import dsl, kubernetes

IMAGE = os.environ.get("TEST_IMAGE", "localhost/millpond-test/python:3.11")


@dsl.container_component
def read_and_write(out: dsl.OutputPath(str)):
    script = ('cat /data/in/train/hello.txt > "$0" && echo -n "|$(cat /etc/os-release | head -1)" >> "$0" '
              '&& echo written-in-a-container > /data/rw/from-container.txt')
    return dsl.ContainerSpec(image=IMAGE, command=["sh", "-c", script], args=[out])


@dsl.pipeline(name="dataset-in-image")
def dataset_in_image() -> str:
    task = read_and_write()
    kubernetes.mount_pvc(task, pvc_name="mnist", mount_path="/data/in")
    kubernetes.mount_pvc(task, pvc_name="scratch", mount_path="/data/rw")
    return task.output
