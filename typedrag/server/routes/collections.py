"""Collections over HTTP (`serve --data DIR`): create, list and delete them; upload, replace, list and delete their
documents; open a passage's original in the viewer. Every route asks typedrag.library.access whether the caller may
read or write the collection (reading a source needs the same right as asking in its collection).

Uploads are multipart/form-data, parsed as they arrive (python-multipart's streaming parser) and written straight
into the collection's staging folder within the library's limits: they never pass the 256 KB body buffer of the
other routes (RequestContext lets `UPLOAD_PATH` through), and no part is spooled anywhere outside the data folder.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any, Literal

from fastapi import APIRouter, Depends, Request
from fastapi.responses import FileResponse, JSONResponse, Response
from pydantic import BaseModel, Field
from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import ClientDisconnect

from typedrag.corpus.formats.common import Unreadable
from typedrag.library import Caller, Collection, CollectionError, may
from typedrag.library.uploads import Staging
from typedrag.library.viewer import pdf_page_png, view
from typedrag.server.auth import require_caller
from typedrag.server.error_bodies import api_error, error_body
from typedrag.server.logs import client_log, log
from typedrag.server.service import service_of

UPLOAD_PATH = re.compile(r"/v1/collections/[^/]+/documents/?")
STATIC = Path(__file__).resolve().parents[1] / "static"
MAX_FIELD_BYTES = 64 * 1024  # a form field that is not a file (ignored) is read up to this size
# The viewer shows documents only this page's own scripts and styles may act on; the originals' markup is sanitised too.
VIEWER_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'self'"
)

router = APIRouter()


async def collection_error(request: Request, error: CollectionError) -> JSONResponse:
    return JSONResponse(error_body(error.status, error.message), error.status)


def _library(request: Request):
    return service_of(request).library


class NewCollection(BaseModel):
    """A collection to create: its name, and how it is searched (default: hybrid, BM25 and passage vectors)."""

    name: str = Field(examples=["manuals"], description="1-64 lower-case letters, digits, '-' or '_'")
    retrieval: Literal["bm25", "dense", "hybrid"] | None = None


class SearchRequest(BaseModel):
    """A search in one collection: the query and how many passages to return."""

    query: str = Field(examples=["How do I recover disk space?"])
    k: int = Field(10, ge=1, le=50)


@router.get("/v1/collections", tags=["collections"])
async def list_collections(request: Request, caller: Caller = Depends(require_caller)) -> dict[str, Any]:
    """Every collection the caller may read: documents, passages, state (empty, queued, ingesting, ready, failed),
    the progress of an ingestion under way, and what the last one did; with the upload limits."""
    library = _library(request)
    try:
        default = library.default_name(caller)
    except CollectionError:
        default = None
    infos = [{**info, "may_write": may(caller, info["name"], "write")} for info in library.infos(caller)]
    if default not in {info["name"] for info in infos}:
        default = None
    # `writable`: the caller may create and delete collections here (admins, on a server with --data)
    return {
        "collections": infos,
        "default": default,
        "writable": library.data is not None and may(caller, None, "write"),
        "limits": library.limits.model_dump(mode="json"),
    }


@router.post("/v1/collections", tags=["collections"], status_code=201)
async def create_collection(
    body: NewCollection, request: Request, caller: Caller = Depends(require_caller)
) -> dict[str, Any]:
    collection = await asyncio.to_thread(_library(request).create, body.name, caller, body.retrieval)
    return collection.info()


@router.get("/v1/collections/{collection}", tags=["collections"])
async def get_collection(collection: str, request: Request, caller: Caller = Depends(require_caller)) -> dict[str, Any]:
    return _library(request).get(collection, caller).info()


@router.delete("/v1/collections/{collection}", tags=["collections"])
async def delete_collection(
    collection: str, request: Request, caller: Caller = Depends(require_caller)
) -> dict[str, Any]:
    """Delete the collection, its documents and its index (an ingestion under way is stopped first)."""
    await asyncio.to_thread(_library(request).delete, collection, caller)
    return {"deleted": collection}


@router.get("/v1/collections/{collection}/documents", tags=["collections"])
async def list_documents(collection: str, request: Request, caller: Caller = Depends(require_caller)) -> dict[str, Any]:
    """Each document with its status: indexed, queued, indexing, failed (with its problems), or removing."""
    found = _library(request).get(collection, caller)
    return {"collection": found.info(), "documents": await asyncio.to_thread(found.documents)}


@router.post("/v1/collections/{collection}/search", tags=["collections"])
async def search(
    collection: str, body: SearchRequest, request: Request, caller: Caller = Depends(require_caller)
) -> dict[str, Any]:
    """The passages the collection's index finds for `query`, best first, each with its link to the original."""
    library = _library(request)
    sources = await asyncio.to_thread(library.search, collection, body.query, body.k, caller)
    return {"collection": collection, "passages": [s.model_dump(mode="json") for s in sources]}


