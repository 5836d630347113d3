# Seed 002's pipeline (Fashion MNIST, kfp 0.5/1.x style), as the tutorial writes it.
from kfp import dsl
from kfp.dsl import PipelineVolume
from kubernetes.client.models import V1SecretVolumeSource, V1Volume, V1VolumeMount

PROJECT_ROOT = '/workspace/kubeflow-mnist'
CONDA_PYTHON_CMD = '/opt/conda/envs/kubeflow-mnist/bin/python'


def git_clone_darkrai_op(repo_url: str):
    volume_op = dsl.VolumeOp(name="create pipeline volume", resource_name="pipeline-pvc",
                             modes=["ReadWriteOnce"], size="3Gi")
    image = 'alpine/git:latest'
    commands = ["mkdir ~/.ssh", "cp /etc/ssh-key/id_rsa ~/.ssh/id_rsa", "chmod 600 ~/.ssh/id_rsa",
                "ssh-keyscan bitbucket.org >> ~/.ssh/known_hosts", f"git clone {repo_url} {PROJECT_ROOT}",
                f"cd {PROJECT_ROOT}"]
    op = dsl.ContainerOp(name='git clone', image=image, command=['sh'], arguments=['-c', ' && '.join(commands)],
                         container_kwargs={'image_pull_policy': 'IfNotPresent'},
                         pvolumes={"/workspace": volume_op.volume})
    op.add_volume(V1Volume(name='ssh-key-volume', secret=V1SecretVolumeSource(secret_name='ssh-key-secret')))
    op.add_volume_mount(V1VolumeMount(mount_path='/etc/ssh-key', name='ssh-key-volume', read_only=True))
    return op


def preprocess_op(image: str, pvolume: PipelineVolume, data_dir: str):
    return dsl.ContainerOp(name='preprocessing', image=image,
                           command=[CONDA_PYTHON_CMD, f"{PROJECT_ROOT}/preprocessing.py"],
                           arguments=["--data_dir", data_dir],
                           container_kwargs={'image_pull_policy': 'IfNotPresent'}, pvolumes={"/workspace": pvolume})


def train_and_eval_op(image: str, pvolume: PipelineVolume, data_dir: str):
    return dsl.ContainerOp(name='training and evaluation', image=image,
                           command=[CONDA_PYTHON_CMD, f"{PROJECT_ROOT}/train.py"], arguments=["--data_dir", data_dir],
                           file_outputs={'output': f'{PROJECT_ROOT}/output.txt'},
                           container_kwargs={'image_pull_policy': 'IfNotPresent'}, pvolumes={"/workspace": pvolume})


@dsl.pipeline(name='Fashion MNIST Training Pipeline',
              description='Fashion MNIST Training Pipeline to be executed on KubeFlow.')
def training_pipeline(image: str = 'benjamintanweihao/kubeflow-mnist',
                      repo_url: str = 'https://github.com/benjamintanweihao/kubeflow-mnist.git',
                      data_dir: str = '/workspace'):
    git_clone = git_clone_darkrai_op(repo_url=repo_url)
    preprocess_data = preprocess_op(image=image, pvolume=git_clone.pvolume, data_dir=data_dir)
    _training_and_eval = train_and_eval_op(image=image, pvolume=preprocess_data.pvolume, data_dir=data_dir)
