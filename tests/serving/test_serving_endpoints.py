"""The endpoints file an InferenceService's supervisor writes and the gateway reads."""

from __future__ import annotations

import subprocess
import sys

import pytest

from millpond.errors import UserError
from millpond.runners.processes import ProcessIdentity
from millpond.serving import endpoints
from millpond.serving.endpoints import Endpoints, Revision


def _endpoints(identity: ProcessIdentity, name: str = "digits") -> Endpoints:
    return Endpoints(name=name, namespace="default", uid="u1", model_name=name, protocol="v1", port=4321,
                     revisions=(Revision("digits-predictor-00001", 90, ("http://127.0.0.1:1",)),
                                Revision("digits-predictor-00002", 10, ())),
                     supervisor_pid=identity.pid, supervisor_ticks=identity.start, updated="2026-11-24T00:00:00Z")


def test_written_endpoints_read_back_while_their_writer_runs(home):
    written = _endpoints(ProcessIdentity.own())
    endpoints.write(written)
    assert endpoints.read("default", "digits") == written
    assert written.ready
    endpoints.clear("default", "digits")
    assert endpoints.read("default", "digits") is None
    endpoints.clear("default", "digits")  # twice: nothing to forget is no error


def test_endpoints_of_a_dead_supervisor_are_not_read(home):
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    identity = ProcessIdentity.of(child.pid)
    child.wait()
    endpoints.write(_endpoints(identity))
    assert endpoints.read_file("default", "digits") is not None
    assert endpoints.read("default", "digits") is None


def test_a_damaged_file_reads_as_none(home):
    endpoints.write(_endpoints(ProcessIdentity.own()))
    (endpoints.folder("default", "digits") / endpoints.FILE_NAME).write_text('{"name": ')
    assert endpoints.read("default", "digits") is None


@pytest.mark.parametrize("name", ["..", "a/b", "", "x\x00"])
def test_names_never_leave_the_serving_folder(home, name):
    with pytest.raises(UserError):
        endpoints.folder("default", name)
    with pytest.raises(UserError):
        endpoints.replica_log("default", "digits", name, 0)
