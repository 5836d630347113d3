"""``millpond server`` over HTTPS: its own CA and certificate in the home, made once, reused, renewed; the
user's own certificate; and every client (Python's ssl, kfp.Client) trusting the CA, none without it.

The certificate rules are tested on ``server.tls`` directly (a moment in the past makes an expired
certificate); what a client sees goes over real TLS to ``millpond server`` in a process of its own.
"""

# no "from __future__ import annotations": kfp reads the components' annotations as types

import datetime as dt
import ipaddress
import json
import os
import socket
import ssl
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from millpond.cli.server import choose_tls
from millpond.errors import UserError
from millpond.server import tls
from tests.server_support import Served, module_home
from tests.tls_support import MILLPOND, TlsServer, https_call, served_certificate

kfp = pytest.importorskip("kfp")

TOKEN = "tls-test-token"
LONG_AGO = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=400)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _certificate(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def _names(certificate: x509.Certificate) -> set[str]:
    names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return {*names.get_values_for_type(x509.DNSName), *map(str, names.get_values_for_type(x509.IPAddress))}


# --- the certificate in the home --------------------------------------------------------------

def test_the_ca_and_certificate_are_made_once_with_owner_only_keys(tmp_path: Path) -> None:
    subjects = tls.Subjects.of([socket.gethostname(), "pond.example", "*.lab.example", "*", "10.0.0.7"])
    files = tls.ensure_certificate(tmp_path, subjects)
    folder = tmp_path / "tls"
    assert files == tls.CertificateFiles(folder / "server.crt", folder / "server.key", folder / "ca.crt")
    assert _mode(folder) == 0o700 and _mode(folder / "ca.key") == 0o600 and _mode(folder / "server.key") == 0o600
    server, ca = _certificate(files.certificate), _certificate(folder / "ca.crt")
    assert _names(server) == {"localhost", "127.0.0.1", "::1", socket.gethostname().lower(), "pond.example",
                              "*.lab.example", "10.0.0.7"}
    server.verify_directly_issued_by(ca)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    before = {name: (folder / name).read_bytes() for name in ("ca.crt", "ca.key", "server.crt", "server.key")}
    tls.ensure_certificate(tmp_path, tls.Subjects.of(["pond.example"]))  # fewer names: still covered, reused
    assert before == {name: (folder / name).read_bytes() for name in before}
    assert not [p.name for p in folder.iterdir() if p.name.startswith(".") and p.name != ".lock"]  # no leftovers


def test_an_expired_server_certificate_is_renewed_under_the_same_ca(tmp_path: Path) -> None:
    subjects = tls.Subjects.of([])
    tls.ensure_certificate(tmp_path, subjects, now=LONG_AGO)
    folder = tmp_path / "tls"
    old_ca, old_server = (folder / "ca.crt").read_bytes(), _certificate(folder / "server.crt")
    assert old_server.not_valid_after_utc < dt.datetime.now(dt.timezone.utc)  # expired
    files = tls.ensure_certificate(tmp_path, subjects)
    renewed = _certificate(files.certificate)
    assert (folder / "ca.crt").read_bytes() == old_ca  # kubeconfigs written before still trust it
    assert renewed.serial_number != old_server.serial_number
    assert renewed.not_valid_after_utc > dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=300)
    renewed.verify_directly_issued_by(_certificate(folder / "ca.crt"))


def test_an_expired_ca_is_replaced_and_signs_a_new_certificate(tmp_path: Path) -> None:
    subjects = tls.Subjects.of([])
    tls.ensure_certificate(tmp_path, subjects, now=dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=3700))
    old_ca = _certificate(tmp_path / "tls" / "ca.crt")
    files = tls.ensure_certificate(tmp_path, subjects)
    new_ca = _certificate(tmp_path / "tls" / "ca.crt")
    assert new_ca.serial_number != old_ca.serial_number
    _certificate(files.certificate).verify_directly_issued_by(new_ca)


def test_an_address_the_certificate_does_not_cover_reissues_it(tmp_path: Path) -> None:
    first = _certificate(tls.ensure_certificate(tmp_path, tls.Subjects.of([])).certificate)
    ca = (tmp_path / "tls" / "ca.crt").read_bytes()
    second = _certificate(tls.ensure_certificate(tmp_path, tls.Subjects.of(["192.0.2.10", "pond.example"])).certificate)
    assert second.serial_number != first.serial_number and {"192.0.2.10", "pond.example"} <= _names(second)
    assert (tmp_path / "tls" / "ca.crt").read_bytes() == ca


