"""How the chunker cuts a corpus: of its cuts (passage ends not at a section's end), how many fall inside a line, so that
a sentence, a list item or a code line is split across two passages ("... **settings)\\nIf" and "xsrf_cookies is set,
the Tornado web application ..."). Run it with two checkouts on PYTHONPATH to compare chunker versions:

    PYTHONPATH=OLD python scripts/chunk_cuts.py /usr/share/doc/python3.11/html
    PYTHONPATH=NEW python scripts/chunk_cuts.py /usr/share/doc/python3.11/html
"""

from __future__ import annotations

import argparse

import typedrag.corpus.chunker as chunker
from typedrag.corpus.readers import iter_documents


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="+", help="files or folders, as `typedrag index` takes them")
    args = parser.parse_args()
    counts = {"passages": 0, "cuts": 0, "inside a line": 0}
    cut = chunker._cut

    def counted(tokens, lines, start, words, slack):  # the chunker's own cut, watched
        taken = cut(tokens, lines, start, words, slack)
        at = start + taken
        counts["cuts"] += 1
        if not chunker._ends_sentence(tokens[at - 1]) and not lines.starts_line(at):
            counts["inside a line"] += 1
        return taken

    chunker._cut = counted
    for document in iter_documents(args.sources, problems=[]):
        counts["passages"] += sum(1 for _ in chunker.iter_passages(document))
    print(f"chunker {chunker.CHUNKER_VERSION}: " + ", ".join(f"{name} {n:,}" for name, n in counts.items()))


if __name__ == "__main__":
    main()
