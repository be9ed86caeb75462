"""Collections on the web page in real headless Chromium: create a collection, upload a real PDF and a real HTML
manual page (one chosen, one dropped), watch the ingestion to its end, ask, click a citation and see the original
with the passage highlighted (the HTML page marked, the PDF page boxed), delete a document and see it gone from the
answers, switch collections; no console errors, no host but ours."""

from __future__ import annotations

import base64
from pathlib import Path
from urllib.parse import urlparse

import pytest

from test_server_browser import ARGS, CHROMIUM, sync_api  # noqa: F401  (skips without Chromium or Playwright)
from test_server import classifier, serving  # noqa: E402,F401

from typedrag.config import Settings  # noqa: E402
from typedrag.engines.offline import OfflineEngine  # noqa: E402
from typedrag.pipeline import Pipeline  # noqa: E402
from typedrag.server.app import create_app  # noqa: E402

R_INTRO = Path("/usr/share/R/doc/manual/R-intro.pdf")
VACUUM_HTML = Path("/usr/share/doc/postgresql-doc-15/html/routine-vacuuming.html")
WAIT = 300_000  # ms a step may take before the test says it hung (never a speed check)

expect = sync_api.expect


@pytest.fixture()
def page(tmp_path, classifier):
    for path, package in ((R_INTRO, "r-doc-pdf"), (VACUUM_HTML, "postgresql-doc-15")):
        if not path.exists():
            pytest.skip(f"{path} not found: apt-get install {package}")
    app = create_app(
        Settings(data=tmp_path / "data", cache_dir=None), Pipeline(OfflineEngine(), None, classifier=classifier)
    )
    with serving(app) as url, sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.url_base = url
        page.hosts, page.console_errors = set(), []
        # every host the page and its viewer talked to (a PDF page shown from a blob: is no host)
        page.on(
            "request",
            lambda request: request.url.startswith(("blob:", "data:")) or page.hosts.add(urlparse(request.url).netloc),
        )
        page.on("console", lambda message: message.type == "error" and page.console_errors.append(message.text))
        page.on("pageerror", lambda error: page.console_errors.append(str(error)))
        page.goto(url)
        try:
            yield page
        finally:
            browser.close()


def create_collection(page, name: str, retrieval: str = "bm25") -> None:
    box = page.locator("#new-collection-box")
    if box.get_attribute("open") is None:
        page.click("#new-collection-box summary")
    page.fill("#new-name", name)
    page.select_option("#new-retrieval", retrieval)
    page.click("#create-collection")
    expect(page.locator("#collection")).to_have_value(name)
    expect(page.locator("#collection-state")).to_have_text("empty")
    expect(page.locator("#documents tbody tr")).to_have_count(0)


def drop(page, path: Path) -> None:
    """Drop a file on the drop zone as a user dragging it from a file manager would."""
    page.evaluate(
        """([name, data]) => {
            const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
            const transfer = new DataTransfer();
            transfer.items.add(new File([bytes], name, { type: "text/html" }));
            const zone = document.getElementById("dropzone");
            zone.dispatchEvent(new DragEvent("dragover", { dataTransfer: transfer, bubbles: true, cancelable: true }));
            zone.dispatchEvent(new DragEvent("drop", { dataTransfer: transfer, bubbles: true, cancelable: true }));
        }""",
        [path.name, base64.b64encode(path.read_bytes()).decode()],
    )


def settled(page) -> None:
    page.wait_for_function("() => ['ready', 'empty'].includes(document.body.dataset.collectionState)", timeout=WAIT)


def ask(page, question: str) -> None:
    page.fill("#question", question)
    page.click("#submit")
    expect(page.locator("#progress li").last).to_contain_text("Done", timeout=WAIT)


def cited_ids(page) -> list[str]:
    return page.locator("#sources .source-id").all_inner_texts()


def viewer(page):
    expect(page.locator("#viewer-panel")).to_be_visible()
    frame = page.frame_locator("#viewer-frame")
    expect(frame.locator("body[data-ready='1']")).to_have_count(1, timeout=WAIT)
    return frame


