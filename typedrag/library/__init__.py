"""A team's document library: collections of uploaded documents, each its own typedrag index, kept in one data
folder (`typedrag serve --data DIR`). Callable without HTTP: list collections, search one, answer in one.

- `store`: the data folder, its collections and their documents, and the background ingestion;
- `uploads`: what an uploaded file must be to join a collection (name, type, size, content);
- `access`: the one place that decides whether a caller may read or write a collection;
- `viewer`: the original of a passage, rendered and sanitised, the passage highlighted.
"""

from typedrag.library.access import Caller, may
from typedrag.library.store import Collection, CollectionError, Library
from typedrag.library.uploads import Rejected

__all__ = ["Caller", "Collection", "CollectionError", "Library", "Rejected", "may"]