@router.post(
    "/v1/collections/{collection}/documents",
    tags=["collections"],
    status_code=202,
    openapi_extra={
        "requestBody": {
            "content": {
                "multipart/form-data": {
                    "schema": {
                        "type": "object",
                        "properties": {"files": {"type": "array", "items": {"type": "string", "format": "binary"}}},
                    }
                }
            },
            "required": True,
        }
    },
)
async def upload(collection: str, request: Request, caller: Caller = Depends(require_caller)) -> JSONResponse:
    """Add documents (multipart/form-data, any number of file fields): a file named as one the collection holds
    replaces it. 202 with each file accepted or rejected (with its one-line reason); ingestion follows in the
    background, and answers come from the documents as they were until it is done. 422 when no file is accepted."""
    library = _library(request)
    target = library.get(collection, caller, "write")
    limits = library.limits
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limits.max_upload_bytes:
        raise api_error(
            413, f"the upload is over the limit of {limits.max_upload_bytes >> 20:,} MB; send fewer files at once"
        )
    kind, params = parse_options_header(request.headers.get("content-type", ""))
    if kind != b"multipart/form-data" or not params.get(b"boundary"):
        raise api_error(415, "send the files as multipart/form-data (e.g. curl -F files=@manual.pdf)")
    staging = target.staging()
    parts = _Parts(params[b"boundary"], staging)
    timeout = service_of(request).options.body_timeout
    try:
        received, chunks = 0, request.stream().__aiter__()
        while True:
            try:
                chunk = await asyncio.wait_for(chunks.__anext__(), timeout)
            except StopAsyncIteration:
                break
            except TimeoutError:
                raise api_error(408, f"nothing of the upload arrived for {timeout:g} s") from None
            received += len(chunk)
            if received > limits.max_upload_bytes:
                raise api_error(
                    413,
                    f"the upload is over the limit of {limits.max_upload_bytes >> 20:,} MB; send fewer files at once",
                )
            parts.write(chunk)
        parts.finish()
    except ClientDisconnect:
        staging.discard()
        client_log.info("upload cut off by the client: nothing kept", extra={"fields": {"collection": collection}})
        return JSONResponse(error_body(499, "client closed the request"), 499)
    except MultipartParseError as error:
        staging.discard()
        raise api_error(
            400, f"the upload is not valid multipart/form-data ({' '.join(str(error).split())[:120]})"
        ) from None
    except BaseException:
        staging.discard()
        raise
    if not staging.staged and not staging.rejected:
        raise api_error(422, "the upload holds no file: send each document as a form field with a file name")
    try:
        accepted, refused = await asyncio.to_thread(library.add, target, staging.staged)
    finally:
        staging.discard()  # what was moved into the collection is no longer here; the rest goes
    rejected = [{"name": r.name, "reason": r.reason} for r in [*staging.rejected, *refused]]
    log.info(
        "upload", extra={"fields": {"collection": target.name, "accepted": len(accepted), "rejected": len(rejected)}}
    )
    body = {"collection": target.name, "accepted": accepted, "rejected": rejected, "state": target.state()}
    if not accepted:
        reasons = "; ".join(f"{r['name']}: {r['reason']}" for r in rejected[:3]) + (
            "; ..." if len(rejected) > 3 else ""
        )
        return JSONResponse({**error_body(422, f"no file was accepted: {reasons}"), **body}, 422)
    return JSONResponse(body, 202)


class _Parts:
    """The parts of a multipart body as they stream: each file part goes to `staging`, other fields are skipped."""

    def __init__(self, boundary: bytes, staging: Staging) -> None:
        self.staging = staging
        self.header_field = self.header_value = b""
        self.headers: dict[bytes, bytes] = {}
        self.is_file = False
        self.open = False
        self.field_bytes = 0
        self.parser = MultipartParser(
            boundary,
            {
                "on_part_begin": self._begin,
                "on_part_data": self._data,
                "on_part_end": self._end,
                "on_header_field": self._field,
                "on_header_value": self._value,
                "on_header_end": self._header_end,
                "on_headers_finished": self._headers_finished,
            },
        )

    def write(self, chunk: bytes) -> None:
        self.parser.write(chunk)

    def finish(self) -> None:
        self.parser.finalize()
        if self.open:
            raise MultipartParseError("the upload ended in the middle of a file")

    def _begin(self) -> None:
        self.headers, self.is_file, self.field_bytes, self.open = {}, False, 0, True

    def _field(self, data: bytes, start: int, end: int) -> None:
        self.header_field += data[start:end]

    def _value(self, data: bytes, start: int, end: int) -> None:
        self.header_value += data[start:end]

    def _header_end(self) -> None:
        self.headers[self.header_field.lower()] = self.header_value
        self.header_field = self.header_value = b""

    def _headers_finished(self) -> None:
        _, options = parse_options_header(self.headers.get(b"content-disposition", b""))
        if b"filename" in options:
            self.is_file = True
            self.staging.begin(options[b"filename"].decode("utf-8", "replace"))

    def _data(self, data: bytes, start: int, end: int) -> None:
        if self.is_file:
            self.staging.write(data[start:end])
        else:
            self.field_bytes += end - start
            if self.field_bytes > MAX_FIELD_BYTES:
                raise MultipartParseError(f"a form field that is no file is over {MAX_FIELD_BYTES >> 10} KB")

    def _end(self) -> None:
        if self.is_file:
            self.staging.end()
        self.open = False


