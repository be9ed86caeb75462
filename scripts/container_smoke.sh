#!/usr/bin/env bash
# Build the Dockerfile with podman and ask the container questions over HTTP; where no image registry is
# reachable, the base image is made here from Debian's packages (debootstrap) under the name the Dockerfile
# uses. Not part of the test suite (it takes minutes and needs root, podman and debootstrap).
#
#   scripts/container_smoke.sh
#
# What it checks: the image builds; with no network at all (--network none) the first start indexes the demo
# corpus and serves it with the offline engine as a non-root user, /readyz is ready, the HEALTHCHECK passes, an
# answer needs the key (401 without it); with a published port, the host asks over HTTP.
#
# Environment: PODMAN (default "podman"; e.g. "podman --runtime runc" where crun cannot run), RUN_OPTS (extra
# `podman run`/`build` options, e.g. ulimits a machine requires), BUILD_OPTS (extra `podman build` options,
# e.g. volumes giving the build a proxy's CA), WORK (scratch folder, default /var/tmp/typedrag-container).
set -euo pipefail
cd "$(dirname "$0")/.."

PODMAN=${PODMAN:-podman}
RUN_OPTS=${RUN_OPTS:-}
BUILD_OPTS=${BUILD_OPTS:-}
WORK=${WORK:-/var/tmp/typedrag-container}
BASE=$(sed -n 's/^FROM \([^ ]*\).*/\1/p' Dockerfile | head -1)   # the public base image the Dockerfile names
IMAGE=localhost/typedrag:smoke
KEY=smoke-$RANDOM$RANDOM
mkdir -p "$WORK"
step() { echo "== $*"; }
fail() { echo "FAILED: $*" >&2; exit 1; }

# 1. The base image: pulled nowhere; made from Debian's packages when it is not here yet.
if ! $PODMAN image exists "$BASE"; then
    case "$BASE" in
        debian:bookworm-slim|docker.io/library/debian:bookworm-slim) ;;
        *) fail "cannot make $BASE here: only debian:bookworm-slim is made with debootstrap" ;;
    esac
    step "making $BASE with debootstrap (Debian 12, minbase)"
    rm -rf "$WORK/rootfs"
    debootstrap --variant=minbase bookworm "$WORK/rootfs" "${DEBIAN_MIRROR:-http://deb.debian.org/debian}" >"$WORK/debootstrap.log"
    rm -rf "$WORK"/rootfs/var/cache/apt/archives/*.deb "$WORK"/rootfs/var/lib/apt/lists/*
    tar -C "$WORK/rootfs" -c . | $PODMAN import --change 'CMD ["bash"]' - "docker.io/library/debian:bookworm-slim"
fi

# 2. The image, from the Dockerfile as it is.
step "building $IMAGE from the Dockerfile"
# shellcheck disable=SC2086
$PODMAN build --format docker $RUN_OPTS $BUILD_OPTS -t "$IMAGE" -f Dockerfile .   # docker format: OCI has no HEALTHCHECK
user=$($PODMAN image inspect --format '{{.Config.User}}' "$IMAGE")
[ -n "$user" ] && [ "$user" != "root" ] && [ "$user" != "0" ] || fail "the image runs as root"
echo "image user: $user; size: $($PODMAN image inspect --format '{{.Size}}' "$IMAGE") bytes"

VOLUME=typedrag-smoke-$$
CONTAINERS=()
cleanup() {
    for c in "${CONTAINERS[@]}"; do $PODMAN rm -f "$c" >/dev/null 2>&1 || true; done
    $PODMAN volume rm -f "$VOLUME" >/dev/null 2>&1 || true
}
trap cleanup EXIT
$PODMAN volume create "$VOLUME" >/dev/null

# 3. No network at all: no key refused, the first start indexes offline, answers need the key.
step "without a key the container refuses to start"
# shellcheck disable=SC2086
if out=$($PODMAN run --rm $RUN_OPTS --network none "$IMAGE" 2>&1); then fail "started without a key: $out"; fi
echo "$out" | grep -q "TYPEDRAG_SERVER_API_KEY" || fail "no word of the key: $out"

step "no network: index the demo corpus and serve it"
# shellcheck disable=SC2086
offline=$($PODMAN run -d $RUN_OPTS --network none -e TYPEDRAG_SERVER_API_KEY="$KEY" -v "$VOLUME:/data" "$IMAGE")
CONTAINERS+=("$offline")
inside() { $PODMAN exec "$offline" python3 -c "$1"; }
ready=""
for _ in $(seq 1 360); do
    if inside "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/readyz', timeout=4)" 2>/dev/null; then ready=yes; break; fi
    [ "$($PODMAN inspect --format '{{.State.Running}}' "$offline")" = "true" ] || break
    sleep 5
done
[ -n "$ready" ] || { $PODMAN logs "$offline" | tail -30; fail "not ready"; }
echo "uid inside: $($PODMAN exec "$offline" id -u)"
[ "$($PODMAN exec "$offline" id -u)" != "0" ] || fail "serving as root"
$PODMAN healthcheck run "$offline" && echo "HEALTHCHECK: healthy" || fail "HEALTHCHECK failed"
ASK='
import json, sys, urllib.request, urllib.error
def ask(key):
    request = urllib.request.Request("http://127.0.0.1:8000/v1/answer", method="POST",
        data=json.dumps({"question": "What is the difference between a comet and an asteroid?"}).encode(),
        headers={"Content-Type": "application/json", **({"Authorization": "Bearer " + key} if key else {})})
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)
status, body = ask(None)
assert status == 401, (status, body)
status, body = ask(sys.argv[1])
assert status == 200, (status, body)
print("answered by", body["engines"]["generator"], "as", body["type"]["type"], "from", len(body["sources"]), "sources:")
print(body["answer"][:400])
'
$PODMAN exec "$offline" python3 -c "$ASK" "$KEY"
$PODMAN rm -f "$offline" >/dev/null

# 4. The same volume behind a published port: the host asks over HTTP.
step "a published port: the host asks over HTTP"
# shellcheck disable=SC2086
served=$($PODMAN run -d $RUN_OPTS -p 127.0.0.1::8000 -e TYPEDRAG_SERVER_API_KEY="$KEY" -v "$VOLUME:/data" "$IMAGE")
CONTAINERS+=("$served")
port=$($PODMAN port "$served" 8000 | head -1 | sed 's/.*://')
for _ in $(seq 1 120); do
    if curl -fsS --max-time 4 "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; then break; fi
    sleep 2
done
curl -fsS --max-time 4 "http://127.0.0.1:$port/readyz"; echo
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/v1/models")
[ "$code" = "401" ] || fail "no key: HTTP $code"
curl -fsS --max-time 300 "http://127.0.0.1:$port/v1/answer" -H "Authorization: Bearer $KEY" \
    -H 'Content-Type: application/json' -d '{"question": "Why did the Western Roman Empire fall?", "method": "typed"}' \
    | python3 -c 'import json, sys; b = json.load(sys.stdin); print("answered by", b["engines"]["generator"], "as", b["type"]["type"]); print(b["answer"][:300])'
echo "the container answers; MCP at http://127.0.0.1:$port/mcp while it runs"
if [ -n "${KEEP_SERVING:-}" ]; then
    echo "KEEP_SERVING: container $served, key $KEY; press Enter to stop"
    read -r _
fi
step "done"
