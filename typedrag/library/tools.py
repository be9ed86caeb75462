"""A library's collections as the MCP tools see them (typedrag.mcp_server's `Collections`): the ones the caller may
read, each answering with its own pipeline and linking its sources to the viewer. `serve`'s /mcp reads with the
caller of each request; `typedrag mcp --data DIR` with an open caller, on a library opened read-only."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from typedrag.library.access import Caller
from typedrag.library.store import CollectionError, Library
from typedrag.mcp_server import Collection, CollectionInfo, UnknownCollection


class LibraryCollections:
    """The collections `caller()` may read; `admit` is what an answer holds while it is made (a server's slot)."""

    def __init__(
        self,
        library: Callable[[], Library],
        caller: Callable[[], Caller] = Caller,
        admit: Callable[[], AbstractContextManager[Any]] = nullcontext,
    ) -> None:
        self.library, self.caller, self.admit = library, caller, admit

    def list(self) -> list[CollectionInfo]:
        library, caller = self.library(), self.caller()
        shown = []
        for info in library.infos(caller):
            try:
                generator = library.pipeline(info["name"], caller).engine.name
            except CollectionError:  # no index yet: listed, with nothing that answers
                generator = "none yet"
            shown.append(
                CollectionInfo(
                    name=info["name"],
                    description=info["state"],
                    retriever=info["retriever"],
                    generator=generator,
                    passages=info.get("passages"),
                )
            )
        return shown

    def open(self, name: str) -> Collection:
        try:
            pipeline = self.library().pipeline(name, self.caller())
        except CollectionError as error:  # one the caller may not read is as unknown as one that is not there
            raise UnknownCollection(error.message) from error
        return Collection(name, pipeline, link=lambda source: source.link, admit=self.admit)
