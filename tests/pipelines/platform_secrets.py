"""Secrets and config maps reach tasks as environment variables and as files (kfp-kubernetes).

Tasks never print a value: they return digests, so a test can check every value arrived
while also checking that no value shows up in logs, outputs or the database.
"""

from kfp import dsl, kubernetes


@dsl.component
def secret_name() -> str:
    return "db-creds"


@dsl.component
def env_digest() -> str:
    import hashlib
    import os

    seen = [os.environ.get(name, "<unset>") for name in ("DB_USER", "DB_PASSWORD", "DB_USER_AGAIN", "LEVEL")]
    return hashlib.sha256("|".join(seen).encode()).hexdigest()


@dsl.component
def files_digest() -> str:
    import hashlib
    import os
    import stat

    parts = []
    for folder in ("/mnt/creds", "/etc/millpond-settings"):
        for name in sorted(os.listdir(folder)):
            path = os.path.join(folder, name)
            with open(path) as handle:
                parts.append(f"{folder}/{name}={handle.read()}|{oct(stat.S_IMODE(os.stat(path).st_mode))}")
    try:
        open("/mnt/creds/new", "w").close()
        parts.append("writable")
    except OSError:
        parts.append("read-only")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


@dsl.pipeline(name="platform-secrets")
def platform_secrets(secret: str = "db-creds", settings: str = "app-settings") -> None:
    name = secret_name()
    from_env = env_digest().after(name)
    kubernetes.use_secret_as_env(from_env, secret_name=secret, secret_key_to_env={"username": "DB_USER"})
    kubernetes.use_secret_as_env(from_env, secret_name="db-creds", secret_key_to_env={"password": "DB_PASSWORD"})
    kubernetes.use_secret_as_env(from_env, secret_name=name.output, secret_key_to_env={"username": "DB_USER_AGAIN"})
    kubernetes.use_config_map_as_env(from_env, config_map_name=settings, config_map_key_to_env={"level": "LEVEL"})

    from_files = files_digest()
    kubernetes.use_secret_as_volume(from_files, secret_name=secret, mount_path="/mnt/creds")
    kubernetes.use_config_map_as_volume(from_files, config_map_name=settings, mount_path="/etc/millpond-settings")


@dsl.component
def optional_env() -> str:
    import os

    mounted = [path for path in ("/mnt/maybe-secret", "/mnt/maybe-config") if os.path.exists(path)]
    return os.environ.get("MAYBE", "<unset>") + "|" + ",".join(mounted)


@dsl.pipeline(name="platform-optional")
def platform_optional(missing: str = "") -> None:
    """Optional secrets and config maps that do not exist (or whose name has no value) are skipped."""
    task = optional_env()
    kubernetes.use_secret_as_env(task, secret_name="no-such-secret", secret_key_to_env={"k": "MAYBE"}, optional=True)
    kubernetes.use_config_map_as_env(task, config_map_name=missing, config_map_key_to_env={"k": "MAYBE"}, optional=True)
    kubernetes.use_secret_as_volume(task, secret_name="no-such-secret", mount_path="/mnt/maybe-secret", optional=True)
    kubernetes.use_config_map_as_volume(task, config_map_name=missing, mount_path="/mnt/maybe-config", optional=True)


@dsl.pipeline(name="platform-missing-secret")
def platform_missing_secret() -> None:
    """A required secret that does not exist fails the task before it starts."""
    task = env_digest()
    kubernetes.use_secret_as_env(task, secret_name="no-such-secret", secret_key_to_env={"username": "DB_USER"})


@dsl.component
def runtime_secret_name() -> str:
    return "made-up-at-run-time"


@dsl.pipeline(name="platform-missing-secret-at-run-time")
def platform_missing_secret_at_run_time() -> None:
    """A secret whose name is only known once a task ran: its absence fails that task."""
    name = runtime_secret_name()
    task = env_digest().after(name)
    kubernetes.use_secret_as_env(task, secret_name=name.output, secret_key_to_env={"username": "DB_USER"})
