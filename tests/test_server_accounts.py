"""Accounts on a real `serve` (issue 52): every route, the OpenAI-compatible endpoint, the source viewer and the MCP
tools enforce each user's grants; the page signs in with a key (a session cookie kept in the store, CSRF-protected);
an SSO proxy's user header is believed only from the proxies named; the server's own key stays an admin key; saved
conversations and feedback are each user's own. Hostile cases: a revoked key, a forged or replayed cookie, a
cross-site post, a header from a non-proxy address, keys echoed back in paths and bodies."""

from __future__ import annotations

import json
import time

import httpx
import pytest

pytest.importorskip("fastapi", reason="fastapi and uvicorn are dependencies of typedrag: pip install -e .")

from test_server import classifier, serving  # noqa: E402,F401  (tests/ is on sys.path, as for conftest)

from typedrag.config import Settings  # noqa: E402
from typedrag.engines.offline import OfflineEngine  # noqa: E402
from typedrag.index import open_retriever  # noqa: E402
from typedrag.pipeline import Pipeline  # noqa: E402
from typedrag.server.app import create_app  # noqa: E402
from typedrag.server.service import ServerOptions  # noqa: E402
from typedrag.store import open_store  # noqa: E402

ADMIN_KEY = "admin-key-for-the-accounts-tests"
HANG_GUARD = 900  # seconds a wait may take before the test says it hung (never a speed check)
CROCODILES = (
    "# Crocodiles\n\nCrocodiles have a V-shaped, pointed snout. When a crocodile closes its mouth, the fourth "
    "tooth of the lower jaw stays visible. Crocodiles tolerate salt water thanks to glands on the tongue.\n"
)
BREAD = (
    "Bread making\n\nTo bake bread, first mix flour, water, salt and yeast into a dough. Knead the dough for about "
    "ten minutes until it is smooth and elastic. Let it rise in a warm place until it doubles in size.\n"
)


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def settled(url: str, name: str) -> None:
    deadline = time.monotonic() + HANG_GUARD
    while True:
        listing = httpx.get(f"{url}/v1/collections/{name}/documents", headers=bearer(ADMIN_KEY), timeout=30).json()
        if listing["collection"]["state"] == "ready" and all(d["status"] == "indexed" for d in listing["documents"]):
            return
        assert time.monotonic() < deadline, f"ingestion of {name} did not settle: {listing}"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def site(tmp_path_factory, classifier):
    """A server with two collections (alpha: crocodiles, beta: bread), the server's key, and accounts: alice (editor,
    write on alpha), bob (reader, read on beta), carol (reader on alpha, her key revoked later by a test)."""
    data = tmp_path_factory.mktemp("accounts") / "data"
    store = open_store(None, data)
    keys = {}
    for name, role, collection, access in [
        ("alice", "editor", "alpha", "write"),
        ("bob", "reader", "beta", "read"),
        ("carol", "reader", "alpha", "read"),
    ]:
        store.add_user(name, role)
        store.grant(name, collection, access)
        keys[name] = store.create_key(name).secret
    pipeline = Pipeline(OfflineEngine(), None, classifier=classifier)
    options = ServerOptions(api_key=ADMIN_KEY, trusted_proxies=("10.9.9.9",), user_header="X-Forwarded-User")
    with serving(create_app(Settings(data=data, cache_dir=None), pipeline, options, store=store)) as url:
        for name, text, filename in [("alpha", CROCODILES, "crocodiles.md"), ("beta", BREAD, "bread.txt")]:
            assert (
                httpx.post(
                    f"{url}/v1/collections", json={"name": name, "retrieval": "bm25"}, headers=bearer(ADMIN_KEY)
                ).status_code
                == 201
            )
            sent = httpx.post(
                f"{url}/v1/collections/{name}/documents",
                files=[("files", (filename, text.encode()))],
                headers=bearer(ADMIN_KEY),
                timeout=120,
            )
            assert sent.status_code == 202, sent.text
            settled(url, name)
        yield url, keys, store
    store.close()


