"""The container image's files, read as they are: the Dockerfile's invariants (a non-root user, the data on a
volume, a HEALTHCHECK on /readyz, the port, no secret baked in), the compose files (they parse; typedrag alone,
typedrag with Milvus standalone) and the start script's refusal to serve without a key. Building and running the
image is scripts/container_smoke.sh (minutes, root, podman): not a test."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml", reason="PyYAML comes with the test extra (langchain-core, ray)")

ROOT = Path(__file__).resolve().parents[1]
START = ROOT / "scripts" / "container-start.sh"


def instructions() -> list[tuple[str, str]]:
    """The Dockerfile's instructions, (KEYWORD, arguments), continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            found.append((keyword.upper(), rest.strip()))
    return found


def test_the_image_runs_as_a_user_that_is_not_root_from_its_first_command():
    steps = instructions()
    users = [(i, args) for i, (keyword, args) in enumerate(steps) if keyword == "USER"]
    assert users, "no USER: the container would run as root"
    last, user = users[-1]
    assert user.split(":")[0] not in ("root", "0")
    assert any(keyword == "CMD" for keyword, _ in steps[last + 1 :])  # the command runs as that user
    created = " ".join(args for keyword, args in steps if keyword == "RUN")
    assert re.search(rf"useradd\b[^&]*\b{re.escape(user.split(':')[0])}\b", created)


def test_data_on_a_volume_the_port_and_a_healthcheck_on_readyz():
    steps = dict(instructions())  # the last of each keyword
    assert "/data" in steps["VOLUME"].split()
    assert steps["EXPOSE"].split() == ["8000"]
    check = steps["HEALTHCHECK"]
    assert "CMD" in check and "http://127.0.0.1:8000/readyz" in check
    assert steps["FROM"].split()[0] == "debian:bookworm-slim"  # docs/deployment.md names it; the smoke script makes it
    start = START.read_text()
    assert "--host 0.0.0.0" in start and "exec typedrag serve" in start


def test_no_secret_is_baked_into_the_image():
    for keyword, args in instructions():
        if keyword in ("ENV", "ARG", "LABEL"):
            names = re.findall(r"([A-Za-z_][A-Za-z0-9_]*)=", args) or [args.split()[0]]
            for name in names:
                assert not re.search(r"KEY|TOKEN|SECRET|PASSWORD", name, re.I), f"{keyword} {name} bakes a secret in"
        if keyword in ("COPY", "ADD"):
            assert not re.search(r"\.env\b|typedrag\.toml|\.pem\b|\.key\b", args), args
    ignored = [line for line in (ROOT / ".dockerignore").read_text().splitlines() if line and not line.startswith("#")]
    assert ignored[0] == "*"  # nothing of the checkout enters the build unless named after it
    assert all(line.startswith("!") or "__pycache__" in line for line in ignored[1:])


def start_script(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["sh", str(START)], capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL
    )


def test_the_start_script_refuses_to_serve_without_a_key(tmp_path):
    base = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    for env in (base, {**base, "TYPEDRAG_SERVER_API_KEY": ""}):
        done = start_script(env)
        assert done.returncode == 2 and not done.stdout
        assert done.stderr.startswith("error: set TYPEDRAG_SERVER_API_KEY")


def test_the_start_script_indexes_then_serves_on_every_address(tmp_path):
    """With a key, the script runs `typedrag index` on its sources, then `typedrag serve --host 0.0.0.0`; a
    `typedrag` on PATH that records its arguments stands in for the real one (the smoke script runs that)."""
    fake = tmp_path / "bin" / "typedrag"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\necho "$*" >> {tmp_path / "calls"}\n')
    fake.chmod(0o755)
    env = {"PATH": f"{fake.parent}:{os.environ['PATH']}", "TYPEDRAG_SERVER_API_KEY": "k", "HOME": str(tmp_path)}
    assert start_script({**env, "TYPEDRAG_SOURCES": "/docs/a /docs/b"}).returncode == 0
    assert start_script({**env, "TYPEDRAG_INDEX_AT_START": "0", "PORT": "9000"}).returncode == 0
    calls = [shlex.split(line) for line in (tmp_path / "calls").read_text().splitlines()]
    assert calls == [
        ["index", "/docs/a", "/docs/b"],
        ["serve", "--host", "0.0.0.0", "--port", "8000"],
        ["serve", "--host", "0.0.0.0", "--port", "9000"],
    ]


def compose(name: str) -> dict:
    return yaml.safe_load((ROOT / name).read_text())


def test_compose_typedrag_alone_builds_the_image_needs_a_key_and_keeps_data_on_a_volume():
    spec = compose("compose.yaml")
    service = spec["services"]["typedrag"]
    assert service["build"] in (".", {"context": "."})
    assert service["environment"]["TYPEDRAG_SERVER_API_KEY"].startswith("${TYPEDRAG_SERVER_API_KEY:?")
    volume, target = service["volumes"][0].split(":")[:2]
    assert target == "/data" and volume in spec["volumes"]
    assert any(str(port).endswith(":8000") for port in service["ports"])


def test_compose_with_milvus_points_typedrag_at_a_healthy_milvus_standalone():
    spec = compose("compose.milvus.yaml")
    services = spec["services"]
    assert {"typedrag", "milvus", "etcd", "minio"} <= set(services)
    typedrag, milvus = services["typedrag"], services["milvus"]
    assert "milvus" in typedrag["build"]["args"]["EXTRAS"].split(",")  # pymilvus in the image
    assert typedrag["environment"]["TYPEDRAG_BACKEND"] == "milvus"
    assert typedrag["environment"]["TYPEDRAG_MILVUS_URI"] == "http://milvus:19530"
    assert typedrag["depends_on"]["milvus"]["condition"] == "service_healthy"
    assert milvus["command"] == ["milvus", "run", "standalone"] and "healthcheck" in milvus
    assert {"etcd", "minio"} <= set(milvus["depends_on"])
    for name, service in services.items():
        for volume in service.get("volumes", []):
            assert volume.split(":")[0] in spec["volumes"], (name, volume)  # named volumes, nothing in the checkout
