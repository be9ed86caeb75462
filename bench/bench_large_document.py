"""One large document handed in by a framework: how long a typed offline answer takes, and how much text it reads.

typedrag's own index cuts documents into ~100-word passages; a framework hands typedrag its documents as they
are. This runs typed questions over one large real document (valgrind's NEWS, 212 KB, installed by the Debian
package `valgrind` as /usr/share/doc/valgrind/changelog.gz) through the LangChain adapter (a retriever that returns
the whole file, as a loader without a splitter gives it) and the Haystack component (the document handed to
`TypedRAG.run(documents=...)`), offline engine, and prints per question the seconds and the characters of the
passages the answer was given. The sentence embeddings are cached in the process, so the first question of a
run pays for the document; run each framework in a process of its own:

    python bench/bench_large_document.py --framework langchain
    python bench/bench_large_document.py --framework haystack
    PYTHONPATH=/path/to/other/checkout python bench/bench_large_document.py --framework langchain
"""

from __future__ import annotations

import argparse
import gzip
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import machine_line  # noqa: E402

NEWS = Path("/usr/share/doc/valgrind/changelog.gz")
QUESTIONS = [
    "How did Valgrind's support for macOS change over the releases?",
    "Why would I use the --track-origins option?",
]


def langchain_answer(text: str, question: str):
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever

    from typedrag.integrations.langchain import TypedRAGRunnable

    class WholeFile(BaseRetriever):
        """A retriever that returns the file whole, as a loader without a text splitter would."""

        def _get_relevant_documents(self, query, *, run_manager, **kwargs):
            return [Document(page_content=text, metadata={"source": str(NEWS)})]

    return TypedRAGRunnable.from_components(WholeFile()).invoke(question)["trace"]


def haystack_answer(text: str, question: str):
    from haystack import Document

    from typedrag.integrations.haystack import TypedRAG

    component = TypedRAG()
    return component.run(query=question, documents=[Document(content=text, meta={"file_path": str(NEWS)})])["trace"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--framework", choices=("langchain", "haystack", "both"), default="both")
    args = parser.parse_args()
    import typedrag

    print(machine_line())
    print(f"typedrag from {Path(typedrag.__file__).parent}")
    text = gzip.decompress(NEWS.read_bytes()).decode("utf-8", "replace")
    print(f"document: {NEWS} ({len(text):,} characters, {len(text.split()):,} words)")
    from typedrag.embed import default_embedder

    default_embedder().embed(["warm up"])  # the model's load is not the document's cost
    runs = {"langchain": langchain_answer, "haystack": haystack_answer}
    for name in ("langchain", "haystack") if args.framework == "both" else (args.framework,):
        for question in QUESTIONS:
            started = time.perf_counter()
            result = runs[name](text, question)
            seconds = time.perf_counter() - started
            result = result if isinstance(result, dict) else result.model_dump()  # Haystack's trace is a dict already
            read = sum(len(source["text"]) for source in result["sources"])
            print(
                f"{name:9} {seconds:7.1f} s  {read:>8,} characters in {len(result['sources'])} passages  "
                f"{result['strategy']:10} {question}",
                flush=True,
            )


if __name__ == "__main__":
    main()
