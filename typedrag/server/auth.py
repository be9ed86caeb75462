"""Who sent a request: every route's `Caller` (typedrag.library.access decides what it may do), and the page's
sign-in (`/v1/session`).

A request is from, in this order:

1. a key in `Authorization: Bearer`: the server's own (`serve --api-key-env`, an admin without an account) or a
   user's (`typedrag users key create`); any other key is a 401;
2. an SSO proxy's user header (`--user-header X-Forwarded-User`), believed only from `--trusted-proxies`
   addresses: from anywhere else the header is ignored;
3. the page's session cookie (`POST /v1/session` with a key), kept server-side in the store (replicas share it),
   ended by signing out, by its expiry, and by revoking its key or disabling its user; a write with it needs the
   `X-CSRF-Token` the page reads from `GET /v1/session` (bound to the cookie) and is refused when the browser says
   it comes from another site (`Sec-Fetch-Site`);
4. nobody: the server is open (anyone may do everything, as before accounts) while it has neither a key of its
   own nor any account; once a user exists, every request must say who it is (401).

The caller carries its user's role and grants as read for this request, so a revoked grant or key applies at the
next request, on every replica. Keys are never logged, echoed or traced: a key-shaped string in any log line,
error body or request span is cut to its public prefix (typedrag.store.keys.mask_keys).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from typedrag.library import Caller
from typedrag.store import AlreadyExists, Forbidden, InvalidInput, NotFound, StoreUnavailable, User
from typedrag.store.keys import mask_keys, prefix_of
from typedrag.server.error_bodies import api_error, error_body
from typedrag.server.logs import client_log, log
from typedrag.server.service import Service, service_of

SESSION_COOKIE = "typedrag_session"
CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
MAX_KEY_CHARS = 512  # a sign-in body's key; longer is no key of ours
STORE_STATUS = ((InvalidInput, 400), (Forbidden, 403), (NotFound, 404), (AlreadyExists, 409))

T = TypeVar("T")
router = APIRouter(tags=["accounts"])


async def in_store(call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """A store call on a worker thread (each is one transaction; the database is never waited on in the loop)."""
    return await anyio.to_thread.run_sync(lambda: call(*args, **kwargs))


async def store_error(request: Request, error: Exception) -> JSONResponse:
    """The store's refusals by class: 400, 403, 404, 409; the database unavailable: 503. Keys in them are masked."""
    if isinstance(error, StoreUnavailable):
        log.warning("the store is unavailable", extra={"fields": {"error": str(error)}})
        return JSONResponse(
            error_body(503, "the store (accounts, conversations) is unavailable; see the server log"),
            503,
            headers={"Retry-After": "5"},
        )
    status = next((code for kind, code in STORE_STATUS if isinstance(error, kind)), 400)
    return JSONResponse(error_body(status, mask_keys(str(error))), status)


# ---------------------------------------------------------------- who is asking


def unauthorized(
    message: str = "missing or wrong API key: send 'Authorization: Bearer <key>', or sign in on the page",
    *,
    clear_cookie: bool = False,
) -> HTTPException:
    headers = {"WWW-Authenticate": "Bearer"}
    if clear_cookie:
        headers["Set-Cookie"] = f"{SESSION_COOKIE}=; Max-Age=0; Path=/; HttpOnly; SameSite=Lax"
    return api_error(401, message, headers)


async def require_caller(request: Request) -> Caller:
    """The caller of a route (a FastAPI dependency): by key, trusted header or session cookie, or 401."""
    caller = await caller_of(request)
    request.state.caller = caller
    return caller


async def check_bearer(request: Request) -> Caller:
    """The caller of /mcp, an ASGI app of its own: by key or trusted header (MCP clients send no cookies)."""
    return await caller_of(request, cookies=False)


