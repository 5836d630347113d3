"""PVCs (CreatePVC, mount_pvc with a subPath, DeletePVC) and emptyDir volumes as local folders."""

from kfp import dsl, kubernetes


@dsl.component
def write(text: str) -> str:
    import os

    os.makedirs("/data/out", exist_ok=True)
    with open("/data/out/message.txt", "w") as handle:
        handle.write(text)
    with open("/scratch/tmp.txt", "w") as handle:  # emptyDir: private to this task
        handle.write("scratch")
    return text


@dsl.component
def read() -> str:
    import os

    with open("/from-pvc/message.txt") as handle:
        text = handle.read()
    return f"{text}|scratch-empty={not os.listdir('/scratch')}"


@dsl.pipeline(name="platform-volumes")
def platform_volumes(text: str = "through a volume") -> str:
    pvc = kubernetes.CreatePVC(pvc_name_suffix="-shared", access_modes=["ReadWriteOnce"], size="1Mi")
    writer = write(text=text)
    kubernetes.mount_pvc(writer, pvc_name=pvc.outputs["name"], mount_path="/data")
    kubernetes.empty_dir_mount(writer, volume_name="scratch", mount_path="/scratch")
    reader = read().after(writer)
    kubernetes.mount_pvc(reader, pvc_name=pvc.outputs["name"], mount_path="/from-pvc", sub_path="out")
    kubernetes.empty_dir_mount(reader, volume_name="scratch", mount_path="/scratch", medium="Memory")
    kubernetes.DeletePVC(pvc_name=pvc.outputs["name"]).after(reader)
    return reader.output


@dsl.pipeline(name="platform-existing-volume")
def platform_existing_volume(volume: str = "my-data") -> str:
    """A PVC made by hand (a folder under MILLPOND_HOME/volumes) is mounted by name."""
    task = read()
    kubernetes.mount_pvc(task, pvc_name=volume, mount_path="/from-pvc")
    kubernetes.empty_dir_mount(task, volume_name="scratch", mount_path="/scratch")
    return task.output
