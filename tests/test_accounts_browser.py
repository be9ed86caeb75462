"""Two users on the web page in real headless Chromium (issue 52): each signs in with their key, sees only the
collection granted, asks, gives feedback, reloads and finds the conversation, reopens it and asks a follow-up read
against its history, renames, exports it as Markdown and JSON; the second user's page gets 403 on the first
user's collection and sources and 404 on their conversation and feedback; signing out ends the session."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from test_server_browser import ARGS, CHROMIUM, sync_api  # noqa: F401  (skips without Chromium or Playwright)
from test_server import classifier, serving  # noqa: E402,F401

from typedrag.config import Settings  # noqa: E402
from typedrag.engines.offline import OfflineEngine  # noqa: E402
from typedrag.pipeline import Pipeline  # noqa: E402
from typedrag.server.app import create_app  # noqa: E402
from typedrag.server.service import ServerOptions  # noqa: E402
from typedrag.store import open_store  # noqa: E402

ADMIN_KEY = "admin-key-for-the-browser-accounts-test"
WAIT = 300_000  # ms a step may take before the test says it hung (never a speed check)
HANG_GUARD = 900
CROCODILES = (
    "# Crocodiles\n\nCrocodiles have a V-shaped, pointed snout. When a crocodile closes its mouth, the fourth "
    "tooth of the lower jaw stays visible. Crocodiles tolerate salt water thanks to glands on the tongue.\n"
)
BREAD = (
    "Bread making\n\nTo bake bread, first mix flour, water, salt and yeast into a dough. Knead the dough for about "
    "ten minutes until it is smooth and elastic. Let it rise in a warm place until it doubles in size.\n"
)

expect = sync_api.expect


@pytest.fixture()
def site(tmp_path, classifier):
    data = tmp_path / "data"
    store = open_store(None, data)
    keys = {}
    for name, collection in [("alice", "alpha"), ("bob", "beta")]:
        store.add_user(name, "editor")
        store.grant(name, collection, "write")
        keys[name] = store.create_key(name).secret
    app = create_app(
        Settings(data=data, cache_dir=None),
        Pipeline(OfflineEngine(), None, classifier=classifier),
        ServerOptions(api_key=ADMIN_KEY),
        store=store,
    )
    admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
    with serving(app) as url:
        for name, text, filename in [("alpha", CROCODILES, "crocodiles.md"), ("beta", BREAD, "bread.txt")]:
            assert (
                httpx.post(f"{url}/v1/collections", json={"name": name, "retrieval": "bm25"}, headers=admin).status_code
                == 201
            )
            assert (
                httpx.post(
                    f"{url}/v1/collections/{name}/documents",
                    files=[("files", (filename, text.encode()))],
                    headers=admin,
                    timeout=120,
                ).status_code
                == 202
            )
            deadline = time.monotonic() + HANG_GUARD
            while httpx.get(f"{url}/v1/collections/{name}", headers=admin).json()["state"] != "ready":
                assert time.monotonic() < deadline, f"{name} did not become ready"
                time.sleep(0.2)
        yield url, keys, store, data
    store.close()


def open_page(browser, url: str):
    context = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    page = context.new_page()
    page.console_errors = []
    page.on("pageerror", lambda error: page.console_errors.append(str(error)))
    page.on("console", lambda message: message.type == "error" and page.console_errors.append(message.text))
    page.goto(url)
    return page


def sign_in(page, key: str, name: str) -> None:
    expect(page.locator("#sign-in")).to_be_visible()
    expect(page.locator("#ask")).to_be_hidden()
    page.fill("#sign-in-key", key)
    page.click("#sign-in-button")
    expect(page.locator("#signed-in-as")).to_have_text(f"Signed in as {name} (editor)")
    expect(page.locator("#sign-in")).to_be_hidden()


def ask(page, question: str) -> None:
    """Ask, and wait until the answer is saved (its verdict bar shown, for a message not shown before)."""
    before = page.evaluate("() => document.querySelector('#feedback .feedback-bar')?.dataset.message || ''")
    page.fill("#question", question)
    page.click("#submit")
    page.wait_for_function(
        "(before) => { const bar = document.querySelector('#feedback .feedback-bar'); return bar && bar.dataset.message !== before; }",
        arg=before,
        timeout=WAIT,
    )


def fetch(page, method: str, path: str, body=None) -> dict:
    """A request from the page's own origin with its cookie and CSRF token, as its scripts send them."""
    return page.evaluate(
        """async ([method, path, body]) => {
            const headers = { "Content-Type": "application/json" };
            if (account.csrf) headers["X-CSRF-Token"] = account.csrf;
            const response = await fetch(path, { method, headers, body: body === null ? undefined : JSON.stringify(body) });
            return { status: response.status, text: await response.text() };
        }""",
        [method, path, body],
    )


