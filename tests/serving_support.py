"""What the serving tests share: the digits classifier saved as KServe's sklearnserver finds it, and
the endpoints file a supervisor would write (this test process standing in for the supervisor)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from millpond.runners.processes import ProcessIdentity
from millpond.serving import endpoints
from millpond.serving.endpoints import Endpoints, Revision
from tests.serving.test_model_server import Served, stop


def train_digits(model_dir: Path) -> tuple[Path, Any, Any]:
    """The digits classifier in ``model_dir/model.joblib``, the estimator, and 20 rows it was not trained on."""
    import joblib
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression

    x, y = load_digits(return_X_y=True)
    model = LogisticRegression(max_iter=300).fit(x[:1500], y[:1500])
    joblib.dump(model, model_dir / "model.joblib")
    return model_dir, model, x[1500:1520]


def publish(name: str, *revisions: tuple[int, list[str]], namespace: str = "default") -> None:
    """Write ``name``'s endpoints: revision i+1 gets ``revisions[i]`` = (percent, replica base URLs)."""
    me = ProcessIdentity.own()
    endpoints.write(Endpoints(
        name=name, namespace=namespace, uid=f"uid-{name}", model_name="digits", protocol="v1", port=0,
        revisions=tuple(Revision(f"{name}-predictor-{i + 1:05d}", percent, tuple(urls))
                        for i, (percent, urls) in enumerate(revisions)),
        supervisor_pid=me.pid, supervisor_ticks=me.start, updated="2026-11-24T00:00:00Z"))


def end(served: Served) -> None:
    """Stop a model server (SIGTERM, then SIGKILL) if it still runs, and close its pipes."""
    if served.proc.poll() is None:
        stop(served)
    for pipe in (served.proc.stdout, served.proc.stderr):
        if pipe is not None:
            pipe.close()
