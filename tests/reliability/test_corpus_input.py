"""Corpus input that tests/test_corpus.py does not cover: foreign encodings, BOMs, pathological JSON,
empty and gigantic documents, the CLI's --strict, and property tests for the readers."""

from __future__ import annotations

import codecs
import dataclasses
import gzip
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from typedrag.corpus import CorpusError, iter_documents
from typedrag.corpus.formats.common import Unreadable
from typedrag.corpus.formats.detect import Kind, choose
from typedrag.index import build_index, open_retriever
from typedrag.index.base import EmptyIndexError

from .conftest import assert_clean_failure, run_cli


def read(*sources, strict=False):
    """Documents with their blocks read (so problems met while reading them are in the list, and two
    reads compare equal), and the problems as strings."""
    problems = []
    docs = [
        doc if doc.blocks is None else dataclasses.replace(doc, blocks=list(doc.iter_blocks()))
        for doc in iter_documents(list(sources), strict=strict, problems=problems)
    ]
    return docs, [str(p) for p in problems]


def text_of(doc):
    return "\n\n".join(block.text for block in doc.iter_blocks())


def test_latin1_files_are_reported_per_line_and_stop_a_strict_build(tmp_path):
    jsonl = tmp_path / "latin1.jsonl"
    jsonl.write_bytes(
        b'{"id": "1", "title": "Ok", "text": "plain ascii"}\n'
        + '{"id": "2", "title": "Café", "text": "crème brûlée"}\n'.encode("latin-1")
    )
    text = tmp_path / "notes.txt"
    text.write_bytes("first line\nsecond line: naïve façade\n".encode("latin-1"))
    docs, problems = read(jsonl, text)
    assert [d.doc_id for d in docs] == ["1"]
    assert problems == [
        f"{jsonl}:2: not UTF-8 (invalid continuation byte at byte offset 25)",
        f"{text}:2: not a UTF-8 text file (binary?), skipped",
    ]
    with pytest.raises(CorpusError, match=rf"^{jsonl}:2: not UTF-8"):
        read(jsonl, strict=True)


def test_utf8_bom_is_not_part_of_the_first_record(tmp_path):
    """Regression: the BOM Windows editors write made line 1 bad JSON, a TSV header a document, a heading no title."""
    bom = codecs.BOM_UTF8
    (tmp_path / "a.jsonl").write_bytes(bom + b'{"id": "a", "title": "Alpha", "text": "First letter."}\n')
    (tmp_path / "b.tsv").write_bytes(bom + b"id\ttext\ttitle\nb\tSecond letter.\tBeta\n")
    (tmp_path / "c.md").write_bytes(bom + b"# Gamma\nThird letter.\n")
    docs, problems = read(tmp_path)
    assert problems == []
    assert [(d.doc_id, d.title) for d in docs] == [("a", "Alpha"), ("b", "Beta"), ("c.md", "Gamma")]


def test_pathological_json_lines_are_reported_not_fatal(tmp_path):
    """Regression: deep nesting (RecursionError) and a 5,000-digit id (ValueError) crashed the whole build."""
    path = tmp_path / "evil.jsonl"
    path.write_text(
        "[" * 100_000
        + "\n"
        + '{"id": 1'
        + "0" * 5000
        + "}\n"
        + json.dumps({"id": "ok", "title": "T", "text": "fine"})
        + "\n",
        encoding="utf-8",
    )
    docs, problems = read(path)
    assert [d.doc_id for d in docs] == ["ok"]
    assert problems == [
        f"{path}:1: bad JSON (nested too deeply)",
        f"{path}:2: bad JSON (Exceeds the limit (4300 digits) for integer string conversion)",
    ]


def test_empty_inputs_build_no_index_and_say_why(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "empty.txt").write_bytes(b"")
    (corpus / "blank.md").write_text("\n \n\t\n", encoding="utf-8")
    (corpus / "empty.jsonl").write_bytes(b"")
    with pytest.raises(EmptyIndexError, match="no readable document in the sources [(]2 × empty text[)]") as caught:
        build_index([corpus], tmp_path / "index", show_progress=False)
    assert sorted(str(p) for p in caught.value.summary.problems) == [
        f"{corpus / 'blank.md'}:1: empty text",
        f"{corpus / 'empty.txt'}:1: empty text",
    ]
    assert not (tmp_path / "index").exists()
    proc = run_cli("index", str(corpus), "--index", str(tmp_path / "index"))
    assert proc.returncode == 2 and "error: no readable document" in proc.stderr and "Traceback" not in proc.stderr


def test_gigantic_document_is_chunked_and_searchable(tmp_path):
    words = [f"filler{i % 997}" for i in range(900_000)]  # ~9 MB of text in one document
    words[-3] = "zebrafishneedle"
    path = tmp_path / "huge.jsonl"
    path.write_text(json.dumps({"id": "huge", "title": "Huge", "text": " ".join(words)}) + "\n", encoding="utf-8")
    assert path.stat().st_size > 5_000_000
    # Chunking and search, not vectors (tests/test_hybrid.py has the dense leg): 9,000 passages embedded cost a
    # minute of CPU here. No time bound: tests count, benchmarks time.
    summary = build_index([path], tmp_path / "index", show_progress=False, retrieval="bm25")
    assert summary.documents == 1 and summary.passages == 9000
    hit = open_retriever(tmp_path / "index").search("zebrafishneedle", 1)[0]
    assert hit.passage_id == "huge#8999"


