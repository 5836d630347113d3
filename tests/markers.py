"""The markers every test gets from what it uses, and the xdist group that keeps heavy servers single.

A test says what it needs through its fixtures (``s3_server``, ``pg_url``, ``ray_cluster``, ``kfp1``,
``kube_sdks``, ``podman``/``python_image``/``registry``), by opening Chromium (``chromium_page``) or by
calling the container helpers (``build_image(...)``); conftest's ``pytest_collection_modifyitems`` turns that
into markers, so ``-m "not ray"`` or ``-m "not slow"`` needs no hand-kept list per file. ``slow`` is
the one hand-kept list (SLOW below): measured, each entry with its reason.

Under pytest-xdist (``--dist loadgroup``) the tests that start a Ray cluster, a browser or kfp 1.8's
side environment each share one ``xdist_group``: one worker runs them all, so the session starts one
Ray cluster (three raylets on two cores), one browser at a time, and builds kfp 1.8 once.

xdist 3.8 under pytest 9 loses those groups: it renames a grouped item's ``_nodeid``, which pytest 9
no longer reads, so its loadgroup scheduler sees no group. So each worker writes the groups it
collected to a folder (GROUPS_ENV) and the controller schedules by them (``GroupScheduling``).
"""

from __future__ import annotations

import inspect
import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

FIXTURE_MARKERS = {
    "s3_server": "s3",
    "failing_s3_server": "s3",
    "pg_server": "postgresql",
    "pg_url": "postgresql",
    "ray_cluster": "ray",
    "kuberay_home": "ray",  # tests/kuberay: RayClusters of their own, as local Ray nodes
    "kube_sdks": "sdk",  # tests/kube_sdk_env.py: the Kubeflow and KServe SDKs' side environment
    "mlmd_client": "sdk",  # tests/mlmd_env.py: ML Metadata's own client in its side environment
    "katib_sdk": "sdk",  # tests/katib_sdk_env.py: the Katib SDK (kubeflow-katib, protobuf < 5) in its side environment
    # tests/containers_support.py: Podman, the images it builds, a local registry
    "podman": "containers",
    "python_image": "containers",
    "busybox_image": "containers",
    "registry": "containers",
}
KFP1_FIXTURES = {"kfp1", "v1"}  # tests/kfp1_env.py's fixtures: kfp 1.8's side environment
BROWSER_CALLS = ("chromium_page(", "_browser(")  # tests/ui/test_server_ui.py's ways into Chromium
CONTAINER_CALLS = ("podman()", "build_image(", "millpond_containers(")  # tests/containers_support.py's helpers

# a cluster's start, a browser per test, kfp 1.8's pip install, the SDKs' environment and a job or model per test
SLOW_BY_NATURE = {"ray", "ui", "kfp1", "sdk"}

# One worker each (the first that applies, longest first): a Ray cluster, kfp 1.8's side environment, the
# Kubeflow and KServe SDKs' side environment (built once), a browser.
GROUPS = (("ray", "ray"), ("kfp1", "kfp1"), ("sdk", "sdk"), ("ui", "ui"))


@dataclass(frozen=True)
class Slow:
    """A test (every parametrization of it) kept out of ``-m "not slow"``, and why."""

    test: str  # "tests/<area>/test_x.py::test_name"
    why: str


