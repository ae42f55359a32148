"""Model endpoints cannot reach what only the server can (server-side request forgery).

Refused when the endpoint is saved and again when a request connects (after resolving the
host), unless ``LLM_ALLOWED_NETWORKS`` allows the range. The test settings allow only
127.0.0.1/32, where the loopback LLM server listens.
"""

import ipaddress
import socket

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.urls import reverse

from apps.core.exceptions import ApplicationError
from apps.llm.client import llm_chat
from apps.llm.exceptions import LLMConfigurationError, LLMRequestError, LLMUnavailable
from apps.llm.models import LLMCall, LLMCallStatus, ModelEndpoint
from apps.llm.redaction import ERROR_BODY_LIMIT, TRUNCATION_MARK, body_excerpt
from apps.llm.services import endpoint_create
from tests.llm.conftest import TEST_KEY_ENV
from tests.llm_server import Reply

pytestmark = pytest.mark.django_db

HELLO = [{"role": "user", "content": "Say hi."}]
UNLESS = (
    "model endpoints may only reach public addresses unless the server's "
    "LLM_ALLOWED_NETWORKS includes it."
)

REFUSED_URLS = [
    ("http://169.254.169.254/latest/v1", f"169.254.169.254 is a link-local address; {UNLESS}"),
    ("http://10.1.2.3:8000/v1", f"10.1.2.3 is a private address; {UNLESS}"),
    ("http://192.168.0.10/v1", f"192.168.0.10 is a private address; {UNLESS}"),
    ("http://[::1]:8000/v1", f"::1 is a loopback address; {UNLESS}"),
    ("http://127.0.0.2:8000/v1", f"127.0.0.2 is a loopback address; {UNLESS}"),
    ("http://0.0.0.0:8000/v1", f"0.0.0.0 is an unspecified address; {UNLESS}"),
    ("http://224.0.0.1/v1", f"224.0.0.1 is a multicast address; {UNLESS}"),
    ("http://240.0.0.1/v1", f"240.0.0.1 is a reserved address; {UNLESS}"),
    ("http://[::ffff:10.0.0.1]/v1", f"::ffff:10.0.0.1 is a private address; {UNLESS}"),
    ("http://[fe80::1]/v1", f"fe80::1 is a link-local address; {UNLESS}"),
]
QUERY_REFUSAL = (
    "The base URL must not contain a query string (?) or a fragment (#): requests add their "
    "own path to it, e.g. https://api.openai.com/v1."
)
SHAPE_URLS = [
    ("https://api.example.com/v1?path=/admin", QUERY_REFUSAL),
    ("https://api.example.com/v1?", QUERY_REFUSAL),
    ("https://api.example.com/v1#/admin", QUERY_REFUSAL),
]


def _save(project, base_url, **fields):
    return endpoint_create(project=project, name="probe", base_url=base_url, model="m", **fields)


def _raw(project, base_url, name="probe"):
    """An endpoint row written around the services (as one saved before the rule was)."""
    return ModelEndpoint.objects.create(project=project, name=name, base_url=base_url, model="m")


def chat(endpoint):
    return llm_chat(endpoint=endpoint, messages=HELLO, purpose="test.chat")


# --- save time --------------------------------------------------------------------------


@pytest.mark.parametrize(("base_url", "message"), REFUSED_URLS + SHAPE_URLS)
def test_refused_on_save(project, base_url, message):
    with pytest.raises(ApplicationError) as error:
        _save(project, base_url)
    assert error.value.extra == {"fields": {"base_url": [message]}}
    assert ModelEndpoint.objects.count() == 0


def test_a_name_resolving_to_loopback_is_refused_on_save_unless_allowed(project, settings):
    settings.LLM_ALLOWED_NETWORKS = []
    with pytest.raises(ApplicationError) as error:
        _save(project, "http://localhost:8000/v1")
    assert error.value.extra == {
        "fields": {"base_url": [f"localhost resolves to 127.0.0.1, a loopback address; {UNLESS}"]}
    }
    settings.LLM_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    assert _save(project, "http://localhost:8000/v1").base_url == "http://localhost:8000/v1"