def test_a_damaged_or_mismatched_key_is_replaced(tmp_path: Path) -> None:
    files = tls.ensure_certificate(tmp_path, tls.Subjects.of([]))
    files.key.write_text("not a key")
    renewed = tls.ensure_certificate(tmp_path, tls.Subjects.of([]))
    tls.server_context(renewed)  # the pair loads: key and certificate belong together
    other = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    files.key.write_bytes(other)
    tls.server_context(tls.ensure_certificate(tmp_path, tls.Subjects.of([])))
    assert _mode(files.key) == 0o600


def test_when_tls_is_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MILLPOND_TLS", raising=False)
    assert choose_tls(None, None, None, "127.0.0.1") is False  # loopback: plain HTTP as before
    assert choose_tls(None, None, None, "localhost") is False
    assert choose_tls(None, None, None, "0.0.0.0") is True  # beyond loopback: the token must not cross in clear
    assert choose_tls(None, None, None, "192.0.2.1") is True
    assert choose_tls(True, None, None, "127.0.0.1") is True and choose_tls(False, None, None, "0.0.0.0") is False
    monkeypatch.setenv("MILLPOND_TLS", "on")
    assert choose_tls(None, None, None, "127.0.0.1") is True
    assert choose_tls(False, None, None, "127.0.0.1") is False  # the flag wins
    monkeypatch.setenv("MILLPOND_TLS", "maybe")
    with pytest.raises(UserError, match="MILLPOND_TLS"):
        choose_tls(None, None, None, "127.0.0.1")
    monkeypatch.setenv("MILLPOND_TLS", "0")
    assert choose_tls(None, None, None, "0.0.0.0") is False
    monkeypatch.delenv("MILLPOND_TLS")
    cert = tmp_path / "c.pem"
    assert choose_tls(None, cert, cert, "127.0.0.1") is True
    with pytest.raises(UserError, match="go together"):
        choose_tls(None, cert, None, "127.0.0.1")
    with pytest.raises(UserError, match="--no-tls"):
        choose_tls(False, cert, cert, "127.0.0.1")


# --- a real server over HTTPS ---------------------------------------------------------------

@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from module_home(tmp_path_factory, "tls")


@pytest.fixture(scope="module")
def server(home: Path) -> Iterator[TlsServer]:
    """Beyond loopback with a token and no --tls: HTTPS by default."""
    token_file = home.parent / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    served = TlsServer(home, ["--host", "0.0.0.0", "--token-file", str(token_file)], token=TOKEN)
    yield served
    served.stop()


def test_the_server_answers_https_to_a_client_that_trusts_its_ca(server: TlsServer, home: Path) -> None:
    assert https_call(server.port, "/apis/v2beta1/healthz", server.ca, TOKEN)[0] == 200
    assert https_call(server.port, "/apis/v2beta1/runs", server.ca)[0] == 401  # the token still required
    assert https_call(server.port, "/apis/v2beta1/healthz", server.ca, TOKEN, host="localhost")[0] == 200
    assert f"listening on https://0.0.0.0:{server.port} (clients trust {home / 'tls' / 'ca.crt'})" in server.log()
    [record] = list((home / "servers").glob("*.json"))
    assert _mode(record) == 0o600
    written = json.loads(record.read_text())
    assert written["url"] == server.url and written["ca_file"] == str(home / "tls" / "ca.crt")
    assert written["token_required"] is True and TOKEN not in record.read_text()


def test_a_client_without_the_ca_is_refused(server: TlsServer) -> None:
    with pytest.raises(ssl.SSLCertVerificationError):
        https_call(server.port, "/apis/v2beta1/healthz", None, TOKEN)  # the system's CAs only
    other_home = server.log_path.parent / "other"
    tls.ensure_certificate(other_home, tls.Subjects.of([]))  # another home's CA is not this server's
    with pytest.raises(ssl.SSLCertVerificationError):
        https_call(server.port, "/apis/v2beta1/healthz", other_home / "tls" / "ca.crt", TOKEN)


def test_plain_http_to_the_https_port_gets_no_answer(server: TlsServer) -> None:
    import http.client

    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        connection.request("GET", "/apis/v2beta1/healthz", headers={"Authorization": f"Bearer {TOKEN}"})
        status = connection.getresponse().status
    except (OSError, http.client.HTTPException):
        status = None
    finally:
        connection.close()
    assert status in (None, 400)  # never the API's answer over an unencrypted connection


