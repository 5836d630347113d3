"""Seed 002's pipeline written with kfp 2 (and kfp-kubernetes): what pipeline.py becomes in v2.

NOTE_v2.md walks through the differences. `millpond run pipeline_v2.py -p repo_url=... -p
python=...` runs it with millpond's own kfp 2, no side environment.
"""
import os

from kfp import dsl, kubernetes

PROJECT_ROOT = '/workspace/kubeflow-mnist'
DEFAULT_REPO = '/var/tmp/kubeflow-mnist.git'  # make_repo.py's default (a step's /tmp is its own)
# kfp 2 fixes a step's image when it compiles (a ContainerSpec image cannot be a pipeline
# parameter): choose it here, or in the environment, instead of at run time.
IMAGE = os.environ.get('KUBEFLOW_MNIST_IMAGE', 'benjamintanweihao/kubeflow-mnist')


@dsl.container_component
def git_clone(repo_url: str):
    commands = [
        'export HOME="$(mktemp -d)"',  # as in pipeline.py: a fresh home, never your ~/.ssh
        'mkdir ~/.ssh',
        'cp /etc/ssh-key/id_rsa ~/.ssh/id_rsa',
        'chmod 600 ~/.ssh/id_rsa',
        f'git clone "$0" {PROJECT_ROOT}',
        f'cd {PROJECT_ROOT}',
    ]
    return dsl.ContainerSpec(image='alpine/git:latest', command=['sh', '-c', ' && '.join(commands)], args=[repo_url])


@dsl.container_component
def preprocess(python: str, data_dir: str):
    return dsl.ContainerSpec(image=IMAGE, command=[python, f'{PROJECT_ROOT}/preprocessing.py'],
                             args=['--data_dir', data_dir])


@dsl.container_component
def train_and_eval(python: str, data_dir: str, output: dsl.OutputPath(str)):
    # v1's file_outputs={'output': f'{PROJECT_ROOT}/output.txt'} read a file wherever the step
    # left it; a v2 output is a path kfp chooses, so the step copies output.txt there.
    return dsl.ContainerSpec(
        image=IMAGE,
        command=['sh', '-c', f'"$0" {PROJECT_ROOT}/train.py --data_dir "$1" && cp {PROJECT_ROOT}/output.txt "$2"'],
        args=[python, data_dir, output],
    )


@dsl.pipeline(name='fashion-mnist-training-pipeline-v2',
              description='Fashion MNIST Training Pipeline to be executed on KubeFlow (kfp 2).')
def training_pipeline(repo_url: str = DEFAULT_REPO, data_dir: str = '/workspace', python: str = 'python3') -> str:
    pvc = kubernetes.CreatePVC(pvc_name_suffix='-pipeline-pvc', access_modes=['ReadWriteOnce'], size='3Gi')

    clone = git_clone(repo_url=repo_url)
    kubernetes.mount_pvc(clone, pvc_name=pvc.outputs['name'], mount_path='/workspace')
    kubernetes.use_secret_as_volume(clone, secret_name='ssh-key-secret', mount_path='/etc/ssh-key')

    preprocess_data = preprocess(python=python, data_dir=data_dir).after(clone)
    kubernetes.mount_pvc(preprocess_data, pvc_name=pvc.outputs['name'], mount_path='/workspace')

    training = train_and_eval(python=python, data_dir=data_dir).after(preprocess_data)
    kubernetes.mount_pvc(training, pvc_name=pvc.outputs['name'], mount_path='/workspace')
    return training.outputs['output']