async def caller_of(request: Request, *, cookies: bool = True) -> Caller:
    service = service_of(request)
    options, store = service.options, service.store
    presented = bearer_of(request)
    if presented is not None:
        if options.api_key is not None and hmac.compare_digest(presented.encode(), options.api_key.encode()):
            return Caller(name="key", how="key")
        if store is not None and prefix_of(presented) is not None:
            user = await in_store(store.authenticate, presented)
            if user is not None:
                return await user_caller(service, user, "key")
        if await is_open(service):  # as before accounts: a server with no key of its own ignores what is sent
            return Caller()
        raise unauthorized()
    if options.user_header is not None and store is not None:
        name = request.headers.get(options.user_header)
        if name is not None:
            if from_trusted_proxy(request, options.trusted_proxies):
                caller = await header_caller(service, name)
                # The proxy adds the header to another site's form post too: a write needs the page's X-CSRF-Token.
                # A cross-site request cannot set a custom header without a CORS preflight, which is never granted.
                check_same_origin_write(request, "header:" + caller.name)
                return caller
            client_log.warning(
                "a user header from an address that is no trusted proxy: ignored",
                extra={"fields": {"header": options.user_header, "client": _peer(request)}},
            )
    ended = False
    if cookies and store is not None:
        token = request.cookies.get(SESSION_COOKIE)
        if token:
            session = await in_store(store.session, token, options.api_key)
            if session is not None:
                check_same_origin_write(request, token)
                if session.user is None:
                    return Caller(name="key", how="session")
                return await user_caller(service, session.user, "session")
            ended = True
    if await is_open(service):
        return Caller()
    if ended:
        raise unauthorized(
            "your session has ended (signed out, expired, or its key revoked): sign in again", clear_cookie=True
        )
    raise unauthorized()


async def user_caller(service: Service, user: User, how: str) -> Caller:
    grants = await in_store(service.store.grants_of, user)
    return Caller(name=user.name, user=user, grants=grants, how=how)


async def header_caller(service: Service, given: str) -> Caller:
    """The account an SSO proxy names: an existing one, or (when the operator allows it) a new reader."""
    name = " ".join(given.split())
    if not name or len(name) > 128 or prefix_of(name) is not None or mask_keys(name) != name:
        raise unauthorized(f"the {service.options.user_header} header names no user")
    store = service.store
    try:
        user = await in_store(store.user, name)
    except NotFound:
        if not service.options.user_header_adds_users:
            raise unauthorized(f"no account {name!r}: an admin adds it with `typedrag users add NAME`") from None
        try:
            user = await in_store(store.add_user, name, "reader")
            log.info("account added for the SSO proxy's user", extra={"fields": {"user": name}})
        except AlreadyExists:  # another request (or replica) added it just now
            user = await in_store(store.user, name)
    if user.disabled:
        raise unauthorized(f"the account {name!r} is disabled")
    return await user_caller(service, user, "header")


async def is_open(service: Service) -> bool:
    """A server with no key of its own and no account answers anyone. Once accounts exist it stays closed for
    the life of the process (removing every account does not reopen a running server)."""
    if service.options.api_key is not None:
        return False
    if service.store is None:
        return True
    if getattr(service, "has_accounts", False):
        return False
    service.has_accounts = await in_store(service.store.has_users)
    return not service.has_accounts


def bearer_of(request: Request) -> str | None:
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def _peer(request: Request) -> str | None:
    """The address the connection came from (`serve` leaves uvicorn's X-Forwarded-For rewriting off)."""
    return request.client.host if request.client else None


def from_trusted_proxy(request: Request, proxies: tuple[str, ...]) -> bool:
    peer = _peer(request)
    if not peer or not proxies:
        return False
    try:
        address = ipaddress.ip_address(peer)
    except ValueError:
        return False
    return any(address in ipaddress.ip_network(proxy, strict=False) for proxy in proxies)


def served_over_tls(request: Request, proxies: tuple[str, ...]) -> bool:
    """TLS here, or at a trusted proxy that says so (X-Forwarded-Proto: https): then the cookie is Secure."""
    if request.url.scheme == "https":
        return True
    forwarded = request.headers.get("x-forwarded-proto", "").split(",")[0].strip().lower()
    return forwarded == "https" and from_trusted_proxy(request, proxies)


# ---------------------------------------------------------------- cross-site requests


def csrf_token(session_token: str) -> str:
    """The token a cookie's writes must carry in X-CSRF-Token: derived from the cookie (so bound to it), readable
    only by the page (GET /v1/session), never by another site."""
    return hashlib.sha256(b"typedrag-csrf:" + session_token.encode()).hexdigest()[:40]


def refuse_cross_site(request: Request) -> None:
    """403 when the browser says the request comes from another site (Sec-Fetch-Site), even a sibling subdomain."""
    if request.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        raise api_error(403, "a request from another site is refused: use typedrag's own page, or a key")