def test_kfp_client_trusts_the_ca(server: TlsServer) -> None:
    client = kfp.Client(host=server.url, ssl_ca_cert=str(server.ca), existing_token=TOKEN)
    experiment = client.create_experiment("over-tls")
    assert experiment.display_name == "over-tls"
    assert any(e.experiment_id == experiment.experiment_id
               for e in client.list_experiments(page_size=100).experiments or [])


def test_host_and_origin_checks_hold_over_https(server: TlsServer) -> None:
    body = json.dumps({"display_name": "from-a-page"}).encode()
    json_type = {"Content-Type": "application/json"}
    same = {**json_type, "Origin": f"https://127.0.0.1:{server.port}"}
    assert https_call(server.port, "/apis/v2beta1/experiments", server.ca, TOKEN, "POST", same, body)[0] == 200
    plain = {**json_type, "Origin": f"http://127.0.0.1:{server.port}"}  # the http:// origin is another origin
    status, answer = https_call(server.port, "/apis/v2beta1/experiments", server.ca, TOKEN, "POST", plain, body)
    assert status == 403 and "https://127.0.0.1" in answer["message"], answer
    status, _ = https_call(server.port, "/apis/v2beta1/healthz", server.ca, TOKEN, headers={"Host": "evil.example"})
    assert status == 400


def test_the_in_process_test_server_serves_https_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``Served(tls=True)``, for tests of clients that need HTTPS (kubectl with a token)."""
    monkeypatch.setenv("MILLPOND_HOME", str(tmp_path / "home"))
    served = Served(TOKEN, tls=True)
    try:
        assert served.url.startswith("https://") and served.ca == tmp_path / "home" / "tls" / "ca.crt"
        assert https_call(served.port, "/apis/v2beta1/healthz", served.ca, TOKEN)[0] == 200
        with pytest.raises(ssl.SSLCertVerificationError):
            https_call(served.port, "/apis/v2beta1/healthz", None, TOKEN)
    finally:
        served.stop()


def test_the_certificate_is_renewed_when_expired_and_then_reused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    tls.ensure_certificate(home, tls.Subjects.of([socket.gethostname()]), now=LONG_AGO)  # an expired one
    expired = (home / "tls" / "server.crt").read_bytes()
    ca = (home / "tls" / "ca.crt").read_bytes()
    served = TlsServer(home, ["--tls"])
    try:
        first = served_certificate(served.port, served.ca)
    finally:
        served.stop()
    assert (home / "tls" / "ca.crt").read_bytes() == ca
    assert first != x509.load_pem_x509_certificate(expired).public_bytes(serialization.Encoding.DER)
    assert x509.load_der_x509_certificate(first).not_valid_after_utc > dt.datetime.now(dt.timezone.utc)
    served = TlsServer(home, ["--tls"])
    try:
        assert served_certificate(served.port, served.ca) == first  # the next start reuses it
    finally:
        served.stop()


def _self_signed(folder: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "my own")])
    now = dt.datetime.now(dt.timezone.utc)
    certificate = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                       critical=False)
        .sign(key, hashes.SHA256()))
    cert_path, key_path = folder / "mine.crt", folder / "mine.key"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def test_a_certificate_of_the_users_own(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    home = tmp_path / "home"
    served = TlsServer(home, ["--tls-cert", str(cert), "--tls-key", str(key)], ca=cert)
    try:
        assert https_call(served.port, "/apis/v2beta1/healthz", cert)[0] == 200
        [record] = list((home / "servers").glob("*.json"))
        assert json.loads(record.read_text())["ca_file"] == str(cert)  # self-signed: what clients trust
    finally:
        served.stop()
    assert not (home / "tls").exists()  # millpond made no certificate of its own


def test_bad_certificate_options_are_one_error_line(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
    (tmp_path / "other").mkdir()
    _, other_key = _self_signed(tmp_path / "other")
    cases = (
        (["--tls-cert", str(cert)], "go together"),
        (["--tls-cert", str(tmp_path / "missing.crt"), "--tls-key", str(key)], "cannot load them"),
        (["--tls-cert", str(garbage), "--tls-key", str(key)], "cannot load them"),
        (["--tls-cert", str(cert), "--tls-key", str(other_key)], "cannot load them"),  # not its key
        (["--no-tls", "--tls-cert", str(cert), "--tls-key", str(key)], "--no-tls"),
    )
    for args, expected in cases:
        result = subprocess.run([str(MILLPOND), "server", "--port", "1", *args], capture_output=True, text=True,
                                check=False, timeout=120,
                                env={**os.environ, "MILLPOND_HOME": str(tmp_path / "home")})
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), (args, result.stderr)
        assert expected in lines[0], (args, lines)
    assert not (tmp_path / "home" / "servers").exists()
