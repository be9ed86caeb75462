"""Issue 57, the sixth hostile round: a full disk while the vectors are written (P4), and standard output that
cannot be written during a build (P5). Each test failed before its fix."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
import sys

import pytest

CLI = [sys.executable, "-c", "from typedrag.cli import main; main()"]


def cli_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("TYPEDRAG_", "OPENAI_"))}


def pages(folder, count: int, words: int = 3000) -> None:
    folder.mkdir()
    vocabulary = "comet orbit tail ice dust sun gas light planet moon rock star".split()
    for i in range(count):
        chooser = random.Random(i)
        (folder / f"page{i}.txt").write_text(
            " ".join(chooser.choice(vocabulary) for _ in range(words)) + "\n", encoding="utf-8"
        )


# --- P4: a disk that fills while the vectors are written ------------------------------------------------------------

FULL_DISK_DRIVER = """
import json, os, subprocess, sys
mount, small, big, cli, env = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4]), json.loads(sys.argv[5])
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", mount], check=True)
def run(*args):
    done = subprocess.run([*cli, *args], capture_output=True, text=True, env=env)
    return [done.returncode, done.stderr]
def fill(free_kb):
    for name in os.listdir(mount):
        subprocess.run(["rm", "-rf", os.path.join(mount, name)], check=True)
    with open(os.path.join(mount, "filler"), "wb") as f:
        f.write(b"\\0" * ((4096 - free_kb) * 1024))
seen = {"fresh": {}}
for free in (560, 500, 440, 380, 320, 280, 240):  # tantivy's files fit, the vectors' do not (SIGBUS before)
    fill(free)
    seen["fresh"][free] = run("index", big, "--index", f"{mount}/idx", "--embedder", "static")
fill(3000)
seen["built"] = run("index", small, "--index", f"{mount}/idx", "--embedder", "static")
manifest = open(f"{mount}/idx/manifest.json").read()
with open(os.path.join(mount, "filler2"), "wb") as f:
    f.write(b"\\0" * (os.statvfs(mount).f_bavail * os.statvfs(mount).f_frsize - 400 * 1024))
