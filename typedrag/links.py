"""Where a passage's original can be read: the link every source carries, and the data folder's layout it is
named by. `typedrag ask --json` and the API give the same link: a path on a typedrag server serving the index.

`serve --data DIR` keeps collection c's index in DIR/collections/c/index (its originals in .../files); an index
anywhere else is served as the collection "default" (`serve --index DIR`).
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

COLLECTIONS = "collections"
INDEX = "index"
FILES = "files"
DEFAULT_COLLECTION = "default"


def viewer_link(collection: str, passage_id: str) -> str:
    """The page that shows `passage_id`'s original document at the passage, highlighted."""
    return f"/view/{quote(collection, safe='')}?passage={quote(passage_id, safe='')}"


def collection_of_index(index_dir: Path | str) -> str:
    """The collection a server serves this index as: c for DIR/collections/c/index, else "default"."""
    path = Path(index_dir)
    if path.name == INDEX and path.parent.parent.name == COLLECTIONS:
        return path.parent.name
    return DEFAULT_COLLECTION