# Every ``ray``, ``ui`` and ``kfp1`` test is slow as well (a cluster's start, a browser per test, kfp
# 1.8's pip install); the list below is the rest, measured: "serial" is .ci/run's serial suite
# (``--durations=30``, before xdist), "loaded" is ``-n 4 --dist loadgroup`` on the 2 cores while other
# work ran (load ~12-16, about 5x slower: census took 10.5 s serial and 56 s loaded). An entry is a
# test over ~5 s serial (~25 s loaded), or a parametrized test whose cases add up to over ~10 s serial.
# Take an entry off once its test gets fast.
SLOW = [Slow(test, why) for test, why in (
    # tests/kfp_v1 in images
    ("tests/kfp_v1/test_examples_in_images.py::test_seed002_runs_every_step_in_its_image",
     "the first run builds the seeds' stand-in images from Debian packages (~2.5 min), then ~8 s"),
    ("tests/kfp_v1/test_examples_in_images.py::test_seed003_runs_every_step_in_its_image",
     "waits for the seeds' stand-in images (built once, ~2.5 min), then ~5 s"),
    # tests/model_registry (measured 2026-11-29 while three other helpers' work ran on the 2 cores)
    ("tests/model_registry/test_registry_serving.py::test_a_registered_version_is_served_through_model_registry_uris",
     "~130 s loaded: five model servers, two trainings, a failed fetch retried with back-off"),
    ("tests/model_registry/test_registry_pipeline.py::test_a_pipeline_registers_its_model_with_its_lineage",
     "~48 s loaded: a two-task pipeline whose task calls the registry"),
    ("tests/model_registry/test_registry_multiuser.py::test_each_namespace_has_its_registry_and_rbac_decides",
     "~75 s loaded: a multi-user server's team (four users, tokens, bindings through the CLI)"),
    # tests/lineage (measured 2026-11-29, serial, while other helpers' work ran on the 2 cores)
    ("tests/lineage/test_lineage_ui_routes.py::test_another_namespaces_lineage_is_refused",
     "~25 s serial: a multi-user team (four users, tokens, bindings through the CLI), a run in each namespace"),
    # tests/mlmd (measured 2026-11-29, serial, while other helpers' work ran on the 2 cores)
    ("tests/mlmd/test_mlmd_multiuser.py::test_no_identity_no_answer",
     "~32 s: the module's team server (four users, tokens, bindings through the CLI) and a run in two namespaces"),
    ("tests/mlmd/test_mlmd_endpoint.py::test_types_are_kfps",
     "~14 s when it is the first to ask for the package's fixture: two pipeline runs and a server"),
    ("tests/mlmd/test_mlmd_postgres.py::test_filters_pages_and_lineage_on_postgresql",
     "~12 s: a pipeline run and a server over a fresh PostgreSQL database"),
    ("tests/mlmd/test_mlmd_endpoint.py::test_over_tls_with_the_servers_token",
     "~6.5 s: a server of its own, its certificate made"),
    ("tests/mlmd/test_mlmd_endpoint.py::test_the_flag_is_checked_and_a_port_in_use_is_one_error_line",
     "~6 s: two server processes start and stop"),
    # tests/kube
    ("tests/kube/test_kubectl_corpora.py::test_a_corpus_row_through_kubectl",
     "102 cases, ~90 s serial: every corpus row applied and deleted with the real kubectl"),
    ("tests/kube/test_kube_protocol.py::test_a_thousand_watches_do_not_stall_the_server_and_abandoned_ones_are_freed",
     "~25-40 s: a thousand open watches, each gets the event"),
    # tests/cli
    ("tests/cli/test_apply_refusals.py::test_apply_refuses_a_document_nested_100000_deep",
     "4 cases, 200 s loaded: each parses a 100,000-deep document"),
    ("tests/cli/test_apply_refusals.py::test_the_fluid_api_refuses_a_document_nested_100000_deep", "16 s loaded"),
    ("tests/cli/test_manifest_corpora.py::test_every_corpus_row_follows_its_protocol",
     "a big corpus: 111 rows, 197 s loaded (.ci/run's conformance runs the same rows)"),
    ("tests/cli/test_parsers_at_call_sites.py::test_a_retry_duration_in_another_notation_is_refused_at_submission",
     "5 cases, 184 s loaded: each waits out a retry"),
    ("tests/cli/test_parsers_at_call_sites.py::test_a_valid_backoff_the_old_parser_misread_is_waited",
     "waits a backoff: 33 s loaded"),
    ("tests/cli/test_parsers_at_call_sites.py::test_a_task_asking_for_memory_in_exponent_form_runs", "30 s loaded"),
    ("tests/cli/test_namespaces.py::test_any_namespace_and_name_is_refused_with_nothing_stored_or_round_trips",
     "hypothesis over the CLI: 27 s loaded"),
    ("tests/cli/test_example_census.py::test_second_run_reads_back_what_the_first_saved",
     "the census example twice: 10.5 s serial"),
    ("tests/cli/test_conformance_manifests.py::test_before_is_applied_in_every_rows_home_and_not_counted_as_stored",
     "each row is a millpond process: 96 s loaded"),
    ("tests/cli/test_conformance_manifests.py::"
     "test_an_allow_listed_row_must_fail_cleanly_and_one_that_passes_fails_the_run",
     "four rows, each a millpond process: 82 s loaded"),
    ("tests/cli/test_conformance_manifests.py::test_rows_that_follow_the_protocol_pass", "33 s loaded"),
    ("tests/cli/test_conformance_manifests.py::test_an_allow_list_entry_naming_no_row_fails_the_run", "30 s loaded"),
    ("tests/cli/test_conformance_manifests.py::test_a_row_against_its_expectation_fails_the_run_naming_it",
     "26 s loaded"),
    # tests/notebooks
    ("tests/notebooks/test_notebook_lifecycle.py::"
     "test_a_kernel_answers_through_the_proxy_and_the_notebook_stops_starts_restarts_and_goes",
     "JupyterLab started four times (apply, kill -9, stop/start), kernels through the proxy: ~15 s serial"),
    ("tests/notebooks/test_notebook_lifecycle.py::"
     "test_a_killed_supervisor_takes_its_server_and_kernels_along_and_the_server_starts_another",
     "waits for millpond server's reconcile (10 s) and a second JupyterLab: ~15 s serial"),
    ("tests/notebooks/test_notebook_resources.py::test_a_gpu_goes_to_one_notebook_and_the_next_waits_saying_why",
     "two JupyterLabs one after the other: ~10 s serial"),
    ("tests/notebooks/test_notebook_resources.py::"
     "test_two_notebooks_share_one_gpu_by_memory_and_a_third_waits_saying_why",
     "two JupyterLabs and a kernel: ~11 s serial"),
    ("tests/notebooks/test_notebook_multiuser.py::test_only_the_namespaces_contributors_reach_the_notebook",
     "a multi-user server, its team, and a sandboxed JupyterLab with a kernel: ~14 s serial"),
    ("tests/notebooks/test_notebook_in_image.py::test_a_notebook_runs_in_its_image_through_stop_start_kill_and_delete",
     "four Jupyter containers (apply, kill -9 of the server, start, kill -9 of the supervisor and millpond "
     "server's reconcile): ~26 s serial"),
    ("tests/notebooks/test_notebook_in_image.py::"
     "test_an_image_that_may_not_be_pulled_waits_or_runs_on_this_host_saying_why",
     "a host JupyterLab after a refused pull, then the image loaded: ~20 s serial"),
    ("tests/notebooks/test_notebook_culling.py::"
     "test_an_idle_notebook_is_culled_a_busy_one_is_not_and_the_culled_one_starts_again_with_its_workspace",
     "waits out a 20 s idle time, a kernel busy for longer, three JupyterLabs: ~50 s serial"),
    ("tests/notebooks/test_notebook_failures.py::test_kill_9_of_the_jupyter_server_and_of_millpond_server",
     "two millpond server processes and two JupyterLabs: ~45 s serial"),
    ("tests/notebooks/test_notebook_resources.py::"
     "test_a_notebook_in_a_kueue_localqueue_is_admitted_like_any_workload_and_waits_with_kueues_reason",
     "four JupyterLabs, one after another's stop: ~20 s serial"),
    ("tests/notebooks/test_notebook_resources.py::test_a_notebook_past_its_namespaces_quota_waits_naming_the_quota",
     "two JupyterLabs, one after the other's stop: ~10 s serial"),
    # tests/kuberay
    ("tests/kuberay/test_ray_waiting.py::test_a_cluster_that_may_not_run_yet_starts_nothing_and_says_why",
     "three supervisors' first admission cycles and ledger reads: 7-10 s serial"),
    # tests/datasets
    ("tests/datasets/test_operation_failures.py::test_a_web_store_that_stops_sending_fails_the_load_in_seconds",
     "22 s serial"),
    ("tests/datasets/test_operation_failures.py::test_a_host_that_never_answers_fails_the_migrate_in_seconds",
     "12 s serial"),
    ("tests/datasets/test_operation_failures.py::test_the_s3fs_fallback_fails_as_soon", "10.7 s serial (a case)"),
    ("tests/datasets/test_example_fluid_resnet.py::test_arena_trains_the_resnet_over_the_cached_image_dataset",
     "trains: 18 s serial"),
    ("tests/datasets/test_example_fluid_mnist.py::test_the_seed_flow_trains_and_archives_the_checkpoint",
     "trains: 14 s serial"),
    ("tests/datasets/test_example_fluid_mnist.py::test_a_training_job_that_never_starts_is_deleted_and_fails_the_step",
     "10.7 s serial"),
    ("tests/datasets/test_operation_liveness.py::test_a_server_start_resumes_an_operation_killed_while_it_was_down",
     "13.2 s serial"),
    ("tests/datasets/test_operation_liveness.py::test_a_killed_datamigrate_resumes_copying_only_the_missing_files",
     "13.2 s serial"),
    ("tests/datasets/test_operation_liveness.py::test_a_killed_dataload_resumes_and_fetches_only_what_is_missing",
     "12.5 s serial"),
    ("tests/datasets/test_example_fluid_mnist.py::test_a_failing_training_job_fails_the_step_naming_why",
     "trains: 69 s loaded"),
    ("tests/datasets/test_example_fluid_mnist.py::test_a_dataprocess_script_reaches_this_arena_and_this_home",
     "29 s loaded"),
    ("tests/datasets/test_cron_operations.py::test_deleting_a_dataset_deletes_its_operations_and_ends_their_processes",
     "2 cases, 57 s loaded: waits for a cron tick"),
    ("tests/datasets/test_cron_operations.py::test_a_reapplied_cron_operation_runs_its_new_schedule_in_one_process",
     "2 cases, 41 s loaded: waits for cron ticks"),
    ("tests/datasets/test_datasets_verified_paths.py::test_a_read_through_millpond_urls_repairs_the_cache_file",
     "3 cases, 55 s loaded"),
    ("tests/datasets/test_s3_root.py::test_cache_hits_reuse_s3_artifacts_while_they_exist", "40 s loaded"),
    ("tests/datasets/test_s3_root.py::test_artifacts_round_trip_through_s3", "30 s loaded"),
    ("tests/datasets/test_operation_failures.py::test_a_bucket_that_fails_every_put_fails_the_migrate_with_the_500",
     "37 s loaded"),
    ("tests/datasets/test_fuzz_manifests.py::test_any_number_in_a_count_ttl_or_size_is_accepted_only_if_it_can_work",
     "hypothesis: 34 s loaded"),
    ("tests/datasets/test_fuzz_manifests.py::test_mutated_manifest_is_accepted_or_refused", "hypothesis: 32 s loaded"),
    ("tests/datasets/test_fuzz_manifests.py::test_mutated_manifest_text_is_accepted_or_refused",
     "hypothesis: 30 s loaded"),
    # tests/kfp_v1
    ("tests/kfp_v1/test_argo_runs.py::test_corpus_row_reaches_its_expected_state",
     "a big corpus: 32 runs, 106 s loaded (.ci/run's conformance runs kfp-v1 twice)"),
    # tests/queues
    ("tests/queues/test_queued_jobs.py::test_strict_fifo_blocks_behind_its_head_and_best_effort_lets_a_smaller_job_by",
     "2 cases, 47 s loaded"),
    # tests/server
    ("tests/server/test_server_openapi_fuzz.py::test_no_request_gets_a_server_error", "schemathesis: 39 s serial"),
    ("tests/server/test_hostile_input.py::test_parsing_an_upload_does_not_stall_other_requests", "18 s serial"),
    ("tests/server/test_server_isvc.py::test_the_server_starts_a_supervisor_again_after_kill_9", "15 s serial"),
    ("tests/server/test_server_recurring.py::test_two_servers_on_one_home_start_each_scheduled_run_once",
     "13.6 s serial"),
    ("tests/server/test_server_recurring.py::test_a_deleted_pipeline_version_is_recorded_and_the_scheduler_goes_on",
     "13.5 s serial"),
    ("tests/server/test_server_recurring.py::test_a_recurring_run_of_the_old_json_layout_is_imported", "11.6 s serial"),
    # tests/seldon (measured 2026-11-29, the machine lightly loaded)
    ("tests/seldon/test_seldon_serving.py::test_seed_003s_query_against_a_seldon_deployment",
     "28 s: trains seed 003's model, serves it, queries it as the seed does"),
    ("tests/seldon/test_seldon_serving.py::test_method_parameter_and_traffic_between_predictors",
     "21 s: two predictors started, a hundred requests split between them"),
    ("tests/seldon/test_seldon_serving.py::test_mlflow_server_serves_an_mlflow_sklearn_model", "9 s"),
    ("tests/seldon/test_seldon_graphs.py::test_transformer_router_and_two_models", "20 s: five processes"),
    ("tests/seldon/test_seldon_graphs.py::test_combiner_over_a_custom_model_and_a_sklearn_server",
     "22 s: a unit killed, restarted 3 s late"),
    ("tests/seldon/test_seldon_graphs.py::test_built_in_units", "30 s: three deployments"),
    # tests/serving
    ("tests/serving/test_serving_cli.py::test_deploy_component_in_a_pipeline_outputs_its_url", "14 s serial"),
    ("tests/serving/test_serving_cli.py::test_seed_003s_query_script_with_only_the_address_changed", "12.5 s serial"),
    ("tests/serving/test_serving_cli.py::"
     "test_deploy_step_keeps_its_runs_service_refuses_a_persons_and_fails_on_a_broken_model",
     "11.4 s serial"),
    ("tests/serving/test_serving_supervisor.py::test_a_pvc_is_a_named_volume_or_a_datasets_shared_mount",
     "10.3 s serial"),
    # measured at load 15-30 (``-n 4``, other work on the 2 cores): a test over 20 s, or cases adding to 40 s
    ("tests/cli/test_apply_refusals.py::test_apply_refuses_what_cannot_work", "15 cases, 42 s loaded"),
    ("tests/cli/test_parsers_at_call_sites.py::test_metadata_ttl_in_each_notation", "6 cases, 49 s loaded"),
    ("tests/datasets/test_cron_operations.py::"
     "test_removing_the_home_ends_a_scheduled_operation", "2 cases, 28 s loaded"),
    ("tests/datasets/test_data_operations.py::"
     "test_a_failing_step_stops_the_flow_and_leaves_the_data_alone", "2 cases, 32 s loaded"),
    ("tests/datasets/test_datasets_cache.py::test_the_index_survives_a_restart", "24 s loaded"),
    ("tests/datasets/test_datasets_fuse.py::test_a_cache_file_replaced_by_another_process_is_read_anew", "20 s loaded"),
    ("tests/datasets/test_example_fluid_mnist.py::test_without_data_the_flow_stops_at_the_first_step_and_says_why",
     "24 s loaded"),
    ("tests/datasets/test_example_fluid_resnet.py::"
     "test_train_py_without_an_image_folder_is_one_error_line", "25 s loaded"),
    ("tests/datasets/test_operation_failures.py::test_a_closed_port_or_an_unknown_host_fails_the_migrate_saying_so",
     "2 cases, 41 s loaded"),
    ("tests/datasets/test_operation_failures.py::"
     "test_a_corpus_dataload_over_an_unreachable_host_fails", "2 cases, 38 s loaded"),
    ("tests/datasets/test_operation_failures.py::"
     "test_a_flow_stops_at_the_failed_step_and_wait_raises_its_reason", "22 s loaded"),
    ("tests/datasets/test_operation_failures.py::test_a_refused_request_is_not_retried", "23 s loaded"),
    ("tests/datasets/test_operation_liveness.py::"
     "test_a_killed_step_waiting_on_run_after_fails_and_wait_says_why", "21 s loaded"),
    ("tests/datasets/test_s3_root.py::test_unwritable_s3_root_fails_the_task", "2 cases, 41 s loaded"),
    ("tests/queues/test_queued_jobs.py::"
     "test_a_higher_priority_preempts_the_job_which_is_requeued_and_resumes_from_its_checkpoint",
     "2 cases, 83 s loaded"),
    ("tests/queues/test_queued_tasks.py::"
     "test_a_runs_tasks_wait_for_their_queues_quota_saying_why", "2 cases, 35 s loaded"),
    ("tests/queues/test_queued_tasks.py::"
     "test_an_evicted_task_is_stopped_and_runs_again_when_readmitted_uncounted_by_its_retries",
     "2 cases, 101 s loaded"),
    ("tests/runs/test_cached_reruns.py::"
     "test_a_thousand_iterations_ending_at_once_do_not_exhaust_the_stack", "56 s loaded"),
    ("tests/runs/test_cached_reruns.py::"
     "test_second_run_of_a_loop_pipeline_succeeds_from_the_cache", "7 cases, 55 s loaded"),
    ("tests/runs/test_cached_reruns.py::test_second_run_through_kfp_client_succeeds_from_the_cache", "34 s loaded"),
    ("tests/runs/test_cancellation.py::test_a_signal_ends_an_endless_walk_with_no_process", "32 s loaded"),
    ("tests/runs/test_cancellation.py::test_a_signal_while_tasks_publish", "41 s loaded"),
    ("tests/runs/test_cancellation.py::"
     "test_a_stop_signal_cancels_the_run_and_stops_every_task", "4 cases, 131 s loaded"),
    ("tests/runs/test_cancellation.py::test_every_kind_of_task_is_stopped", "44 s loaded"),
    ("tests/runs/test_cancellation.py::test_only_retry_runs_a_cancelled_run_again", "46 s loaded"),
    ("tests/runs/test_cancellation.py::"
     "test_server_start_resumes_a_killed_run_but_never_a_cancelled_one", "82 s loaded"),
    ("tests/runs/test_cancellation.py::test_tasks_do_not_outlive_an_engine_killed_with_sigkill", "31 s loaded"),
    ("tests/runs/test_cancellation.py::"
     "test_tasks_queued_for_a_worker_when_the_run_is_cancelled_touch_nothing", "32 s loaded"),
    ("tests/runs/test_cancellation.py::test_terminate_through_the_api_stops_the_tasks", "23 s loaded"),
    ("tests/runs/test_conformance_runner.py::test_a_corpus_with_expected_tsv_is_judged_by_its_rows", "31 s loaded"),
    ("tests/runs/test_history.py::test_two_concurrent_runs_on_one_home", "2 cases, 59 s loaded"),
    ("tests/runs/test_ir_validation.py::test_cli_refuses_before_the_run", "9 cases, 171 s loaded"),
    ("tests/katib/test_upstream_examples.py::test_katib_examples_run_to_succeeded_with_an_optimal_trial",
     "8 cases, ~150 s serial: Katib's examples, 12 trials each of host processes ~2.5 s long"),
    ("tests/katib/test_experiments.py::test_a_killed_supervisor_resumes_without_losing_or_repeating_a_trial",
     "~12 s serial: six 1.5 s trials around a kill -9"),
    ("tests/katib/test_experiments.py::test_long_running_restarts_when_max_trial_count_is_raised",
     "~12 s serial: two Experiments run to the end, one of them twice"),
)]
SLOW_TESTS = {entry.test: entry.why for entry in SLOW}