def test_allowed_networks_open_a_private_range(project, settings):
    settings.LLM_ALLOWED_NETWORKS = ["10.0.0.0/8"]
    assert _save(project, "http://10.1.2.3:8000/v1").base_url == "http://10.1.2.3:8000/v1"


def test_public_and_unresolvable_names_are_accepted_on_save(project):
    # "vllm" resolves nowhere here (a compose service name elsewhere): the connection checks it.
    assert _save(project, "http://vllm:8000/v1").base_url == "http://vllm:8000/v1"
    endpoint = endpoint_create(
        project=project, name="public", base_url="https://93.184.216.34/v1", model="m"
    )
    assert endpoint.base_url == "https://93.184.216.34/v1"


def test_refused_on_save_through_the_api_and_the_form(api_client_for, client_for, author, project):
    payload = {"name": "meta", "base_url": "http://169.254.169.254/v1", "model": "m"}
    url = reverse("api:model_endpoint_list", args=[project.pk])
    response = api_client_for(author).post(url, payload, format="json")
    assert response.status_code == 400
    assert response.json() == {
        "message": "The request is not valid.",
        "details": {"base_url": [f"169.254.169.254 is a link-local address; {UNLESS}"]},
    }
    form = {
        **payload,
        "base_url": "https://api.example.com/v1#x",
        "temperature": "0.7",
        "max_tokens": "100",
        "request_timeout_s": "10",
        "max_concurrency": "1",
        "price_input_per_million": "0",
        "price_output_per_million": "0",
    }
    page = client_for(author).post(reverse("llm:endpoint_create", args=[project.slug]), form)
    assert page.status_code == 200
    assert page.context["form"].errors == {"base_url": [QUERY_REFUSAL]}
    assert ModelEndpoint.objects.count() == 0


# --- connect time -----------------------------------------------------------------------


@pytest.mark.parametrize(("base_url", "message"), REFUSED_URLS + SHAPE_URLS)
def test_refused_at_connect_for_a_row_saved_around_the_rule(project, base_url, message):
    endpoint = _raw(project, base_url)
    with pytest.raises(LLMConfigurationError) as error:
        chat(endpoint)
    assert error.value.detail == f"Refused to connect: {message}"
    assert str(error.value) == f"Endpoint “probe” cannot be used: Refused to connect: {message}"
    call = LLMCall.objects.get()
    assert (call.status, call.error, call.http_status) == (
        LLMCallStatus.ERROR,
        f"Refused to connect: {message}",
        None,
    )


def test_a_name_resolving_to_loopback_is_refused_at_connect(project, llm_server, settings, api_key):
    """Saved while loopback was allowed; the connection resolves the name and refuses it."""
    settings.LLM_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    endpoint = _save(project, f"http://localhost:{llm_server.port}/v1", api_key_env=TEST_KEY_ENV)
    settings.LLM_ALLOWED_NETWORKS = []
    with pytest.raises(LLMConfigurationError) as error:
        chat(endpoint)
    expected = f"Refused to connect: localhost resolves to 127.0.0.1, a loopback address; {UNLESS}"
    assert error.value.detail == expected
    assert llm_server.requests == []  # not one byte reached the server
    assert list(LLMCall.objects.values_list("attempt", "status", "error")) == [
        (1, LLMCallStatus.ERROR, expected)
    ]

    settings.LLM_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    llm_server.script(Reply.text("Hi."))
    assert chat(endpoint).content == "Hi."


@pytest.fixture
def rebinding_resolver(monkeypatch):
    """A resolver for ``rebind.test`` that answers a public address first and 127.0.0.1
    afterwards, as a DNS-rebinding attacker's name server would. Records every lookup."""
    real = socket.getaddrinfo
    lookups: list[str] = []

    def getaddrinfo(host, port, *args, **kwargs):
        lookups.append(host)
        if host == "rebind.test":
            address = "93.184.216.34" if lookups.count("rebind.test") == 1 else "127.0.0.1"
            return real(address, port, *args, **kwargs)
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return lookups


