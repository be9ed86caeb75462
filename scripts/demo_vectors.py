"""Write the demo corpus's passage vectors that typedrag ships (typedrag/index/shipped/), from a demo index.

Run after the default embedder, its passage input or the chunker changes (tests/test_hybrid.py says when the
shipped file no longer matches the embedder):

    typedrag index demo:vital-articles --index demo-index --retrieval hybrid --embedder minilm
    python scripts/demo_vectors.py demo-index

Each record is the digest of the text embedded (title and passage), the int8 row and its scale, as the index
holds them. A sample of rows is embedded again and must come out the same.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import tantivy

from typedrag.corpus.readers import DEMO_SOURCE
from typedrag.embed import passage_input
from typedrag.index.dense import _passages_of
from typedrag.index.vectors import (
    SHIPPED_DIR,
    DenseVectors,
    Table,
    digest,
    embedder_for,
    identity_of,
    quantize,
    record_shipped,
    shipped_file,
)

OUT = SHIPPED_DIR / "vital-articles.minilm.vectors"
CHECKED = 64  # rows embedded again to check the file


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("index", type=Path, help="an index of demo:vital-articles with MiniLM vectors")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    manifest = json.loads((args.index / "manifest.json").read_text())
    table = Table.from_json(manifest.get("vectors"))
    if table is None or table.identity != identity_of("minilm") or list(table.files) != [DEMO_SOURCE]:
        print(f"{args.index}: not an index of {DEMO_SOURCE} with vectors by today's MiniLM", file=sys.stderr)
        return 1
    vectors = DenseVectors(args.index, table)
    index = tantivy.Index.open(str(args.index))
    first, count = table.files[DEMO_SOURCE]
    texts = []
    for i, passage in enumerate(_passages_of(index.searcher(), index.schema, DEMO_SOURCE, count)):
        assert vectors.passage_id(first + i) == passage.passage_id, (first + i, passage.passage_id)
        texts.append(passage_input(passage.title, passage.text))
    held = np.asarray(vectors.rows[first : first + count])
    sample = np.random.default_rng(0).choice(count, size=min(CHECKED, count), replace=False)
    rows, _ = quantize(embedder_for("minilm").encode([texts[i] for i in sample]))
    drift = int(np.abs(rows.astype(np.int16) - held[sample].astype(np.int16)).max())
    if drift > 1:
        print(f"rows embedded again differ by up to {drift}: the index was not made by this model", file=sys.stderr)
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    data = shipped_file(
        table.identity, [digest(t) for t in texts], held, np.asarray(vectors.scales[first : first + count])
    )
    record_shipped(args.out.parent, args.out.name, data)  # its sha256 beside it: typedrag takes no other bytes
    print(
        f"{count:,} vectors -> {args.out} ({args.out.stat().st_size / 2**20:.1f} MiB); re-embedded {len(sample)}: max drift {drift}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
