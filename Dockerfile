# typedrag's service image: `typedrag serve` on 0.0.0.0:8000 as a non-root user, its data on the volume /data,
# a client key required (TYPEDRAG_SERVER_API_KEY), healthy when /readyz says ready. With no key for an LLM and
# no network it answers with the built-in offline engine and the models inside its packages.
#
# Base: the public image debian:bookworm-slim (Debian 12), Python 3.11 from Debian's own packages.
#   docker build -t typedrag .        or: docker compose up (compose.yaml)
FROM debian:bookworm-slim

# Extras installed beside the plain package: the MCP server (/mcp); compose.milvus.yaml adds the Milvus backend
# (EXTRAS=mcp,milvus: pymilvus brings pandas and pyarrow, about 300 MB more).
ARG EXTRAS=mcp

ENV PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/typedrag/bin:$PATH \
    HOME=/home/typedrag \
    TYPEDRAG_INDEX=/data/index \
    TYPEDRAG_CACHE_DIR=/data/cache

RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --user-group --create-home --home-dir /home/typedrag --shell /usr/sbin/nologin typedrag \
    && mkdir -p /data \
    && chown typedrag:typedrag /data

COPY pyproject.toml README.md LICENSE /src/
COPY typedrag /src/typedrag
RUN python3 -m venv /opt/typedrag \
    && /opt/typedrag/bin/pip install --no-cache-dir "/src[${EXTRAS}]" \
    && rm -rf /src
COPY scripts/container-start.sh /usr/local/bin/typedrag-start

USER typedrag
WORKDIR /data
VOLUME /data
EXPOSE 8000
# The first start indexes the documents (a few minutes for the demo corpus): the check waits for it.
HEALTHCHECK --interval=30s --timeout=5s --start-period=15m --retries=3 \
    CMD ["python3", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/readyz', timeout=4)"]
CMD ["typedrag-start"]
