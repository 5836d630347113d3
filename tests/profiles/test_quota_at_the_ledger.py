"""A namespace's ResourceQuota charged at the machine's ledger: the grant that would pass a hard limit is refused
with kube-apiserver's ``exceeded quota`` line, another namespace is not charged, a released grant (or a holder
that died) makes room again, and every quota key counts what Kubernetes' quota admission counts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from millpond.runners.processes import ProcessIdentity, own_identity
from millpond.scheduling import Holder, Ledger, Request
from millpond.scheduling.resource_quota import Charge, QuotaLimits, amount, exceeded, limits_of, total
from millpond.scheduling.sharing import GpuShare
from millpond.settings import load_settings
from millpond.store.resources import ResourceStore
from millpond.store.training import JobStore
from tests.training_support import arena

GIB = 2**30


def _quota(namespace: str, hard: dict[str, str]) -> None:
    ResourceStore().apply([{"apiVersion": "v1", "kind": "ResourceQuota",
                            "metadata": {"name": "kf-resource-quota", "namespace": namespace},
                            "spec": {"hard": hard}}])


@pytest.fixture
def ledger(home: Path, monkeypatch: pytest.MonkeyPatch) -> Ledger:
    monkeypatch.setenv("MILLPOND_FAKE_GPUS", "4x16Gi")
    return Ledger(load_settings())


def _holder(name: str, namespace: str, pods: int = 1) -> Holder:
    pid, ticks = own_identity()
    return Holder("job", name, pid, ticks, namespace, pods)


def test_the_grant_that_would_pass_the_quota_waits_with_kubernetes_words(ledger: Ledger) -> None:
    _quota("team", {"requests.nvidia.com/gpu": "2"})
    one = Request(gpus=1)
    first = ledger.try_acquire(one, _holder("a", "team"))
    second = ledger.try_acquire(one, _holder("b", "team"))
    assert first is not None and second is not None
    assert ledger.try_acquire(one, _holder("c", "team")) is None
    assert ledger.why_waiting(one, "team") == (
        "exceeded quota: kf-resource-quota, requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=2, "
        "limited: requests.nvidia.com/gpu=2")
    assert ledger.try_acquire(one, _holder("elsewhere", "other")) is not None  # another namespace: not charged
    nowhere = ledger.try_acquire(one, _holder("nowhere", ""))  # no namespace: no quota, the machine's 4th GPU
    assert nowhere is not None and ledger.try_acquire(one, _holder("d", "other")) is None  # the machine is full
    assert ledger.namespace_usage("team")["requests.nvidia.com/gpu"] == 2000
    ledger.release(first.id)
    ledger.release(nowhere.id)
    assert ledger.try_acquire(one, _holder("c", "team")) is not None


def test_a_dead_holders_charge_is_reclaimed(ledger: Ledger) -> None:
    _quota("team", {"pods": "1"})
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    gone = Holder("job", "dead", child.pid, ProcessIdentity.of(child.pid).start or "1", "team")
    ledger.try_acquire(Request(cpu_millis=100), gone)  # its process has ended: reclaimed at the next request
    assert ledger.try_acquire(Request(cpu_millis=100), _holder("alive", "team")) is not None
    assert ledger.why_waiting(Request(cpu_millis=100), "team").startswith("exceeded quota: kf-resource-quota, "
                                                                          "requested: pods=1, used: pods=1")


def test_every_quota_key_counts_what_kubernetes_counts(ledger: Ledger) -> None:
    _quota("team", {"requests.cpu": "1500m", "limits.memory": "1Gi", "pods": "3"})
    wanted = Request(cpu_millis=1000, memory_bytes=GIB // 2)
    assert ledger.try_acquire(wanted, _holder("a", "team", pods=2)) is not None
    refused = ledger.why_waiting(wanted, "team")
    assert refused == ("exceeded quota: kf-resource-quota, requested: requests.cpu=1, used: requests.cpu=1, "
                       "limited: requests.cpu=1500m")  # only what is exceeded is named (pods: 3 of 3 fits)
    assert ledger.try_acquire(Request(cpu_millis=500), _holder("b", "team")) is not None  # now at 3 pods
    assert "requested: pods=1, used: pods=3, limited: pods=3" in ledger.why_waiting(Request(memory_bytes=1), "team")
    used = total([Charge(cpu_millis=500, memory_bytes=GIB, gpus=1, share_bytes=3 * GIB, pods=2)])
    assert (used["cpu"], used["limits.memory"], used["requests.nvidia.com/gpu"], used["requests.aliyun.com/gpu-mem"],
            used["count/pods"]) == (500, GIB * 1000, 1000, 3000, 2000)
    assert amount("requests.memory", GIB * 1000) == "1Gi" and amount("requests.aliyun.com/gpu-mem", 3000) == "3"
    share = Request(shares=(GpuShare(6 * GIB),))
    assert exceeded([limits_of("shares", {"requests.aliyun.com/gpu-mem": "4"})], {},
                    Charge(share_bytes=share.shares[0].memory_bytes)) == (
        "exceeded quota: shares, requested: requests.aliyun.com/gpu-mem=6, used: requests.aliyun.com/gpu-mem=0, "
        "limited: requests.aliyun.com/gpu-mem=4")
    assert exceeded([QuotaLimits("q", {"requests.nvidia.com/gpu": 1000})], {}, Charge(cpu_millis=100)) is None


def test_a_job_that_could_never_fit_its_namespaces_quota_is_refused_at_submit(ledger: Ledger, capsys) -> None:
    _quota("team", {"requests.nvidia.com/gpu": "2"})
    result = arena(capsys, "submit", "pytorch", "--name", "big", "-n", "team", "--workers", "3", "--gpus", "1", "true")
    assert result.code == 2 and result.out == ""
    assert result.err.strip() == (
        "error: the job big can never run here: exceeded quota: kf-resource-quota, requested: "
        "requests.nvidia.com/gpu=3, used: requests.nvidia.com/gpu=0, limited: requests.nvidia.com/gpu=2")
    assert JobStore().list(None) == []