def test_two_users_each_keep_their_own_conversations_and_feedback(site):
    url, keys, store, data = site
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            alice = open_page(browser, url)
            sign_in(alice, keys["alice"], "alice")
            expect(alice.locator("#collection option")).to_have_text(["alpha"])
            expect(alice.locator("#conversation-list")).to_contain_text("none yet")
            # an editor uploads where granted; collections are created and deleted by admins
            expect(alice.locator("#dropzone")).to_be_visible()
            expect(alice.locator("#new-collection-box")).to_be_hidden()
            expect(alice.locator("#delete-collection")).to_be_hidden()

            # another site's form, posted in alice's browser while she is signed in, does nothing
            attacker = alice.context.new_page()
            attacker.set_content(f"""<form id=f method=post enctype=text/plain action="{url}/v1/conversations">
                <input name='{{"collection":"alpha","x":"' value='"}}'></form>""")
            with attacker.expect_navigation():
                attacker.evaluate("document.getElementById('f').submit()")
            assert "201" not in attacker.content() and '"id"' not in attacker.content()
            attacker.close()
            assert store.conversations(store.user("alice")).items == []

            ask(alice, "Why does a crocodile's fourth tooth stay visible?")
            expect(alice.locator("#answer")).to_contain_text("tooth")
            expect(alice.locator("#conversation-list li")).to_have_count(1)
            alice.click("#feedback [data-verdict=up]")
            expect(alice.locator("#feedback .saved-note")).to_have_text("feedback saved")
            alice.fill("#feedback .comment", "clear and cited")
            alice.press("#feedback .comment", "Enter")
            expect(alice.locator("#feedback [data-verdict=up]")).to_have_attribute("aria-pressed", "true")
            alice.check(
                '#feedback .helped[data-passage="crocodiles.md#0"]'
            )  # the passage that helped, sent with the verdict
            alice.wait_for_function(
                "() => document.querySelector('#feedback .saved-note').textContent === 'feedback saved'"
            )
            deadline = time.monotonic() + HANG_GUARD
            while not store.feedback_records()[0].helpful:
                assert time.monotonic() < deadline
                time.sleep(0.1)

            # a reload keeps the session and reopens the conversation, the verdict with it
            alice.reload()
            expect(alice.locator("#signed-in-as")).to_have_text("Signed in as alice (editor)")
            expect(alice.locator("#conversation-list li")).to_have_text(
                [
                    "Why does a crocodile's fourth tooth stay visible?alpha · "
                    + alice.locator("#conversation-list .when").inner_text().split(" · ")[1]
                ]
            )
            expect(alice.locator("#answer")).to_contain_text("tooth")
            expect(alice.locator("#feedback [data-verdict=up]")).to_have_attribute("aria-pressed", "true")
            expect(alice.locator("#feedback .comment")).to_have_value("clear and cited")
            expect(alice.locator('#feedback .helped[data-passage="crocodiles.md#0"]')).to_be_checked()

            # a new page on the same session: reopened from the list, a follow-up is read against its history
            alice.goto(url)
            alice.click("#conversation-list li button")
            expect(alice.locator("#answer")).to_contain_text("tooth")
            ask(alice, "And why can they live in salt water?")
            expect(alice.locator("#thread .turn")).to_have_count(1)
            expect(alice.locator("#thread .turn .feedback-bar")).to_have_count(
                1
            )  # the earlier answer keeps its verdict bar
            [conversation] = store.conversations(store.user("alice")).items
            [first, second] = [m for m in store.messages(store.user("alice"), conversation.id) if m.role == "assistant"]
            assert second.result["rewrite"]["history_turns"] == 2

            # rename, search, export
            alice.once("dialog", lambda dialog: dialog.accept("Crocodile teeth"))
            alice.click("#rename-conversation")
            expect(alice.locator("#conversation-list li button").first).to_contain_text("Crocodile teeth")
            alice.fill("#conversation-search", "salt water")
            expect(alice.locator("#conversation-list li")).to_have_count(1)
            alice.fill("#conversation-search", "sourdough")
            expect(alice.locator("#conversation-list")).to_contain_text("nothing found")
            with alice.expect_download() as markdown:
                alice.click("#export-markdown")
            text = open(markdown.value.path(), encoding="utf-8").read()
            assert "# Crocodile teeth" in text and "Why does a crocodile's fourth tooth stay visible?" in text
            assert "crocodiles.md" in text
            with alice.expect_download() as exported:
                alice.click("#export-json")
            saved = json.loads(open(exported.value.path(), encoding="utf-8").read())
            answers = [m for m in saved["messages"] if m["role"] == "assistant"]
            assert answers[0]["feedback"]["verdict"] == "up" and answers[0]["feedback"]["comment"] == "clear and cited"
            assert answers[0]["feedback"]["helpful"] == ["crocodiles.md#0"]
            assert answers[0]["result"]["trace"] if "trace" in answers[0]["result"] else answers[0]["result"]["steps"]
            assert answers[0]["trace_id"]

            # bob, in a browser of his own: only beta; alice's collection, sources, conversation and feedback refused
            bob = open_page(browser, url)
            sign_in(bob, keys["bob"], "bob")
            expect(bob.locator("#collection option")).to_have_text(["beta"])
            expect(bob.locator("#conversation-list")).to_contain_text("none yet")
            ask(bob, "How long should I knead bread dough?")
            expect(bob.locator("#conversation-list li")).to_have_count(1)
            assert fetch(bob, "GET", "/v1/collections/alpha/documents")["status"] == 403
            assert fetch(bob, "GET", "/v1/collections/alpha/source?passage=crocodiles.md%230")["status"] == 403
            assert (
                fetch(
                    bob, "POST", "/v1/answer", {"question": "Why the tooth?", "collection": "alpha", "method": "rag"}
                )["status"]
                == 403
            )
            for method, path, body in [
                ("GET", f"/v1/conversations/{conversation.id}", None),
                ("GET", f"/v1/conversations/{conversation.id}/export?format=json", None),
                ("POST", f"/v1/messages/{first.id}/feedback", {"verdict": "down"}),
                ("GET", f"/v1/messages/{first.id}/feedback", None),
            ]:
                refused = fetch(bob, method, path, body)
                assert refused["status"] == 403 and "crocodile" not in refused["text"].lower(), (path, refused)
            bob.goto(f"{url}/?again#c={conversation.id}")  # alice's conversation by its address: not shown
            expect(bob.locator("#error")).to_contain_text("403")
            expect(bob.locator("#answer")).not_to_contain_text("tooth")

            # signing out ends the session: the page asks for a key again
            bob.click("#sign-out")
            expect(bob.locator("#sign-in")).to_be_visible()
            assert fetch(bob, "GET", "/v1/conversations")["status"] == 401
            # alice's verdict becomes an evaluation set: the question, the passage she marked as what is relevant
            from typer.testing import CliRunner

            from typedrag.cli import app as cli

            out = data.parent / "feedback.jsonl"
            exported = CliRunner().invoke(cli, ["eval", "export-feedback", "--data", str(data), "--out", str(out)])
            assert exported.exit_code == 0, exported.output
            rows = [json.loads(line) for line in out.read_text().splitlines()]
            row = next(r for r in rows if r["question"] == "Why does a crocodile's fourth tooth stay visible?")
            assert row["verdict"] == "up" and row["relevant"] == ["crocodiles.md#0"]

            # delete: gone from the list, and from the page's address
            alice.fill("#conversation-search", "")
            expect(alice.locator("#conversation-list li")).to_have_count(1)
            alice.once("dialog", lambda dialog: dialog.accept())
            alice.click("#delete-conversation")
            expect(alice.locator("#conversation-list")).to_contain_text("none yet")
            assert store.conversations(store.user("alice")).items == []

            assert alice.console_errors == []
            # bob's only errors are the refusals asked for above, as the browser logs a failed request
            assert bob.console_errors and all(e.startswith("Failed to load resource") for e in bob.console_errors), (
                bob.console_errors
            )
        finally:
            browser.close()
