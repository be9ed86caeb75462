"""Corpus readers and the chunker: every format, every malformed-record report, chunk properties."""

from __future__ import annotations

import gzip
import json
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from typedrag.corpus import DEMO_SOURCE, SUFFIXES, CorpusError, chunk_document, iter_documents
from typedrag.corpus.chunker import MARKUP
from typedrag.corpus.readers import FileFilter
from typedrag.records import Document


def read(*sources, strict=False):
    problems = []
    docs = list(iter_documents(list(sources), strict=strict, problems=problems))
    return docs, [str(p) for p in problems]


def text_of(doc):
    return "\n\n".join(block.text for block in doc.iter_blocks())


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


# --- formats -------------------------------------------------------------------------------


def test_jsonl_reads_id_title_text_and_ignores_extra_keys(tmp_path):
    path = tmp_path / "wiki.jsonl"
    write_jsonl(
        path,
        [
            {"id": "12", "title": "Anarchism", "url": "http://x", "text": "Anarchism is a political philosophy."},
            {"id": "25", "title": "Autism", "text": "Autism is a developmental disorder."},
        ],
    )
    docs, problems = read(path)
    assert problems == []
    assert [(d.doc_id, d.title, d.text) for d in docs] == [
        ("12", "Anarchism", "Anarchism is a political philosophy."),
        ("25", "Autism", "Autism is a developmental disorder."),
    ]
    assert docs[1].source == f"{path}:2"


def test_jsonl_gz(tmp_path):
    path = tmp_path / "wiki.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write(json.dumps({"id": "a", "title": "Alpha", "text": "First letter."}) + "\n\n")
        f.write(json.dumps({"id": "b", "title": "Beta", "text": "Second letter."}) + "\n")
    docs, problems = read(path)
    assert problems == []
    assert [d.doc_id for d in docs] == ["a", "b"]
    assert docs[1].source == f"{path}:3"


def test_dpr_tsv_skips_header_and_unquotes(tmp_path):
    path = tmp_path / "psgs.tsv"
    path.write_text(
        'id\ttext\ttitle\n1\t"Aaron ( or ; ""Ahärôn"") is a prophet."\tAaron\n2\tPlain text here.\t"Second"\n',
        encoding="utf-8",
    )
    docs, problems = read(path)
    assert problems == []
    assert [(d.doc_id, d.title, d.text) for d in docs] == [
        ("1", "Aaron", 'Aaron ( or ; "Ahärôn") is a prophet.'),
        ("2", "Second", "Plain text here."),
    ]


def test_markdown_title_from_heading_and_txt_title_from_stem(tmp_path):
    (tmp_path / "notes.md").write_text("Intro line\n\n## Tidal Power\n\nTides turn turbines.\n", encoding="utf-8")
    (tmp_path / "river-deltas.txt").write_text("Deltas form where rivers meet the sea.\n", encoding="utf-8")
    docs, problems = read(tmp_path / "notes.md", tmp_path / "river-deltas.txt")
    assert problems == []
    assert [(d.doc_id, d.title) for d in docs] == [("notes.md", "Tidal Power"), ("river-deltas.txt", "river-deltas")]
    assert "Tides turn turbines." in text_of(docs[0])


def test_folder_is_recursive_sorted_and_uses_relative_ids(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "z.md").write_text("# Zebra\nStriped horse.", encoding="utf-8")
    (tmp_path / "a.txt").write_text("An apple a day.", encoding="utf-8")
    write_jsonl(tmp_path / "b" / "c.jsonl", [{"id": "c1", "title": "Cat", "text": "Cats purr."}])
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref: refs/heads/main", encoding="utf-8")
    docs, problems = read(tmp_path)
    assert problems == []
    assert [d.doc_id for d in docs] == ["a.txt", "c1", "b/z.md"]


