"""gateway.accounts.keys: generation, hashing, shape checks, masking, IP/CIDR matching."""

from __future__ import annotations

import hashlib

import pytest

from gateway.accounts.keys import (
    client_ip_from,
    generate_api_key,
    generate_user_token,
    hash_secret,
    ip_in,
    is_api_key_shaped,
    is_user_token_shaped,
    mask_key,
    parse_networks,
)
from gateway.edge.http import new_request_id


def test_generated_credentials_have_their_shapes() -> None:
    key, token = generate_api_key(), generate_user_token()
    assert key.startswith("sk-") and is_api_key_shaped(key) and not is_user_token_shaped(key)
    assert token.startswith("ut-") and is_user_token_shaped(token) and not is_api_key_shaped(token)
    assert len({generate_api_key() for _ in range(100)}) == 100


@pytest.mark.parametrize("value", [
    "", "sk-", "sk-short", "pk-" + "a" * 40, " sk-" + "a" * 40, "sk-" + "a" * 40 + "\n",
    "sk-" + "a" * 40 + " ", "sk-aaaa bbbb cccc dddd eeee", "sk-" + "a" * 20 + "\r\n", "sk-" + "é" * 20,
    "Bearer sk-" + "a" * 40, hash_secret("sk-" + "a" * 40),
])
def test_malformed_api_keys_are_refused(value: str) -> None:
    assert not is_api_key_shaped(value)


@pytest.mark.parametrize("secret", ["sk-" + "a" * 40, "ut-" + "Z_-9" * 10, "é" * 7, ""])
def test_hash_is_the_sha256_hex_digest_of_the_utf8_bytes(secret: str) -> None:
    """The stored digests predate the builtin sha256 the hot path uses: they must stay equal."""
    assert hash_secret(secret) == hashlib.sha256(secret.encode("utf-8")).hexdigest()


def test_hash_is_sha256_hex_and_not_itself_a_credential() -> None:
    key = generate_api_key()
    digest = hash_secret(key)
    assert len(digest) == 64 and int(digest, 16) >= 0
    assert hash_secret(digest) != digest and not is_api_key_shaped(digest)


def test_mask_hides_the_middle() -> None:
    key = "sk-abcdEFGHijklMNOPqrstUVWX"
    assert mask_key(key) == "sk-abcd...UVWX"
    assert "EFGH" not in mask_key(key)
    assert mask_key("sk-abc") == "sk-..."


def test_ip_and_cidr_matching() -> None:
    nets = parse_networks(["10.0.0.0/8", "192.168.1.7", "2001:db8::/32"])
    assert ip_in("10.1.2.3", nets) and ip_in("192.168.1.7", nets) and ip_in("2001:db8::1", nets)
    assert not ip_in("192.168.1.8", nets) and not ip_in("11.0.0.1", nets)
    assert ip_in("::ffff:10.0.0.1", nets)  # IPv4-mapped IPv6 peer
    assert not ip_in("not-an-ip", nets) and not ip_in("", nets)
    with pytest.raises(ValueError):
        parse_networks(["10.0.0.0/33"])


def test_client_ip_believes_forwarded_for_only_from_trusted_proxies() -> None:
    trusted = parse_networks(["10.0.0.0/8"])
    assert client_ip_from("1.2.3.4", "5.6.7.8", trusted) == "1.2.3.4"  # untrusted peer: ignored
    assert client_ip_from("10.0.0.1", "5.6.7.8", trusted) == "5.6.7.8"
    # The client forged the left-most hop; the right-most untrusted one is the real client.
    assert client_ip_from("10.0.0.1", "9.9.9.9, 5.6.7.8, 10.0.0.2", trusted) == "5.6.7.8"
    assert client_ip_from("10.0.0.1", None, trusted) == "10.0.0.1"
    assert client_ip_from("10.0.0.1", "5.6.7.8", ()) == "10.0.0.1"


def test_request_id_format() -> None:
    rid = new_request_id()
    assert rid.startswith("req_") and len(rid) == 36 and int(rid[4:], 16) >= 0
