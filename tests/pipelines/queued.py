"""Tasks for Kueue's queues: each asks for CPU, one names its own queue with kfp-kubernetes' pod label."""

from kfp import dsl, kubernetes

_HOLD = ('mkdir -p "$0" && echo start >> "$0/$1.starts" && touch "$0/$1.started" && '
         'while [ ! -e "$0/gate" ]; do sleep 0.05; done && echo "$1"')


@dsl.container_component
def held(folder: str, name: str):
    """Marks each start (a line in NAME.starts), then holds its quota until the test opens the gate."""
    return dsl.ContainerSpec(image="alpine:3", command=["sh", "-c", _HOLD], args=[folder, name])


@dsl.pipeline(name="queued-pair")
def queued_pair(folder: str) -> None:
    held(folder=folder, name="a").set_cpu_request("1").set_memory_request("64Mi").set_caching_options(False)
    held(folder=folder, name="b").set_cpu_request("1").set_memory_request("64Mi").set_caching_options(False)


@dsl.pipeline(name="own-queue")
def own_queue(folder: str) -> None:
    held(folder=folder, name="a").set_cpu_request("500m").set_caching_options(False)
    mine = held(folder=folder, name="b").set_cpu_request("500m").set_caching_options(False)
    kubernetes.add_pod_label(mine, "kueue.x-k8s.io/queue-name", "its-own")


@dsl.pipeline(name="one-held")
def one_held(folder: str) -> None:
    held(folder=folder, name="a").set_cpu_request("1").set_caching_options(False)
