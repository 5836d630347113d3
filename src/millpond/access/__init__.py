"""Who may do what: identities, Kubernetes RBAC, and the one authorization function every surface calls.

Kubeflow's multi-user model is Kubernetes' own: a request carries an identity (a user and groups,
established by an authenticating proxy or a token), and RBAC (Roles, ClusterRoles and their bindings)
decides each request's *attributes* (verb, namespace, API group, resource, subresource, name; or a
non-resource path). KFP's API server asks the same question through a SubjectAccessReview with
``pipelines.kubeflow.org`` attributes; Kubeflow's profile controller and KFAM give a namespace's owner
and contributors their rights as RoleBindings to ``kubeflow-admin|edit|view``.

millpond keeps that model whole: ``identity`` (who), ``attributes`` (what is asked), ``rules`` (one
RBAC rule against attributes), ``builtin`` (the ClusterRoles and bindings a cluster boots with, and
Kubeflow's aggregated roles), ``rbac`` (the policy: stored and built-in objects, aggregation, which
rules bind an identity where), ``authorizer`` (the one decision: the KFP API, the Kubernetes API,
millpond's routes, the UI, the model gateway and ``/metrics`` all call it), ``users`` (credentials,
tokens and login sessions, kept hashed).

Single-user mode (the default) decides nothing: every request is allowed, as before.
"""
