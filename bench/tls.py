"""A test certificate authority for the bench's HTTPS upstream (trustme): the CA's certificate, and
a certificate it issued for 127.0.0.1 and localhost with its key, as PEM files.

The relays under test trust the CA through ``SSL_CERT_FILE`` in their environment: aiohttp's
default context is ``ssl.create_default_context()``, whose ``load_default_certs`` calls OpenSSL's
``set_default_verify_paths``, which reads the file that variable names (``openssl_cafile_env`` of
``ssl.get_default_verify_paths()``). Nothing in the gateway or the floor is told about the CA.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

import trustme


@dataclass(frozen=True)
class LoopbackCA:
    ca_pem: Path  # what a client trusts (``SSL_CERT_FILE``)
    cert_chain_pem: Path  # the server's certificate, then the CA's
    key_pem: Path  # the server certificate's private key

    def client_env(self) -> dict[str, str]:
        """The environment of a process that must trust this CA, and only it."""
        return {"SSL_CERT_FILE": str(self.ca_pem)}

    def server_context(self) -> ssl.SSLContext:
        return server_context(self.cert_chain_pem, self.key_pem)


def server_context(cert_chain_pem: str | Path, key_pem: str | Path) -> ssl.SSLContext:
    """A TLS server's context with its certificate chain and key loaded."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_chain_pem, key_pem)
    return context


def make_authority(directory: Path) -> LoopbackCA:
    """A fresh CA and a loopback server certificate, written under ``directory``."""
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    out = LoopbackCA(directory / "bench-ca.pem", directory / "bench-upstream-chain.pem",
                        directory / "bench-upstream-key.pem")
    ca.cert_pem.write_to_path(str(out.ca_pem))
    cert.private_key_pem.write_to_path(str(out.key_pem))
    with out.cert_chain_pem.open("wb") as chain:
        for blob in cert.cert_chain_pems:
            chain.write(blob.bytes())
    return out