def test_once_accounts_exist_a_request_must_say_who_it_is(site):
    url, keys, _ = site
    for path in [
        "/v1/collections",
        "/v1/conversations",
        "/v1/models",
        "/v1/collections/alpha/source?passage=crocodiles.md%230",
    ]:
        assert httpx.get(url + path).status_code == 401, path
    wrong = httpx.get(f"{url}/v1/collections", headers=bearer(keys["alice"][:-2] + "xx"))
    assert wrong.status_code == 401 and wrong.headers["www-authenticate"] == "Bearer"
    assert httpx.get(f"{url}/healthz").status_code == 200  # probes need no key


def test_each_user_sees_and_uses_only_the_collections_granted(site):
    url, keys, _ = site
    alice, bob = bearer(keys["alice"]), bearer(keys["bob"])
    assert [c["name"] for c in httpx.get(f"{url}/v1/collections", headers=alice).json()["collections"]] == ["alpha"]
    assert [c["name"] for c in httpx.get(f"{url}/v1/collections", headers=bob).json()["collections"]] == ["beta"]
    assert [c["name"] for c in httpx.get(f"{url}/v1/collections", headers=bearer(ADMIN_KEY)).json()["collections"]] == [
        "alpha",
        "beta",
    ]
    # what the page offers: uploads where the caller writes, creating collections to admins only
    as_bob, as_alice = (httpx.get(f"{url}/v1/collections", headers=h).json() for h in (bob, alice))
    assert (as_bob["writable"], as_bob["collections"][0]["may_write"]) == (False, False)
    assert (as_alice["writable"], as_alice["collections"][0]["may_write"]) == (False, True)
    assert httpx.get(f"{url}/v1/collections", headers=bearer(ADMIN_KEY)).json()["writable"] is True

    asked = httpx.post(
        f"{url}/v1/collections/beta/answer",
        json={"question": "How do I knead dough?", "method": "rag"},
        headers=bob,
        timeout=120,
    )
    assert asked.status_code == 200 and asked.json()["sources"][0]["passage_id"] == "bread.txt#0"
    # a question naming no collection is asked in the only one the caller may read; an error names only those
    unnamed = httpx.post(
        f"{url}/v1/answer", json={"question": "How do I knead dough?", "method": "rag"}, headers=bob, timeout=120
    )
    assert unnamed.status_code == 200 and unnamed.json()["collection"] == "beta"
    assert httpx.get(f"{url}/v1/collections", headers=bob).json()["default"] == "beta"
    several = httpx.post(f"{url}/v1/answer", json={"question": "Why?"}, headers=bearer(ADMIN_KEY))
    assert several.status_code == 422 and "alpha, beta" in several.json()["error"]["message"]
    # bob in alpha: 403 on every route that reads it, the source viewer's included
    for method, path, body in [
        ("POST", "/v1/collections/alpha/answer", {"question": "Why is a crocodile's tooth visible?", "method": "rag"}),
        (
            "POST",
            "/v1/answer",
            {"question": "Why is a crocodile's tooth visible?", "method": "rag", "collection": "alpha"},
        ),
        (
            "POST",
            "/v1/collections/alpha/answer/stream",
            {"question": "Why is a crocodile's tooth visible?", "method": "rag"},
        ),
        ("POST", "/v1/collections/alpha/search", {"query": "crocodile tooth"}),
        ("GET", "/v1/collections/alpha", None),
        ("GET", "/v1/collections/alpha/documents", None),
        ("GET", "/v1/collections/alpha/source?passage=crocodiles.md%230", None),
        ("GET", "/v1/collections/alpha/documents/crocodiles.md/original", None),
        ("POST", "/v1/conversations", {"collection": "alpha"}),
    ]:
        response = httpx.request(method, url + path, json=body, headers=bob, timeout=120)
        assert response.status_code == 403, (path, response.status_code, response.text)
        assert "crocodile" not in response.text.lower().replace("crocodiles.md", "")  # nothing of alpha's text
    # a reader writes nothing, even where they read; an editor writes where granted, creates no collection
    assert (
        httpx.post(
            f"{url}/v1/collections/beta/documents", files=[("files", ("x.txt", b"some words here"))], headers=bob
        ).status_code
        == 403
    )
    assert httpx.delete(f"{url}/v1/collections/beta/documents/bread.txt", headers=bob).status_code == 403
    assert httpx.post(f"{url}/v1/collections", json={"name": "gamma"}, headers=alice).status_code == 403
    assert httpx.delete(f"{url}/v1/collections/alpha", headers=alice).status_code == 403
    assert httpx.delete(f"{url}/v1/collections/beta", headers=alice).status_code == 403