def test_dns_rebinding_between_save_and_connect_is_refused(
    project, llm_server, settings, rebinding_resolver
):
    settings.LLM_ALLOWED_NETWORKS = []
    endpoint = _save(project, f"http://rebind.test:{llm_server.port}/v1")  # public at save
    with pytest.raises(LLMConfigurationError) as error:
        chat(endpoint)
    assert error.value.detail == (
        f"Refused to connect: rebind.test resolves to 127.0.0.1, a loopback address; {UNLESS}"
    )
    assert llm_server.requests == []


def test_the_socket_goes_to_the_address_that_was_checked(
    project, llm_server, settings, rebinding_resolver, api_key
):
    """The name is resolved once per connection and the socket opened to that checked
    address (the second lookup is of the IP literal itself), so no second answer is used."""
    settings.LLM_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    endpoint = _raw(project, f"http://rebind.test:{llm_server.port}/v1")
    ModelEndpoint.objects.filter(pk=endpoint.pk).update(api_key_env=TEST_KEY_ENV)
    endpoint.refresh_from_db()
    rebinding_resolver.append("rebind.test")  # the public first answer is used up
    llm_server.script(Reply.text("Hi."))
    assert chat(endpoint).content == "Hi."
    assert rebinding_resolver == ["rebind.test", "rebind.test", "127.0.0.1"]


def test_redirects_are_not_followed(endpoint, llm_server):
    llm_server.script(
        Reply.error(307, "moved", headers={"Location": "http://169.254.169.254/latest/"})
    )
    with pytest.raises(LLMRequestError) as error:
        chat(endpoint)
    assert error.value.status == 307
    assert len(llm_server.requests) == 1


# --- the call log keeps a bounded, redacted excerpt -------------------------------------


def test_error_bodies_are_redacted_and_bounded(endpoint, llm_server):
    leak = (
        "Incorrect API key provided: sk-live-0123456789abcdef. "
        'Internal config: {"password": "hunter2", "token": "t0k3n-value"} '
        "Authorization: Bearer eyJhbGciOi.abc "
    )
    llm_server.script(Reply.error(400, leak + "lorem ipsum " * 800))
    with pytest.raises(LLMRequestError) as error:
        chat(endpoint)
    assert error.value.status == 400
    call = LLMCall.objects.get()
    assert "sk-live" not in call.error and "hunter2" not in call.error
    assert call.error.startswith("HTTP 400: Incorrect API key provided: [redacted]. ")
    assert len(call.error) <= 600
    excerpt = call.response["error_body"]
    assert isinstance(excerpt, str)
    assert excerpt.endswith(TRUNCATION_MARK)
    assert len(excerpt) == ERROR_BODY_LIMIT + len(TRUNCATION_MARK)
    for secret in ("sk-live-0123456789abcdef", "hunter2", "t0k3n-value", "eyJhbGciOi.abc"):
        assert secret not in excerpt


def test_body_excerpt_redacts_credentials_and_keeps_the_rest():
    assert body_excerpt({"error": {"message": "bad key sk-abcdef123456", "api_key": "k1"}}) == (
        '{"error": {"message": "bad key [redacted]", "api_key": "[redacted]"}}'
    )
    assert body_excerpt("Not found: /v1/chat/completions") == "Not found: /v1/chat/completions"
    assert body_excerpt("A" * 40) == "[redacted]"
    assert body_excerpt("é" * 3000) == "é" * ERROR_BODY_LIMIT + TRUNCATION_MARK


def _error_call(project, endpoint):
    return LLMCall.objects.create(
        project=project,
        endpoint=endpoint,
        endpoint_name=endpoint.name,
        model="m",
        purpose="endpoint.test",
        status=LLMCallStatus.ERROR,
        http_status=500,
        error="HTTP 500: boom",
        response={"error_body": "INTERNAL-REPLY-MARKER"},
    )


def test_only_roles_that_may_edit_the_endpoint_see_error_bodies(
    client_for, api_client_for, viewer, author, project, endpoint
):
    _error_call(project, endpoint)
    page_url = reverse("llm:endpoint_detail", args=[endpoint.pk])
    api_url = reverse("api:model_endpoint_calls", args=[endpoint.pk])

    assert b"INTERNAL-REPLY-MARKER" not in client_for(viewer).get(page_url).content
    [row] = api_client_for(viewer).get(api_url).json()["results"]
    assert row["response"] == {}
    assert row["error"] == "HTTP 500: boom"

    assert b"INTERNAL-REPLY-MARKER" in client_for(author).get(page_url).content
    [row] = api_client_for(author).get(api_url).json()["results"]
    assert row["response"] == {"error_body": "INTERNAL-REPLY-MARKER"}


