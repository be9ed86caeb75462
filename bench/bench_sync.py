"""Incremental indexing against a full build: 1,000 real HTML pages, then 1% of them changed.

Copies the first 1,000 pages of a Debian HTML manual (PostgreSQL's by default) into a scratch folder,
builds an index of it from scratch, changes ten files (four edited, three deleted, three new), and
syncs: prints both times, their ratio, what the sync did, and the peak memory of each run (each in a
fresh process, as `typedrag index` runs).

    python bench/bench_sync.py [--manual /usr/share/doc/postgresql-doc-15/html] [--files 1000]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import machine_line  # noqa: E402

RUN = """
import json, resource, sys, time
from typedrag.index.tantivy import sync_index
started = time.perf_counter()
summary = sync_index([sys.argv[1]], sys.argv[2], show_progress=False, rebuild=sys.argv[3] == "rebuild")
print(json.dumps({"seconds": time.perf_counter() - started, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "children_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
                  "added": summary.added, "updated": summary.updated, "removed": summary.removed,
                  "unchanged": summary.unchanged, "documents": summary.documents, "passages": summary.passages}))
"""


def run(folder: Path, index: Path, mode: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", RUN, str(folder), str(index), mode], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--manual", type=Path, default=Path("/usr/share/doc/postgresql-doc-15/html"))
    parser.add_argument("--files", type=int, default=1000)
    args = parser.parse_args()
    pages = sorted(args.manual.glob("*.html"))[: args.files + 3]
    if len(pages) < args.files + 3:
        raise SystemExit(
            f"{args.manual} has {len(pages)} pages; need {args.files + 3} (apt-get install postgresql-doc-15)"
        )
    print(machine_line())
    with tempfile.TemporaryDirectory() as scratch:
        folder, index = Path(scratch) / "docs", Path(scratch) / "index"
        folder.mkdir()
        for page in pages[: args.files]:
            shutil.copy(page, folder / page.name)
        full = run(folder, index, "rebuild")
        names = sorted(p.name for p in folder.iterdir())
        for name in names[:4]:  # edited
            path = folder / name
            path.write_text(
                path.read_text(encoding="utf-8", errors="replace").replace(
                    "</body>", "<p>An edited paragraph.</p></body>"
                ),
                encoding="utf-8",
            )
        for name in names[4:7]:  # deleted
            (folder / name).unlink()
        for page in pages[args.files :]:  # new
            shutil.copy(page, folder / page.name)
        sync = run(folder, index, "sync")
    print(f"corpus: {args.files:,} pages of {args.manual}")
    print(
        f"full build: {full['seconds']:.1f} s, {full['documents']:,} documents, {full['passages']:,} passages, "
        f"peak RSS {full['rss_mb']:.0f} MB (workers {full['children_rss_mb']:.0f} MB)"
    )
    print(
        f"sync after 10 changes: {sync['seconds']:.2f} s (added {sync['added']}, updated {sync['updated']}, "
        f"removed {sync['removed']}, unchanged {sync['unchanged']}), {sync['documents']:,} documents, "
        f"peak RSS {sync['rss_mb']:.0f} MB"
    )
    print(f"sync / full build: {100 * sync['seconds'] / full['seconds']:.1f}%")


if __name__ == "__main__":
    main()