def test_the_openai_endpoint_and_its_models_follow_the_grants(site):
    url, keys, _ = site
    bob = bearer(keys["bob"])
    models = {m["id"] for m in httpx.get(f"{url}/v1/models", headers=bob).json()["data"]}
    assert {"typedrag:beta", "typedrag-rag:beta", "typedrag-llm"} <= models
    assert not any(m.endswith(":alpha") for m in models)
    assert httpx.get(f"{url}/v1/models/typedrag:alpha", headers=bob).status_code == 404
    refused = httpx.post(
        f"{url}/v1/chat/completions",
        headers=bob,
        timeout=120,
        json={
            "model": "typedrag-rag:alpha",
            "messages": [{"role": "user", "content": "Why is a crocodile's tooth visible?"}],
        },
    )
    assert refused.status_code == 403 and refused.json()["error"]["message"]
    allowed = httpx.post(
        f"{url}/v1/chat/completions",
        headers=bob,
        timeout=120,
        json={"model": "typedrag-rag:beta", "messages": [{"role": "user", "content": "How do I knead bread dough?"}]},
    )
    assert allowed.status_code == 200 and allowed.json()["typedrag"]["collection"] == "beta"


async def test_the_mcp_tools_follow_the_grants(site):
    mcp = pytest.importorskip("mcp", reason="the test extra installs mcp: pip install -e '.[test]'")  # noqa: F841
    httpx2 = pytest.importorskip("httpx2", reason="mcp's own HTTP client")
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    url, keys, _ = site
    http = httpx2.AsyncClient(headers=bearer(keys["bob"]), timeout=httpx2.Timeout(30, read=300))
    async with http, Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
        listed = await client.call_tool("list_collections", {})
        assert [c["name"] for c in listed.structured_content["collections"]] == ["beta"]
        for tool, arguments in [
            ("search", {"query": "crocodile tooth", "collection": "alpha"}),
            ("answer", {"question": "Why is a crocodile's tooth visible?", "collection": "alpha", "method": "rag"}),
        ]:
            refused = await client.call_tool(tool, arguments)
            assert refused.is_error and "not allowed" in refused.content[0].text
            assert "V-shaped" not in refused.content[0].text
        found = await client.call_tool("search", {"query": "knead dough", "collection": "beta"})
        assert not found.is_error and found.structured_content["passages"][0]["id"] == "bread.txt#0"


