"""Document readers, one module per format, each turning a file into a title and a stream of `Block`s.

Every reader opens the file itself and raises `Unreadable` with a one-line reason when it cannot read
it; `typedrag.corpus.readers` turns that into a `file: reason` problem. Blocks come from a generator
that opens the file again, so a Document can be handed to the chunker (or consumed in a worker
process) long after the reader returned.
"""

from typedrag.corpus.formats.common import MAX_BLOCK_CHARS, Parsed, Unreadable

__all__ = ["MAX_BLOCK_CHARS", "Parsed", "Unreadable"]
