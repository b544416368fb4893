"""The operator decides where the server connects (issue 26, A-3): model endpoints, tenant URLs, job errors.

A tenant admin chooses among the operator's endpoints; a URL of the tenant's own only where the operator
permits it, and never an internal address the operator has not allow-listed, at save time and again at
every connection. A job's error says what went wrong in the product's words, never what the server said.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from jobs.models import TenantModelSettings
from tests.jobs.llm_server import LlmServer, Reply, completion, entries_json, error
from tests.platform.test_outbound import Listener, fake_dns

pytestmark = pytest.mark.django_db

WORLD = "A drowned archipelago where lighthouse-keepers rule and the tide hides old gods."
DRAFT = entries_json([{"title": f"Isle number {n}", "lore": f"The isle number {n} is ruled by a keeper."}
                      for n in range(1, 6)])


@pytest.fixture
def internal() -> Iterator[Listener]:
    """The internal service the attacker aims at: loopback, not allow-listed."""
    listener = Listener()
    yield listener
    listener.stop()


@pytest.fixture
def tenant_urls(settings: Any, no_model: None) -> None:
    """The operator permits tenant endpoints and allow-lists nothing; no operator model."""
    settings.MODEL_TENANT_ENDPOINTS = True
    settings.OUTBOUND_ALLOW = []
    settings.LOREWEAVE_LLM_MAX_RETRIES = 2
    settings.LOREWEAVE_LLM_TIMEOUT = 2.0


def put(client: Any, **body: Any) -> Any:
    return client.put("/api/v1/jobs/model", body, format="json")


def generate(client: Any, capture: Any) -> dict[str, Any]:
    with capture(execute=True):
        started = client.post("/api/v1/jobs/generate", {"description": WORLD}, format="json")
    assert started.status_code == 202, started.json()
    return client.get(f"/api/v1/jobs/{started.json()['id']}").json()


def test_by_default_a_tenant_admin_cannot_point_the_server_at_a_url(tenant_a, internal, no_model, settings,
                                                                   django_capture_on_commit_callbacks):
    """The reported attack: PUT a loopback URL, start a job, read the internal service's answer."""
    assert settings.MODEL_TENANT_ENDPOINTS is False  # the shipped default
    refused = put(tenant_a.admin_client, base_url=f"{internal.url}/internal-admin/v1", model="m")
    assert refused.status_code == 422
    assert refused.json()["error"]["field"] == "base_url" and refused.json()["error"]["rule"] == "A-3"
    assert not TenantModelSettings.objects.for_tenant(tenant_a.tenant).exists()  # nothing half-written
    with django_capture_on_commit_callbacks(execute=True):
        job = tenant_a.admin_client.post("/api/v1/jobs/generate", {"description": WORLD}, format="json")
    assert job.status_code == 409  # still no model
    assert internal.hits == []


@pytest.mark.parametrize(("host", "reason"), [
    ("127.0.0.1", "loopback"), ("10.0.0.5", "private"), ("169.254.169.254", "metadata"),
    ("[::1]", "loopback"), ("[fd00:ec2::254]", "metadata"), ("localhost", "loopback"), ("192.168.0.1", "private"),
])
def test_where_tenant_urls_are_permitted_internal_addresses_are_refused(tenant_a, tenant_urls, host, reason):
    refused = put(tenant_a.admin_client, base_url=f"http://{host}:8080/v1", model="m")
    assert refused.status_code == 422, refused.json()
    body = refused.json()["error"]
    assert (body["code"], body["field"], body["rule"], body["details"]["reason"]) == (
        "address_not_allowed", "base_url", "A-3", reason)
    assert "allow-lists" in body["message"]
    assert tenant_a.admin_client.get("/api/v1/jobs/model").json()["configured"] is False


def test_a_name_resolving_to_loopback_is_refused(tenant_a, tenant_urls, monkeypatch):
    fake_dns(monkeypatch, {"model.example.test": [["127.0.0.1"]]})
    refused = put(tenant_a.admin_client, base_url="https://model.example.test/v1", model="m")
    assert refused.status_code == 422 and refused.json()["error"]["details"]["reason"] == "loopback"
    assert "127.0.0.1" in refused.json()["error"]["message"]


def test_a_name_that_turns_internal_after_saving_is_refused_at_the_job_and_not_retried(
        tenant_a, tenant_urls, internal, monkeypatch, django_capture_on_commit_callbacks):
    """DNS rebinding: public when saved, loopback when the worker connects."""
    fake_dns(monkeypatch, {"rebind.example.test": [["93.184.215.14"], ["127.0.0.1"]]})
    saved = put(tenant_a.admin_client, base_url=f"http://rebind.example.test:{internal.port}/v1", model="m")
    assert saved.status_code == 200 and saved.json()["configured"] is True
    job = generate(tenant_a.admin_client, django_capture_on_commit_callbacks)
    assert job["state"] == "failed" and job["error"]["code"] == "model_address_refused"
    assert "loopback" in job["error"]["message"] and "A-3" in job["error"]["message"]
    assert internal.hits == []  # neither the first try nor a retry reached it


