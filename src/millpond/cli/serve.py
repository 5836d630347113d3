"""``millpond serve --from-run RUN --artifact TASK.OUTPUT``: serve the Model a run trained, in one command;
``millpond serve --model NAME[:VERSION]``: serve a version of the model registry.

A shortcut for writing the InferenceService by hand: the run's Model artifact (``serving.from_run``), or the
reference ``model-registry://NAME/VERSION`` (``serving.from_registry``), becomes the ``storageUri`` of an
``sklearn`` or ``pytorch`` predictor, stored and started as ``arena serve`` does (``serving.deploy``).
With ``--wait`` it waits for the model to answer and prints its URL; ``arena serve get NAME`` and
``millpond get isvc NAME`` show it afterwards.
"""

from __future__ import annotations

import sys

import click

from millpond.cli.namespace_option import NAMESPACE as NAMESPACE_TYPE


@click.command("serve")
@click.option("--from-run", "run", default=None, metavar="RUN", help="The run: its id (or a prefix) or its name.")
@click.option("--artifact", default=None, metavar="TASK.OUTPUT", help="The task's Model output (train.model).")
@click.option("--model", default=None, metavar="NAME[:VERSION]",
              help="A registered model's version (the latest without :VERSION), from the namespace's model registry.")
@click.option("--name", default="", help="The InferenceService's name (default: TASK-OUTPUT, or NAME-VERSION).")
@click.option("-n", "--namespace", type=NAMESPACE_TYPE, default="default", show_default=True)
@click.option("--format", "fmt", type=click.Choice(["sklearn", "pytorch"]), default=None,
              help="The model's format (default: the artifact's framework metadata or file name).")
@click.option("--replicas", type=int, default=1, show_default=True)
@click.option("--wait/--no-wait", default=False, help="Wait until it answers, then print its URL.")
@click.option("--timeout", type=float, default=120.0, show_default=True, help="Seconds --wait waits.")
def serve_command(run: str | None, artifact: str | None, model: str | None, name: str, namespace: str,
                  fmt: str | None, replicas: int, wait: bool, timeout: float) -> None:
    """Serve a run's Model artifact, or a registered model version, as an InferenceService (KServe v1, Open
    Inference v2, Seldon v0.1)."""
    from millpond.errors import UserError
    from millpond.serving import from_registry, from_run
    from millpond.serving.deploy import deploy, ready_url
    from millpond.settings import load_settings
    from millpond.store.model_registry import RegistryStore
    from millpond.store.resources import ResourceStore
    from millpond.store.runs import RunStore

    if (model is None) == (run is None and artifact is None):
        raise UserError("give --model NAME[:VERSION], or --from-run RUN with --artifact TASK.OUTPUT")
    if model is None and (run is None or artifact is None):
        raise UserError("--from-run and --artifact go together")
    settings = load_settings()
    if model is not None:
        chosen = name or from_registry.default_name(model)
        body = from_registry.inference_service(model, chosen, namespace, fmt or "", replicas,
                                               RegistryStore(settings.database_url))
        served = f"registered model {model} ({from_registry.reference(model)})"
    else:
        assert run is not None and artifact is not None
        found = from_run.model_artifact(RunStore(settings.database_url), run, artifact)
        chosen = name or from_run.default_name(found)
        body = from_run.inference_service(found, chosen, namespace, fmt or "", replicas,
                                          annotations={from_run.ARTIFACT_ANNOTATION: f"{found.task}.{found.output}"})
        served = f"{found.task}.{found.output} of run {found.run_name} ({found.uri})"
    store = ResourceStore(settings)
    existing = store.get("InferenceService", chosen, namespace)
    if existing is not None and existing.manifest.get("spec") != body["spec"]:
        raise UserError(f"the InferenceService {chosen} already exists in namespace {namespace} and serves "
                        "something else: give --name, or delete it (arena serve delete)")
    done = deploy(body, store, "millpond serve", settings.volumes_dir)
    click.echo(f"inferenceservice.serving.kserve.io/{done.name} {done.action}")
    for note in done.notes:
        print(f"info: {note}", file=sys.stderr)
    print(f"info: serving {served}", file=sys.stderr)
    if wait and done.started:
        click.echo(ready_url(store, done.name, done.namespace, timeout))
    elif done.started:
        print(f"info: arena serve get {done.name} -n {done.namespace} shows its URL once it answers", file=sys.stderr)
