"""Parsing of the operator's LLM network settings (no Django: ``coworkenv_web.env`` imports
it, and names the variable in front of each error).

- ``LLM_KEY_HOSTS`` binds each API-key variable to origins (scheme + host + port):
  ``OPENAI_API_KEY=https://api.openai.com,VLLM_API_KEY=http://gpu1.lan:8000|http://gpu2.lan:8000``.
  A bare host (the older form, ``OPENAI_API_KEY=api.openai.com``) still parses and means
  ``https://`` on port 443 only; ``host:port`` means ``https://host:port``.
- ``LLM_ALLOWED_NETWORKS`` lists the CIDR ranges that model endpoints may reach although
  they are loopback, private, link-local or otherwise not public (``127.0.0.1/32,10.0.0.0/8``);
  ``none`` allows none of them.
"""

import ipaddress
from urllib.parse import urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}


def origin_of(url: str) -> str:
    """``scheme://host:port`` of an http(s) URL, lower-cased and with the port spelled out.

    A value without ``://`` is read as a bare host (``api.openai.com``) or ``host:port``
    and means https. Raises ``ValueError`` for anything else.
    """
    text = url.strip()
    if "://" not in text:
        text = "https://" + text
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        raise ValueError(f"{url!r} is not an http:// or https:// origin")
    port = parts.port or DEFAULT_PORTS[scheme]  # .port raises ValueError for a bad port
    host = parts.hostname.lower()
    if ":" in host:  # an IPv6 literal keeps its brackets in an origin
        host = f"[{host}]"
    return f"{scheme}://{host}:{port}"


def parse_key_hosts(value: str | None) -> dict[str, list[str]]:
    """``A_API_KEY=https://api.a.com|eu.a.com,B_API_KEY=http://b.lan:8000`` ->
    ``{"A_API_KEY": ["https://api.a.com:443", "https://eu.a.com:443"],
    "B_API_KEY": ["http://b.lan:8000"]}``. Raises ``ValueError`` naming a bad entry."""
    hosts: dict[str, list[str]] = {}
    for item in (value or "").split(","):
        if not item.strip():
            continue
        name, sep, allowed = item.partition("=")
        if not sep or not name.strip() or not allowed.strip():
            raise ValueError(
                f"entries look like NAME=https://host|http://host:port, not {item.strip()!r}."
            )
        try:
            origins = [origin_of(entry) for entry in allowed.split("|") if entry.strip()]
        except ValueError as exc:
            raise ValueError(f"entry {item.strip()!r}: {exc}.") from None
        hosts[name.strip()] = origins
    return hosts


def parse_networks(value: str | None) -> list[str]:
    """``127.0.0.1/32, 10.0.0.0/8`` -> ``["127.0.0.1/32", "10.0.0.0/8"]`` (each checked);
    ``none`` -> ``[]``. Raises ``ValueError`` naming a bad entry."""
    if value is None or value.strip().lower() == "none":
        return []
    networks = []
    for item in value.split(","):
        if not item.strip():
            continue
        try:
            networks.append(str(ipaddress.ip_network(item.strip(), strict=False)))
        except ValueError:
            raise ValueError(
                f"entries are CIDR ranges such as 10.0.0.0/8, not {item.strip()!r}."
            ) from None
    return networks
