"""Collections on `typedrag serve --data DIR`, on a real uvicorn server: create, upload, ingest, ask, open the
source, replace, delete; and hostile uploads (traversal, a zip bomb, too big, wrong type, empty, 200 at once, cut
off halfway, the server killed with -9 while it ingests): clean errors, nothing lost or half-indexed, nothing
written outside the data folder."""

from __future__ import annotations

import html
import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import httpx
import openai
import pytest
from typer.testing import CliRunner

pytest.importorskip("fastapi", reason="fastapi and uvicorn are dependencies of typedrag: pip install -e .")

from test_server import classifier, serving  # noqa: E402,F401  (tests/ is on sys.path, as for conftest)

from typedrag.config import LibraryLimits, Settings  # noqa: E402
from typedrag.engines.offline import OfflineEngine  # noqa: E402
from typedrag.index.vectors import EMBED_BATCH  # noqa: E402
from typedrag.pipeline import Pipeline  # noqa: E402
from typedrag.server.app import create_app  # noqa: E402

R_INTRO = Path("/usr/share/R/doc/manual/R-intro.pdf")
VACUUM_HTML = Path("/usr/share/doc/postgresql-doc-15/html/routine-vacuuming.html")
HANG_GUARD = 900  # seconds a wait may take before the test says it hung (never a speed check)

CROCODILES = (
    "# Crocodiles\n\nCrocodiles have a V-shaped, pointed snout. When a crocodile closes its mouth, the fourth "
    "tooth of the lower jaw stays visible. Crocodiles tolerate salt water thanks to glands on the tongue.\n"
)
BREAD = (
    "Bread making\n\nTo bake bread, first mix flour, water, salt and yeast into a dough. Knead the dough for about "
    "ten minutes until it is smooth and elastic. Let it rise in a warm place until it doubles in size.\n"
)
SOURDOUGH = (
    "Sourdough\n\nA sourdough starter replaces baker's yeast: flour and water ferment for a week with wild "
    "yeasts and lactobacilli. Feed the starter daily and bake when it bubbles and smells sour.\n"
)


def requires(path: Path, package: str) -> None:
    if not path.exists():
        pytest.skip(f"{path} not found: apt-get install {package}")


@pytest.fixture()
def library_url(tmp_path, classifier):
    """A server with a data folder and no --index: collections only."""
    data = tmp_path / "data"
    pipeline = Pipeline(OfflineEngine(), None, classifier=classifier)
    with serving(
        create_app(Settings(data=data, cache_dir=None, library=LibraryLimits(max_file_bytes=2 << 20)), pipeline)
    ) as url:
        yield url, data


def create(url: str, name: str, retrieval: str | None = "bm25") -> dict:
    response = httpx.post(f"{url}/v1/collections", json={"name": name, "retrieval": retrieval})
    assert response.status_code == 201, response.text
    return response.json()


def upload(url: str, name: str, files: list[tuple[str, bytes]]) -> httpx.Response:
    return httpx.post(
        f"{url}/v1/collections/{name}/documents", files=[("files", (n, b)) for n, b in files], timeout=120
    )


def settled(url: str, name: str) -> dict:
    """Wait until the collection has no ingestion under way or pending, and every document is settled."""
    deadline = time.monotonic() + HANG_GUARD
    while True:
        listing = httpx.get(f"{url}/v1/collections/{name}/documents", timeout=30).json()
        busy = listing["collection"]["state"] in ("ingesting", "queued") or any(
            d["status"] in ("queued", "indexing", "removing") for d in listing["documents"]
        )
        if not busy:
            return listing
        assert time.monotonic() < deadline, f"ingestion of {name} did not settle: {listing}"
        time.sleep(0.3)


def ask(url: str, name: str, question: str, method: str = "rag") -> dict:
    response = httpx.post(
        f"{url}/v1/collections/{name}/answer", json={"question": question, "method": method}, timeout=120
    )
    assert response.status_code == 200, response.text
    return response.json()