def test_conversations_and_feedback_are_each_users_own(site):
    url, keys, _ = site
    alice, bob = bearer(keys["alice"]), bearer(keys["bob"])
    started = httpx.post(f"{url}/v1/conversations", json={"collection": "alpha"}, headers=alice)
    assert started.status_code == 201, started.text
    conversation = started.json()["id"]
    asked = httpx.post(
        f"{url}/v1/conversations/{conversation}/answer",
        headers=alice,
        timeout=120,
        json={"question": "Why does a crocodile's fourth tooth stay visible?", "method": "rag"},
    )
    assert asked.status_code == 200, asked.text
    answer = asked.json()["answer"]["id"]
    assert (
        httpx.post(
            f"{url}/v1/messages/{answer}/feedback", json={"verdict": "up", "comment": "clear"}, headers=alice
        ).json()["verdict"]
        == "up"
    )
    assert [c["id"] for c in httpx.get(f"{url}/v1/conversations", headers=bob).json()["conversations"]] == []
    # alice's conversation is refused to bob on each route (403, as the issue asks), nothing of it shown
    for method, path, body in [
        ("GET", f"/v1/conversations/{conversation}", None),
        ("GET", f"/v1/conversations/{conversation}/export?format=json", None),
        ("GET", f"/v1/conversations/{conversation}/export?format=markdown", None),
        ("PATCH", f"/v1/conversations/{conversation}", {"title": "mine now"}),
        ("DELETE", f"/v1/conversations/{conversation}", None),
        ("POST", f"/v1/conversations/{conversation}/answer", {"question": "And salt water?", "method": "rag"}),
        ("POST", f"/v1/messages/{answer}/feedback", {"verdict": "down"}),
        ("GET", f"/v1/messages/{answer}/feedback", None),
    ]:
        response = httpx.request(method, url + path, json=body, headers=bob, timeout=120)
        assert response.status_code == 403, (path, response.status_code, response.text)
        assert "crocodile" not in response.text.lower()
    kept = httpx.get(f"{url}/v1/conversations/{conversation}", headers=alice).json()
    assert kept["conversation"]["title"] == "Why does a crocodile's fourth tooth stay visible?"
    assert [m["role"] for m in kept["messages"]] == ["user", "assistant"]
    assert httpx.get(f"{url}/v1/messages/{answer}/feedback", headers=alice).json()["feedback"]["comment"] == "clear"
    # /metrics counts the verdicts by type, strategy and verdict
    scraped = httpx.get(f"{url}/metrics").text
    assert 'typedrag_feedback{strategy="rag",type="unknown",verdict="up"} 1.0' in scraped, scraped[-2000:]
    # the server's own key is an admin without an account: no conversations of its own
    assert httpx.get(f"{url}/v1/conversations", headers=bearer(ADMIN_KEY)).status_code == 403


def cookie_of(response: httpx.Response) -> str:
    [line] = [v for k, v in response.headers.multi_items() if k.lower() == "set-cookie"]
    return line


def test_the_page_signs_in_with_a_key_and_writes_need_the_csrf_token(site):
    url, keys, _ = site
    assert httpx.post(f"{url}/v1/session", json={"key": "tdk_notarealkey_0000000000000000"}).status_code == 401
    signed = httpx.post(f"{url}/v1/session", json={"key": keys["alice"]})
    assert signed.status_code == 200 and signed.json()["user"] == "alice" and signed.json()["conversations"]
    line = cookie_of(signed).lower()
    assert "httponly" in line and "samesite=lax" in line and "secure" not in line and "path=/" in line
    assert keys["alice"] not in signed.text and keys["alice"].lower() not in line
    csrf = signed.json()["csrf"]
    page = httpx.Client(base_url=url, cookies=signed.cookies, timeout=120)
    with page:
        assert page.get("/v1/session").json()["csrf"] == csrf
        assert page.get("/v1/session").headers["cache-control"] == "no-store"
        assert [c["name"] for c in page.get("/v1/collections").json()["collections"]] == ["alpha"]
        # a write with the cookie alone (what a cross-site form post would carry) is refused
        assert page.post("/v1/conversations", json={"collection": "alpha"}).status_code == 403
        assert (
            page.post("/v1/conversations", json={"collection": "alpha"}, headers={"X-CSRF-Token": "0" * 40}).status_code
            == 403
        )
        cross = page.post(
            "/v1/conversations",
            json={"collection": "alpha"},
            headers={"X-CSRF-Token": csrf, "Sec-Fetch-Site": "cross-site"},
        )
        assert cross.status_code == 403 and "another site" in cross.json()["error"]["message"]
        same = page.post(
            "/v1/conversations",
            json={"collection": "alpha"},
            headers={"X-CSRF-Token": csrf, "Sec-Fetch-Site": "same-origin"},
        )
        assert same.status_code == 201
        # a sign-in from another site is refused before the key is even looked at
        assert (
            httpx.post(
                f"{url}/v1/session", json={"key": keys["alice"]}, headers={"Sec-Fetch-Site": "cross-site"}
            ).status_code
            == 403
        )
        # signing out ends the session in the store: the same cookie replayed is refused
        token = page.cookies["typedrag_session"]
        assert page.request("DELETE", "/v1/session", headers={"X-CSRF-Token": csrf}).status_code == 200
    replayed = httpx.get(f"{url}/v1/collections", cookies={"typedrag_session": token})
    assert replayed.status_code == 401 and "session has ended" in replayed.json()["error"]["message"]
    forged = httpx.get(f"{url}/v1/collections", cookies={"typedrag_session": "A" * 43})
    assert forged.status_code == 401
    assert httpx.get(f"{url}/v1/session", cookies={"typedrag_session": "A" * 43}).json()["sign_in_required"]