def _measured(path: Path) -> dict[str, float]:
    """tests/durations.tsv: test cases (node ids, parametrizations included) measured at 2.5 s or more
    under ``-n 4`` on two cores, written by scripts/measure_slow.py; each is ``slow``, so the inner loop
    keeps to its 3 minutes as the suite grows. Re-measure after a change that makes many tests slower."""
    if not path.is_file():
        return {}
    rows = (line.split("\t") for line in path.read_text().splitlines() if line and not line.startswith("#"))
    return {test: float(seconds) for test, seconds in rows}


MEASURED_SLOW = _measured(Path(__file__).with_name("durations.tsv"))


def _source(item: pytest.Item) -> str:
    function = getattr(item, "function", None)
    try:
        return inspect.getsource(function) if function is not None else ""
    except (OSError, TypeError):
        return ""


def markers_for(item: pytest.Item) -> list[str]:
    """The markers ``item`` earns from its fixtures (those it names and those it asks for with
    ``request.getfixturevalue``), its use of Chromium and the slow list."""
    fixtures = set(getattr(item, "fixturenames", ()))
    source = _source(item)
    fixtures |= {name for name in (*FIXTURE_MARKERS, *KFP1_FIXTURES) if f'getfixturevalue("{name}")' in source}
    names = {marker for fixture, marker in FIXTURE_MARKERS.items() if fixture in fixtures}
    if fixtures & KFP1_FIXTURES:  # a test that builds kfp 1.8's side environment elsewhere builds it twice
        names.add("kfp1")
    if any(call in source for call in BROWSER_CALLS):
        names.add("ui")
    if any(call in source for call in CONTAINER_CALLS):
        names.add("containers")
    if item.nodeid.split("[")[0] in SLOW_TESTS or item.nodeid in MEASURED_SLOW or names & SLOW_BY_NATURE:
        names.add("slow")
    return sorted(names)


