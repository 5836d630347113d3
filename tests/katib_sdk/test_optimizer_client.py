"""The Kubeflow SDK's ``OptimizerClient`` (``kubeflow`` 0.5.0, ``kubeflow.optimizer``), unchanged, against
``millpond server``: it optimizes a TrainJob template (a Python function on Trainer's upstream
``torch-distributed`` runtime) over a search space, which it writes as a Katib Experiment whose trials are
TrainJobs (``primaryContainerName: node``, the StdOut collector reading ``loss=...``).

It runs in the Kubeflow SDKs' side environment (``tests/kube_sdk_env.py``) with the kubeconfig ``millpond
kubeconfig`` writes for ``millpond server --tls`` with a token: ``optimize``, ``wait_for_job_status``,
``get_job``, ``list_jobs``, ``get_best_results`` (with the best trial's TrainJob), ``get_job_events`` and
``delete_job``.
"""

from __future__ import annotations

from pathlib import Path

from tests.kube.test_sdk_clients import TORCH_DISTRIBUTED
from tests.kube_sdk_env import SdkEnv, run_sdk
from tests.kube_support import Kubectl

OPTIMIZE = """\
    import json
    import time

    from kubeflow.optimizer import Objective, OptimizerClient, RandomSearch, Search, TrainJobTemplate, TrialConfig
    from kubeflow.trainer import CustomTrainer


    def train(x):
        # What each trial's node runs (the SDK sends its source); the value arrives as a string.
        print(f"loss={(float(x) - 2) ** 2:.6f}", flush=True)


    client = OptimizerClient()
    name = client.optimize(
        TrainJobTemplate(trainer=CustomTrainer(func=train, num_nodes=1), runtime="torch-distributed"),
        search_space={"x": Search.uniform(min=-4, max=6)}, objectives=[Objective(metric="loss")],
        algorithm=RandomSearch(random_state=5), trial_config=TrialConfig(num_trials=3, parallel_trials=2))
    # The SDK reads each Trial's TrainJob as soon as it lists the Trial; the experiment's controller creates that
    # TrainJob at its next tick (up to ~1 s later), where Katib's trial controller does it at once: a poll that
    # falls in between fails "TrainJob not found", so the test waits again (only that error; for up to a minute).
    for _ in range(120):
        try:
            done = client.wait_for_job_status(name, timeout=300, polling_interval=1)
            break
        except RuntimeError as exc:
            if "Failed to list Trials" not in str(exc) or "not found" not in str(exc.__cause__.__cause__):
                raise
            time.sleep(0.5)
    job = client.get_job(name)
    best = client.get_best_results(name)
    listed = [one.name for one in client.list_jobs()]
    events = sorted({(e.involved_object_kind, e.reason) for e in client.get_job_events(name)})
    seen = {
        "name": name, "status": done.status, "trials": sorted([t.name, t.parameters, [[m.name, m.latest] for m in
                                                                                       t.metrics]] for t in job.trials),
        "search": {key: [space.min, space.max] for key, space in job.search_space.items()},
        "objectives": [[o.metric, o.direction.value] for o in job.objectives],
        "best": [best.parameters, [[m.name, m.min, m.max, m.latest] for m in best.metrics]],
        "listed": listed, "events": events}
    client.delete_job(name)
    print(json.dumps({**seen, "left": [one.name for one in client.list_jobs()]}))
"""


def test_optimizer_client_optimizes_a_trainjob_template_and_reads_its_best_results(
        kube_sdks: SdkEnv, kubectl: Kubectl, tmp_path: Path) -> None:
    runtime = tmp_path / "torch_distributed.yaml"
    runtime.write_text(TORCH_DISTRIBUTED)
    kubectl.ok("apply", "-f", str(runtime))
    seen = run_sdk(kube_sdks, kubectl.config, tmp_path, "optimize", OPTIMIZE, timeout=400)
    assert seen["status"] == "Complete", seen
    assert seen["search"] == {"x": [-4.0, 6.0]} and seen["objectives"] == [["loss", "minimize"]]
    trials = seen["trials"]
    assert len(trials) == 3 and all(name.startswith(f"{seen['name']}-") for name, _, _ in trials)
    losses = {}
    for name, parameters, metrics in trials:
        x = float(parameters["x"])
        assert -4 <= x <= 6
        (metric, latest), = metrics
        assert metric == "loss" and abs(float(latest) - (x - 2) ** 2) < 1e-5
        losses[name] = float(latest)
    best_parameters, best_metrics = seen["best"]
    (metric, low, _high, latest), = best_metrics
    assert metric == "loss" and float(low) == float(latest) == min(losses.values())
    assert abs((float(best_parameters["x"]) - 2) ** 2 - float(latest)) < 1e-5
    assert seen["name"] in seen["listed"] and seen["name"] not in seen["left"]
    assert {kind for kind, _reason in seen["events"]} <= {"Experiment", "Trial"}  # the events it filters to