def test_the_servers_key_signs_the_page_in_as_an_admin(site):
    url, _, _ = site
    signed = httpx.post(f"{url}/v1/session", json={"key": ADMIN_KEY})
    assert signed.status_code == 200 and signed.json()["role"] == "admin" and signed.json()["user"] is None
    listed = httpx.get(f"{url}/v1/collections", cookies=signed.cookies)
    assert [c["name"] for c in listed.json()["collections"]] == ["alpha", "beta"]


def test_a_revoked_key_and_its_sessions_stop_at_once(site):
    url, keys, store = site
    carol = bearer(keys["carol"])
    signed = httpx.post(f"{url}/v1/session", json={"key": keys["carol"]})
    assert httpx.get(f"{url}/v1/collections", headers=carol).status_code == 200
    assert httpx.get(f"{url}/v1/collections", cookies=signed.cookies).status_code == 200
    [key] = store.keys("carol")
    store.revoke_key("carol", key.prefix)
    assert httpx.get(f"{url}/v1/collections", headers=carol).status_code == 401
    ended = httpx.get(f"{url}/v1/collections", cookies=signed.cookies)
    assert ended.status_code == 401 and "max-age=0" in cookie_of(ended).lower()
    assert httpx.post(f"{url}/v1/session", json={"key": keys["carol"]}).status_code == 401


def test_a_grant_revoked_applies_at_the_next_request(site):
    url, keys, store = site
    bob = bearer(keys["bob"])
    store.grant("bob", "alpha", "read")
    assert [c["name"] for c in httpx.get(f"{url}/v1/collections", headers=bob).json()["collections"]] == [
        "alpha",
        "beta",
    ]
    store.revoke_grant("bob", "alpha")
    assert [c["name"] for c in httpx.get(f"{url}/v1/collections", headers=bob).json()["collections"]] == ["beta"]
    assert httpx.get(f"{url}/v1/collections/alpha", headers=bob).status_code == 403


def test_a_user_header_from_an_address_that_is_no_trusted_proxy_is_ignored(site):
    url, _, _ = site
    spoofed = httpx.get(f"{url}/v1/collections", headers={"X-Forwarded-User": "alice"})
    assert spoofed.status_code == 401  # the test client is 127.0.0.1; only 10.9.9.9 is trusted


def test_keys_sent_back_are_never_echoed_in_error_bodies(site):
    url, keys, _ = site
    key = keys["alice"]
    for response in [
        httpx.get(f"{url}/v1/collections/{key}", headers=bearer(keys["alice"])),
        httpx.post(f"{url}/v1/conversations", json={"collection": key}, headers=bearer(keys["alice"])),
        httpx.patch(f"{url}/v1/conversations/{key}", json={"title": key}, headers=bearer(keys["alice"])),
        httpx.post(
            f"{url}/v1/session", content=json.dumps({"key": key + "x"}), headers={"Content-Type": "application/json"}
        ),
        httpx.post(f"{url}/v1/answer", json={"question": key, "collection": ADMIN_KEY}, headers=bearer(ADMIN_KEY)),
    ]:
        assert response.status_code >= 400
        assert key not in response.text and ADMIN_KEY not in response.text, response.text