def test_a_collection_from_upload_to_a_cited_original(page):
    expect(page.locator("#library")).to_be_visible()
    expect(page.locator("#collection-state")).to_have_text("no collection yet")
    create_collection(page, "manuals")
    page.evaluate("""() => { window.__lines = []; new MutationObserver(() => window.__lines.push(document.getElementById('ingest-line').textContent))
        .observe(document.getElementById('ingest-line'), {childList: true, characterData: true, subtree: true}); }""")

    page.set_input_files("#files", str(R_INTRO))  # chosen in the file dialog
    drop(page, VACUUM_HTML)  # and dragged in
    expect(page.locator("#documents tbody tr")).to_have_count(2, timeout=WAIT)
    settled(page)
    statuses = dict(
        zip(
            page.locator("#documents tbody td:first-child a").all_inner_texts(),
            page.locator("#documents tbody td.status").all_inner_texts(),
        )
    )
    assert statuses == {"R-intro.pdf": "indexed", "routine-vacuuming.html": "indexed"}, statuses
    lines = page.evaluate("() => window.__lines")
    assert any(line.startswith("reading:") and "files" in line for line in lines), lines  # progress was shown live
    assert "passages" in page.locator("#collection-counts").inner_text()
    results = page.locator("#upload-result li").all_inner_texts()
    assert any("R-intro.pdf: added" in line for line in results) and any(
        "routine-vacuuming.html: added" in line for line in results
    )

    # an HTML source: its original opens beside the answer, the passage marked and in view
    ask(page, "Why should VACUUM be run regularly?")
    assert "collection manuals" in page.locator("#meta").inner_text()
    citation = page.locator("#answer a.cite").first
    number = citation.get_attribute("data-source")
    assert citation.get_attribute("href").startswith("/view/manuals?passage=")
    source_id = page.locator(f"#source-{number} .source-id").inner_text()
    assert source_id.startswith("routine-vacuuming.html#")
    citation.click()
    expect(page.locator(f"#source-{number}")).to_have_class("highlight")
    frame = viewer(page)
    mark = frame.locator("mark#passage")
    expect(mark).to_be_visible()
    expect(frame.locator("#document")).to_have_text("routine-vacuuming.html")
    assert frame.locator("script").count() == 1  # the viewer's own, none from the original
    page.wait_for_function(
        """() => { const doc = document.getElementById('viewer-frame').contentDocument; const m = doc.getElementById('passage');
                   if (!m) return false; const r = m.getBoundingClientRect(); return r.top >= 0 && r.top < doc.defaultView.innerHeight; }""",
        timeout=WAIT,
    )
    page.click("#details-summary")  # the typed plan and the engines stay in view with collections
    trace = page.locator("#trace").inner_text()
    assert "strategy" in trace and "tantivy-bm25" in trace and "offline engine" in trace

    # a PDF source: its page rendered, the passage boxed
    ask(page, "How do I create a list with named components in R?")
    pdf_citation = next(
        c
        for c in page.locator("#answer a.cite").all()
        if page.locator(f"#source-{c.get_attribute('data-source')} .source-id").inner_text().startswith("R-intro.pdf#")
    )
    pdf_citation.click()
    frame = viewer(page)
    expect(frame.locator(".pdf-page img")).to_be_visible()
    assert frame.locator(".passage-box").count() >= 1
    assert "page" in frame.locator("#page-label").inner_text() and frame.locator("#where").inner_text()
    frame.locator("#next").click()
    expect(frame.locator(".passage-box")).to_have_count(0)  # the next page: no passage on it
    frame.locator("#to-passage").click()
    expect(frame.locator(".passage-box").first).to_be_visible()

    # a document deleted: gone from the answers
    page.locator("#documents tr[data-name='routine-vacuuming.html'] button.remove").click()
    expect(page.locator("#documents tr[data-name='routine-vacuuming.html']")).to_have_count(0, timeout=WAIT)
    settled(page)
    ask(page, "Why should VACUUM be run regularly?")
    assert cited_ids(page) and not any(i.startswith("routine-vacuuming.html") for i in cited_ids(page))

    # another collection, then back
    create_collection(page, "notes")
    page.set_input_files(
        "#files",
        files=[
            {
                "name": "crocodiles.md",
                "mimeType": "text/markdown",
                "buffer": b"# Crocodiles\n\nA crocodile shows the fourth tooth of its lower jaw when its mouth is shut.\n",
            }
        ],
    )
    expect(page.locator("#documents tr[data-name='crocodiles.md']")).to_have_count(1, timeout=WAIT)
    settled(page)
    ask(page, "Which tooth does a crocodile show?")
    assert cited_ids(page) == ["crocodiles.md#0"]
    page.select_option("#collection", "manuals")
    expect(page.locator("#documents tbody tr")).to_have_count(1, timeout=WAIT)
    expect(page.locator("#documents tbody tr").first).to_have_attribute("data-name", "R-intro.pdf")
    assert page.locator("#thread .turn").count() == 0  # switching starts a new conversation
    ask(page, "How do I create a list with named components in R?")
    assert all(i.startswith("R-intro.pdf#") for i in cited_ids(page))

    assert page.hosts == {urlparse(page.url_base).netloc} and not page.console_errors, page.console_errors
