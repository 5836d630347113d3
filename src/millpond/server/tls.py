"""The certificate ``millpond server --tls`` serves: a CA of its own in the home, and a server certificate it signs.

Why a CA and not one self-signed certificate: what a client trusts (a kubeconfig's
``certificate-authority-data``, ``kfp.Client(ssl_ca_cert=…)``, httpx's ``verify=``) is the CA,
which lasts ``CA_DAYS``; the server certificate under it can be reissued (expired, or an address
it does not cover) without any kubeconfig written before having to change.

The files live in ``$MILLPOND_HOME/tls`` (a folder only the user may enter): ``ca.crt``,
``ca.key``, ``server.crt``, ``server.key``; the keys are mode 0600. They are made on the first
start and reused on the next ones; each start checks them and reissues what no longer holds:

- the CA: missing, unreadable, not a CA, its key not its own, or expiring within ``RENEW_BEFORE``
  (a new CA means a new server certificate, and kubeconfigs written before must be written again);
- the server certificate: missing, unreadable, not issued by this CA, its key not its own,
  expiring within ``RENEW_BEFORE``, or its names (subject alternative names) not covering every
  name this start needs (``Subjects``).

Keys are ECDSA P-256 (quick to make, accepted by Go's crypto/tls, so kubectl and client-go, and
by OpenSSL); the certificates carry what strict verifiers ask (a critical ``basicConstraints``,
key usages, subject and authority key identifiers), as Python 3.13's ``VERIFY_X509_STRICT`` does.
A lock file keeps two servers starting in one home from writing the files at once.

A certificate the user brings (``--tls-cert``/``--tls-key``) is only loaded and checked here:
millpond never rewrites it.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import ipaddress
import os
import ssl
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from millpond.errors import UserError
from millpond.hosts import LOOPBACK_HOSTS

TLS_DIR = "tls"
CA_CERT, CA_KEY, SERVER_CERT, SERVER_KEY = "ca.crt", "ca.key", "server.crt", "server.key"
CA_DAYS = 3650
SERVER_DAYS = 365
RENEW_BEFORE = dt.timedelta(days=30)  # a start this close to the end reissues, so a running server rarely sees it
CLOCK_SKEW = dt.timedelta(hours=1)  # valid from an hour ago: a client whose clock is a little behind still accepts

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class CertificateFiles:
    """What a TLS listener loads (``certificate`` and its ``key``) and what its clients trust (``authority``:
    millpond's CA; None for a certificate the user brought, whose issuer millpond does not know)."""

    certificate: Path
    key: Path
    authority: Path | None


@dataclass(frozen=True)
class Subjects:
    """The names a server certificate must cover: DNS names (``*.example.org`` included) and IP addresses."""

    dns: frozenset[str]
    ips: frozenset[IPAddress]

    @classmethod
    def of(cls, names: Iterable[str]) -> Subjects:
        """The loopback names plus ``names`` (the host name, the ``--host`` address, each ``--allowed-host``):
        an address becomes an IP name, ``*`` and names no certificate can carry are left out."""
        dns: set[str] = set()
        ips: set[IPAddress] = set()
        for name in (*LOOPBACK_HOSTS, *names):
            name = name.strip().strip("[]").lower().rstrip(".")
            try:
                ips.add(ipaddress.ip_address(name))
                continue
            except ValueError:
                pass
            if name in ("", "*") or not name.isascii() or any(c.isspace() for c in name):
                continue  # a name no certificate can carry (an IDN is given in its xn-- form)
            dns.add(name)
        return cls(frozenset(dns), frozenset(ips))

    def covered_by(self, certificate: x509.Certificate) -> bool:
        """Whether ``certificate``'s subject alternative names include every one of these names."""
        try:
            names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        except x509.ExtensionNotFound:
            return False
        held_dns = {name.lower() for name in names.get_values_for_type(x509.DNSName)}
        held_ips = set(names.get_values_for_type(x509.IPAddress))
        return self.dns <= held_dns and self.ips <= held_ips

    def extension(self) -> x509.SubjectAlternativeName:
        return x509.SubjectAlternativeName(
            [x509.DNSName(name) for name in sorted(self.dns)]
            + [x509.IPAddress(address) for address in sorted(self.ips, key=lambda a: (a.version, int(a)))])


def ensure_certificate(home: Path, subjects: Subjects, now: dt.datetime | None = None) -> CertificateFiles:
    """millpond's CA and a server certificate for ``subjects`` in ``home``, reused when they still hold,
    made or reissued when not (see the module's docstring)."""
    moment = now or dt.datetime.now(dt.timezone.utc)
    folder = home / TLS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    with _locked(folder):
        authority = _usable_ca(folder, moment) or _issue_ca(folder, moment)
        if not _server_holds(folder, authority[0], subjects, moment):
            _issue_server(folder, authority, subjects, moment)
    return CertificateFiles(folder / SERVER_CERT, folder / SERVER_KEY, folder / CA_CERT)


def server_context(files: CertificateFiles) -> ssl.SSLContext:
    """The SSLContext a listener serves ``files`` with (TLS 1.2 at least); a certificate or key that
    cannot be loaded (missing, not PEM, not a pair) is a UserError naming both files."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(str(files.certificate), str(files.key))
    except (OSError, ssl.SSLError) as exc:
        reason = getattr(exc, "strerror", None) or getattr(exc, "reason", None) or str(exc)
        raise UserError(f"--tls-cert {files.certificate} with --tls-key {files.key}: cannot load them ({reason})") \
            from None
    return context


def expired(certificate_path: Path, now: dt.datetime | None = None) -> bool:
    """Whether the PEM certificate at ``certificate_path`` is past its end (False when it cannot be read:
    ``server_context`` reports that)."""
    certificate = _read_certificate(certificate_path)
    return certificate is not None and certificate.not_valid_after_utc <= (now or dt.datetime.now(dt.timezone.utc))


def self_signed(certificate_path: Path) -> bool:
    """Whether the (first) certificate at ``certificate_path`` is its own issuer: then it is what a client trusts."""
    certificate = _read_certificate(certificate_path)
    if certificate is None or certificate.issuer != certificate.subject:
        return False
    try:
        certificate.verify_directly_issued_by(certificate)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    descriptor = os.open(folder / ".lock", os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # closing releases the lock


def _read_certificate(path: Path) -> x509.Certificate | None:
    try:
        return x509.load_pem_x509_certificate(path.read_bytes())
    except (OSError, ValueError):
        return None


def _read_key(path: Path) -> ec.EllipticCurvePrivateKey | None:
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError):
        return None
    return key if isinstance(key, ec.EllipticCurvePrivateKey) else None


def _pair(folder: Path, cert_name: str, key_name: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None:
    """The certificate and key stored under these names, when both load and the key is the certificate's."""
    certificate, key = _read_certificate(folder / cert_name), _read_key(folder / key_name)
    if certificate is None or key is None or certificate.public_key() != key.public_key():
        return None
    return certificate, key


def _current(certificate: x509.Certificate, moment: dt.datetime) -> bool:
    return certificate.not_valid_before_utc <= moment + CLOCK_SKEW and certificate.not_valid_after_utc - moment > \
        RENEW_BEFORE


def _usable_ca(folder: Path, moment: dt.datetime) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None:
    pair = _pair(folder, CA_CERT, CA_KEY)
    if pair is None or not _current(pair[0], moment):
        return None
    try:
        constraints = pair[0].extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        return None
    return pair if constraints.ca else None


def _server_holds(folder: Path, ca: x509.Certificate, subjects: Subjects, moment: dt.datetime) -> bool:
    pair = _pair(folder, SERVER_CERT, SERVER_KEY)
    if pair is None or not _current(pair[0], moment) or not subjects.covered_by(pair[0]):
        return False
    try:
        pair[0].verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _issue_ca(folder: Path, moment: dt.datetime) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "millpond"),
                      x509.NameAttribute(NameOID.COMMON_NAME, f"millpond CA {moment:%Y-%m-%d %H:%M:%S}")])
    identifier = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    certificate = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(moment - CLOCK_SKEW).not_valid_after(moment + dt.timedelta(days=CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(cert_sign=True), critical=True)
        .add_extension(identifier, critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(identifier), critical=False)
        .sign(key, hashes.SHA256())
    )
    _write_pair(folder, CA_CERT, certificate, CA_KEY, key)
    return certificate, key


