"""Reading HTML against the parser's own cost, two checkouts side by side (issue 56 item 5).

For each round and each checkout, a fresh process reads every page of a folder three ways and reports CPU-seconds
(not wall time: the machine is shared): Lexbor's parse alone (the floor), typedrag's reader (`read_html`: parse,
boilerplate cut, the walk to blocks) and reading plus chunking (`iter_documents` then `chunk_document`, what a BM25
build or a sync does per file). The checkouts alternate, so both see the same load. Each run also hashes every
page's title and blocks (text, section, kind, order), and the two checkouts' digests are compared: equal blocks make
equal passages, so equal indexes and answers.

    python bench/bench_html_walk.py --old /path/to/old --new /path/to/new --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

POSTGRES = "/usr/share/doc/postgresql-doc-15/html"

ONE_RUN = r"""
import hashlib, json, resource, sys
from pathlib import Path
from selectolax.lexbor import LexborHTMLParser
from typedrag.corpus import chunk_document, iter_documents
from typedrag.corpus.formats.html import decode, read_html

def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime

files = sorted(Path(sys.argv[1]).glob("*.html"))
data = [path.read_bytes() for path in files]
started = cpu()
for page in data:
    LexborHTMLParser(decode(page))
parse = cpu() - started
started = cpu()
for path in files:
    for _ in read_html(path).blocks:
        pass
read = cpu() - started
digest = hashlib.sha256()
for path in files:
    parsed = read_html(path)
    blocks = [[b.text, list(b.section), b.page, str(b.kind), b.order] for b in parsed.blocks]
    digest.update(json.dumps([str(path), parsed.title, blocks], ensure_ascii=False).encode())
started = cpu()
passages = sum(len(chunk_document(doc)) for doc in iter_documents([sys.argv[1]], problems=[]))
chunked = cpu() - started
print(json.dumps({"files": len(files), "parse": parse, "read": read, "read_chunk": chunked, "passages": passages, "digest": digest.hexdigest()}))
"""


def run(checkout: str, folder: str) -> dict:
    env = {**os.environ, "PYTHONPATH": checkout}
    out = subprocess.run([sys.executable, "-c", ONE_RUN, folder], env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old", required=True)
    parser.add_argument("--new", required=True)
    parser.add_argument("--folder", default=POSTGRES, help="a folder of .html pages (not recursive)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    runs: dict[str, list[dict]] = {"old": [], "new": []}
    for _ in range(args.rounds):
        for name in ("old", "new"):
            runs[name].append(run(getattr(args, name), args.folder))
    print(f"{args.folder}: {runs['old'][0]['files']} files, {args.rounds} rounds, load {os.getloadavg()[0]:.1f}")
    for name, found in runs.items():
        parse, read, chunk = (statistics.median(r[key] for r in found) for key in ("parse", "read", "read_chunk"))
        files = found[0]["files"]
        print(
            f"{name}: parse {parse:.2f} CPU-s, read_html {read:.2f} ({files / read:.0f} files per CPU-s, {read / parse:.1f}x the parse), "
            f"reading and chunking {chunk:.2f} ({files / chunk:.0f} files per CPU-s), {found[0]['passages']:,} passages"
        )
    old, new = (statistics.median(r["read_chunk"] for r in runs[name]) for name in ("old", "new"))
    print(f"reading and chunking, old / new: {old / new:.2f}")
    same = {r["digest"] for r in runs["old"] + runs["new"]}
    print("blocks of every page: identical" if len(same) == 1 else "blocks of every page: DIFFER")


if __name__ == "__main__":
    main()
