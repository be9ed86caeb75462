"""Whether a replica may take traffic, for orchestrators and monitoring: /healthz (alive), /readyz (the index is
readable, the LLM endpoint answers, the engine's models are loaded), /metrics (Prometheus)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from typedrag.server.service import service_of

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is alive."""
    return {"status": "ok"}


@router.get("/metrics", response_class=Response)
async def metrics(request: Request) -> Response:
    """Prometheus metrics (text format, or OpenMetrics when asked): requests, answers, LLM calls, slots, reloads."""
    body, content_type = service_of(request).metrics.exposition(request.headers.get("accept"))
    return Response(body, media_type=content_type)


@router.get("/readyz")
async def readyz(request: Request) -> JSONResponse:
    """Ready to answer: the index is readable and the LLM endpoint (if any) answers GET /models."""
    checks = await service_of(request).readiness()
    ready = checks["index"] == "ok" and checks["llm"] in ("ok", "offline") and checks["models"] == "ok"
    return JSONResponse({"status": "ready" if ready else "not ready", "checks": checks}, 200 if ready else 503)
