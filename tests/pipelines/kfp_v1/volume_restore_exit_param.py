# KFP v1 code (kfp 1.8.22), compiled to volume_restore_exit_param.yaml: a VolumeOp named from a parameter, a
# VolumeSnapshotOp, a VolumeOp restoring it with the snapshot's size, and an exit handler taking a parameter.
import kfp
from kfp import dsl
from kfp.components import func_to_container_op


@func_to_container_op
def echo(msg: str):
    print(msg)


@dsl.pipeline(name="exit-with-param")
def p(msg: str = "bye", size: str = "1Gi", name: str = "vol"):
    exit_op = echo(f"exit {msg}")
    with dsl.ExitHandler(exit_op):
        vop = dsl.VolumeOp(name="make-vol", resource_name=f"{name}-pvc", size=size, modes=dsl.VOLUME_MODE_RWO)
        t = dsl.ContainerOp(name="use", image="alpine", command=["sh", "-c", "echo hi > /data/x; echo $0", msg],
                            pvolumes={"/data": vop.volume})
        s = dsl.VolumeSnapshotOp(name="snap", resource_name="snap", volume=t.pvolume)
        v2 = dsl.VolumeOp(name="restore", resource_name="restored", data_source=s.snapshot, size=s.outputs["size"])
        dsl.ContainerOp(name="read", image="alpine", command=["sh", "-c", "cat /data/x"], pvolumes={"/data": v2.volume})


if __name__ == "__main__":
    kfp.compiler.Compiler().compile(p, "volume_restore_exit_param.yaml")