seen["synced"] = run("index", big, "--index", f"{mount}/idx", "--embedder", "static")
seen["manifest_kept"] = open(f"{mount}/idx/manifest.json").read() == manifest
seen["asked"] = run("ask", "Why do comets have tails?", "--index", f"{mount}/idx", "--method", "rag", "--json")
print(json.dumps(seen))
"""


def namespace_command() -> list[str] | None:
    """`unshare` with a private mount namespace (user namespace too when not root), if this machine allows one."""
    if shutil.which("unshare") is None:
        return None
    for command in (["unshare", "-m"], ["unshare", "-r", "-m"]):
        if subprocess.run([*command, "true"], capture_output=True).returncode == 0:
            return command
    return None


ONE_LINE = re.compile(
    r"error: cannot write the index \S+ \(no space left on device\??\); (nothing was written|the previous index is unchanged)"
)


def test_a_disk_that_fills_while_vectors_are_written_is_one_line_and_exit_2_never_sigbus(tmp_path):
    """Before, the vector files were memory-mapped sparse: a write into a page the full disk could not hold
    killed the build with SIGBUS (exit 135, no message), or a bare "[Errno 28]" came from the journal."""
    unshare = namespace_command()
    if unshare is None:
        pytest.skip("no private mount namespace here (unshare -m), so no small file system to fill")
    small, big, mount = tmp_path / "small", tmp_path / "big", tmp_path / "mnt"
    pages(small, 2, 300)
    pages(big, 20)
    mount.mkdir()
    proc = subprocess.run(
        [
            *unshare,
            sys.executable,
            "-c",
            FULL_DISK_DRIVER,
            str(mount),
            str(small),
            str(big),
            json.dumps(CLI),
            json.dumps(cli_env()),
        ],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout)
    full = 0
    for free, (code, stderr) in seen["fresh"].items():
        assert code in (0, 2), (free, code, stderr)  # never a signal (-7, 135)
        if code == 2:
            full += 1
            assert ONE_LINE.fullmatch(stderr.strip()) and stderr.strip().endswith("nothing was written"), (free, stderr)
    assert full, seen["fresh"]  # the disk did fill at some of them
    assert seen["built"][0] == 0, seen["built"]
    code, stderr = seen["synced"]
    assert (
        code == 2 and ONE_LINE.fullmatch(stderr.strip()) and stderr.strip().endswith("the previous index is unchanged")
    ), stderr
    assert seen["manifest_kept"]
    code, _ = seen["asked"]
    assert code == 0


# --- P5: progress and summary that cannot be written ----------------------------------------------------------------


def test_a_build_whose_standard_output_is_a_closed_pipe_builds_and_says_so_on_stderr(tmp_path):
    """`typedrag index SRC --index idx | head -c 1`: before, the first progress line that could not be written
    ended the build, exit 1, nothing on stderr, no index."""
    pages(tmp_path / "src", 5, 200)
    build = subprocess.Popen(
        [*CLI, "index", str(tmp_path / "src"), "--index", str(tmp_path / "idx"), "--retrieval", "bm25"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(),
    )
    build.stdout.close()  # the reader is gone before anything is written
    _, stderr = build.communicate(timeout=600)
    stderr = stderr.decode()
    assert build.returncode == 0, stderr
    assert (tmp_path / "idx" / "manifest.json").is_file()
    assert "cannot write to standard output (its reader closed it); carrying on without it" in stderr
    assert "Traceback" not in stderr and "Exception ignored" not in stderr


def test_a_build_whose_standard_output_is_on_a_full_disk_builds_and_says_so_on_stderr(tmp_path):
    """stdout redirected to a full disk while the index's own disk has room: before, "error: [Errno 28] ...", exit 2."""
    pages(tmp_path / "src", 5, 200)
    with open("/dev/full", "w") as full:
        build = subprocess.run(
            [*CLI, "index", str(tmp_path / "src"), "--index", str(tmp_path / "idx"), "--retrieval", "bm25"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            env=cli_env(),
            timeout=600,
        )
    assert build.returncode == 0, build.stderr
    assert (tmp_path / "idx" / "manifest.json").is_file()
    assert (
        "cannot write to standard output (no space left on device)" in build.stderr and "Traceback" not in build.stderr
    )


# --- Issue 56: the HNSW graph written on a full disk ----------------------------------------------------------------

GRAPH_DRIVER = """
import json, os, subprocess, sys
mount, big, cli, env = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", mount], check=True)
def run(*args):
    done = subprocess.run([*cli, *args], capture_output=True, text=True, env=env)
    return [done.returncode, done.stderr]
def fill(free):
    for name in os.listdir(mount):
        subprocess.run(["rm", "-rf", os.path.join(mount, name)], check=True)
    stat = os.statvfs(mount)
    with open(os.path.join(mount, "filler"), "wb") as f:
        f.write(b"\\0" * (stat.f_bavail * stat.f_frsize - free))
built = run("index", big, "--index", f"{mount}/idx", "--embedder", "static")
sizes = {name: os.path.getsize(f"{mount}/idx/{name}") for name in os.listdir(f"{mount}/idx")}
rows = json.load(open(f"{mount}/idx/manifest.json"))["vectors"]["rows"]
graph = sizes.pop("vectors.hnsw", 0)
before = sum(sizes.values()) + rows * (32 + 384 + 4) + 64 * 1024  # the rest, the journal (kept until the end), slack
seen = {"built": built, "graph": graph, "runs": {}}
for part in (0.1, 0.3, 0.5, 0.7, 0.9):  # the graph's file is the one that does not fit
    free = before + int(graph * part)
    fill(free)
    seen["runs"][free] = run("index", big, "--index", f"{mount}/idx", "--embedder", "static")
print(json.dumps(seen))
"""


def test_an_hnsw_graph_that_does_not_fit_on_the_disk_is_one_line_and_exit_2(tmp_path):
    """usearch reports a failed save as RuntimeError("Failed to serialize into stream"): before, a traceback, exit 1."""
    unshare = namespace_command()
    if unshare is None:
        pytest.skip("no private mount namespace here (unshare -m), so no small file system to fill")
    big, mount = tmp_path / "big", tmp_path / "mnt"
    pages(big, 20)
    mount.mkdir()
    env = {**cli_env(), "TYPEDRAG_ANN_MIN_ROWS": "1"}  # every index gets its graph
    proc = subprocess.run(
        [*unshare, sys.executable, "-c", GRAPH_DRIVER, str(mount), str(big), json.dumps(CLI), json.dumps(env)],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout)
    assert seen["built"][0] == 0 and seen["graph"] > 0, seen
    full = 0
    for free, (code, stderr) in seen["runs"].items():
        assert code in (0, 2), (free, code, stderr)
        if code == 2:
            full += 1
            assert ONE_LINE.fullmatch(stderr.strip()) and stderr.strip().endswith("nothing was written"), (free, stderr)
    assert full, seen