def test_a_url_stored_before_the_operator_said_no_is_not_connected_to(tenant_a, internal, no_model, settings,
                                                                      django_capture_on_commit_callbacks):
    """A row the old code let a tenant write: it no longer counts, so no job reaches it."""
    TenantModelSettings.objects.create(tenant=tenant_a.tenant, base_url=f"{internal.url}/internal-admin/v1",
                                       model="m", api_key="sk-tenant")
    shown = tenant_a.admin_client.get("/api/v1/jobs/model").json()
    assert shown["configured"] is False and shown["base_url"] == ""
    with django_capture_on_commit_callbacks(execute=True):
        job = tenant_a.admin_client.post("/api/v1/jobs/generate", {"description": WORLD}, format="json")
    assert job.status_code == 409 and internal.hits == []


def test_a_redirect_from_a_tenant_server_to_an_internal_one_goes_nowhere(
        tenant_a, tenant_urls, settings, django_capture_on_commit_callbacks):
    hidden = Listener("127.0.0.2")
    bouncer = Listener(redirect_to=f"{hidden.url}/internal-admin/v1/chat/completions")
    try:
        settings.OUTBOUND_ALLOW = [f"127.0.0.1:{bouncer.port}"]  # the tenant's server is allowed, its target not
        assert put(tenant_a.admin_client, base_url=f"{bouncer.url}/v1", model="m").status_code == 200
        job = generate(tenant_a.admin_client, django_capture_on_commit_callbacks)
        assert job["state"] == "failed" and bouncer.hits and hidden.hits == []
        assert "307" not in job["error"]["message"] and Listener.BANNER not in job["error"]["message"]
    finally:
        hidden.stop()
        bouncer.stop()


@pytest.mark.parametrize("reply", [
    Reply(status=418, body=Listener.BANNER),
    error(400, f"{Listener.BANNER}: unknown field"),
    error(422, Listener.BANNER, type_="invalid_request_error"),
    Reply(status=200, body=f"<html>{Listener.BANNER}</html>"),
], ids=["418", "400-body", "422-body", "not-json"])
def test_a_job_error_never_repeats_what_the_server_answered(tenant_a, model, settings, reply,
                                                            django_capture_on_commit_callbacks):
    settings.LOREWEAVE_LLM_MAX_RETRIES = 0
    settings.LOREWEAVE_LLM_STRUCTURED = False
    model.script(reply)
    job = generate(tenant_a.admin_client, django_capture_on_commit_callbacks)
    assert job["state"] == "failed", job
    message = job["error"]["message"]
    assert "secret banner" not in message and (reply.status == 200 or str(reply.status) not in message)
    assert message.startswith("The model")


def test_a_page_that_is_not_a_completion_fails_the_job_without_showing_it(tenant_a, internal, settings,
                                                                          django_capture_on_commit_callbacks):
    settings.LOREWEAVE_LLM_BASE_URL, settings.LOREWEAVE_LLM_MODEL = f"{internal.url}/v1", "m"  # the operator's
    settings.LOREWEAVE_LLM_MAX_RETRIES = 0
    job = generate(tenant_a.admin_client, django_capture_on_commit_callbacks)
    assert job["state"] == "failed" and job["error"]["code"] == "model_bad_response"
    assert Listener.BANNER not in job["error"]["message"] and internal.hits  # the operator's endpoint is trusted


