"""``arena serve``: Arena's serving commands, each an InferenceService served on this machine.

``custom``, ``kserve`` and ``sklearn`` build a ``serving.kserve.io/v1beta1`` InferenceService from
Arena's flags (``serving.arena_serve``), store it through the checks ``millpond apply -f`` runs and
start its supervisor (``serving.deploy``); ``list``, ``get``, ``logs`` and ``delete`` show and stop
them with Arena's columns. Arena's other serve types (tensorflow, triton, seldon, …) are answered
with one ``error:`` line naming what millpond serves. Flags that only mean something on a cluster
are accepted and named in one ``info:`` line, as ``arena submit`` does.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from collections.abc import Callable
from typing import Any

import click

from millpond.cli.namespace_option import NAMESPACE as NAMESPACE_TYPE
from millpond.errors import UserError
from millpond.manifest_envelope import found as found_objects

NAMESPACE = click.option("-n", "--namespace", type=NAMESPACE_TYPE, default="default", show_default=True)
SETTINGS = {"allow_interspersed_args": False, "ignore_unknown_options": False}
CLUSTER_ONLY = (
    ("--image-pull-policy", True), ("--imagePullPolicy", True), ("--image-pull-secret", True), ("--toleration", True),
    ("--selector", True), ("--enable-istio", False), ("--expose-service", False), ("--share-memory", True),
    ("--data-dir", True), ("--data-subpath-expr", True), ("--temp-dir", True), ("--temp-dir-subpath-expr", True),
    ("--config-file", True), ("--env-from-secret", True), ("--device", True),
)
KSERVE_CLUSTER_ONLY = (("--security-context", True), ("--affinity-policy", True), ("--affinity-constraint", True),
                       ("--enable-prometheus", False), ("--metrics-port", True))
CUSTOM_CLUSTER_ONLY = (("--metrics-port", True), ("--max-surge", True), ("--max-unavailable", True)) + tuple(
    (f"--{probe}-probe-{part}", True) for probe in ("liveness", "readiness", "startup")
    for part in ("action", "action-option", "option"))
TYPE_NAMES = {"custom": "Custom", "kserve": "KServe", "sklearn": "Sklearn"}


@click.group("serve")
def serve_group() -> None:
    """Serve models: custom (a command), kserve (an InferenceService), sklearn; list, get, logs, delete."""


def _key(flag: str) -> str:
    return "cluster_" + flag.lstrip("-").replace("-", "_").lower()


def _accepted(flags: tuple[tuple[str, bool], ...]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def wrap(command: Callable[..., Any]) -> Callable[..., Any]:
        for flag, takes_value in reversed(flags):
            option = click.option(flag, _key(flag), multiple=True, hidden=True) if takes_value else \
                click.option(flag, _key(flag), is_flag=True, hidden=True)
            command = option(command)
        return command
    return wrap


def common_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Arena's serving flags (``pkg/argsbuilder/serving.go``), outermost first."""
    command = _accepted(CLUSTER_ONLY)(command)
    options = [
        click.option("--name", required=True, help="The InferenceService's name."),
        NAMESPACE,
        click.option("-v", "--version", default="", help="The serving version (label servingVersion)."),
        click.option("--model-name", default="", help="Recorded as the label modelName."),
        click.option("--model-version", default="", help="Recorded as the label modelVersion."),
        click.option("--image", default="", help="A custom server's image: its command runs in it under the "
                     "runtime policy (millpond.io/runtime, MILLPOND_RUNTIME), else on this machine."),
        click.option("--command", "command_flag", default="", help="The command (else the words after the flags)."),
        click.option("--shell", default="sh", show_default=True, help="Runs the command: SHELL -c COMMAND."),
        click.option("--replicas", type=int, default=1, show_default=True, help="Replicas (processes)."),
        click.option("--gpus", type=int, default=0, help="GPUs per replica."),
        click.option("--gpumemory", type=int, default=0, metavar="GIB", help="GiB of one GPU's memory per replica."),
        click.option("--gpucore", type=int, default=0, hidden=True),
        click.option("--cpu", default="", help="CPU per replica (a quantity: 1, 500m)."),
        click.option("--memory", default="", help="Memory per replica (a quantity: 1Gi)."),
        click.option("-d", "--data", multiple=True, metavar="DATASET:PATH", help="Mount a dataset (repeatable)."),
        click.option("-e", "--env", multiple=True, metavar="KEY=VALUE", help="An environment variable (repeatable)."),
        click.option("-l", "--label", "labels", multiple=True, metavar="KEY=VALUE"),
        click.option("-a", "--annotation", "annotations", multiple=True, metavar="KEY=VALUE"),
        click.argument("words", nargs=-1, type=click.UNPROCESSED),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def kserve_options(command: Callable[..., Any]) -> Callable[..., Any]:
    command = _accepted(KSERVE_CLUSTER_ONLY)(command)
    options = [
        click.option("--model-format", default="", metavar="NAME[:VERSION]", help="sklearn, pytorch, …"),
        click.option("--runtime", default="", help="A ServingRuntime's name."),
        click.option("--storage-uri", default="", help="Where the model is (s3://, pvc://, a path, …)."),
        click.option("--port", type=int, default=0, help="The port the server listens on (KServe: 8080)."),
        click.option("--runtime-version", default=""),
        click.option("--protocol-version", default="", help="v1, v2, grpc-v1 or grpc-v2."),
        click.option("--min-replicas", type=int, default=-1, help="KServe's minReplicas (default: --replicas)."),
        click.option("--max-replicas", type=int, default=0),
        click.option("--canary-traffic-percent", type=int, default=-1,
                     help="The share of requests the new revision gets (the previous one gets the rest)."),
        click.option("--scale-target", type=int, default=0, help="Recorded (Knative's autoscaler)."),
        click.option("--scale-metric", default="", help="Recorded (Knative's autoscaler)."),
        click.option("--container-concurrency", type=int, default=0, help="Recorded."),
        click.option("--timeout", type=int, default=0, help="Recorded."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _serve(serve_type: str, values: dict[str, Any], extra: tuple[tuple[str, bool], ...]) -> None:
    from millpond.serving.arena_serve import ServeArgs, inference_service
    from millpond.serving.deploy import deploy
    from millpond.settings import load_settings
    from millpond.store.resources import ResourceStore

    ignored = [flag for flag, _ in CLUSTER_ONLY + extra if values.pop(_key(flag), None)]
    words, flag = values.pop("words"), values.pop("command_flag")
    if words and flag:
        raise UserError("give the command once: --command or the words after the flags, not both")
    fields = ServeArgs.__dataclass_fields__
    given: dict[str, Any] = {k: tuple(v) if isinstance(v, (list, tuple)) else v
                             for k, v in values.items() if k in fields}  # click's values, as parsed
    args = ServeArgs(type=serve_type, command=flag or " ".join(words), **given)
    body = inference_service(args)
    settings = load_settings()
    store = ResourceStore(settings)
    if store.get("InferenceService", args.name, args.namespace) is not None:
        raise UserError(f"the serving job {args.name} already exists in namespace {args.namespace}: "
                        f"arena serve delete {args.name} -n {args.namespace} first")
    if ignored:
        word = "means" if len(ignored) == 1 else "mean"
        print(f"info: {', '.join(ignored)} only {word} something on a Kubernetes cluster; ignored on this machine",
              file=sys.stderr)
    done = deploy(body, store, f"arena serve {serve_type}", settings.volumes_dir)
    click.echo(f"inferenceservice.serving.kserve.io/{done.name} created")
    for note in done.notes:
        print(f"info: {note}", file=sys.stderr)
    click.echo(f"INFO: The Job {done.name} has been submitted successfully", err=True)
    click.echo(f"INFO: You can run `arena serve get {done.name} --type {serve_type} -n {done.namespace}` "
               "to check the job status", err=True)


@serve_group.command("custom", context_settings=SETTINGS)
@_accepted(CUSTOM_CLUSTER_ONLY)
@click.option("--port", type=int, default=0, help="The port the command listens on (gRPC in Arena).")
@click.option("--restful-port", type=int, default=0, help="The HTTP port the command listens on.")
@common_options
def serve_custom(**values: Any) -> None:
    """A custom server: the command runs on this host (SHELL -c COMMAND), as KServe's kserve-container."""
    _serve("custom", values, CUSTOM_CLUSTER_ONLY)


@serve_group.command("kserve", context_settings=SETTINGS)
@kserve_options
@common_options
def serve_kserve(**values: Any) -> None:
    """An InferenceService: --model-format with --storage-uri (or --data), or a command (a custom container)."""
    _serve("kserve", values, KSERVE_CLUSTER_ONLY)


@serve_group.command("sklearn", context_settings=SETTINGS)
@click.option("--model-uri", "--storage-uri", "storage_uri", default="",
              help="Where the model is: a folder with model.joblib (s3://, pvc://DATASET/PATH, a local path).")
@click.option("--protocol-version", default="", help="v1 or v2 (both are answered).")
@click.option("--port", type=int, default=0, hidden=True)
@common_options
def serve_sklearn(**values: Any) -> None:
    """A scikit-learn model (KServe's sklearn predictor), served by millpond's model server."""
    _serve("sklearn", values, ())


def _refused(serve_type: str) -> click.Command:
    @click.command(serve_type, context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
                   add_help_option=False, hidden=True)
    @click.argument("rest", nargs=-1, type=click.UNPROCESSED)
    def refused(rest: tuple[str, ...]) -> None:
        from millpond.serving.arena_serve import refusal

        raise UserError(refusal(serve_type))
    return refused


def _add_refused() -> None:
    from millpond.serving.arena_serve import ELSEWHERE

    for serve_type in ELSEWHERE:
        serve_group.add_command(_refused(serve_type))


_add_refused()


# --- list, get, logs, delete ----------------------------------------------------------------------

def _dump(data: Any, output: str) -> None:
    if output == "json":
        click.echo(json.dumps(data, indent=2))
    else:
        from millpond.documents import dump_yaml

        click.echo(dump_yaml(data).rstrip())


def _table(rows: list[list[str]], indent: str = "") -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        click.echo(indent + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


def _check_type(serve_type: str) -> str:
    wanted = serve_type.strip().lower()
    if wanted and wanted not in TYPE_NAMES:
        raise UserError(f"--type {serve_type!r}: one of {', '.join(TYPE_NAMES)}")
    return wanted


@serve_group.command("list")
@NAMESPACE
@click.option("-A", "--all-namespaces", "--allNamespaces", "all_namespaces", is_flag=True)
@click.option("-o", "--output", type=click.Choice(["wide", "json", "yaml"]), default="wide")
@click.option("-T", "--type", "serve_type", default="", help="Only custom, kserve or sklearn.")
def list_command(namespace: str, all_namespaces: bool, output: str, serve_type: str) -> None:
    """List the served models: NAME TYPE VERSION DESIRED AVAILABLE ADDRESS PORTS."""
    from millpond.serving import serve_views
    from millpond.store.resources import ResourceStore

    wanted = _check_type(serve_type)
    store = ResourceStore()
    found = [serve_views.info(r) for r in store.list("InferenceService", None if all_namespaces else namespace)]
    found = [f for f in found if not wanted or f["type"].lower() == wanted]
    if output in ("json", "yaml"):
        _dump(found, output)
        return
    header = ["NAME", "TYPE", "VERSION", "DESIRED", "AVAILABLE", "ADDRESS", "PORTS"]
    rows = [(["NAMESPACE"] if all_namespaces else []) + header]
    for item in found:
        row = [item["name"], item["type"], item["version"] or "N/A", str(item["desiredInstances"]),
               str(item["availableInstances"]), item["address"] or "N/A", item["ports"] or "N/A"]
        rows.append(([item["namespace"]] if all_namespaces else []) + row)
    _table(rows)


@serve_group.command("get")
@click.argument("name")
@NAMESPACE
@click.option("-T", "--type", "serve_type", default="")
@click.option("-v", "--version", default="", help="Accepted (one version is served at a time here).")
@click.option("-o", "--output", type=click.Choice(["wide", "json", "yaml"]), default="wide")
def get_command(name: str, namespace: str, serve_type: str, version: str, output: str) -> None:
    """One served model: its address, revisions, and instances (replicas) with status and restarts."""
    from millpond.serving import serve_views
    from millpond.serving.kinds import KINDS
    from millpond.store.resources import ResourceStore

    wanted = _check_type(serve_type)
    resource = found_objects(KINDS["InferenceService"].names, name, namespace, False, ResourceStore())[0]
    item = serve_views.info(resource, instances=True)
    if wanted and item["type"].lower() != wanted:
        raise UserError(f"the serving job {name} is a {item['type']} job, not {wanted}")
    if output in ("json", "yaml"):
        _dump(item, output)
        return
    for label, value in (("Name", item["name"]), ("Namespace", item["namespace"]), ("Type", item["type"]),
                         ("Version", item["version"] or "N/A"), ("Desired", item["desiredInstances"]),
                         ("Available", item["availableInstances"]), ("Age", item["age"]),
                         ("Address", item["address"] or "N/A"), ("Port", item["ports"] or "N/A"),
                         ("Ready", item["ready"])):
        click.echo(f"{label + ':':<12}{value}")
    if item["requestGPUs"] or item["requestGPUMemory"]:
        shown = f"{item['requestGPUs']}" if item["requestGPUs"] else f"{item['requestGPUMemory']} GiB of one GPU"
        click.echo(f"{'GPUs:':<12}{shown} per replica")
    if item["message"]:
        click.echo(f"{'Message:':<12}{item['message']}")
    for revision in item["revisions"]:
        click.echo(f"\n{'Revision:':<12}{revision['name']}\n{'Percent:':<12}{revision['percent']}")
    if item["endpoints"]:
        click.echo("\nEndpoints:")
        _table([["NAME", "URL"], *[[e["name"], e["url"]] for e in item["endpoints"]]], "  ")
    click.echo("\nInstances:")
    rows = [["NAME", "STATUS", "AGE", "READY", "RESTARTS", "NODE"]]
    rows += [[i["name"], i["status"], i["age"], i["ready"], str(i["restartCount"]), i["nodeName"]]
             for i in item["instances"]]
    _table(rows, "  ")


@serve_group.command("logs")
@click.argument("name")
@NAMESPACE
@click.option("-T", "--type", "serve_type", default="")
@click.option("-v", "--version", default="", help="Accepted (one version is served at a time here).")
@click.option("-i", "--instance", default="", help="The instance (default: the newest revision's first).")
@click.option("-f", "--follow", is_flag=True, help="Keep printing until the model is deleted (Ctrl-C ends it).")
@click.option("-t", "--tail", type=int, default=-1, help="Only the last N lines.")
@click.option("--since", default="", help="Only lines newer than this Go duration (5s, 2m, 3h).")
@click.option("--timestamps", is_flag=True, help="Prefix each line with the time it was printed.")
def logs_command(name: str, namespace: str, serve_type: str, version: str, instance: str, follow: bool, tail: int,
                 since: str, timestamps: bool) -> None:
    """Print one instance's output (its model server's lines)."""
    from millpond.durations import parse_go_duration
    from millpond.errors import NotFoundError
    from millpond.serving import serve_views
    from millpond.serving.kinds import KINDS
    from millpond.store.keys import utcnow
    from millpond.store.resources import ResourceStore
    from millpond.training import logs

    _check_type(serve_type)
    store = ResourceStore()
    found_objects(KINDS["InferenceService"].names, name, namespace, False, store)
    cutoff = utcnow() - dt.timedelta(seconds=parse_go_duration(since, "--since").seconds) if since else None
    found = serve_views.instance_logs(name, namespace)
    if instance and instance not in found:
        raise NotFoundError(f"the serving job {name} has no instance {instance} (its instances: "
                            f"{', '.join(found) or 'none yet'})")
    chosen = instance or next(iter(found), "")
    if not chosen:
        return  # nothing started yet
    log = found[chosen]
    for line in logs.read(log, tail if tail >= 0 else None, cutoff, timestamps):
        click.echo(line)
    if follow:
        def gone() -> bool:
            return store.get("InferenceService", name, namespace) is None

        for line in logs.follow(log, len(logs.read(log)), gone, timestamps):
            click.echo(line)


@serve_group.command("delete")
@click.argument("names", nargs=-1, required=True)
@NAMESPACE
@click.option("-T", "--type", "serve_type", default="")
@click.option("-v", "--version", default="", help="Accepted (one version is served at a time here).")
def delete_command(names: tuple[str, ...], namespace: str, serve_type: str, version: str) -> None:
    """Stop the served models' processes and delete them."""
    import shutil

    from millpond.serving import lifecycle, objects
    from millpond.serving.endpoints import folder
    from millpond.serving.kinds import KINDS
    from millpond.store.resources import ResourceStore

    _check_type(serve_type)
    store = ResourceStore()
    for name in names:
        found_objects(KINDS["InferenceService"].names, name, namespace, False, store)  # NotFoundError first
        objects.delete(KINDS["InferenceService"], name, namespace, store)
        lifecycle.stop(name, namespace)
        # its logs and model copies go with it, as a deleted pod's do (a new one of that name starts clean)
        shutil.rmtree(folder(namespace, name), ignore_errors=True)
        click.echo(f"INFO: The serving job {name} has been deleted successfully", err=True)


# --- update ----------------------------------------------------------------------------------------

CANARY_UPDATE = click.option(
    "--canary-traffic-percent", type=int, default=None,
    help="The new revision's share of the requests (the previous one keeps the rest); 100 promotes it.")


@serve_group.group("update")
def update_group() -> None:
    """Change a served model (a new revision; with --canary-traffic-percent it gets that share)."""


def update_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Arena's update flags (``pkg/argsbuilder/update_serving.go``): each given one changes that part only."""
    command = _accepted((("--selector", True), ("--toleration", True)))(command)
    options = [
        click.option("--name", required=True, help="The served model to change."),
        NAMESPACE,
        click.option("-v", "--version", default=None, help="The label servingVersion."),
        click.option("--model-name", default=None),
        click.option("--model-version", default=None),
        click.option("--image", default=None, help="The image (custom servers run in it under the runtime policy)."),
        click.option("--command", "command_flag", default=None, help="The new command (custom containers)."),
        click.option("--shell", default="sh", show_default=True),
        click.option("--replicas", type=int, default=None),
        click.option("--gpus", type=int, default=None),
        click.option("--gpumemory", type=int, default=None, metavar="GIB"),
        click.option("--cpu", default=None),
        click.option("--memory", default=None),
        click.option("-e", "--env", multiple=True, metavar="KEY=VALUE"),
        click.option("-l", "--label", "labels", multiple=True, metavar="KEY=VALUE"),
        click.option("-a", "--annotation", "annotations", multiple=True, metavar="KEY=VALUE"),
        click.argument("words", nargs=-1, type=click.UNPROCESSED),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _update(serve_type: str, values: dict[str, Any]) -> None:
    from millpond.serving.arena_update import UpdateArgs, updated
    from millpond.serving.deploy import deploy
    from millpond.serving.kinds import KINDS
    from millpond.settings import load_settings
    from millpond.store.resources import ResourceStore

    ignored = [flag for flag in ("--selector", "--toleration") if values.pop(_key(flag), None)]
    words, flag = values.pop("words"), values.pop("command_flag")
    if words and flag is not None:
        raise UserError("give the command once: --command or the words after the flags, not both")
    command = flag if flag is not None else (" ".join(words) if words else None)
    fields = UpdateArgs.__dataclass_fields__
    given: dict[str, Any] = {k: tuple(v) if isinstance(v, (list, tuple)) else v
                             for k, v in values.items() if k in fields}  # click's values, as parsed
    args = UpdateArgs(type=serve_type, command=command, **given)
    settings = load_settings()
    store = ResourceStore(settings)
    current = found_objects(KINDS["InferenceService"].names, args.name, args.namespace, False, store)[0]
    body = updated(current.manifest, args)
    if ignored:
        print(f"info: {', '.join(ignored)} only mean something on a Kubernetes cluster; ignored on this machine",
              file=sys.stderr)
    done = deploy(body, store, f"arena serve update {serve_type}", settings.volumes_dir)
    click.echo(f"inferenceservice.serving.kserve.io/{done.name} {done.action}")
    for note in done.notes:
        print(f"info: {note}", file=sys.stderr)
    click.echo(f"INFO: The serving job {done.name} has been updated successfully", err=True)


@update_group.command("kserve", context_settings=SETTINGS)
@click.option("--model-format", default=None, metavar="NAME[:VERSION]")
@click.option("--runtime", default=None)
@click.option("--storage-uri", default=None)
@click.option("--port", type=int, default=None)
@click.option("--runtime-version", default=None)
@click.option("--protocol-version", default=None)
@click.option("--min-replicas", type=int, default=None)
@click.option("--max-replicas", type=int, default=None)
@CANARY_UPDATE
@update_options
def update_kserve(**values: Any) -> None:
    """Change an InferenceService's model, format, runtime, resources, replicas or canary split."""
    _update("kserve", values)


@update_group.command("sklearn", context_settings=SETTINGS)
@click.option("--model-uri", "--storage-uri", "storage_uri", default=None, help="The new model's folder.")
@click.option("--protocol-version", default=None)
@CANARY_UPDATE
@update_options
def update_sklearn(**values: Any) -> None:
    """Serve another scikit-learn model under the same name, all at once or as a canary."""
    _update("sklearn", values)


@update_group.command("custom", context_settings=SETTINGS)
@click.option("--port", "--restful-port", "port", type=int, default=None)
@update_options
def update_custom(**values: Any) -> None:
    """Change a custom server's command, image, environment, resources or replicas."""
    _update("custom", values)