@router.delete("/v1/collections/{collection}/documents/{name}", tags=["collections"], status_code=202)
async def delete_document(
    collection: str, name: str, request: Request, caller: Caller = Depends(require_caller)
) -> dict[str, Any]:
    """Remove a document: it leaves the answers once the ingestion that follows is done."""
    library = _library(request)
    target = library.get(collection, caller, "write")
    await asyncio.to_thread(library.remove, target, name)
    return {"collection": target.name, "removed": name, "state": target.state()}


@router.get("/v1/collections/{collection}/documents/{name}/original", tags=["collections"])
async def original(collection: str, name: str, request: Request, caller: Caller = Depends(require_caller)) -> Response:
    """The document as uploaded, as a download (never shown by the browser as it is: the viewer shows it sanitised)."""
    target = _library(request).get(collection, caller)
    path, why = await asyncio.to_thread(target.original, name, _indexed_hash(target, name))
    if path is None:
        raise api_error(404, f"{name}: {why}")
    return FileResponse(
        path,
        media_type="application/octet-stream",
        filename=name,
        headers={"X-Content-Type-Options": "nosniff", "Content-Security-Policy": "default-src 'none'; sandbox"},
    )


def _indexed_hash(target: Collection, name: str) -> str | None:
    """For a read-only collection, the hash the index holds (its originals are checked against it)."""
    return target.manifest_files().get(name, {}).get("sha256") if target.read_only else None


@router.get("/v1/collections/{collection}/source", tags=["collections"])
async def source(
    collection: str,
    request: Request,
    passage: str | None = None,
    document: str | None = None,
    caller: Caller = Depends(require_caller),
) -> dict[str, Any]:
    """What the viewer shows for a passage (or a whole document): the passage, and its original rendered and
    sanitised with the passage marked (`kind` html), or a PDF's page count and the passage's boxes on its pages
    (`kind` pdf; images from .../pages/{n}.png). `found` false, with a note, when the passage is not in the index."""
    if not passage and not document:
        raise api_error(422, "name a passage (?passage=ID) or a document (?document=NAME)")
    target = _library(request).get(collection, caller)
    return await asyncio.to_thread(_source, target, passage, document)


def _source(target: Collection, passage_id: str | None, document: str | None) -> dict[str, Any]:
    shown: dict[str, Any] = {"collection": target.name, "found": True, "passage": None, "note": None}
    text = first = last = None
    if passage_id:
        found = target.passage(passage_id)
        if found is None:
            return {
                **shown,
                "found": False,
                "note": f"passage {passage_id!r} is not in collection {target.name!r} now "
                "(its document was removed or replaced since)",
            }
        passage, name, record = found
        text, first, last = passage.text, passage.page, passage.page_end or passage.page
        shown["passage"] = {
            "passage_id": passage.passage_id,
            "title": passage.title,
            "section": passage.section,
            "page": passage.page,
            "page_end": passage.page_end,
            "text": passage.text,
        }
        path, why = target.original(name, record.get("sha256"))
    else:
        name = document
        path, why = target.original(name, _indexed_hash(target, name))
        if path is None and why and "removed" in why:
            return {**shown, "found": False, "note": f"no document {name!r} in collection {target.name!r}"}
    shown["document"] = {
        "name": name,
        "original": f"/v1/collections/{target.name}/documents/{name}/original" if path else None,
    }
    if path is None:
        return {**shown, "note": why, "view": {"kind": "none"}}
    shown["view"] = view(path, name, text, first, last)
    return shown


@router.get(
    "/v1/collections/{collection}/documents/{name}/pages/{number}.png", tags=["collections"], response_class=Response
)
async def page_image(
    collection: str, name: str, number: int, request: Request, caller: Caller = Depends(require_caller)
) -> Response:
    """Page `number` of a PDF document, rendered by PDFium."""
    target = _library(request).get(collection, caller)
    path, why = await asyncio.to_thread(target.original, name, _indexed_hash(target, name))
    if path is None:
        raise api_error(404, f"{name}: {why}")
    try:
        image = await asyncio.to_thread(pdf_page_png, path, name, number)
    except IndexError as error:
        raise api_error(404, str(error)) from None
    except Unreadable as error:
        raise api_error(422, f"{name}: {error.reason.removesuffix(', skipped')}") from None
    except Exception as error:  # not a PDF, or one PDFium cannot render
        raise api_error(422, f"{name}: page {number} cannot be rendered ({type(error).__name__})") from None
    return Response(image, media_type="image/png", headers={"Cache-Control": "private, max-age=300"})


@router.get("/view/{collection}", include_in_schema=False)
async def viewer(collection: str) -> FileResponse:
    """The viewer page: it fetches /v1/collections/{collection}/source as the page does (its session cookie, or the key
    it keeps), so a link needs no key in it."""
    return FileResponse(
        STATIC / "view.html", headers={"Content-Security-Policy": VIEWER_POLICY, "Cache-Control": "no-cache"}
    )