def everything_under(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


# --- collections and documents ---------------------------------------------------------------------


def test_collections_are_created_listed_and_deleted(library_url):
    url, data = library_url
    assert httpx.get(f"{url}/v1/collections").json()["collections"] == []
    assert create(url, "manuals")["state"] == "empty"
    create(url, "recipes")
    assert [c["name"] for c in httpx.get(f"{url}/v1/collections").json()["collections"]] == ["manuals", "recipes"]
    again = httpx.post(f"{url}/v1/collections", json={"name": "manuals"})
    assert again.status_code == 409 and "exists already" in again.json()["error"]["message"]
    for bad in ["../x", "Manuals", "", "a" * 65, "-x", "a/b"]:
        response = httpx.post(f"{url}/v1/collections", json={"name": bad})
        assert response.status_code == 422, bad
    # a question in an empty collection, or naming none when there are two, says what to do
    empty = httpx.post(f"{url}/v1/answer", json={"question": "Why?", "collection": "manuals"})
    assert empty.status_code == 409 and "no indexed documents yet" in empty.json()["error"]["message"]
    unnamed = httpx.post(f"{url}/v1/answer", json={"question": "Why do crocodiles show a tooth?"})
    assert unnamed.status_code == 422 and "manuals, recipes" in unnamed.json()["error"]["message"]
    unknown = httpx.post(f"{url}/v1/collections/nope/answer", json={"question": "Why?"})
    assert unknown.status_code == 404
    assert httpx.delete(f"{url}/v1/collections/recipes").json() == {"deleted": "recipes"}
    assert not (data / "collections" / "recipes").exists()
    assert [c["name"] for c in httpx.get(f"{url}/v1/collections").json()["collections"]] == ["manuals"]


def test_upload_ingest_ask_open_the_source_replace_and_delete(library_url, tmp_path):
    requires(VACUUM_HTML, "postgresql-doc-15")
    url, data = library_url
    create(url, "kb")
    response = upload(
        url,
        "kb",
        [
            ("crocodiles.md", CROCODILES.encode()),
            ("bread.txt", BREAD.encode()),
            ("routine-vacuuming.html", VACUUM_HTML.read_bytes()),
        ],
    )
    assert response.status_code == 202, response.text
    assert [a["name"] for a in response.json()["accepted"]] == ["crocodiles.md", "bread.txt", "routine-vacuuming.html"]
    listing = settled(url, "kb")
    assert {d["name"]: d["status"] for d in listing["documents"]} == {
        "bread.txt": "indexed",
        "crocodiles.md": "indexed",
        "routine-vacuuming.html": "indexed",
    }
    assert listing["collection"]["documents"] == 3 and listing["collection"]["last_ingestion"]["added"] == 3

    # one collection answers over /v1/answer by default (the only one), /v1/collections/kb/answer, and OpenAI's model id
    result = ask(url, "kb", "Why should VACUUM be run regularly?")
    assert result["collection"] == "kb" and result["engines"]["retriever"] == "tantivy-bm25"
    top = result["sources"][0]
    assert top["passage_id"].startswith("routine-vacuuming.html#")
    assert top["link"] == f"/view/kb?passage={top['passage_id'].replace('#', '%23')}"
    default = httpx.post(
        f"{url}/v1/answer", json={"question": "Why should VACUUM be run regularly?", "method": "rag"}, timeout=120
    )
    assert default.json()["sources"][0]["link"] == top["link"]
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
    assert {"typedrag:kb", "typedrag-rag:kb"} <= {m.id for m in client.models.list()}
    chat = client.chat.completions.create(
        model="typedrag-rag:kb", messages=[{"role": "user", "content": "How do I knead bread dough?"}]
    )
    typed = chat.model_extra["typedrag"]
    assert typed["collection"] == "kb" and typed["sources"][0]["passage_id"] == "bread.txt#0"
    assert typed["sources"][0]["link"] == "/view/kb?passage=bread.txt%230"

    # the viewer's source: the original sanitised, the passage marked
    shown = httpx.get(f"{url}/v1/collections/kb/source", params={"passage": top["passage_id"]}).json()
    assert shown["found"] and shown["view"]["kind"] == "html" and shown["view"]["located"]
    page = shown["view"]["html"]
    assert 'id="passage"' in page and "<script" not in page.lower() and "<img" not in page.lower()
    marked = re.findall(r'<mark class="passage"(?: id="passage")?>(.*?)</mark>', page, re.S)
    marked_words = re.findall(r"\w+", html.unescape(" ".join(re.sub(r"<[^>]+>", " ", m) for m in marked)))
    passage_words = re.findall(r"\w+", top["text"])
    assert marked_words[:8] == passage_words[:8] and marked_words[-8:] == passage_words[-8:]
    md = httpx.get(f"{url}/v1/collections/kb/source", params={"passage": "crocodiles.md#0"}).json()
    assert md["view"]["located"] and "<h1>" in md["view"]["html"]  # Markdown rendered, not shown raw
    assert httpx.get(f"{url}/view/kb").headers["content-security-policy"].startswith("default-src 'none'")

    # `typedrag ask --json` on the collection's index gives the same link
    from typedrag.cli import app as cli

    run = CliRunner().invoke(
        cli,
        [
            "ask",
            "How do I knead bread dough?",
            "--index",
            str(data / "collections/kb/index"),
            "--method",
            "rag",
            "--json",
        ],
    )
    assert run.exit_code == 0, run.output
    assert json.loads(run.output)["sources"][0]["link"] == "/view/kb?passage=bread.txt%230"

    # replaced: the new text answers, and the old passage's viewer says the document changed
    replaced = upload(url, "kb", [("bread.txt", SOURDOUGH.encode())])
    assert replaced.json()["accepted"][0]["replaced"] is True
    settled(url, "kb")
    assert ask(url, "kb", "What does a sourdough starter replace?")["sources"][0]["passage_id"] == "bread.txt#0"
    assert "sourdough" in ask(url, "kb", "What does a sourdough starter replace?")["sources"][0]["text"].lower()

    # deleted: gone from answers and from the listing; its viewer link says so
    assert httpx.delete(f"{url}/v1/collections/kb/documents/crocodiles.md").status_code == 202
    listing = settled(url, "kb")
    assert "crocodiles.md" not in {d["name"] for d in listing["documents"]}
    answer = ask(url, "kb", "Why does a crocodile show its fourth tooth?")
    assert not any(s["passage_id"].startswith("crocodiles.md") for s in answer["sources"])
    gone = httpx.get(f"{url}/v1/collections/kb/source", params={"passage": "crocodiles.md#0"}).json()
    assert gone["found"] is False and "removed or replaced" in gone["note"]
    assert not (data / "collections/kb/files/crocodiles.md").exists()
    assert httpx.delete(f"{url}/v1/collections/kb/documents/crocodiles.md").status_code == 404


def test_a_pdf_opens_at_its_page_with_the_passage_boxed(library_url):
    requires(R_INTRO, "r-doc-pdf")
    url, _ = library_url
    create(url, "r")
    # the library's default file limit is lowered to 2 MB in this fixture; R-intro.pdf is 0.6 MB
    assert upload(url, "r", [("R-intro.pdf", R_INTRO.read_bytes())]).status_code == 202
    settled(url, "r")
    found = httpx.post(f"{url}/v1/collections/r/search", json={"query": "lists and data frames", "k": 3}).json()[
        "passages"
    ]
    top = found[0]
    assert top["passage_id"].startswith("R-intro.pdf#") and top["page"] and top["link"].startswith("/view/r?passage=")
    shown = httpx.get(f"{url}/v1/collections/r/source", params={"passage": top["passage_id"]}).json()
    view = shown["view"]
    assert view["kind"] == "pdf" and view["page_count"] > 100 and view["located"]
    page = next(p for p in view["pages"] if p["boxes"])
    assert page["number"] == top["page"] and all(0 <= b[0] <= 1 and 0 <= b[1] <= 1 for b in page["boxes"])
    image = httpx.get(f"{url}/v1/collections/r/documents/R-intro.pdf/pages/{page['number']}.png")
    assert image.status_code == 200 and image.content.startswith(b"\x89PNG")
    assert httpx.get(f"{url}/v1/collections/r/documents/R-intro.pdf/pages/9999.png").status_code == 404
    original = httpx.get(f"{url}/v1/collections/r/documents/R-intro.pdf/original")
    assert original.content == R_INTRO.read_bytes() and original.headers["content-type"] == "application/octet-stream"


def test_gzipped_documents_upload_and_open_in_the_viewer_as_the_documents_inside(library_url, monkeypatch):
    """Debian ships its manuals gzipped (`intro.md.gz`, `R-intro.pdf.gz`). The index read them, but an upload of
    one was refused as a type not accepted, and the viewer showed a gzipped original as its compressed bytes
    (latin-1 garbage, the passage never found). Now each is accepted when the document inside is, checked
    uncompressed, and shown as the document inside."""
    import gzip

    from typedrag.corpus.formats import gunzip

    url, data = library_url
    create(url, "gz")
    # bread.txt and bread.md: each upload is read, though `typedrag index` reads one rendering of a document
    files = [
        ("crocodiles.md.gz", gzip.compress(CROCODILES.encode())),
        ("bread.txt", BREAD.encode()),
        ("bread.md", BREAD.encode()),
    ]
    if R_INTRO.exists():
        files.append(("R-intro.pdf.gz", gzip.compress(R_INTRO.read_bytes())))
    monkeypatch.setattr(gunzip, "MAX_GUNZIPPED", 1 << 20)  # R-intro.pdf is 0.6 MB
    response = upload(
        url,
        "gz",
        [
            *files,
            ("plain.md.gz", b"# not compressed\n\ntext\n"),
            ("cut.md.gz", gzip.compress(CROCODILES.encode())[:30]),
            ("bomb.txt.gz", gzip.compress(b"a" * (2 << 20))),
            ("fake.pdf.gz", gzip.compress(b"<html><body>not a pdf</body></html>")),
            ("tool.exe.gz", gzip.compress(b"MZ\x90\x00")),
        ],
    )
    assert response.status_code == 202, response.text
    body = response.json()
    assert [a["name"] for a in body["accepted"]] == [name for name, _ in files]
    reasons = {r["name"]: r["reason"] for r in body["rejected"]}
    assert reasons["plain.md.gz"] == "named .gz, but its content is not gzip-compressed"
    assert reasons["cut.md.gz"].startswith("corrupt or truncated gzip")
    assert reasons["bomb.txt.gz"] == "expands past 1 MB uncompressed"
    assert reasons["fake.pdf.gz"].startswith("uncompressed, named .pdf, but its content is not a PDF")
    assert "type not accepted (.gz)" in reasons["tool.exe.gz"] and "each also gzipped" in reasons["tool.exe.gz"]
    assert not any(p.name.startswith("typedrag-gunzip-") for p in Path(gunzip.tempfile.gettempdir()).iterdir())
    listing = settled(url, "gz")
    assert {d["name"]: d["status"] for d in listing["documents"]} == {name: "indexed" for name, _ in files}

    top = ask(url, "gz", "Why does a crocodile show its fourth tooth?")["sources"][0]
    assert top["passage_id"] == "crocodiles.md.gz#0"
    shown = httpx.get(f"{url}/v1/collections/gz/source", params={"passage": top["passage_id"]}).json()
    view = shown["view"]
    assert view["kind"] == "html" and view["format"] == "Markdown" and view["located"]
    assert "<h1>Crocodiles</h1>" in view["html"] and "fourth" in view["html"]
    original = httpx.get(f"{url}/v1/collections/gz/documents/crocodiles.md.gz/original")
    assert gzip.decompress(original.content) == CROCODILES.encode()  # the original as uploaded
    if R_INTRO.exists():
        found = httpx.post(f"{url}/v1/collections/gz/search", json={"query": "lists and data frames", "k": 5})
        pdf = next(p for p in found.json()["passages"] if p["passage_id"].startswith("R-intro.pdf.gz#"))
        shown = httpx.get(f"{url}/v1/collections/gz/source", params={"passage": pdf["passage_id"]}).json()["view"]
        assert shown["kind"] == "pdf" and shown["page_count"] > 100 and shown["located"]
        image = httpx.get(f"{url}/v1/collections/gz/documents/R-intro.pdf.gz/pages/{pdf['page']}.png")
        assert image.status_code == 200 and image.content.startswith(b"\x89PNG")


def test_a_hybrid_collection_embeds_and_says_how_far_it_is(library_url):
    url, _ = library_url
    create(url, "mixed", retrieval=None)  # the default: BM25 and passage vectors
    assert (
        upload(url, "mixed", [("crocodiles.md", CROCODILES.encode()), ("bread.txt", BREAD.encode())]).status_code == 202
    )
    listing = settled(url, "mixed")
    info = listing["collection"]
    assert info["retriever"] == "tantivy-hybrid/minilm" and info["last_ingestion"]["embedded"] == info["passages"] == 2
    assert ask(url, "mixed", "How long should dough be kneaded?")["engines"]["retriever"] == "tantivy-hybrid/minilm"


def test_the_index_collection_is_read_only_and_default(small_index, classifier, tmp_path):
    from typedrag.index import open_retriever

    pipeline = Pipeline(OfflineEngine(), open_retriever(small_index), classifier=classifier)
    with serving(create_app(Settings(index=small_index, cache_dir=None), pipeline)) as url:
        listing = httpx.get(f"{url}/v1/collections").json()
        assert listing["default"] == "default" and listing["writable"] is False
        assert listing["collections"][0]["read_only"] and listing["collections"][0]["documents"] == 7
        refused = upload(url, "default", [("x.md", b"# x\n\ntext\n")])
        assert refused.status_code == 409 and "read-only" in refused.json()["error"]["message"]
        assert httpx.post(f"{url}/v1/collections", json={"name": "new"}).status_code == 409
        result = httpx.post(
            f"{url}/v1/answer", json={"question": "How do I bake bread?", "method": "rag"}, timeout=60
        ).json()
        assert result["collection"] == "default" and result["sources"][0]["link"].startswith("/view/default?passage=")
        shown = httpx.get(
            f"{url}/v1/collections/default/source", params={"passage": result["sources"][0]["passage_id"]}
        ).json()
        assert shown["found"] and shown["passage"]["text"]
        # a file of the folder the index was built from that the index does not hold is never served
        (small_index.parent / "secret.txt").write_text("not indexed")
        for name in ("secret.txt", "../small0/secret.txt", "corpus.jsonl/../secret.txt"):
            refused = httpx.get(f"{url}/v1/collections/default/documents/{name}/original")
            assert refused.status_code == 404, name
        assert httpx.get(f"{url}/v1/collections/default/documents/corpus.jsonl/original").status_code == 200


# --- hostile uploads -------------------------------------------------------------------------------


HOSTILE_HTML = b"""<!doctype html><html><head><title>Pwn</title><style>body{display:none}</style>
<script>window.stolen = localStorage.getItem("typedrag-api-key")</script></head>
<body onload="alert(1)"><h1 id="passage">Garden hoses</h1>
<p>Drain the garden hose before the first frost <img src=x onerror="alert(2)"> so that ice cannot split it.
<a href="javascript:alert(3)">tips</a> <a href="other.html">next</a> <a href="https://example.org/hoses">more</a></p>
<iframe src="https://evil.example"></iframe><form action="https://evil.example"><input name=q></form>
<svg><script>alert(4)</script></svg><p style="position:fixed">Coil it loosely and store it indoors.</p></body></html>"""


def test_an_original_is_shown_sanitised_never_raw(library_url):
    url, _ = library_url
    create(url, "garden")
    assert upload(url, "garden", [("hoses.html", HOSTILE_HTML)]).status_code == 202
    settled(url, "garden")
    shown = httpx.get(f"{url}/v1/collections/garden/source", params={"passage": "hoses.html#0"}).json()
    page = shown["view"]["html"]
    for banned in (
        "<script",
        "onload",
        "onerror",
        "javascript:",
        "<iframe",
        "<form",
        "<input",
        "<style",
        "style=",
        "<img",
        "<svg",
        'href="other.html"',
        "display:none",
    ):
        assert banned not in page, banned
    assert 'href="https://example.org/hoses"' in page and 'rel="noopener noreferrer nofollow"' in page
    assert page.count('id="passage"') == 1  # the original's own id="passage" is dropped; the mark keeps it
    assert shown["view"]["located"] and "Drain the garden hose" in page
    # the original itself is only ever a download
    original = httpx.get(f"{url}/v1/collections/garden/documents/hoses.html/original")
    assert (
        original.headers["content-type"] == "application/octet-stream"
        and "attachment" in original.headers["content-disposition"]
    )
    assert "sandbox" in original.headers["content-security-policy"]


def test_a_collection_deleted_while_it_ingests_stops_cleanly(library_url):
    requires(R_INTRO, "r-doc-pdf")
    url, data = library_url
    create(url, "busy", retrieval=None)
    assert upload(url, "busy", [("R-intro.pdf", R_INTRO.read_bytes())]).status_code == 202
    deadline = time.monotonic() + HANG_GUARD
    while httpx.get(f"{url}/v1/collections/busy").json()["state"] != "ingesting":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert httpx.delete(f"{url}/v1/collections/busy", timeout=HANG_GUARD).json() == {"deleted": "busy"}
    assert not (data / "collections" / "busy").exists() and not any((data / ".trash").iterdir())
    create(url, "busy")  # the name is free again, and the ingestion thread serves it
    assert upload(url, "busy", [("bread.txt", BREAD.encode())]).status_code == 202
    assert [d["status"] for d in settled(url, "busy")["documents"]] == ["indexed"]


def docx_bytes(document_xml: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(
            "[Content_Types].xml",
            '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>',
        )
        archive.writestr("word/document.xml", document_xml)
    return out.getvalue()


def test_hostile_files_are_refused_each_with_its_reason_and_the_rest_kept(library_url, tmp_path):
    url, data = library_url
    create(url, "kb")
    assert upload(url, "kb", [("bread.txt", BREAD.encode())]).status_code == 202
    settled(url, "kb")
    before_outside = {p for p in tmp_path.iterdir()}
    bomb = docx_bytes(b"<w:document>" + b" " * (24 << 20) + b"</w:document>")  # 24 MB of spaces in ~24 KB
    response = upload(
        url,
        "kb",
        [
            ("../../escape.txt", b"outside"),
            ("/etc/passwd.txt", b"absolute"),
            ("..\\windows.txt", b"backslash"),
            ("bomb.docx", bomb),
            ("big.txt", b"x " * (1 << 20) + b"y" * 10),  # over the 2 MB limit of this server
            ("tool.exe", b"MZ\x90\x00"),
            ("fake.pdf", b"<html><body>not a pdf</body></html>"),
            ("binary.txt", b"\x00\x01\x02" * 100),
            ("empty.md", b""),
            (".hidden.md", b"# hidden\n"),
            ("good.md", CROCODILES.encode()),
        ],
    )
    assert response.status_code == 202, response.text
    body = response.json()
    assert [a["name"] for a in body["accepted"]] == ["good.md"]
    reasons = {r["name"]: r["reason"] for r in body["rejected"]}
    assert "folder part" in reasons["../../escape.txt"] and "folder part" in reasons["/etc/passwd.txt"]
    assert "folder part" in reasons["..\\windows.txt"]
    assert "zip bomb" in reasons["bomb.docx"]
    assert "larger than the limit of 2 MB" in reasons["big.txt"]
    assert "type not accepted (.exe)" in reasons["tool.exe"]
    assert "not a PDF" in reasons["fake.pdf"] and "binary data" in reasons["binary.txt"]
    assert reasons["empty.md"] == "the file is empty" and "hidden" in reasons[".hidden.md"]
    assert all("\n" not in reason for reason in reasons.values())
    listing = settled(url, "kb")
    assert {d["name"]: d["status"] for d in listing["documents"]} == {"bread.txt": "indexed", "good.md": "indexed"}
    assert sorted(p.name for p in (data / "collections/kb/files").iterdir()) == ["bread.txt", "good.md"]
    assert not any((data / "collections/kb/incoming").iterdir())
    assert {p for p in tmp_path.iterdir()} == before_outside and not (tmp_path / "escape.txt").exists()
    assert not Path("/etc/passwd.txt").exists()
    # an upload of nothing but refused files is a 422 naming them
    refused = upload(url, "kb", [("a.exe", b"x"), ("b.md", b"")])
    assert refused.status_code == 422 and "a.exe: type not accepted" in refused.json()["error"]["message"]
    assert ask(url, "kb", "How do I knead bread?")["sources"][0]["passage_id"] == "bread.txt#0"


def test_limits_on_count_and_size_of_an_upload_and_of_a_collection(tmp_path, classifier):
    data = tmp_path / "data"
    limits = LibraryLimits(max_files_per_upload=3, max_collection_files=4, max_upload_bytes=64 << 10)
    with serving(
        create_app(
            Settings(data=data, cache_dir=None, library=limits), Pipeline(OfflineEngine(), None, classifier=classifier)
        )
    ) as url:
        create(url, "kb")
        response = upload(url, "kb", [(f"n{i}.md", f"# note {i}\n\nnumber {i}\n".encode()) for i in range(5)])
        body = response.json()
        assert [a["name"] for a in body["accepted"]] == ["n0.md", "n1.md", "n2.md"]
        assert {r["name"]: r["reason"] for r in body["rejected"]} == {
            "n3.md": "more than 3 files in one upload",
            "n4.md": "more than 3 files in one upload",
        }
        more = upload(url, "kb", [("n3.md", b"# three\n\nthree\n"), ("n4.md", b"# four\n\nfour\n")]).json()
        assert [a["name"] for a in more["accepted"]] == ["n3.md"]
        assert more["rejected"] == [{"name": "n4.md", "reason": "the collection holds its limit of 4 files"}]
        huge = httpx.post(f"{url}/v1/collections/kb/documents", files=[("files", ("big.md", b"a " * (40 << 10)))])
        assert huge.status_code == 413 and "over the limit" in huge.json()["error"]["message"]
        not_multipart = httpx.post(f"{url}/v1/collections/kb/documents", json={"files": []})
        assert not_multipart.status_code == 415
        assert len(settled(url, "kb")["documents"]) == 4


def test_two_hundred_files_at_once_are_all_indexed(library_url):
    url, data = library_url
    create(url, "notes")
    files = [
        (f"note-{i:03d}.md", f"# Note {i}\n\nThe note number {i} says the word zebra{i} once.\n".encode())
        for i in range(200)
    ]
    response = upload(url, "notes", files)
    assert response.status_code == 202 and len(response.json()["accepted"]) == 200 and response.json()["rejected"] == []
    listing = settled(url, "notes")
    assert len(listing["documents"]) == 200 and {d["status"] for d in listing["documents"]} == {"indexed"}
    assert listing["collection"]["documents"] == 200
    assert ask(url, "notes", "What does note 137 say about zebra137?")["sources"][0]["passage_id"] == "note-137.md#0"


def test_an_upload_cut_off_halfway_leaves_nothing(library_url):
    url, data = library_url
    create(url, "kb")
    host, port = url.removeprefix("http://").split(":")
    boundary = "typedrag-boundary"
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="half.txt"\r\n'
        "Content-Type: text/plain\r\n\r\n"
    ).encode()
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(
            (
                f"POST /v1/collections/kb/documents HTTP/1.1\r\nHost: {host}\r\nContent-Length: {1 << 20}\r\n"
                f"Content-Type: multipart/form-data; boundary={boundary}\r\n\r\n"
            ).encode()
            + head
            + b"words " * 20_000
        )
        deadline = time.monotonic() + HANG_GUARD
        while not any((data / "collections/kb/incoming").iterdir()):  # the server is receiving it
            assert time.monotonic() < deadline
            time.sleep(0.05)
    deadline = time.monotonic() + HANG_GUARD
    while any((data / "collections/kb/incoming").iterdir()):  # gone once the server hears the client left
        assert time.monotonic() < deadline, list((data / "collections/kb/incoming").iterdir())
        time.sleep(0.05)
    assert not any((data / "collections/kb/files").iterdir())
    assert upload(url, "kb", [("whole.txt", BREAD.encode())]).status_code == 202
    assert [d["name"] for d in settled(url, "kb")["documents"]] == ["whole.txt"]


# --- a server killed with -9 while it ingests --------------------------------------------------------


def start_server(data: Path, port: int, tmpdir: Path) -> subprocess.Popen:
    env = {**os.environ, "TMPDIR": str(tmpdir), "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("TYPEDRAG_SERVER_API_KEY", None)
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from typedrag.cli import app; app()",
            "serve",
            "--data",
            str(data),
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def wait_ready(url: str, server: subprocess.Popen) -> None:
    deadline = time.monotonic() + HANG_GUARD
    while True:
        assert server.poll() is None, server.stderr.read().decode()[-2000:]
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.2)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_server_killed_while_it_ingests_resumes_and_loses_nothing(tmp_path):
    requires(R_INTRO, "r-doc-pdf")
    data, outside = tmp_path / "data", tmp_path / "outside-tmp"
    outside.mkdir()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = start_server(data, port, outside)
    try:
        wait_ready(url, server)
        create(url, "r", retrieval=None)  # hybrid: the PDF's 500-odd passages take minutes to embed here
        assert upload(url, "r", [("bread.txt", BREAD.encode())]).status_code == 202
        settled(url, "r")
        assert upload(url, "r", [("R-intro.pdf", R_INTRO.read_bytes())]).status_code == 202
        deadline = time.monotonic() + HANG_GUARD
        while True:  # killed once some of the PDF's passages are embedded and journaled, not all: the journal takes
            # EMBED_BATCH passages at a time, after the model's smaller batches were counted, so a count past one
            # journal batch means the first was appended
            progress = httpx.get(f"{url}/v1/collections/r").json()["progress"] or {}
            if progress.get("phase") == "embedding" and progress["vectors_done"] > EMBED_BATCH:
                break
            assert time.monotonic() < deadline, progress
            time.sleep(0.1)
        server.send_signal(signal.SIGKILL)
        server.wait()
        server = start_server(data, port, outside)
        wait_ready(url, server)
        # while it catches up, the last complete index answers
        during = httpx.post(
            f"{url}/v1/collections/r/answer", json={"question": "How do I knead bread?", "method": "rag"}, timeout=120
        )
        assert during.status_code == 200 and during.json()["sources"][0]["passage_id"] == "bread.txt#0"
        listing = settled(url, "r")
        assert {d["name"]: d["status"] for d in listing["documents"]} == {
            "R-intro.pdf": "indexed",
            "bread.txt": "indexed",
        }
        info = listing["collection"]
        last = info["last_ingestion"]
        assert last["added"] == 1 and last["embedded"] < info["passages"] - 1  # resumed: the journaled vectors kept
        pdf = next(d for d in listing["documents"] if d["name"] == "R-intro.pdf")
        result = ask(url, "r", "How do I create a list in R?")
        assert any(s["passage_id"].startswith("R-intro.pdf#") for s in result["sources"])
        assert pdf["passages"] == info["passages"] - 1
    finally:
        server.send_signal(signal.SIGKILL)
        server.wait()
    assert list(outside.iterdir()) == []  # nothing written outside the data folder, its temporary files included
    assert sorted(p.name for p in (data / "collections/r/files").iterdir()) == ["R-intro.pdf", "bread.txt"]
    assert not list((data / "collections/r").glob(".index.building-*"))


# --- without HTTP (what an MCP server calls) -----------------------------------------------------------


async def test_the_library_lists_searches_and_answers_without_http(tmp_path, classifier):
    from typedrag.library import Caller, CollectionError, Library

    library = Library(Pipeline(OfflineEngine(), None, classifier=classifier), tmp_path / "data", ingest=False)
    try:
        collection = library.create("kb", retrieval="bm25")
        staging = collection.staging()
        for name, text in (("crocodiles.md", CROCODILES), ("bread.txt", BREAD)):
            staging.begin(name)
            staging.write(text.encode())
            staging.end()
        accepted, rejected = library.add(collection, staging.staged)
        assert [a["name"] for a in accepted] == ["crocodiles.md", "bread.txt"] and rejected == []
        assert collection.state() == "queued"
        with pytest.raises(CollectionError, match="first ingestion is under way"):
            library.pipeline("kb")
        library.ingest(collection)  # what the ingestion thread runs
        assert not collection.behind()
        collection.registry["bread.txt"]["sha256"] = (
            "0" * 64
        )  # as after a crash between a replacement and its ingestion
        assert collection.behind()
        collection.registry["bread.txt"]["sha256"] = accepted[1]["sha256"]
        assert collection.state() == "ready" and library.names() == ["kb"] and library.infos()[0]["documents"] == 2
        hits = library.search("kb", "knead the dough", k=2)
        assert hits[0].passage_id == "bread.txt#0" and hits[0].link == "/view/kb?passage=bread.txt%230"
        result = await library.answer("kb", "Why does a crocodile show a tooth when its mouth is shut?", method="rag")
        assert result.collection == "kb" and result.sources[0].passage_id == "crocodiles.md#0"
        assert result.engines.generator and result.engines.retriever == "tantivy-bm25"  # the trace stays whole
        with pytest.raises(CollectionError) as refused:
            library.search("kb", "dough", caller=Caller(authenticated=False))
        assert refused.value.status == 404  # a caller who may not read it does not learn it exists
    finally:
        library.close()


def test_a_document_that_cannot_be_read_is_listed_as_failed_with_its_problem(library_url):
    url, _ = library_url
    create(url, "kb")
    # a PDF by its first bytes, so the upload takes it; the reader finds no page in it
    assert upload(url, "kb", [("broken.pdf", b"%PDF-1.4\n% nothing after this\n")]).status_code == 202
    listing = settled(url, "kb")
    [broken] = listing["documents"]
    assert broken["status"] == "failed" and broken["problems"] and "PDF" in broken["problems"][0]
    assert listing["collection"]["state"] == "empty"  # nothing readable: nothing to answer from, said so
    refused = httpx.post(f"{url}/v1/collections/kb/answer", json={"question": "Why?"})
    assert refused.status_code == 409 and "no indexed documents" in refused.json()["error"]["message"]
    assert upload(url, "kb", [("bread.txt", BREAD.encode())]).status_code == 202
    listing = settled(url, "kb")
    assert {d["name"]: d["status"] for d in listing["documents"]} == {"broken.pdf": "failed", "bread.txt": "indexed"}
    assert ask(url, "kb", "How do I knead bread?")["sources"][0]["passage_id"] == "bread.txt#0"
    assert httpx.delete(f"{url}/v1/collections/kb/documents/broken.pdf").status_code == 202
    assert [d["name"] for d in settled(url, "kb")["documents"]] == ["bread.txt"]