@pytest.fixture(scope="module")
def behind_a_proxy(tmp_path_factory, classifier, small_index):
    """A server whose trusted proxy is this test (127.0.0.1), naming its users in X-Forwarded-User."""
    folder = tmp_path_factory.mktemp("proxied")
    database = f"sqlite:///{folder / 'store.db'}"
    store = open_store(database)
    store.add_user("dora", "reader")
    store.grant("dora", "default", "read")
    store.add_user("eve", "reader")
    store.set_disabled("eve", True)
    store.dora_key = store.create_key("dora").secret
    pipeline = Pipeline(OfflineEngine(), open_retriever(small_index), classifier=classifier)
    options = ServerOptions(trusted_proxies=("127.0.0.1",), user_header="X-Forwarded-User")
    with serving(create_app(Settings(index=small_index, cache_dir=None), pipeline, options, store=store)) as url:
        yield url, store
    store.close()


def test_a_trusted_proxys_user_header_signs_in_an_existing_enabled_account(behind_a_proxy):
    url, _ = behind_a_proxy
    dora = {"X-Forwarded-User": "dora"}
    assert [c["name"] for c in httpx.get(f"{url}/v1/collections", headers=dora).json()["collections"]] == ["default"]
    session = httpx.get(f"{url}/v1/session", headers=dora).json()
    assert session["user"] == "dora" and session["how"] == "header"
    assert httpx.get(f"{url}/v1/collections", headers={"X-Forwarded-User": "mallory"}).status_code == 401
    assert httpx.get(f"{url}/v1/collections", headers={"X-Forwarded-User": "eve"}).status_code == 401
    assert httpx.get(f"{url}/v1/collections").status_code == 401
    # a write by header still needs the page's CSRF token: a proxy forwards another site's form post too
    assert httpx.post(f"{url}/v1/conversations", json={}, headers=dora).status_code == 403
    made = httpx.post(f"{url}/v1/conversations", json={}, headers={**dora, "X-CSRF-Token": session["csrf"]})
    assert made.status_code == 201 and made.json()["collection"] == "default"


def test_the_cookie_is_secure_when_a_trusted_proxy_says_it_served_tls(behind_a_proxy):
    url, store = behind_a_proxy
    proxied = httpx.post(f"{url}/v1/session", json={"key": store.dora_key}, headers={"X-Forwarded-Proto": "https"})
    assert proxied.status_code == 200 and "; secure" in cookie_of(proxied).lower()
    plain = httpx.post(f"{url}/v1/session", json={"key": store.dora_key})
    assert plain.status_code == 200 and "secure" not in cookie_of(plain).lower()


def test_serve_leaves_forwarded_headers_to_the_trusted_proxies_check():
    """uvicorn would believe X-Forwarded-Proto and -For from any loopback client (its default); `serve` turns that off
    so that only --trusted-proxies are believed (typedrag.server.auth), the Secure cookie's decision included."""
    from typedrag.server.command import uvicorn_config

    config = uvicorn_config(create_app(Settings(cache_dir=None)), "127.0.0.1", 0)
    assert config.proxy_headers is False


def test_the_retention_setting_removes_old_conversations_when_the_server_starts(tmp_path, small_index, classifier):
    from datetime import datetime, timedelta, timezone

    import sqlalchemy as sa

    from typedrag.store.schema import conversations

    database = f"sqlite:///{tmp_path / 'store.db'}"
    store = open_store(database)
    alice = store.add_user("alice", "admin")
    old, _recent = (
        store.start_conversation(alice, "default", "old"),
        store.start_conversation(alice, "default", "recent"),
    )
    with store.db.writing() as c:
        c.execute(
            sa.update(conversations)
            .where(conversations.c.id == old.id)
            .values(updated_at=datetime.now(timezone.utc) - timedelta(days=40))
        )
    store.close()
    pipeline = Pipeline(OfflineEngine(), open_retriever(small_index), classifier=classifier)
    with serving(
        create_app(Settings(index=small_index, database=database, retention_days=30, cache_dir=None), pipeline)
    ):
        pass
    store = open_store(database)
    try:
        assert [c.title for c in store.conversations(store.user("alice")).items] == ["recent"]
    finally:
        store.close()


