"""KFP v1 pipelines: the Argo Workflows that kfp 1.x compiles, read into a typed model and run as v2 IR.

kfp 1.x compiles a pipeline to an Argo ``Workflow`` (not to the v2 IR the rest of
``millpond.pipelines`` runs). This package reads such a workflow and knows Argo's languages:

- ``package``: the text of a ``.yaml`` or of the ``pipeline.yaml`` in a ``.tar.gz``/``.zip``;
- ``reader`` (with ``fields``, ``pods``, ``volume_ops``, ``checks``): the checked ``model``,
  or one ``UserError`` line naming what cannot be honoured;
- ``templating``: Argo's ``{{...}}`` tags; ``when``: its govaluate conditions; ``scopes``: the
  values tags resolve from (workflow parameters, bound inputs, saved outputs), as Argo builds them.

- ``to_ir`` (with ``step_config`` for one step's command, pod config and sidecars): the model
  said in v2 IR and a kfp-kubernetes platform spec, which ``loader.load_pipeline`` hands to the
  engine like any other pipeline; what it cannot say yet is refused in one line;
- ``paths``: the fixed paths of a step (``/tmp/outputs/X/data``, ``file_outputs``), recorded on
  its executor; ``placement``: the launcher making them real files in the task's sandbox.
"""