# --- settings ---------------------------------------------------------------------------


def test_allowed_networks_setting_is_parsed_strictly(monkeypatch):
    from coworkenv_web.env import env_networks

    monkeypatch.setenv("LLM_ALLOWED_NETWORKS", "127.0.0.1/32, 10.0.0.0/8,::1")
    assert env_networks("LLM_ALLOWED_NETWORKS", "none") == [
        "127.0.0.1/32",
        "10.0.0.0/8",
        "::1/128",
    ]
    monkeypatch.setenv("LLM_ALLOWED_NETWORKS", "none")
    assert env_networks("LLM_ALLOWED_NETWORKS", "127.0.0.0/8") == []
    monkeypatch.delenv("LLM_ALLOWED_NETWORKS")
    assert env_networks("LLM_ALLOWED_NETWORKS", "none") == []
    monkeypatch.setenv("LLM_ALLOWED_NETWORKS", "10.0.0.0/8,lab-vllm")
    with pytest.raises(ImproperlyConfigured) as refused:
        env_networks("LLM_ALLOWED_NETWORKS", "none")
    assert str(refused.value) == (
        "LLM_ALLOWED_NETWORKS entries are CIDR ranges such as 10.0.0.0/8, not 'lab-vllm'."
    )


# --- one TLS context and one client per process, certificates still verified ------------


def _self_signed_tls_server(tmp_path):
    """A TLS listener on 127.0.0.1 with a self-signed certificate no CA vouches for."""
    import datetime
    import ssl
    import threading

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    (tmp_path / "cert.pem").write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    listener = socket.create_server(("127.0.0.1", 0))
    handshakes = []

    def serve():
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            try:
                with context.wrap_socket(connection, server_side=True):
                    handshakes.append("completed")
            except (ssl.SSLError, OSError) as exc:
                handshakes.append(type(exc).__name__)

    threading.Thread(target=serve, daemon=True).start()
    return listener, handshakes


def test_a_certificate_no_ca_vouches_for_is_refused(project, settings, tmp_path):
    """The process's shared TLS context verifies certificates: a self-signed endpoint is a
    connection error (retried, then logged), never a conversation."""
    settings.LLM_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    listener, handshakes = _self_signed_tls_server(tmp_path)
    try:
        endpoint = _save(
            project,
            f"https://127.0.0.1:{listener.getsockname()[1]}/v1",
            request_timeout_s=5,
        )
        with pytest.raises(LLMUnavailable) as error:
            chat(endpoint)
    finally:
        listener.close()
    assert "CERTIFICATE_VERIFY_FAILED" in error.value.message
    assert "completed" not in handshakes
    assert LLMCall.objects.filter(endpoint=endpoint, status=LLMCallStatus.ERROR).exists()


def test_a_process_builds_one_client_per_endpoint_and_one_tls_context(monkeypatch):
    """Lanes starting together wait for the one client being built instead of each building
    one (and a pool that was dropped); every client shares one verifying TLS context."""
    import ssl
    import threading

    from apps.llm import transport as llm_transport
    from apps.llm.network import GuardedTransport, verified_ssl_context

    llm_transport._built_endpoint_client.cache_clear()
    builds = []
    build = llm_transport.openai.OpenAI

    def counted(*args, **kwargs):
        builds.append(1)
        return build(*args, **kwargs)

    monkeypatch.setattr(llm_transport.openai, "OpenAI", counted)
    start = threading.Barrier(16)
    clients = []

    def lane():
        start.wait()
        clients.append(llm_transport.endpoint_client("http://127.0.0.1:9/v1", "k", 5.0, ()))

    threads = [threading.Thread(target=lane) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    llm_transport._built_endpoint_client.cache_clear()
    assert len(builds) == 1
    assert len({id(client) for client in clients}) == 1
    context = verified_ssl_context()
    assert GuardedTransport()._pool._ssl_context is context
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