def _issue_server(folder: Path, authority: tuple[x509.Certificate, ec.EllipticCurvePrivateKey], subjects: Subjects,
                  moment: dt.datetime) -> None:
    ca, ca_key = authority
    key = ec.generate_private_key(ec.SECP256R1())
    ca_identifier = ca.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "millpond"),
                                 x509.NameAttribute(NameOID.COMMON_NAME, "millpond server")]))
        .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(moment - CLOCK_SKEW)
        .not_valid_after(min(moment + dt.timedelta(days=SERVER_DAYS), ca.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(subjects.extension(), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_identifier), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    _write_pair(folder, SERVER_CERT, certificate, SERVER_KEY, key)


def _key_usage(cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                         data_encipherment=False, key_agreement=False, key_cert_sign=cert_sign, crl_sign=cert_sign,
                         encipher_only=False, decipher_only=False)


def _write_pair(folder: Path, cert_name: str, certificate: x509.Certificate, key_name: str,
                key: ec.EllipticCurvePrivateKey) -> None:
    """Write the key (mode 0600) then its certificate, each whole through a temporary file: a reader sees an
    old pair, or a new key with an old certificate, which ``_pair`` refuses and the next start reissues."""
    _write_whole(folder / key_name, key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()), 0o600)
    _write_whole(folder / cert_name, certificate.public_bytes(serialization.Encoding.PEM), 0o644)


def _write_whole(path: Path, data: bytes, mode: int) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.unlink(missing_ok=True)  # O_EXCL: a new file, so it has ``mode`` (less the umask)
    with os.fdopen(os.open(temporary, os.O_CREAT | os.O_EXCL | os.O_WRONLY, mode), "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