def test_cli_reports_problems_with_file_and_line_and_strict_stops(tmp_path):
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(
        b'{"id": "a", "title": "A", "text": "alpha"}\n{broken\n'
        + '{"id": "b", "title": "B", "text": "bêta"}\n'.encode("latin-1")
        + b'{"id": "a", "title": "A again", "text": "dup"}\n'
    )
    proc = run_cli("index", str(path), "--index", str(tmp_path / "index"))
    assert proc.returncode == 0, proc.stderr
    squashed = "".join(proc.stderr.split())
    for reason in (":2: bad JSON", ":3: not UTF-8", ":4: duplicate id 'a'"):
        assert "".join(f"skipped {path}{reason}".split()) in squashed
    assert "1 documents" in proc.stdout and "(3 skipped)" in proc.stdout
    proc = run_cli("index", str(path), "--index", str(tmp_path / "strict"), "--strict")
    assert_clean_failure(proc, f"{path}:2: bad JSON")
    assert not (tmp_path / "strict").exists()


def test_cli_prints_problems_containing_markup_verbatim(tmp_path):
    path = tmp_path / "c.jsonl"
    record = json.dumps({"id": "[/b]", "title": "T", "text": "text"})
    path.write_text(f"{record}\n{record}\n", encoding="utf-8")
    proc = run_cli("index", str(path), "--index", str(tmp_path / "index"))
    assert proc.returncode == 0 and "duplicate id '[/b]'" in proc.stderr, proc.stderr


# --- property tests ---------------------------------------------------------------------------

FORMATS = [".jsonl", ".jsonl.gz", ".tsv", ".txt", ".md"]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(["id", "title", "text", "x"]), inner, max_size=4)
    ),
    max_leaves=12,
)
json_lines = st.lists(json_values.map(json.dumps) | st.text(max_size=40), max_size=8).map(
    lambda ls: "\n".join(ls).encode()
)
contents = (
    st.binary(max_size=400) | json_lines | st.text(max_size=400).map(lambda t: t.encode("utf-8", "surrogatepass"))
)


def check_documents(path: Path, data: bytes) -> None:
    """Non-strict reading never raises and reports `path:line:`; strict either agrees or raises one located error."""
    docs, problems = read(path)
    for doc in docs:
        text = text_of(doc)
        assert doc.doc_id.strip() and text.strip() and "\x00" not in text + doc.title + doc.doc_id
        text.encode("utf-8")  # no lone surrogates reach the index
    lines = max(1, data.count(b"\n") + 1)
    for problem in problems:
        assert problem.startswith(f"{path}:"), problem
        assert 1 <= int(problem[len(f"{path}:") :].split(":", 1)[0]) <= lines, problem
    check_stable_and_strict(path, docs, problems)


def read_as_a_document(path: Path) -> bool:
    """Whether typedrag reads `path` as the document its bytes show (a PDF named .txt), whatever its suffix."""
    try:
        return choose(path) in (Kind.HTML, Kind.PDF, Kind.DOCX)
    except Unreadable:
        return False


@settings(max_examples=150, deadline=None)
@given(data=contents, suffix=st.sampled_from(FORMATS))
@example(data=b"%PDF-", suffix=".txt")  # read as a PDF: its problems are `file: reason`, as a document's are
def test_readers_never_crash_on_arbitrary_bytes(data, suffix):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"input{suffix}"
        path.write_bytes(gzip.compress(data) if suffix == ".jsonl.gz" else data)
        if read_as_a_document(path):
            check_document(path)
        else:
            check_documents(path, data)


DOCUMENT_FORMATS = [".html", ".pdf", ".docx", ".rst", ""]
pdf_like = st.binary(max_size=300).map(lambda b: b"%PDF-1.4\n" + b)
zip_like = st.binary(max_size=300).map(lambda b: b"PK\x03\x04" + b)


@settings(max_examples=80, deadline=None)
@given(data=contents | pdf_like | zip_like, suffix=st.sampled_from(DOCUMENT_FORMATS))
def test_document_readers_never_crash_on_arbitrary_bytes(data, suffix):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"input{suffix}"
        path.write_bytes(data)
        check_document(path)


def check_document(path: Path) -> None:
    """Non-strict reading never raises; each problem is `file: reason` or `file:line: reason`, and strict agrees."""
    docs, problems = read(path)
    for doc in docs:
        text = text_of(doc)
        assert text.strip() and "\x00" not in text + doc.title
        assert not any(ch in text + doc.title for ch in "\x1b\x07\x08")
    assert all(p.startswith((f"{path}: ", f"{path}:")) for p in problems), problems
    check_stable_and_strict(path, docs, problems)


def check_stable_and_strict(path: Path, docs, problems: list[str]) -> None:
    """Read again, the same documents and problems (ids too); read strictly, the same documents, or the first
    problem raised as the one error."""
    assert read(path) == (docs, problems)
    try:
        strict_docs, _ = read(path, strict=True)
    except CorpusError as error:
        assert problems and str(error) == problems[0]
    else:
        assert not problems and strict_docs == docs