def test_a_tenant_admin_chooses_among_the_operator_endpoints(tenant_a, llm_server, no_model, settings,
                                                            django_capture_on_commit_callbacks):
    settings.OUTBOUND_ALLOW = []  # the operator's own endpoints need no allow-list entry
    settings.MODEL_TENANT_ENDPOINTS = False
    settings.MODEL_ENDPOINTS = (
        '[{"name": "hosted", "base_url": "https://api.example.test/v1", "model": "big"},'
        f' {{"name": "local", "base_url": "{llm_server.base_url}", "model": "small", "api_key": "sk-operator"}}]'
    )
    shown = tenant_a.admin_client.get("/api/v1/jobs/model").json()
    assert shown["endpoints"] == [{"name": "hosted", "model": "big"}, {"name": "local", "model": "small"}]
    assert shown["endpoint"] == "hosted" and shown["tenant_endpoints"] is False  # the first is the default
    unknown = put(tenant_a.admin_client, endpoint="intranet")
    assert unknown.status_code == 422 and unknown.json()["error"]["field"] == "endpoint"
    chosen = put(tenant_a.admin_client, endpoint="local")
    assert chosen.status_code == 200 and chosen.json()["endpoint"] == "local" and chosen.json()["model"] == "small"
    llm_server.script(completion(DRAFT))
    job = generate(tenant_a.admin_client, django_capture_on_commit_callbacks)
    assert job["state"] == "done", job
    sent = llm_server.requests[0]
    assert sent["body"]["model"] == "small" and sent["headers"]["authorization"] == "Bearer sk-operator"
    # Typing the operator's own URL is choosing that endpoint, not a tenant URL.
    typed = put(tenant_a.admin_client, endpoint="", base_url=llm_server.base_url + "/")
    assert typed.status_code == 200 and typed.json()["endpoint"] == "local"


def test_the_operators_key_never_goes_to_a_tenant_url(tenant_a, model, settings,
                                                      django_capture_on_commit_callbacks):
    """The operator's endpoint has a key; the tenant's own server must not receive it."""
    own = LlmServer().start()
    try:
        settings.MODEL_TENANT_ENDPOINTS = True
        settings.OUTBOUND_ALLOW = [f"127.0.0.1:{own.port}"]
        settings.LOREWEAVE_LLM_API_KEY = "sk-operator-secret"
        assert put(tenant_a.admin_client, base_url=own.base_url, model="mine").status_code == 200
        own.script(completion(DRAFT))
        job = generate(tenant_a.admin_client, django_capture_on_commit_callbacks)
        assert job["state"] == "done", job
        assert "sk-operator-secret" not in own.requests[0]["headers"].get("authorization", "")
        assert model.requests == []
    finally:
        own.stop()


def test_the_page_refuses_an_internal_url_on_its_field(tenant_a, tenant_urls, internal):
    from tests.web.support import signed_in
    from tests.web.test_editor_pages import html

    admin = signed_in(tenant_a.admin)
    refused = admin.post("/jobs/model", {"base_url": f"{internal.url}/v1", "model": "m"})
    assert refused.status_code == 422
    page = html(refused)
    assert "a loopback address" in page and "A-3" in page
    assert not TenantModelSettings.objects.for_tenant(tenant_a.tenant).exists()


def test_without_tenant_endpoints_the_page_offers_only_the_operators(tenant_a, no_model, settings):
    from tests.web.support import signed_in
    from tests.web.test_editor_pages import html

    settings.MODEL_TENANT_ENDPOINTS = False
    settings.MODEL_ENDPOINTS = "hosted=https://api.example.test/v1"
    page = html(signed_in(tenant_a.admin).get("/jobs/model"))
    assert 'name="endpoint"' in page and ">hosted<" in page and 'name="base_url"' not in page
    saved = signed_in(tenant_a.admin).post("/jobs/model", {"endpoint": "hosted", "model": "big"})
    assert saved.status_code == 302
    assert TenantModelSettings.objects.for_tenant(tenant_a.tenant).get().endpoint == "hosted"


def test_the_operator_checks_the_settings_and_a_url_with_a_command(settings):
    import json as json_module
    from io import StringIO

    from django.core.management import CommandError, call_command

    settings.LOREWEAVE_LLM_BASE_URL = ""
    settings.MODEL_ENDPOINTS = "local=http://127.0.0.1:8080/v1, hosted=https://api.example.test/v1"
    settings.OUTBOUND_ALLOW = ["10.0.0.0/8", "127.0.0.1:8080"]
    out = StringIO()
    call_command("model_endpoints", "--json", "--url", "http://169.254.169.254/latest", "--url", "http://10.1.1.1/v1",
                 stdout=out)
    report = json_module.loads(out.getvalue())
    assert [e["name"] for e in report["endpoints"]] == ["local", "hosted"]
    assert report["outbound_allow"] == ["10.0.0.0/8", "127.0.0.1:8080"]
    assert [(c["allowed"], "metadata" in c["why"]) for c in report["checked"]] == [(False, True), (True, False)]
    settings.OUTBOUND_ALLOW = ["127.0.0.1:http"]
    with pytest.raises(CommandError, match="OUTBOUND_ALLOW"):
        call_command("model_endpoints", stdout=StringIO())
    settings.OUTBOUND_ALLOW = []
    settings.MODEL_ENDPOINTS = '[{"name": "x", "base_url": "ftp://nope"}]'
    with pytest.raises(CommandError, match="MODEL_ENDPOINTS"):
        call_command("model_endpoints", stdout=StringIO())
