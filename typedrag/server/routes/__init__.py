"""The HTTP routes by job, each module an APIRouter that typedrag.server.app includes: `native` (typedrag's answer
API, JSON and Server-Sent Events, and the page), `openai` (the OpenAI-compatible models and chat completions),
`health` (liveness, readiness, metrics), `collections` (the library: collections, uploads, the source viewer),
`conversations` (saved conversations and feedback). Accounts' sign-in is typedrag.server.auth, /mcp
typedrag.server.mcp_http."""
