"""``millpond profile``: Kubeflow Profiles and their contributors without writing YAML.

A convenience over the same objects and code path: ``create`` applies a ``kubeflow.org/v1`` Profile as
``millpond apply -f`` would (the profile controller makes its namespace, RoleBindings, ServiceAccounts and
``kf-resource-quota``), ``delete`` deletes it as ``millpond delete profile`` does (its namespace and
everything in it go too), and the contributor commands write KFAM's RoleBindings (``core.contributors``).
The command line acts on the home directly, as the machine's administrator: it needs no login and may
manage any profile's contributors.
"""

from __future__ import annotations

import click

from millpond.errors import UserError
from millpond.tables import format_table

_ROLE = click.Choice(["admin", "edit", "view"])


@click.group("profile")
def profile_group() -> None:
    """Kubeflow Profiles (a user's namespace, with its quota) and their contributors."""


def _quota(text: str | None) -> dict[str, str]:
    """``requests.nvidia.com/gpu=2,requests.cpu=8`` as ``spec.resourceQuotaSpec.hard``."""
    hard: dict[str, str] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise UserError(f"--quota: {part.strip()!r}: use RESOURCE=AMOUNT (requests.nvidia.com/gpu=2,"
                            "requests.cpu=8)")
        hard[key.strip()] = value.strip()
    return hard


@profile_group.command("create")
@click.argument("name")
@click.option("--owner", required=True, help="The owner's user name or e-mail (spec.owner, kind User).")
@click.option("--quota", metavar="RESOURCE=AMOUNT,...",
              help="The namespace's ResourceQuota (spec.resourceQuotaSpec.hard): requests.nvidia.com/gpu=2,pods=10.")
def create_command(name: str, owner: str, quota: str | None) -> None:
    """Create (or change) Profile NAME owned by --owner, with namespace NAME."""
    from millpond.cli.resources import apply_documents
    from millpond.core.profile_controller import not_owned
    from millpond.kind_handler import KindContext
    from millpond.settings import load_settings

    refused = not_owned(name, owner, KindContext(load_settings())) if name.isprintable() else None
    if refused:  # the controller would keep the Profile Failed: refused here, nothing stored
        raise UserError(f"profile {name}: {refused}")
    spec: dict[str, object] = {"owner": {"kind": "User", "name": owner}}
    hard = _quota(quota)
    if hard:
        spec["resourceQuotaSpec"] = {"hard": hard}
    document = {"apiVersion": "kubeflow.org/v1", "kind": "Profile", "metadata": {"name": name}, "spec": spec}
    apply_documents([("profile create", 1, document)])


@profile_group.command("list")
def list_command() -> None:
    """NAME OWNER QUOTA STATUS of every Profile."""
    from millpond.core.profile_controller import owner_of
    from millpond.store.resources import ResourceStore

    rows = []
    for row in ResourceStore().list("Profile"):
        hard = (row.spec.get("resourceQuotaSpec") or {}).get("hard") or {}
        conditions = row.status.get("conditions") or []
        rows.append([row.name, str(owner_of(row.manifest).get("name", "")),
                     ",".join(f"{key}={value}" for key, value in hard.items()) or "<none>",
                     str(conditions[-1].get("type", "")) if conditions else ""])
    click.echo(format_table(("NAME", "OWNER", "QUOTA", "STATUS"), rows) if rows else "No profiles found.")


@profile_group.command("delete")
@click.argument("name")
def delete_command(name: str) -> None:
    """Delete Profile NAME, with its namespace and everything in it."""
    from millpond.kind_handler import KindContext
    from millpond.kinds import REGISTRY
    from millpond.settings import load_settings

    entry = REGISTRY.resolve("profile")
    REGISTRY.handler(entry).delete(entry, name, "", KindContext(load_settings()))
    click.echo(f"{entry.resource}/{name} deleted")


@profile_group.command("add-contributor")
@click.argument("name")
@click.argument("user")
@click.option("--role", type=_ROLE, default="edit", show_default=True,
              help="kubeflow-admin, kubeflow-edit or kubeflow-view in the profile's namespace.")
def add_contributor_command(name: str, user: str, role: str) -> None:
    """Let USER work in profile NAME's namespace (KFAM's RoleBinding)."""
    from millpond.core import contributors
    from millpond.settings import load_settings

    binding = contributors.Binding(user, name, role)
    contributors.add(load_settings(), binding)
    click.echo(f"rolebinding.rbac.authorization.k8s.io/{binding.name} created")


@profile_group.command("remove-contributor")
@click.argument("name")
@click.argument("user")
@click.option("--role", type=_ROLE, help="The role to take away (default: every role USER has there).")
def remove_contributor_command(name: str, user: str, role: str | None) -> None:
    """Take USER's contributor RoleBinding(s) in profile NAME away."""
    from millpond.core import contributors
    from millpond.core.profile_controller import ADMIN_BINDING
    from millpond.errors import NotFoundError
    from millpond.settings import load_settings

    settings = load_settings()
    contributors.profile(settings, name)
    found = [binding for binding in contributors.listed(settings, user, [name], role or "")
             if binding.name != ADMIN_BINDING]  # the owner's binding is the profile's: never removed here
    if not found:
        raise NotFoundError(f"{user} is no contributor of profile {name}" + (f" with role {role}" if role else ""))
    for binding in found:
        contributors.remove(settings, binding)
        click.echo(f"rolebinding.rbac.authorization.k8s.io/{binding.name} deleted")


@profile_group.command("contributors")
@click.argument("name")
def contributors_command(name: str) -> None:
    """USER ROLE BINDING of profile NAME (its owner's binding included, as KFAM lists it)."""
    from millpond.core import contributors
    from millpond.settings import load_settings

    settings = load_settings()
    contributors.profile(settings, name)
    rows = [[binding.user, binding.role] for binding in contributors.listed(settings, namespaces=[name])]
    click.echo(format_table(("USER", "ROLE"), rows) if rows else f"No contributors of profile {name}.")
