"""typedrag as an HTTP service (`typedrag serve`): native API, OpenAI-compatible chat, web page.

Kept empty so `typedrag.server.command` imports without FastAPI; the app lives in `app.py`.
"""
