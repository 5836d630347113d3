"""The IR's protobuf schemas, without importing the whole kfp SDK (see deferred_import)."""

from __future__ import annotations

from types import ModuleType

from millpond.deferred_import import defer_package_init


def pipeline_spec_pb2() -> ModuleType:
    defer_package_init("kfp")
    from kfp.pipeline_spec import pipeline_spec_pb2 as module  # noqa: PLC0415 - after kfp's __init__ is deferred

    return module


def kubernetes_executor_config_pb2() -> ModuleType:
    defer_package_init("kfp")
    defer_package_init("kfp.kubernetes")
    from kfp.kubernetes import kubernetes_executor_config_pb2 as module  # noqa: PLC0415 - after the deferrals above

    return module