def test_binary_and_unsupported_files_in_folder_are_reported_and_skipped(tmp_path):
    """.html/.pdf/.docx/.rst are read now; other types are still reported with the list of supported ones."""
    (tmp_path / "good.txt").write_text("Fine text.", encoding="utf-8")
    (tmp_path / "page.html").write_text("<html><body><p>A page.</p></body></html>", encoding="utf-8")
    (tmp_path / "image.txt").write_bytes(b"line one\nline two\n\xff\xd8\xff\xe0 jpeg")
    (tmp_path / "nul.md").write_bytes(b"# Title\nok\nbad\x00byte\n")
    (tmp_path / "data.csv").write_text("a,b\n", encoding="utf-8")
    (tmp_path / "tool.exe").write_bytes(b"MZ\x90\x00\x03\x00\x00\x00")
    (tmp_path / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    docs, problems = read(tmp_path)
    assert [d.doc_id for d in docs] == ["good.txt", "page.html"]
    unsupported = f"unsupported file type (expected one of {', '.join(SUFFIXES)}, gzipped or not, or text without a suffix), skipped"
    assert ".html, .htm, .xhtml, .pdf, .docx" in unsupported
    assert problems == [
        f"{tmp_path / 'data.csv'}:1: {unsupported}",
        f"{tmp_path / 'image.txt'}:3: not a UTF-8 text file (binary?), skipped",
        f"{tmp_path / 'nul.md'}:3: NUL byte (binary file?), skipped",
        f"{tmp_path / 'photo.png'}:1: {unsupported}",
        f"{tmp_path / 'tool.exe'}:1: {unsupported}",
    ]


def test_gzipped_documents_are_read_as_the_documents_they_hold(tmp_path, monkeypatch):
    """Found labelling Debian's docker-doc: 70 of its pages are `*.md.gz` (Debian compresses every text document over
    4 kB in /usr/share/doc), and every one was skipped as an unsupported file type. A gzipped document is read as the
    file its name has without ".gz"; a gzip that is broken, or expands past the bound, is reported; a name with no
    document suffix inside stays unread; no uncompressed copy is left behind."""
    from typedrag.corpus.formats import gunzip

    copies = tmp_path / "tmp"
    copies.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(copies))
    docs_dir = tmp_path / "docs"
    docs_dir.mkdir()
    (docs_dir / "builder.md.gz").write_bytes(
        gzip.compress(
            b"\n---\ntitle: Dockerfile reference\n---\n\n# Dockerfile reference\n\nThe ONBUILD instruction adds a trigger.\n"
        )
    )
    (docs_dir / "notes.txt.gz").write_bytes(gzip.compress(b"Plain notes about the build cache.\n"))
    (docs_dir / "page.html.gz").write_bytes(
        gzip.compress(
            b"<html><head><title>Volumes</title></head><body><p>Volumes outlive containers.</p></body></html>"
        )
    )
    (docs_dir / "changelog.gz").write_bytes(gzip.compress(b"v1.0: first release\n"))
    (docs_dir / "broken.md.gz").write_bytes(gzip.compress(b"# Broken\n\nCut short.\n")[:20])
    (docs_dir / "huge.txt.gz").write_bytes(gzip.compress(b"all work and no play\n" * 60_000))
    monkeypatch.setattr(gunzip, "MAX_GUNZIPPED", 1 << 20)
    docs, problems = read(docs_dir)
    assert [(d.doc_id, d.title, text_of(d)) for d in docs] == [
        ("builder.md.gz", "Dockerfile reference", "The ONBUILD instruction adds a trigger."),
        ("notes.txt.gz", "notes", "Plain notes about the build cache."),
        ("page.html.gz", "Volumes", "Volumes outlive containers."),
    ]
    assert [problem.split(": ", 1)[0] for problem in problems] == [
        f"{docs_dir / 'broken.md.gz'}",
        f"{docs_dir / 'changelog.gz'}:1",
        f"{docs_dir / 'huge.txt.gz'}",
    ]
    assert "corrupt or truncated gzip" in problems[0] and "unsupported file type" in problems[1]
    assert problems[2].endswith("expands past 1 MB uncompressed, skipped")
    assert list(copies.iterdir()) == []


