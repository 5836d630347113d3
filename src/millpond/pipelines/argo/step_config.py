"""How one kfp 1.x step runs: its command's Argo tags as IR placeholders, its pod's config, its sidecars.

Split from ``to_ir`` (which maps templates and tasks onto IR components and DAGs) because these
say what a single container does, whatever DAG it sits in:

- ``executor_text``: ``{{inputs.parameters.X}}`` and the job tags as the launcher's placeholders
  (the paths kfp 1.x fixes stay as written: ``argo.paths`` places them);
- ``platform_config``: volumes, env from secrets, config maps and the pod, pod metadata, as the
  kfp-kubernetes platform spec the engine already honours;
- ``resources``/``patched_resources``: requests and limits (podSpecPatch's at run time);
- ``sidecar_script``: a shell wrapper starting the step's sidecars around it.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from millpond.errors import UserError
from millpond.pipelines.argo.model import Container, Template, Volume
from millpond.pipelines.argo.templating import tags

JOB_TAGS = {
    "workflow.name": "{{$.pipeline_job_resource_name}}",
    "workflow.uid": "{{$.pipeline_job_uuid}}",
    "pod.name": "{{$.pipeline_task_uuid}}",
}
INPUT = re.compile(r"inputs\.parameters\.(?P<name>.+)")
TAG_TEXT = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)

def executor_text(word: str, where: str) -> str:
    """One word of a step's command in IR: its Argo tags as the launcher's placeholders.

    Tags outside Argo's prefixes (a Python f-string's ``{{x}}``) stay as written; an Argo tag
    the launcher cannot fill is refused, naming it.
    """
    def tag(match: re.Match[str]) -> str:
        inner = match.group(1).strip()
        if inner in JOB_TAGS:
            return JOB_TAGS[inner]
        found = INPUT.fullmatch(inner)
        if found:
            return f"{{{{$.inputs.parameters['{found.group('name')}']}}}}"
        if inner.startswith("$."):
            return match.group(0)  # a placeholder this translation wrote
        if inner.startswith(("inputs.", "outputs.", "tasks.", "steps.", "workflow.", "pod.", "node.")):
            raise UserError(f"{where}: tag {{{{{inner[:60]}}}}} in a command is not supported yet")
        return match.group(0)

    return TAG_TEXT.sub(tag, word)



def platform_config(t: Template, container: Container, where: str, workflow_volumes: tuple[Volume, ...],
                    pending: dict[str, list[tuple[dict[str, Any], str]]],
                    pull_secrets: tuple[str, ...] = ()) -> dict[str, Any]:
    """The kfp-kubernetes config of a step: its volumes, env from secrets/config maps/the pod, pod metadata,
    how its image is pulled (the container's ``imagePullPolicy``, the workflow's ``imagePullSecrets``).

    A claim named by the step's input goes on ``pending`` (executor label -> (pvcMount, input)):
    the task's argument for that input names it (``to_ir._bind_claims``).
    """
    config: dict[str, Any] = {}
    volumes = {v.name: v for v in (*workflow_volumes, *t.volumes)}
    for mount in container.volume_mounts:
        volume = volumes.get(mount.name)
        if volume is None:
            raise UserError(f"{where}: volume mount {mount.name!r} names no volume")
        if volume.items or (mount.sub_path and volume.kind != "persistentVolumeClaim"):
            raise UserError(f"{where}: volume {mount.name!r}: items and subPath are not supported yet")
        if volume.kind == "secret":
            config.setdefault("secretAsVolume", []).append(
                {"secretName": volume.source, "mountPath": mount.mount_path, "optional": volume.optional})
        elif volume.kind == "configMap":
            config.setdefault("configMapAsVolume", []).append(
                {"configMapName": volume.source, "mountPath": mount.mount_path, "optional": volume.optional})
        elif volume.kind == "emptyDir":
            config.setdefault("emptyDirMounts", []).append({"volumeName": volume.name,
                                                            "mountPath": mount.mount_path})
        else:
            entry: dict[str, Any] = {"mountPath": mount.mount_path}
            found = list(tags(volume.source))
            if not found:
                entry["constant"] = volume.source
            elif len(found) == 1 and volume.source.strip() == "{{" + found[0] + "}}" and INPUT.fullmatch(found[0]):
                # The claim's name is the step's input: bound per task, from the task's argument (``_task``).
                name = found[0][len("inputs.parameters."):]
                pending.setdefault(f"exec-{t.name}", []).append((entry, name))
            else:
                raise UserError(f"{where}: claim name {volume.source[:60]!r} is not supported yet")
            if mount.sub_path:
                # Tags (``{{workflow.uid}}_{{pod.name}}``, ``{{inputs.parameters.X}}``) become the
                # launcher's placeholders, which the engine fills as the task starts (``platform._pvc``).
                entry["subPath"] = executor_text(mount.sub_path, where)
            config.setdefault("pvcMount", []).append(entry)
    for variable in container.env:
        if variable.source == "fieldRef":
            config.setdefault("fieldPathAsEnv", []).append({"name": variable.name, "fieldPath": variable.key})
        elif variable.source == "secretKeyRef":
            config.setdefault("secretAsEnv", []).append({
                "secretName": variable.source_name, "optional": variable.optional,
                "keyToEnv": [{"secretKey": variable.key, "envVar": variable.name}]})
        elif variable.source == "configMapKeyRef":
            config.setdefault("configMapAsEnv", []).append({
                "configMapName": variable.source_name, "optional": variable.optional,
                "keyToEnv": [{"configMapKey": variable.key, "envVar": variable.name}]})
        elif variable.source is not None:
            raise UserError(f"{where}: env {variable.name!r} from {variable.source} is not supported yet")
    if t.labels or t.annotations:
        config["podMetadata"] = {"labels": dict(t.labels), "annotations": dict(t.annotations)}
    if container.image_pull_policy:
        config["imagePullPolicy"] = container.image_pull_policy
    if pull_secrets:
        config["imagePullSecret"] = [{"secretName": name} for name in pull_secrets]
    return config



def resources(container: Container, patched: dict[str, dict[str, str]], where: str) -> dict[str, Any]:
    """Requests and limits in the IR's quantity fields, which the engine's budget reads.

    ``patched`` are podSpecPatch's (kfp 1.x's run-time quantities, ``{{inputs.parameters.X}}``):
    they become input placeholders the engine fills just before the task runs.
    """
    fields = {("requests", "cpu"): "resourceCpuRequest", ("limits", "cpu"): "resourceCpuLimit",
              ("requests", "memory"): "resourceMemoryRequest", ("limits", "memory"): "resourceMemoryLimit"}
    resources: dict[str, Any] = {}
    for kind, pairs in (("requests", container.resources.requests), ("limits", container.resources.limits)):
        merged = {**dict(pairs), **patched.get(kind, {})}
        for name, quantity in merged.items():
            found = list(tags(quantity))
            if found and (len(found) != 1 or quantity.strip() != "{{" + found[0] + "}}"
                          or not INPUT.fullmatch(found[0])):
                raise UserError(f"{where}: {kind}.{name} {quantity[:40]!r} is not supported yet")
            quantity = executor_text(quantity, where)
            if (kind, name) in fields:
                resources[fields[(kind, name)]] = quantity
            elif name.endswith("/gpu"):
                resources["accelerator"] = {"resourceType": name, "resourceCount": quantity}
            else:
                raise UserError(f"{where}: resource {kind}.{name} is not supported")
    return resources



def patched_resources(t: Template, where: str) -> dict[str, dict[str, str]]:
    """The main container's requests and limits a podSpecPatch sets; anything else it patches is refused."""
    patch = t.pod_spec_patch
    if not patch:
        return {}
    containers = patch.get("containers") if isinstance(patch, dict) else None
    if set(patch) != {"containers"} or not isinstance(containers, list) or len(containers) != 1:
        raise UserError(f"{where}: a podSpecPatch other than the main container's resources is not supported")
    main = containers[0]
    resources = main.get("resources") if isinstance(main, dict) else None
    if not isinstance(resources, dict) or set(main) != {"name", "resources"} or main["name"] != "main":
        raise UserError(f"{where}: a podSpecPatch other than the main container's resources is not supported")
    patched: dict[str, dict[str, str]] = {}
    for kind in ("requests", "limits"):
        values = resources.get(kind) or {}
        if not isinstance(values, dict) or set(resources) - {"requests", "limits"}:
            raise UserError(f"{where}: podSpecPatch resources hold only requests and limits")
        patched[kind] = {str(k): str(v) for k, v in values.items()}
    return patched


def sidecar_script(t: Template, where: str) -> str:
    """A shell script starting each sidecar beside the step (same sandbox), then the step, then stopping them.

    A sidecar whose command the host lacks fails the step at once, naming it: the main step
    would otherwise wait for a service that never comes (kfp's sidecar sample polls for ever).
    """
    lines = ["pids="]
    for sidecar in t.sidecars:
        words = [*sidecar.container.command, *sidecar.container.args]
        if not words:
            raise UserError(f"{where}: sidecar {sidecar.name!r} has no command (an image's entrypoint cannot run)")
        if any(list(tags(word)) for word in words):
            raise UserError(f"{where}: sidecar {sidecar.name!r}: tags in its command are not supported yet")
        program = shlex.quote(words[0])
        missing = shlex.quote(f"sidecar {sidecar.name!r}: command not found on this machine: {words[0]!r}")
        lines.append(f"command -v {program} >/dev/null 2>&1 || {{ echo {missing} >&2; exit 127; }}")
        lines.append(f'{shlex.join(words)} & pids="$pids $!"')
    lines.append('"$@"; status=$?')
    lines.append("kill $pids 2>/dev/null; wait 2>/dev/null; exit $status")
    return "\n".join(lines) + "\n"
