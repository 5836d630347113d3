"""The model registry's authorization vocabulary: which resource its REST API is asked as.

Kubeflow deploys one model registry per namespace and guards it as a whole: its UI's backend asks
whether the user may ``get`` the registry's ``services`` object in that namespace (``clients/ui/bff``,
``CanAccessServiceInNamespace``), which lets anyone who may reach the service read and write everything in
it. millpond asks finer attributes through the one authorizer: resource ``registeredmodels`` of group
``modelregistry.kubeflow.org`` in the registry's namespace, the verb the HTTP method means (``list`` a
list, ``get`` one entity or a search, ``create`` a POST, ``patch`` a PATCH); versions and artifacts are
asked as the registered models they belong to, as upstream's one check covers them all. Kubeflow's
``kubeflow-edit`` and ``kubeflow-view`` get them through the aggregated ClusterRoles below (``builtin``).
"""

from __future__ import annotations

from typing import Any

GROUP = "modelregistry.kubeflow.org"
RESOURCE = "registeredmodels"

VIEW_RULES: list[dict[str, Any]] = [{"apiGroups": [GROUP], "resources": [RESOURCE], "verbs": ["get", "list", "watch"]}]
EDIT_RULES: list[dict[str, Any]] = [{"apiGroups": [GROUP], "resources": [RESOURCE],
                                     "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}]
