#!/bin/sh
# The container's command (Dockerfile): refuse to start without a client key, bring the index up to date with
# the documents, then serve on 0.0.0.0.
#
#   TYPEDRAG_SERVER_API_KEY   required: the key clients send as 'Authorization: Bearer <key>'
#   TYPEDRAG_SOURCES          what to index (files, folders, demo:vital-articles); default: /data/docs when it
#                             holds anything, else the demo corpus that ships inside typedrag's packages
#   TYPEDRAG_INDEX_AT_START   0: serve the index as it is, without indexing first
#   PORT                      default 8000
# The rest (TYPEDRAG_LLM, TYPEDRAG_BASE_URL, TYPEDRAG_BACKEND, TYPEDRAG_MILVUS_URI, ...) as for any typedrag command.
set -eu

if [ -z "${TYPEDRAG_SERVER_API_KEY:-}" ]; then
    echo "error: set TYPEDRAG_SERVER_API_KEY, the key clients must send: this server listens beyond loopback" >&2
    exit 2
fi
if [ -z "${TYPEDRAG_SOURCES:-}" ]; then
    if [ -d /data/docs ] && [ -n "$(ls -A /data/docs)" ]; then
        TYPEDRAG_SOURCES=/data/docs
    else
        TYPEDRAG_SOURCES=demo:vital-articles
    fi
fi
if [ "${TYPEDRAG_INDEX_AT_START:-1}" != "0" ]; then
    # shellcheck disable=SC2086  # several sources are separated by spaces
    typedrag index $TYPEDRAG_SOURCES
fi
exec typedrag serve --host 0.0.0.0 --port "${PORT:-8000}"
