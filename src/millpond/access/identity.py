"""Who a request comes from: a user name and the groups Kubernetes' authenticators give it.

Kubernetes adds ``system:authenticated`` to every authenticated identity, and ``system:masters`` is
the group its authorizer never refuses (kube-apiserver's superuser group): millpond's server token
and the command line acting on the home directly are that (the machine's administrator, who can read
the database anyway). A user made an administrator with ``millpond user add --admin`` is an
ordinary user bound to ``cluster-admin`` (a ClusterRoleBinding), as Kubeflow's admins are.
"""

from __future__ import annotations

from dataclasses import dataclass

AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
MASTERS = "system:masters"
ANONYMOUS_NAME = "system:anonymous"


@dataclass(frozen=True)
class Identity:
    """One caller: ``name`` (a user name or e-mail), its ``groups``, and ``via`` how it was established
    (``session``, ``token``, ``proxy``, ``server-token``, ``local``, ``header``: for logs and whoami)."""

    name: str
    groups: tuple[str, ...] = (AUTHENTICATED,)
    via: str = ""

    @property
    def is_master(self) -> bool:
        """Whether RBAC is skipped for it (``system:masters``, kube-apiserver's superuser group)."""
        return MASTERS in self.groups

    @property
    def authenticated(self) -> bool:
        return AUTHENTICATED in self.groups


ADMIN = Identity("system:admin", (MASTERS, AUTHENTICATED), "local")  # the server token; the CLI on the home
ANONYMOUS = Identity(ANONYMOUS_NAME, (UNAUTHENTICATED,), "")


def user(name: str, via: str) -> Identity:
    """An authenticated user (``system:authenticated`` its one group)."""
    return Identity(name, (AUTHENTICATED,), via)