GROUPS_ENV = "MILLPOND_TEST_GROUPS"  # the folder where workers write {nodeid: group}, set by the controller


def apply_markers(items: list[pytest.Item], groups_first: bool = False) -> None:
    """Mark each item, and put the heavy ones in their xdist group.

    ``groups_first`` (under xdist) moves the grouped tests to the front, in GROUPS' order: xdist hands
    out work in collection order, and a group is one long unit (the Ray tests take minutes on one
    worker), so it must start first or it ends last, alone.
    """
    group_of: dict[int, int] = {}
    for index, item in enumerate(items):
        names = markers_for(item)
        for name in names:
            item.add_marker(name)
        rank = next((rank for rank, (marker, _) in enumerate(GROUPS) if marker in names), None)
        if rank is not None:
            item.add_marker(pytest.mark.xdist_group(GROUPS[rank][1]))
            group_of[index] = rank
    if groups_first and group_of:
        order = sorted(range(len(items)), key=lambda index: (group_of.get(index, len(GROUPS)), index))
        grouped = {items[index].nodeid: GROUPS[rank][1] for index, rank in group_of.items()}
        items[:] = [items[index] for index in order]
        folder, worker = os.environ.get(GROUPS_ENV), os.environ.get("PYTEST_XDIST_WORKER")
        if folder and worker:
            (Path(folder) / f"{worker}.json").write_text(json.dumps(grouped))


def make_group_scheduler(config: pytest.Config, log: object) -> object:
    """xdist's load scheduling with one unit per group (as ``--dist loadgroup`` means), groups read from
    what the workers wrote: every other test is a unit of its own."""
    from xdist.scheduler import LoadScopeScheduling

    folder = Path(os.environ[GROUPS_ENV])

    class GroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
        _groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self._groups is None:
                self._groups = {}
                for written in sorted(folder.glob("*.json")):
                    self._groups.update(json.loads(written.read_text()))
            return self._groups.get(nodeid, nodeid)

    return GroupScheduling(config, log)
