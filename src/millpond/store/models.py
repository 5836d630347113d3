"""The metadata schema: experiments, runs, tasks, artifacts, applied Fluid resources, uploaded pipelines,
recurring runs.

Every state change of a run is a committed row, so a killed engine can resume where it stopped.
Structured values (parameters, outputs) are JSON columns: they are read back whole, never queried.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from millpond.store.keys import new_id, utcnow


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}  # noqa: RUF012 - SQLAlchemy reads it as is
    # Every model maps one table (none maps a join or a subquery), which Core's insert/update take as such.
    __table__: ClassVar[Table]


class Experiment(Base):
    """A KFP experiment: runs filed under a name, in a namespace (0013; "" in single-user mode, where names are
    unique over the home as before; in multi-user mode unique within the namespace, as KFP's are)."""

    __tablename__ = "experiments"
    __table_args__ = (UniqueConstraint("namespace", "name", name="uq_experiments_namespace_name"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(255))
    namespace: Mapped[str] = mapped_column(String(253), default="", server_default="")
    description: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # AVAILABLE or ARCHIVED (KFP's storage_state); the engine's raw inserts rely on the server default.
    storage_state: Mapped[str] = mapped_column(String(16), default="AVAILABLE", server_default="AVAILABLE")


class Run(Base):
    __tablename__ = "runs"
    __table_args__ = (
        Index("ix_runs_experiment_created", "experiment_id", "created_at"),
        Index("ix_runs_created", "created_at"),  # the runs list, newest first (migration 0005)
        Index("ix_runs_state_created", "state", "created_at"),  # ... filtered by state
        Index("ix_runs_recurring_created", "recurring_run_id", "created_at"),  # ... of one recurring run (0006)
        Index("ix_runs_recurring_state", "recurring_run_id", "state"),  # its runs in flight, every scheduler tick
        Index("ix_runs_namespace_created", "namespace", "created_at"),  # a namespace's runs, newest first (0013)
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(255))
    experiment_id: Mapped[str] = mapped_column(ForeignKey("experiments.id"))
    pipeline_name: Mapped[str] = mapped_column(String(255))
    pipeline_spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    platform_spec: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # The Argo workflow a kfp 1.x run came from (0011), for the UI's graph and the API; None for v2.
    workflow: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    parameters: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    pipeline_root: Mapped[str] = mapped_column(Text)
    state: Mapped[str] = mapped_column(String(32), default="PENDING")
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    outputs: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    started_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    finished_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # The engine process driving the run, so that resume can tell a live run from a killed one.
    engine_pid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    engine_start: Mapped[str | None] = mapped_column(String(32), nullable=True)
    storage_state: Mapped[str] = mapped_column(String(16), default="AVAILABLE", server_default="AVAILABLE")
    # The uploaded pipeline version the run was started from (API runs from a pipeline_version_reference).
    pipeline_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    pipeline_version_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    # The recurring run whose scheduler started this run (KFP's run.recurring_run_id), if one did.
    recurring_run_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    # Its experiment's namespace, kept on the run for filtering (0013): "" for a single-user run.
    namespace: Mapped[str] = mapped_column(String(253), default="", server_default="")


class Task(Base):
    """One node of a run's DAG: a container execution, an importer or a sub-DAG."""

    __tablename__ = "tasks"
    __table_args__ = (Index("ix_tasks_run_path", "run_id", "path", unique=True),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    parent_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    # A stable address inside the run, e.g. "root/condition-1/train": the key for resume.
    path: Mapped[str] = mapped_column(Text)
    name: Mapped[str] = mapped_column(String(255))
    kind: Mapped[str] = mapped_column(String(16))  # container | importer | dag
    component: Mapped[str] = mapped_column(String(255))
    image: Mapped[str | None] = mapped_column(Text, nullable=True)
    state: Mapped[str] = mapped_column(String(32), default="PENDING")
    cached: Mapped[bool] = mapped_column(Boolean, default=False)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    exit_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    inputs: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    outputs: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    log_path: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    started_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    finished_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # The task's process while it runs (its process group leader), to stop leftovers on resume.
    pid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    pid_start: Mapped[str | None] = mapped_column(String(32), nullable=True)
    # kfp-kubernetes podMetadata: the labels and annotations the task's pod would carry.
    pod_metadata: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)


class CacheEntry(Base):
    """A task execution whose outputs another task with the same cache key may reuse."""

    __tablename__ = "cache_entries"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    run_id: Mapped[str] = mapped_column(String(36))
    task_id: Mapped[str] = mapped_column(String(36))
    outputs: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Artifact(Base):
    """An output artifact a task produced, by its final URI."""

    __tablename__ = "artifacts"
    __table_args__ = (Index("ix_artifacts_run", "run_id"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    task_id: Mapped[str] = mapped_column(ForeignKey("tasks.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(255))
    type: Mapped[str] = mapped_column(String(255))
    uri: Mapped[str] = mapped_column(Text)
    artifact_metadata: Mapped[dict[str, Any]] = mapped_column("metadata", JSON, default=dict)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class StoredResource(Base):
    """A Fluid object applied with ``millpond apply -f`` (Dataset, a runtime, a data operation).

    ``manifest`` is what was applied (apiVersion, kind, metadata, spec); ``status`` is what
    millpond observed, written apart so that re-applying a manifest never resets it.
    """

    __tablename__ = "resources"
    __table_args__ = (UniqueConstraint("kind", "namespace", "name", name="uq_resources_kind_namespace_name"),)

    uid: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    kind: Mapped[str] = mapped_column(String(64))
    namespace: Mapped[str] = mapped_column(String(253))
    name: Mapped[str] = mapped_column(String(253))
    manifest: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # The process running a data operation (pid + start ticks, against pid reuse), and how many
    # times it was resumed after its process died (0007): see datasets/operations/liveness.py.
    process_pid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    process_start: Mapped[str | None] = mapped_column(String(32), nullable=True)
    process_resumes: Mapped[int] = mapped_column(Integer, default=0, server_default="0")


class Pipeline(Base):
    """A pipeline uploaded through the API (``kfp.Client().upload_pipeline``): a name over versions.

    ``namespace`` "" is a shared pipeline (every pipeline of a single-user home); a namespaced one (0013) belongs
    to that namespace, as KFP 2.x's do. Names are unique within a namespace.
    """

    __tablename__ = "pipelines"
    __table_args__ = (UniqueConstraint("namespace", "name", name="uq_pipelines_namespace_name"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(255))
    namespace: Mapped[str] = mapped_column(String(253), default="", server_default="")
    display_name: Mapped[str] = mapped_column(String(255))
    description: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class PipelineVersion(Base):
    """One uploaded IR document of a pipeline (and its kfp-kubernetes platform spec, if any)."""

    __tablename__ = "pipeline_versions"
    __table_args__ = (UniqueConstraint("pipeline_id", "name", name="uq_pipeline_versions_pipeline_name"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    pipeline_id: Mapped[str] = mapped_column(ForeignKey("pipelines.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(255))
    display_name: Mapped[str] = mapped_column(String(255))
    description: Mapped[str] = mapped_column(Text, default="")
    pipeline_spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    platform_spec: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # The Argo workflow of a kfp 1.x upload (0011): what the API returns as its pipeline_spec.
    workflow: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class RecurringRun(Base):
    """A KFP recurring run (a "job"): what to run, on which trigger, and where its schedule stands.

    The pipeline is either inline (``pipeline_spec``) or a reference to an uploaded pipeline
    (``pipeline_id`` and/or ``pipeline_version_id``), resolved each time a run starts, as Kubeflow does.
    The trigger is a cron expression (six fields, seconds first) or an interval in seconds.
    """

    __tablename__ = "recurring_runs"
    __table_args__ = (Index("ix_recurring_runs_experiment", "experiment_id"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(255))
    description: Mapped[str] = mapped_column(Text, default="")
    experiment_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    namespace: Mapped[str] = mapped_column(String(253), default="")
    service_account: Mapped[str] = mapped_column(String(253), default="")
    pipeline_spec: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    platform_spec: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    pipeline_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    pipeline_version_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    parameters: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    pipeline_root: Mapped[str | None] = mapped_column(Text, nullable=True)
    cron: Mapped[str | None] = mapped_column(String(255), nullable=True)
    interval_second: Mapped[int | None] = mapped_column(Integer, nullable=True)
    start_time: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    end_time: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    max_concurrency: Mapped[int] = mapped_column(Integer, default=1)
    no_catchup: Mapped[bool] = mapped_column(Boolean, default=False)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # The latest scheduled time handled (a run started, or a reason recorded); None before the first.
    last_scheduled_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # Why the latest scheduled run did not start (a deleted pipeline version, a busy database...).
    error: Mapped[str | None] = mapped_column(Text, nullable=True)


class ScheduledRun(Base):
    """One scheduled time of a recurring run, claimed by the scheduler that starts its run.

    The primary key makes the claim: of two servers on one home, only the one whose INSERT
    commits starts the run for that time. ``run_id`` is set once the run exists, ``error`` when
    it could not be started.
    """

    __tablename__ = "scheduled_runs"
    __table_args__ = (Index("ix_scheduled_runs_claimed", "recurring_run_id", "claimed_at"),)  # claims being started

    recurring_run_id: Mapped[str] = mapped_column(ForeignKey("recurring_runs.id", ondelete="CASCADE"), primary_key=True)
    scheduled_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), primary_key=True)
    claimed_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    run_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)


class TrainingJob(Base):
    """A training job (``arena submit``, 0008): spec, status with its reason, supervising process."""

    __tablename__ = "training_jobs"
    __table_args__ = (UniqueConstraint("namespace", "name", name="uq_training_jobs_namespace_name"),)

    uid: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(253))
    namespace: Mapped[str] = mapped_column(String(253))
    trainer: Mapped[str] = mapped_column(String(32))
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(String(64), nullable=True)
    message: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    started_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    finished_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    supervisor_pid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    supervisor_start: Mapped[str | None] = mapped_column(String(32), nullable=True)
    attempt: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    gpus: Mapped[list[Any] | None] = mapped_column(JSON, nullable=True)


class TrainingInstance(Base):
    """One process group of a training job's current attempt (``NAME-master-0``, ``NAME-worker-0``)."""

    __tablename__ = "training_instances"

    job_uid: Mapped[str] = mapped_column(ForeignKey("training_jobs.uid", ondelete="CASCADE"), primary_key=True)
    name: Mapped[str] = mapped_column(String(253), primary_key=True)
    role: Mapped[str] = mapped_column(String(32))
    index: Mapped[int] = mapped_column(Integer)
    rank: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16))
    pid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    pid_start: Mapped[str | None] = mapped_column(String(32), nullable=True)
    exit_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    log_path: Mapped[str | None] = mapped_column(Text, nullable=True)
    gpus: Mapped[list[Any] | None] = mapped_column(JSON, nullable=True)
    started_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    finished_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class TrainingEvent(Base):
    """One line of ``arena get -e``: when, Normal or Warning, a reason word, a message."""

    __tablename__ = "training_events"
    __table_args__ = (Index("ix_training_events_job", "job_uid", "id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_uid: Mapped[str] = mapped_column(ForeignKey("training_jobs.uid", ondelete="CASCADE"))
    at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    type: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(String(64))
    message: Mapped[str] = mapped_column(Text)


class DatasetNodeCache(Base):
    """One node's cache of one dataset in cluster mode (0009): written by that node's cache, read by status.

    A row exists while the node holds (or may hold) a cache of the dataset: it is the node's
    claim on one of the runtime's ``replicas``, and its numbers are what the node last reported.
    """

    __tablename__ = "dataset_node_caches"

    dataset_uid: Mapped[str] = mapped_column(String(36), primary_key=True)
    node_id: Mapped[str] = mapped_column(String(64), primary_key=True)  # Ray's hex node id
    namespace: Mapped[str] = mapped_column(String(253))
    name: Mapped[str] = mapped_column(String(253))
    node_dir: Mapped[str] = mapped_column(Text)  # the node's MILLPOND_NODE_DIR, where its tiers and index are
    cached: Mapped[int] = mapped_column(BigInteger, default=0)
    capacity: Mapped[int] = mapped_column(BigInteger, default=0)
    hit_bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    miss_bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    claimed_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class WorkloadRow(Base):
    """A Kueue workload (0010): a training job or a pipeline task waiting for, holding or done with quota.

    Times are epoch seconds (floats): ``created`` is the FIFO order and a requeue keeps it, as in
    Kueue; several machines write them, so their clocks are assumed to agree (NTP).
    """

    __tablename__ = "workloads"
    __table_args__ = (
        Index("ix_workloads_state", "state"),
        Index("ix_workloads_namespace_queue", "namespace", "queue"),
        Index("ix_workloads_version", "version"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    kind: Mapped[str] = mapped_column(String(16))
    name: Mapped[str] = mapped_column(String(512))
    namespace: Mapped[str] = mapped_column(String(253))
    user: Mapped[str] = mapped_column(String(253))
    queue: Mapped[str] = mapped_column(String(253))
    requests: Mapped[dict[str, Any]] = mapped_column(JSON)
    priority: Mapped[int] = mapped_column(Integer, default=0)
    priority_class: Mapped[str | None] = mapped_column(String(253), nullable=True)
    pod_count: Mapped[int] = mapped_column(Integer, default=1)
    created: Mapped[float] = mapped_column(Float)
    state: Mapped[str] = mapped_column(String(16))
    cluster_queue: Mapped[str | None] = mapped_column(String(253), nullable=True)
    flavors: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    reason: Mapped[str] = mapped_column(Text, default="")
    position: Mapped[int | None] = mapped_column(Integer, nullable=True)
    requeues: Mapped[int] = mapped_column(Integer, default=0)
    holder: Mapped[str] = mapped_column(String(128), default="")
    admitted_at: Mapped[float] = mapped_column(Float, default=0.0)
    finished_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    updated_at: Mapped[float] = mapped_column(Float)
    version: Mapped[int] = mapped_column(BigInteger, default=0)  # 0016: the workload_generation of its last write


class WorkloadGenerationRow(Base):
    """The workloads' change counter (0016): one row, taken (+1) by every transaction that writes workloads."""

    __tablename__ = "workload_generation"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    value: Mapped[int] = mapped_column(BigInteger)
    epoch: Mapped[str] = mapped_column(String(36))  # random, set by the migration: this database, not another


class UserRow(Base):
    """A user of a multi-user server (0012): its name and its password's argon2 hash (never the password)."""

    __tablename__ = "users"

    name: Mapped[str] = mapped_column(String(253), primary_key=True)
    password_hash: Mapped[str] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class UserTokenRow(Base):
    """An API token of a user (0012): the SHA-256 digest of the token (shown once, never kept), its expiry."""

    __tablename__ = "user_tokens"
    __table_args__ = (Index("ix_user_tokens_user", "user"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    user: Mapped[str] = mapped_column(ForeignKey("users.name", ondelete="CASCADE"))
    digest: Mapped[str] = mapped_column(String(64), unique=True)
    description: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))


class LoginSessionRow(Base):
    """A login session of the web UI (0012): the SHA-256 digest of its cookie, its user, its expiry."""

    __tablename__ = "login_sessions"
    __table_args__ = (Index("ix_login_sessions_user", "user"),)

    digest: Mapped[str] = mapped_column(String(64), primary_key=True)
    user: Mapped[str] = mapped_column(ForeignKey("users.name", ondelete="CASCADE"))
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))



class RegistryColumns:
    """What every entity of the model registry has (0014): an integer id (the API's ids are digits), the
    namespace of the registry holding it, an optional external id and description, a state, the type's own
    fields as the API names them (``properties``), the user's MetadataValues, and times in epoch ms."""

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    namespace: Mapped[str] = mapped_column(String(253))
    external_id: Mapped[str | None] = mapped_column(String(255), nullable=True)
    description: Mapped[str | None] = mapped_column(Text, nullable=True)
    state: Mapped[str] = mapped_column(String(32))
    properties: Mapped[dict[str, Any]] = mapped_column(JSON)
    custom_properties: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_ms: Mapped[int] = mapped_column(BigInteger)
    updated_ms: Mapped[int] = mapped_column(BigInteger)


class RegistryModelRow(RegistryColumns, Base):
    """A registered model of the model registry (Kubeflow Model Registry's ``RegisteredModel``): its name is
    unique in its registry; ``properties`` holds owner, readme, license…"""

    __tablename__ = "registry_models"
    __table_args__ = (UniqueConstraint("namespace", "name", name="uq_registry_models_namespace_name"),
                      UniqueConstraint("namespace", "external_id", name="uq_registry_models_namespace_external_id"))

    name: Mapped[str] = mapped_column(String(255))


class RegistryVersionRow(RegistryColumns, Base):
    """A version of a registered model (``ModelVersion``): its name is unique within its model."""

    __tablename__ = "registry_versions"
    __table_args__ = (UniqueConstraint("parent_id", "name", name="uq_registry_versions_parent_name"),
                      UniqueConstraint("namespace", "external_id", name="uq_registry_versions_namespace_external_id"))

    parent_id: Mapped[int] = mapped_column(ForeignKey("registry_models.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(255))


class RegistryArtifactRow(RegistryColumns, Base):
    """An artifact of the model registry (``ModelArtifact``, ``DocArtifact``, ``DataSet``, ``Metric``,
    ``Parameter``), attached to a model version or to none; ``uri`` is where its files are."""

    __tablename__ = "registry_artifacts"
    __table_args__ = (Index("ix_registry_artifacts_parent", "parent_id"),
                      UniqueConstraint("namespace", "external_id", name="uq_registry_artifacts_namespace_external_id"))

    parent_id: Mapped[int | None] = mapped_column(ForeignKey("registry_versions.id", ondelete="SET NULL"),
                                                  nullable=True)
    artifact_type: Mapped[str] = mapped_column(String(32))
    name: Mapped[str | None] = mapped_column(String(255), nullable=True)
    uri: Mapped[str | None] = mapped_column(Text, nullable=True)