def check_same_origin_write(request: Request, session_token: str) -> None:
    """A write with the session cookie: from this site, carrying the cookie's CSRF token. A form posted by another
    site has neither (SameSite=Lax keeps the cookie off most of them to begin with)."""
    if request.method in SAFE_METHODS:
        return
    refuse_cross_site(request)
    sent = request.headers.get(CSRF_HEADER, "")
    if not hmac.compare_digest(sent.encode(), csrf_token(session_token).encode()):
        raise api_error(403, f"missing or wrong {CSRF_HEADER}: the page sends the one GET /v1/session gives")


# ---------------------------------------------------------------- the page's sign-in


def who(caller: Caller, service: Service, *, csrf: str | None = None, required: bool = False) -> dict[str, Any]:
    """What the page shows of its caller, and what it may offer."""
    return {
        "signed_in": caller.authenticated and caller.how != "open",
        "sign_in_required": required,
        "how": caller.how if caller.authenticated else None,
        "user": caller.user.name if caller.user else None,
        "role": caller.role if caller.authenticated else None,
        "csrf": csrf,
        "sessions": service.store is not None,  # without a store the page keeps a key and sends it (as before)
        "conversations": service.store is not None and caller.user is not None,
    }


@router.get("/v1/session")
async def session_info(request: Request) -> JSONResponse:
    """Who the page is signed in as (`signed_in` false and `sign_in_required` true when it must sign in first), the
    CSRF token its writes send (with a session cookie), and whether conversations are kept for it."""
    service = service_of(request)
    try:
        caller = await caller_of(request)
    except HTTPException as error:
        if error.status_code != 401:
            raise
        body = who(Caller(authenticated=False, name="nobody"), service, required=True)
        headers = {"Cache-Control": "no-store"}
        if "Set-Cookie" in (error.headers or {}):
            headers["Set-Cookie"] = error.headers["Set-Cookie"]
        return JSONResponse(body, headers=headers)
    token = request.cookies.get(SESSION_COOKIE) if caller.how == "session" else None
    csrf = csrf_token(token) if token else csrf_token("header:" + caller.name) if caller.how == "header" else None
    return JSONResponse(
        who(caller, service, csrf=csrf), headers={"Cache-Control": "no-store"}
    )  # the CSRF token: never cached


@router.post("/v1/session")
async def sign_in(request: Request) -> JSONResponse:
    """Sign the page in with a key (`{"key": "tdk_..."}`, a user's, or the server's own): a session cookie (HttpOnly,
    SameSite=Lax, Secure over TLS), kept in the store so every replica knows it. 401 for a key that is not valid."""
    service = service_of(request)
    if service.store is None:
        raise api_error(
            409,
            "this server keeps no sessions (start it with --data DIR or --database URL): "
            "send the key as 'Authorization: Bearer <key>'",
        )
    refuse_cross_site(request)
    if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
        raise api_error(415, 'send the key as JSON: {"key": "..."}')
    try:
        given = json.loads(await request.body())
    except ValueError:
        given = None
    key = given.get("key") if isinstance(given, dict) else None
    if not isinstance(key, str) or not key.strip() or len(key) > MAX_KEY_CHARS:  # nothing of the body is echoed
        raise api_error(422, 'send the key as JSON: {"key": "..."}')
    key = key.strip()
    lifetime = timedelta(hours=service.options.session_hours)
    if service.options.api_key is not None and hmac.compare_digest(key.encode(), service.options.api_key.encode()):
        opened = await in_store(service.store.open_admin_session, key, lifetime)
        caller = Caller(name="key", how="session")
    else:
        opened = await in_store(service.store.open_session, key, lifetime)
        if opened is None:
            raise api_error(401, "that key is not valid: mistyped, revoked, or of a disabled user")
        caller = await user_caller(service, opened.session.user, "session")
    log.info("signed in", extra={"fields": {"user": caller.user.name if caller.user else "(the server's key)"}})
    response = JSONResponse(who(caller, service, csrf=csrf_token(opened.token)), headers={"Cache-Control": "no-store"})
    response.set_cookie(
        SESSION_COOKIE,
        opened.token,
        max_age=int(lifetime.total_seconds()),
        path="/",
        httponly=True,
        samesite="lax",
        secure=served_over_tls(request, service.options.trusted_proxies),
    )
    return response


@router.delete("/v1/session")
async def sign_out(request: Request) -> JSONResponse:
    """Sign out: the session is ended in the store (its cookie is refused from now on, by every replica)."""
    service = service_of(request)
    token = request.cookies.get(SESSION_COOKIE)
    if token and service.store is not None:
        check_same_origin_write(request, token)
        await in_store(service.store.end_session, token)
    response = JSONResponse({"signed_out": True})
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="lax")
    return response