def test_a_log_line_never_carries_a_key_in_its_message_fields_or_traceback():
    import logging

    from typedrag.server.error_bodies import hide
    from typedrag.server.logs import KeyFilter

    user_key = "tdk_0123456789ab_" + "k" * 43
    hide("the-servers-secret-key")
    record = logging.LogRecord(
        "typedrag.server", logging.WARNING, __file__, 1, "sent %s and %s", (user_key, "the-servers-secret-key"), None
    )
    record.fields = {"path": f"/v1/collections/{user_key}", "n": 3}
    try:
        raise ValueError(f"bad key {user_key}")
    except ValueError:
        import sys

        record.exc_info = sys.exc_info()
    assert KeyFilter().filter(record)
    shown = record.getMessage() + json.dumps(record.fields)
    assert user_key not in shown and "the-servers-secret-key" not in shown and "tdk_0123456789ab" in shown
    assert record.exc_info is None and user_key not in record.fields["error"]


def test_a_proxy_may_be_allowed_to_add_its_users_as_readers_without_grants(tmp_path, small_index, classifier):
    database = f"sqlite:///{tmp_path / 'store.db'}"
    store = open_store(database)
    store.add_user("admin", "admin")
    pipeline = Pipeline(OfflineEngine(), open_retriever(small_index), classifier=classifier)
    options = ServerOptions(
        trusted_proxies=("127.0.0.0/8",), user_header="X-Forwarded-User", user_header_adds_users=True
    )
    try:
        with serving(create_app(Settings(index=small_index, cache_dir=None), pipeline, options, store=store)) as url:
            first = httpx.get(f"{url}/v1/session", headers={"X-Forwarded-User": "frank"})
            assert first.json()["user"] == "frank" and first.json()["role"] == "reader"
            assert httpx.get(f"{url}/v1/collections", headers={"X-Forwarded-User": "frank"}).json()["collections"] == []
            assert httpx.get(f"{url}/v1/collections/default", headers={"X-Forwarded-User": "frank"}).status_code == 403
            key_shaped = httpx.get(
                f"{url}/v1/collections", headers={"X-Forwarded-User": "tdk_0123456789ab_" + "k" * 43}
            )
            assert key_shaped.status_code == 401 and "k" * 43 not in key_shaped.text
        assert [u.name for u in store.users()] == ["admin", "frank"]
    finally:
        store.close()


def test_sql_metacharacters_and_oversized_strings_over_http_are_data_or_a_clear_refusal(site):
    url, keys, _ = site
    alice = bearer(keys["alice"])
    made = httpx.post(
        f"{url}/v1/conversations", json={"collection": "alpha", "title": "x'); DROP TABLE users; --"}, headers=alice
    )
    assert made.status_code == 201 and made.json()["title"] == "x'); DROP TABLE users; --"
    found = httpx.get(f"{url}/v1/conversations", params={"search": "%' OR 1=1 --"}, headers=alice)
    assert found.status_code == 200 and found.json()["conversations"] == []
    too_long = httpx.patch(f"{url}/v1/conversations/{made.json()['id']}", json={"title": "t" * 100_000}, headers=alice)
    assert too_long.status_code == 400 and "too long" in too_long.json()["error"]["message"]
    huge = httpx.patch(f"{url}/v1/conversations/{made.json()['id']}", json={"title": "t" * (1 << 20)}, headers=alice)
    assert huge.status_code == 413
    assert (
        httpx.get(f"{url}/v1/conversations/{made.json()['id']}", headers=alice).json()["conversation"]["title"]
        == "x'); DROP TABLE users; --"
    )
