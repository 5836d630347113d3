"""A task that mounts a PVC named after a Fluid dataset sees the dataset (as on Kubernetes with Fluid)."""

from kfp import dsl, kubernetes


@dsl.component
def summarize(folder: str) -> str:
    import os

    names = sorted(os.listdir(folder))
    with open(os.path.join(folder, "train", "hello.txt")) as handle:
        first = handle.read()
    return f"{','.join(names)}|{first}"


@dsl.pipeline(name="dataset-volume")
def dataset_volume() -> str:
    task = summarize(folder="/data/mnist")
    kubernetes.mount_pvc(task, pvc_name="mnist", mount_path="/data/mnist")
    return task.output
