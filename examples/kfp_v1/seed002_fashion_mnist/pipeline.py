# Seed 002's Fashion MNIST pipeline: KFP v1 SDK (kfp 1.8) code, as the seed writes it.
#
# What differs from the seed, and why (the host is not a pod):
# - `repo_url` defaults to the local repository that make_repo.py creates (nothing is fetched);
# - the steps run `python` (a parameter) instead of the image's /opt/conda python: millpond runs
#   a step's command on this machine, where the image's conda environment does not exist;
# - the git step gets a fresh HOME (a pod's is the container's own) so that it never writes into
#   your ~/.ssh, and it skips `ssh-keyscan bitbucket.org` (no network, and a local clone needs no
#   known host).
# Everything else (the VolumeOp, the secret volume with the ssh key, file_outputs, the image from a
# parameter) is the seed's. `millpond run pipeline.py` compiles it with kfp 1.8.22 in a side
# environment; pipeline.tar.gz is the same pipeline compiled by dsl-compile (see README.md).
from kfp import dsl
from kfp.dsl import PipelineVolume
from kubernetes.client.models import V1SecretVolumeSource, V1Volume, V1VolumeMount

PROJECT_ROOT = '/workspace/kubeflow-mnist'
DEFAULT_REPO = '/var/tmp/kubeflow-mnist.git'  # make_repo.py's default (a step's /tmp is its own)


def git_clone_darkrai_op(repo_url: str):

    volume_op = dsl.VolumeOp(
        name="create pipeline volume",
        resource_name="pipeline-pvc",
        modes=["ReadWriteOnce"],
        size="3Gi"
    )

    image = 'alpine/git:latest'

    commands = [
        'export HOME="$(mktemp -d)"',  # host adaptation: a fresh home, as a container's
        "mkdir ~/.ssh",
        "cp /etc/ssh-key/id_rsa ~/.ssh/id_rsa",
        "chmod 600 ~/.ssh/id_rsa",
        f"git clone {repo_url} {PROJECT_ROOT}",
        f"cd {PROJECT_ROOT}"]

    op = dsl.ContainerOp(
        name='git clone',
        image=image,
        command=['sh'],
        arguments=['-c', ' && '.join(commands)],
        container_kwargs={'image_pull_policy': 'IfNotPresent'},
        pvolumes={"/workspace": volume_op.volume}
    )

    # Mount Git Secrets
    op.add_volume(V1Volume(name='ssh-key-volume',
                           secret=V1SecretVolumeSource(secret_name='ssh-key-secret')))
    op.add_volume_mount(V1VolumeMount(mount_path='/etc/ssh-key', name='ssh-key-volume', read_only=True))

    return op


def preprocess_op(image: str, python: str, pvolume: PipelineVolume, data_dir: str):
    return dsl.ContainerOp(
        name='preprocessing',
        image=image,
        command=[python, f"{PROJECT_ROOT}/preprocessing.py"],
        arguments=["--data_dir", data_dir],
        container_kwargs={'image_pull_policy': 'IfNotPresent'},
        pvolumes={"/workspace": pvolume}
    )


def train_and_eval_op(image: str, python: str, pvolume: PipelineVolume, data_dir: str, ):
    return dsl.ContainerOp(
        name='training and evaluation',
        image=image,
        command=[python, f"{PROJECT_ROOT}/train.py"],
        arguments=["--data_dir", data_dir],
        file_outputs={'output': f'{PROJECT_ROOT}/output.txt'},
        container_kwargs={'image_pull_policy': 'IfNotPresent'},
        pvolumes={"/workspace": pvolume}
    )


@dsl.pipeline(
    name='Fashion MNIST Training Pipeline',
    description='Fashion MNIST Training Pipeline to be executed on KubeFlow.'
)
def training_pipeline(image: str = 'benjamintanweihao/kubeflow-mnist',
                      repo_url: str = DEFAULT_REPO,
                      data_dir: str = '/workspace',
                      python: str = 'python3'):
    git_clone = git_clone_darkrai_op(repo_url=repo_url)

    preprocess_data = preprocess_op(image=image,
                                    python=python,
                                    pvolume=git_clone.pvolume,
                                    data_dir=data_dir)

    _training_and_eval = train_and_eval_op(image=image,
                                           python=python,
                                           pvolume=preprocess_data.pvolume,
                                           data_dir=data_dir)


if __name__ == '__main__':
    import kfp.compiler as compiler
    compiler.Compiler().compile(training_pipeline, __file__ + '.tar.gz')