def test_a_gzipped_document_with_no_room_to_uncompress_is_reported_not_fatal(tmp_path, monkeypatch):
    """A full disk (or no temporary folder) while uncompressing stopped the whole build with an OSError."""
    import errno

    def no_room(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    (tmp_path / "a.md.gz").write_bytes(gzip.compress(b"# A\n\nText a.\n"))
    (tmp_path / "b.md").write_text("# B\n\nText b.\n", encoding="utf-8")
    monkeypatch.setattr(tempfile, "mkstemp", no_room)
    docs, problems = read(tmp_path)
    assert [d.doc_id for d in docs] == ["b.md"]
    assert problems == [f"{tmp_path / 'a.md.gz'}: cannot be uncompressed (No space left on device), skipped"]


def test_demo_source_yields_vital_articles():
    docs, problems = read(DEMO_SOURCE)
    assert problems == []
    assert len(docs) > 9000
    by_id = {d.doc_id: d for d in docs}
    assert by_id["vital:Mona Lisa"].title == "Mona Lisa"
    assert "Leonardo" in by_id["vital:Mona Lisa"].text


def test_missing_source_always_raises(tmp_path):
    with pytest.raises(CorpusError, match="no such file"):
        read(tmp_path / "nope.jsonl")


# --- malformed records -----------------------------------------------------------------------


def test_malformed_jsonl_lines_are_reported_with_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    lines = [
        json.dumps({"id": "ok1", "title": "Fine", "text": "Good record."}),
        '{"id": "x", "title": "Broken", "text": ',
        json.dumps({"title": "No id", "text": "Missing id."}),
        json.dumps({"id": "e", "title": "Empty", "text": "   "}),
        json.dumps({"id": 7, "title": "Int id", "text": "Numeric id."}),
        json.dumps({"id": "n", "title": "Nul", "text": "a\u0000b"}),
        json.dumps({"id": "ok1", "title": "Again", "text": "Duplicate."}),
        json.dumps(["not", "an", "object"]),
        json.dumps({"id": "t", "title": None, "text": "Null title."}),
        json.dumps({"id": "", "title": "Blank", "text": "Blank id."}),
        json.dumps({"id": "s", "title": "Surrogate", "text": "half a pair \ud83d"}),
        json.dumps({"id": "ok2", "title": "Fine too", "text": "Another good one."}),
    ]
    raw = "\n".join(lines).encode() + b'\n{"id": "u", "title": "\xff", "text": "bad bytes"}\n'
    path.write_bytes(raw)
    docs, problems = read(path)
    assert [d.doc_id for d in docs] == ["ok1", "ok2"]
    assert problems == [
        f"{path}:2: bad JSON (Expecting value at column 40)",
        f"{path}:3: field 'id' is missing or null",
        f"{path}:4: empty text",
        f"{path}:5: field 'id' is not a string (int)",
        f"{path}:6: NUL byte in field 'text'",
        f"{path}:7: duplicate id 'ok1'",
        f"{path}:8: not a JSON object",
        f"{path}:9: field 'title' is missing or null",
        f"{path}:10: empty id",
        f"{path}:11: invalid unicode (lone surrogate) in field 'text'",
        f"{path}:13: not UTF-8 (invalid start byte at byte offset 22)",
    ]


def test_truncated_or_fake_gzip_is_reported(tmp_path):
    path = tmp_path / "cut.jsonl.gz"
    lines = "".join(json.dumps({"id": str(i), "title": "T", "text": f"text {i} " * 50}) + "\n" for i in range(200))
    data = gzip.compress(lines.encode())
    path.write_bytes(data[: len(data) // 2])
    docs, problems = read(path)
    assert 0 < len(docs) < 200 and [d.doc_id for d in docs] == [str(i) for i in range(len(docs))]
    assert len(problems) == 1 and problems[0].startswith(f"{path}:{len(docs) + 1}: corrupt or truncated gzip")
    fake = tmp_path / "fake.jsonl.gz"
    fake.write_text('{"id": "1", "title": "A", "text": "not compressed"}\n')
    docs, problems = read(fake)
    assert docs == [] and problems == [
        f"{fake}:1: corrupt or truncated gzip (Not a gzipped file (b'{{\"')), rest of file skipped"
    ]


def test_tsv_wrong_column_count(tmp_path):
    path = tmp_path / "psgs.tsv"
    path.write_text("1\tgood text\tGood\n2\tonly two\n3\ta\tb\tc\n", encoding="utf-8")
    docs, problems = read(path)
    assert [d.doc_id for d in docs] == ["1"]
    assert problems == [
        f"{path}:2: expected 3 tab-separated columns (id, text, title), got 2",
        f"{path}:3: expected 3 tab-separated columns (id, text, title), got 4",
    ]


def test_duplicate_ids_are_detected_across_files(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", [{"id": "1", "title": "A", "text": "a"}])
    write_jsonl(tmp_path / "b.jsonl", [{"id": "1", "title": "B", "text": "b"}])
    docs, problems = read(tmp_path / "a.jsonl", tmp_path / "b.jsonl")
    assert [d.title for d in docs] == ["A"]
    assert problems == [f"{tmp_path / 'b.jsonl'}:1: duplicate id '1'"]


def test_strict_mode_raises_on_first_problem(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "1", "title": "A", "text": "a"}\n{oops\n', encoding="utf-8")
    with pytest.raises(CorpusError) as err:
        read(path, strict=True)
    assert str(err.value) == f"{path}:2: bad JSON (Expecting property name enclosed in double quotes at column 2)"


# --- chunker ---------------------------------------------------------------------------------


def doc(text, doc_id="d", title="T"):
    return Document(doc_id, title, text)


def test_chunks_without_sentences_are_cut_at_the_target_and_tail_is_merged():
    words = [f"w{i}" for i in range(250)]
    passages = chunk_document(doc(" ".join(words)), words=100)
    assert [len(p.text.split()) for p in passages] == [100, 150]
    assert [p.passage_id for p in passages] == ["d#0", "d#1"]
    assert all(p.doc_id == "d" and p.title == "T" for p in passages)


def test_chunk_prefers_nearest_sentence_end():
    words = [f"w{i}" for i in range(400)]
    words[94] += "."  # sentence ends after word 95: 5 short of the target
    words[230] += "?"  # 36 past the next target (195): beyond the 30% slack, ignored
    words[300] += '."'  # ends after word 301, 6 past the target of 295
    passages = chunk_document(doc(" ".join(words)), words=100)
    lengths = [len(p.text.split()) for p in passages]
    assert lengths == [95, 100, 106, 99]
    assert passages[0].text.endswith("w94.")


def test_chunk_drops_markup_tags_but_keeps_angle_brackets_in_text():
    text = 'Dramatis personae:<br>Hamlet</dl> <ref name="a">cited</ref> x < y and <3 <!-- note --> end.'
    (passage,) = chunk_document(doc(text), words=100)
    assert passage.text == "Dramatis personae: Hamlet cited x < y and <3 end."


def test_chunk_normalises_whitespace_and_handles_empty_text():
    passages = chunk_document(doc("  Tides\n\n turn\tturbines.  "), words=100)
    assert [p.text for p in passages] == ["Tides\nturn turbines."]  # a line stays a line: it may end no sentence
    assert chunk_document(doc(" \n\t "), words=100) == []
    with pytest.raises(ValueError):
        chunk_document(doc("x"), words=0)


# Arbitrary unicode, plus text with many words, sentence ends and odd whitespace.
texts = st.one_of(
    st.text(alphabet=st.characters(codec="utf-8"), max_size=2000),
    st.integers(0, 600).flatmap(
        lambda n: st.lists(
            st.one_of(st.text(max_size=6), st.sampled_from([" ", "  ", "\n", "\t", ". ", '?" ', "\u00a0", "\u3000"])),
            min_size=n,
            max_size=n,
        ).map("".join)
    ),
)


@settings(max_examples=300, deadline=None)
@given(text=texts, words=st.integers(1, 60))
def test_chunk_properties(text, words):
    passages = chunk_document(doc(text, doc_id="doc/1"), words=words)
    assert [w for p in passages for w in p.text.split()] == MARKUP.sub(" ", text).split()
    assert all(1 <= len(p.text.split()) <= max(1, words * 3 // 2) for p in passages)
    assert [p.passage_id for p in passages] == [f"doc/1#{i}" for i in range(len(passages))]
    assert chunk_document(doc(text, doc_id="doc/1"), words=words) == passages


@settings(max_examples=200, deadline=None)
@given(sentences=st.lists(st.integers(1, 40), min_size=1, max_size=40))
def test_chunks_end_at_a_sentence_when_one_is_within_reach(sentences):
    text = " ".join(" ".join(["word"] * (n - 1) + ["end."]) for n in sentences)
    ends, total = set(), 0
    for n in sentences:
        total += n
        ends.add(total)
    passages = chunk_document(doc(text), words=50)
    start = 0
    for p in passages[:-1]:
        end = start + len(p.text.split())
        assert 35 <= end - start <= 65
        if any(start + 35 <= e <= start + 65 for e in ends):
            assert end in ends
        start = end
    assert len(passages[-1].text.split()) <= 75


@pytest.mark.parametrize(
    ("key", "include", "exclude", "read"),
    [
        ("index.html", ("*.html",), (), True),
        ("notes.md", ("*.html",), (), False),
        ("a/b/page.html", ("*.html",), (), True),  # a name pattern matches at any depth
        ("changelog.html", (), ("changelog*",), False),
        ("changelog/v2.html", (), ("changelog*",), False),  # so does a folder's name: the folder is left out whole
        ("docs/changelog/v2.html", (), ("changelog",), False),
        ("docs/changes.html", (), ("changelog*",), True),
        ("api/ref/x.html", (), ("api/*",), False),  # a pattern with a / matches the path inside the folder
        ("guide/api/x.html", (), ("api/*",), True),  # ... from its start: guide/api is another path
        ("release-3.html", (), ("**/release-*",), False),  # a leading **/ is as if left out
        ("guide/install.html", ("guide/",), (), True),
        ("index.html", ("guide/",), (), False),
        ("README.MD", ("*.md",), (), False),  # case-sensitive, as globs are on Linux
    ],
)
def test_a_file_filter_reads_a_name_pattern_at_any_depth_and_a_path_pattern_from_the_folder(
    key, include, exclude, read
):
    assert FileFilter(include, exclude).admits(key) is read
