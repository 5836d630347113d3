"""Kubernetes' own documents beside a manifest (the corpus protocol): Secrets and ConfigMaps kept in the
home's store, Namespace/ServiceAccount/RBAC kept as objects (``millpond.core``, issue 30: they were ignored
with one info line before) with one info line for what is not enforced, all or nothing with the batch."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from millpond.store.secrets import ConfigStore, MissingConfig

DATASET = """\
apiVersion: data.fluid.io/v1alpha1
kind: Dataset
metadata: {name: demo}
spec:
  mounts:
    - mountPoint: s3://bucket/data/
      name: data
      encryptOptions:
        - {name: aws.accessKeyId, valueFrom: {secretKeyRef: {name: mykeys, key: aws.accessKeyId}}}
        - {name: aws.secretKey, valueFrom: {secretKeyRef: {name: mykeys, key: aws.secretKey}}}
"""
SECRET = """\
apiVersion: v1
kind: Secret
metadata: {name: mykeys, namespace: default}
type: Opaque
data: {aws.accessKeyId: QUtJRA==}
stringData: {aws.secretKey: s3cr3t}
"""
ALONGSIDE = """\
apiVersion: v1
kind: Namespace
metadata: {name: team}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: trainer, namespace: team}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: rb, namespace: team}
subjects: [{kind: ServiceAccount, name: trainer}]
roleRef: {kind: Role, name: r, apiGroup: rbac.authorization.k8s.io}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {mode: fast}
"""


def _apply(cli, tmp_path: Path, text: str):
    path = tmp_path / "batch.yaml"
    path.write_text(text)
    return cli("apply", "-f", path)


def test_a_secret_beside_the_dataset_that_reads_it_is_kept_first(cli, home: Path, tmp_path: Path) -> None:
    result = _apply(cli, tmp_path, SECRET + "---\n" + DATASET)
    assert result.code == 0, result.err
    assert result.out.splitlines() == ["secret/mykeys created", "dataset.data.fluid.io/demo created"]
    assert ConfigStore(home).get("secret", "mykeys") == {"aws.accessKeyId": "AKID", "aws.secretKey": "s3cr3t"}
    assert "s3cr3t" not in result.out + result.err
    again = _apply(cli, tmp_path, SECRET + "---\n" + DATASET)
    assert "secret/mykeys unchanged" in again.out


def test_namespaces_accounts_and_rbac_are_kept_with_one_info_line_each_and_config_maps_kept_first(
    cli, home: Path, tmp_path: Path
) -> None:
    result = _apply(cli, tmp_path, ALONGSIDE)
    assert result.code == 0, result.err
    assert result.out.splitlines() == ["configmap/settings created", "namespace/team created",
                                       "serviceaccount/trainer created",
                                       "rolebinding.rbac.authorization.k8s.io/rb created"]
    infos = result.err.splitlines()
    assert len(infos) == 2 and all(line.startswith("info: ") for line in infos), infos
    assert {line.split()[1] for line in infos} == {"ServiceAccount", "RoleBinding"}
    assert ConfigStore(home).get("configmap", "settings") == {"mode": "fast"}


@pytest.mark.parametrize(("document", "message"), [
    ("apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: {k: '!!not base64'}\n", "data.k is not base64"),
    ("apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: {k: '//79'}\n", "data.k is not base64 of UTF-8"),
    ("apiVersion: v1\nkind: Secret\nmetadata: {name: Bad_Name}\nstringData: {k: v}\n", "invalid secret name"),
    ("apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {'../k': v}\n", "invalid secret key"),
    ("apiVersion: v1\nkind: Secret\nmetadata: {}\nstringData: {k: v}\n", "metadata.name is required"),
    ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\nbinaryData: {k: AAA=}\n", "binaryData"),
    ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: [1, 2]\n", "must be a map"),
    ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {k: 3}\n", "must be a string"),
])
def test_a_bad_secret_or_config_map_is_one_line_and_nothing_of_the_batch_is_kept(
    cli, home: Path, tmp_path: Path, document: str, message: str
) -> None:
    result = _apply(cli, tmp_path, document + "---\n" + SECRET.replace("mykeys", "other") + "---\n" + DATASET)
    assert result.code == 2
    assert len(result.err.strip().splitlines()) == 1 and message in result.err, result.err
    with pytest.raises(MissingConfig):
        ConfigStore(home).get("secret", "other")
    assert cli("get", "dataset", "demo").code != 0


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.text(min_size=0, max_size=8), st.one_of(st.text(max_size=8), st.integers(), st.none()),
                       max_size=4))
def test_fuzzed_secret_data_is_kept_or_refused_in_one_line(tmp_path_factory, data: dict) -> None:
    from millpond.errors import UserError
    from millpond.store.config_documents import check

    doc = yaml.safe_load(yaml.safe_dump({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                                         "stringData": data}))
    try:
        planned, _ = check([("f.yaml", 1, doc)])
    except UserError as exc:
        assert "\n" not in str(exc)
        return
    assert planned[0].data == data


def test_the_server_apply_route_keeps_the_batch_secret_and_never_echoes_it(home: Path) -> None:
    import json
    import urllib.request

    from tests.server_support import serving

    for served in serving():
        request = urllib.request.Request(served.url + "/apis/millpond/v1/fluid/apply",
                                         data=(SECRET + "---\n" + DATASET + "---\n" + ALONGSIDE).encode(),
                                         headers={"Content-Type": "application/yaml"}, method="POST")
        with urllib.request.urlopen(request, timeout=30) as answer:
            body = answer.read().decode()
        assert "s3cr3t" not in body and "QUtJRA" not in body
        items = json.loads(body)["items"]
        assert [(i["kind"], i["name"], i["action"]) for i in items] == [
            ("Secret", "mykeys", "created"), ("ConfigMap", "settings", "created"), ("Namespace", "team", "created"),
            ("ServiceAccount", "trainer", "created"), ("RoleBinding", "rb", "created"), ("Dataset", "demo", "created")]
        assert ConfigStore(home).get("secret", "mykeys")["aws.secretKey"] == "s3cr3t"
