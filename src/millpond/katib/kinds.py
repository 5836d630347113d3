"""Katib's Experiment, Suggestion and Trial kinds (``kubeflow.org/v1beta1``) by the names kubectl accepts.

Katib's CRDs serve ``v1beta1`` only and declare no short names; neither does millpond. Their schemas
are open objects (``scripts/derive_katib_schemas.py``): an Experiment is checked by Katib's webhook
rules (``katib.webhook``). The handler (``katib.handler``) alone imports what runs an Experiment.
Katib's vocabulary shared by the controller's modules is here: the labels it puts on a Trial, on the
Trial's job and on the job's pods.
"""

from __future__ import annotations

from pathlib import Path

from millpond.errors import UserError
from millpond.kind_handler import KindName
from millpond.kinds import REGISTRY

OWNER = "katib"
GROUP = "kubeflow.org"
VERSION = "v1beta1"
API_VERSION = f"{GROUP}/{VERSION}"
SCHEMAS_DIR = Path(__file__).parent / "schemas"
EXPERIMENT = KindName("Experiment", "experiments", GROUP, (VERSION,), OWNER)
SUGGESTION = KindName("Suggestion", "suggestions", GROUP, (VERSION,), OWNER)
TRIAL = KindName("Trial", "trials", GROUP, (VERSION,), OWNER)
KINDS = (EXPERIMENT, SUGGESTION, TRIAL)
# Katib's labels (pkg/controller.v1beta1/consts): a Trial and its job carry the experiment's name, the job and
# its pods the trial's too.
EXPERIMENT_LABEL = "katib.kubeflow.org/experiment"
TRIAL_LABEL = "katib.kubeflow.org/trial"

REGISTRY.register(KINDS)  # the handler: katib.handler


def schema_file(kind: KindName, api_version: str) -> Path:
    """The JSON Schema of a document of ``kind``; UserError names the version millpond reads."""
    if api_version != API_VERSION:
        raise UserError(f"{kind.kind}: apiVersion {api_version!r} is not supported (millpond reads {API_VERSION})")
    return SCHEMAS_DIR / f"{kind.kind.lower()}.{VERSION}.json"
