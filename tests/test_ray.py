"""`typedrag index --ray` on a real Ray cluster (a head node and a worker node, started here once, as
`ray start` processes on loopback) into a real `milvus-lite server`, from a real manual of a Debian
documentation package (python3.11-doc's tutorial) with a few files of our own beside it: two record files
that share a document id, one bad record, an image and a broken PDF.

What is checked against a build of the same sources in one process: the rows (ids, passages, terms, pages,
line kinds, generations, vectors), the manifest and its file table, the problems reported; after the driver
is killed mid-run and run again; after a worker is killed mid-run; after edits, a sync. No timing is asserted.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="the ray extra is not installed (CI installs it with the test extra)")
pymilvus = pytest.importorskip("pymilvus")

from test_milvus import LiteServer, free_port  # noqa: E402

MANUAL = Path("/usr/share/doc/python3.11/html/tutorial")
ROOT = Path(__file__).resolve().parent.parent
DRIVER_TIMEOUT = 900  # seconds: a hung driver fails the test instead of the CI run


# ------------------------------------------------------------------------------------- the cluster


def _process_table() -> dict[int, tuple[int, int, str]]:
    """{pid: (parent pid, process group, command line)} of every process, from /proc."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        table[int(entry)] = (int(fields[1]), int(fields[2]), command)
    return table


class RayCluster:
    """`ray start --head --block` and `ray start --address ... --block`, each in its own process group on
    loopback; stopped by killing exactly those groups and their descendants (Ray's workers), never `ray stop`,
    which would stop every Ray on the machine."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.temp = Path(tempfile.mkdtemp(prefix="tdray", dir="/tmp"))  # short: Ray's socket paths must fit
        self.groups: list[subprocess.Popen] = []
        self.env = dict(
            os.environ,
            RAY_USAGE_STATS_ENABLED="0",
            PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p),
        )

    def _start(self, args: list[str], log: str) -> None:
        ray = str(Path(sys.executable).parent / "ray")
        with open(self.root / log, "ab") as out:
            self.groups.append(
                subprocess.Popen(
                    [
                        ray,
                        "start",
                        "--block",
                        "--node-ip-address=127.0.0.1",
                        "--num-cpus=2",
                        "--object-store-memory=400000000",
                        "--disable-usage-stats",
                        *args,
                    ],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=self.env,
                    start_new_session=True,
                )
            )

    def start(self) -> None:
        self._start(
            [
                "--head",
                f"--port={self.port}",
                "--include-dashboard=false",
                f"--temp-dir={self.temp}",
                f"--ray-client-server-port={free_port()}",
            ],
            "head.log",
        )  # not 10001: another cluster may hold it
        self._wait(lambda: self._port_open(), "the head node")
        self._start([f"--address={self.address}"], "worker.log")
        self._wait(lambda: self.alive_nodes() >= 2, "the worker node")

    def _port_open(self) -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", self.port)) == 0

    def alive_nodes(self) -> int:
        ray = str(Path(sys.executable).parent / "ray")
        out = subprocess.run(
            [ray, "status", f"--address={self.address}"], capture_output=True, text=True, env=self.env, timeout=60
        )
        active = out.stdout.split("Active:", 1)[-1].split("Pending:", 1)[0]
        return active.count("node_")

    def _wait(self, ready, what: str) -> None:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if any(group.poll() is not None for group in self.groups):
                break
            if ready():
                return
            time.sleep(0.5)
        self.stop()
        logs = "".join(
            (self.root / name).read_text(errors="replace")[-1500:]
            for name in ("head.log", "worker.log")
            if (self.root / name).exists()
        )
        pytest.fail(f"{what} of the Ray cluster did not start: {logs}")

    def processes(self) -> dict[int, str]:
        """Our cluster's processes (its groups and every descendant) and their command lines."""
        table = _process_table()
        ours = {pid for pid, (_, group, _) in table.items() if group in {g.pid for g in self.groups}}
        while more := {pid for pid, (parent, _, _) in table.items() if parent in ours} - ours:
            ours |= more
        return {pid: table[pid][2] for pid in ours}

    def stop(self) -> None:
        for pid in self.processes():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for group in self.groups:
            group.wait(timeout=30)
        shutil.rmtree(self.temp, ignore_errors=True)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    ray_cluster = RayCluster(tmp_path_factory.mktemp("ray"))
    ray_cluster.start()
    yield ray_cluster
    ray_cluster.stop()


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("ray-milvus")
    lite = LiteServer(root / "data", root / "server.log")
    lite.start()
    yield lite
    lite.kill()


# ------------------------------------------------------------------------------------- the corpus


def write_jsonl(path: Path, records: list) -> None:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records), encoding="utf-8")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """One corpus for the module: the sync test edits it and syncs the reference too, so every later Ray
    build is compared with a reference of the corpus as it is then."""
    if not MANUAL.is_dir():
        pytest.skip("python3.11-doc is not installed (apt-get install python3.11-doc; .ci/run does)")
    folder = tmp_path_factory.mktemp("corpus")
    shutil.copytree(MANUAL, folder / "tutorial")
    notes = folder / "notes"
    notes.mkdir()
    text = "Ray workers read files in parallel while the driver keeps the ledger of files already written. " * 3
    write_jsonl(
        notes / "a.jsonl",
        [
            {"id": "shared", "title": "Shared (a)", "text": "First copy. " + text},
            {"id": "a-only", "title": "A", "text": text},
        ],
    )
    write_jsonl(
        notes / "b.jsonl",
        [
            {"id": "b-only", "title": "B", "text": text},
            "{not json",
            {"id": "shared", "title": "Shared (b)", "text": "Second copy. " + text},
        ],
    )
    (folder / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4\nthis is not a PDF body\n")
    return folder


# ------------------------------------------------------------------------------------- helpers


def index(args: list[str], env: dict, *, check: bool = True) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "typedrag.cli", "index", *args]
    out = subprocess.run(command, capture_output=True, text=True, env=env, timeout=DRIVER_TIMEOUT, cwd=ROOT)
    if check:
        assert out.returncode == 0, out.stdout + out.stderr
    return out


def start_index(args: list[str], env: dict, log: Path) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "typedrag.cli", "index", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=ROOT,
            start_new_session=True,
        )


def milvus_args(server, collection: str, *options: str) -> list[str]:
    """A collection of the test's Milvus; no `options`: the default retrieval (hybrid, MiniLM vectors)."""
    return ["--backend", "milvus", "--uri", server.uri, "--collection", collection, *options]


def milvus(server):
    """A client on its own channel, opened just before use: milvus-lite drops a channel left idle through a long
    run ("too many pings", from gRPC keepalives), and pymilvus shares one channel per URI unless told not to."""
    from typedrag.index.milvus.schema import CHANNEL_OPTIONS

    return closing(pymilvus.MilvusClient(uri=server.uri, dedicated=True, grpc_options=CHANNEL_OPTIONS))


def rows_of(client, collection: str) -> dict[str, dict]:
    found: dict[str, dict] = {}
    iterator = client.query_iterator(collection, filter='passage_id != ""', output_fields=["*"], batch_size=1000)
    while batch := iterator.next():
        for row in batch:
            assert row["row_id"] not in found, f"row {row['row_id']} twice"
            found[row["row_id"]] = row
    iterator.close()
    return found


def properties_of(client, collection: str) -> dict:
    return client.describe_collection(collection).get("properties") or {}


def assert_same_index(client, expected: str, actual: str) -> int:
    """The two collections hold the same rows (vectors included, bit for bit) and the same manifest."""
    want, got = rows_of(client, expected), rows_of(client, actual)
    assert sorted(got) == sorted(want)
    different = [key for key in want if want[key] != got[key]]
    assert not different, f"{len(different)} rows differ, e.g. {different[0]}"
    assert client.query(actual, filter="", output_fields=["count(*)"])[0]["count(*)"] == len(want)
    mine, theirs = properties_of(client, expected), properties_of(client, actual)
    assert sorted(theirs) == sorted(mine) == ["typedrag.files", "typedrag.manifest"]  # no ledger, no build mark left
    manifest, ray_manifest = json.loads(mine["typedrag.manifest"]), json.loads(theirs["typedrag.manifest"])
    assert manifest.pop("created") and ray_manifest.pop("created")
    assert ray_manifest == manifest
    assert theirs["typedrag.files"] == mine["typedrag.files"]
    return len(want)


def problems(output: str) -> list[str]:
    """The build's problem lines: notes, and files skipped (issue 55 E12: "FILE: reason, skipped" or "skipped FILE...")."""
    return sorted(
        line
        for line in output.splitlines()
        if line.startswith(("skipped", "note:")) or line.rstrip().endswith(", skipped")
    )


def said(output: str) -> list[str]:
    """What `typedrag index` printed of the index, without its timings: "indexed N documents into M passages (K
    skipped)" (or "added ..."), and "search: hybrid; passage vectors by minilm: N embedded" when it made vectors."""
    return [
        line.split(" in ")[0] for line in output.splitlines() if line.startswith(("indexed ", "added ", "search: "))
    ]


@pytest.fixture(scope="module")
def env(cluster):
    environment = dict(cluster.env)
    for name in [n for n in environment if n.startswith(("TYPEDRAG_", "OTEL_"))]:
        environment.pop(name)
    return environment


@pytest.fixture(scope="module")
def reference(server, corpus, env):
    """The corpus indexed in one process, the way every Ray build is compared."""
    out = index([str(corpus), *milvus_args(server, "single")], env)
    return out


# ------------------------------------------------------------------------------------- tests


def test_ray_build_equals_a_single_process_build_then_a_sync_reads_only_the_changes(
    cluster, server, corpus, env, reference
):
    out = index([str(corpus), *milvus_args(server, "onray"), "--ray", cluster.address], env)
    with milvus(server) as client:
        count = assert_same_index(client, "single", "onray")
        shared = client.query("onray", filter='doc_id == "shared"', output_fields=["file", "title"])
    assert count > 300
    assert problems(out.stderr) == problems(reference.stderr)
    assert any("duplicate id 'shared'" in line and "b.jsonl:3" in line for line in problems(out.stderr))
    assert any("b.jsonl:2" in line and "bad JSON" in line for line in problems(out.stderr))
    assert any("broken.pdf" in line for line in problems(out.stderr))
    summary = next(line for line in out.stderr.splitlines() if line.startswith("ray: "))
    assert "passages, " in summary and "on 2 nodes" in summary and "read again for duplicate document ids" in summary
    assert said(out.stdout) == said(reference.stdout)
    assert said(out.stdout)[1] == f"search: hybrid; passage vectors by minilm: {count} embedded"
    # The one document id both record files give is the first file's, as in one process.
    assert {(row["file"], row["title"]) for row in shared} == {("notes/a.jsonl", "Shared (a)")}

    # Edit one page, delete another, add a new one: the sync reads only those two and removes the third.
    pages = sorted((corpus / "tutorial").glob("*.html"))
    edited, deleted = pages[1], pages[2]
    edited.write_text(
        edited.read_text(encoding="utf-8").replace("</h1>", "</h1><p>Zygomorphic orchids bloom here.</p>", 1),
        encoding="utf-8",
    )
    deleted.unlink()
    (corpus / "notes" / "new.md").write_text(
        "# Quokkas\n\nThe quokka of Rottnest Island smiles at tourists.\n", encoding="utf-8"
    )
    synced = index([str(corpus), *milvus_args(server, "onray"), "--ray", cluster.address], env)
    assert said(synced.stdout)[0].startswith("added 1, updated 1, removed 1, unchanged ")
    assert "ray: 2 files read" in synced.stderr
    synced_reference = index([str(corpus), *milvus_args(server, "single")], env)
    assert said(synced.stdout) == said(synced_reference.stdout)  # the vectors of the two files read, the others kept
    with milvus(server) as client:
        assert_same_index(client, "single", "onray")
        assert (
            client.query("onray", filter='text like "%Zygomorphic%"', output_fields=["file"])[0]["file"]
            == f"tutorial/{edited.name}"
        )
        assert not client.query("onray", filter=f'file == "tutorial/{deleted.name}"', output_fields=["row_id"])
        generations = {row["generation"] for row in rows_of(client, "onray").values()}
    assert generations == {1, 2}  # the unchanged files' rows kept as they were, the changed ones rewritten
    index(
        [str(corpus), *milvus_args(server, "single"), "--rebuild"], env
    )  # the reference for the next tests: a fresh build


@pytest.mark.parametrize(
    "options, retrieval",
    [(("--retrieval", "bm25"), "bm25"), (("--embedder", "static"), "hybrid")],
    ids=["bm25", "static"],
)
def test_retrieval_and_embedder_options_give_the_build_of_one_process(cluster, server, corpus, env, options, retrieval):
    """`--ray` with `--retrieval` and `--embedder` builds what a build in one process with the same options does: no
    vectors for bm25, the static model's for `--embedder static`; and a sync keeps what the collection was built with."""
    name = f"options_{retrieval}"
    single = index([str(corpus), *milvus_args(server, name, *options)], env)
    out = index([str(corpus), *milvus_args(server, name + "_ray", *options), "--ray", cluster.address], env)
    with milvus(server) as client:
        count = assert_same_index(client, name, name + "_ray")
        manifest = json.loads(properties_of(client, name + "_ray")["typedrag.manifest"])
        fields = {field["name"] for field in client.describe_collection(name + "_ray")["fields"]}
    assert said(out.stdout) == said(single.stdout)
    assert manifest["retrieval"] == retrieval
    if retrieval == "bm25":
        assert "dense" not in fields and not manifest["engine"]["dense"] and len(said(out.stdout)) == 1
        assert ", 0 vectors" in next(line for line in out.stderr.splitlines() if line.startswith("ray: "))
    else:
        assert manifest["engine"]["embedder_key"] == "static"
        assert said(out.stdout)[1] == f"search: hybrid; passage vectors by static: {count} embedded"
    again = index([str(corpus), *milvus_args(server, name + "_ray"), "--ray", cluster.address], env)  # no options
    assert said(again.stdout)[0].startswith("added 0, updated 0, removed 0, unchanged ")
    with milvus(server) as client:
        assert json.loads(properties_of(client, name + "_ray")["typedrag.manifest"])["retrieval"] == retrieval


def test_a_sync_killed_in_one_process_is_completed_on_the_cluster(cluster, server, env, tmp_path, monkeypatch):
    """A sync in one process killed after it sent rows of its new generation, one of its files then put back as it
    was (so the rerun does not read it): the rerun on the cluster drops every row the killed sync left."""
    from typedrag.index.milvus import build as milvus_build

    folder = tmp_path / "notes"
    folder.mkdir()
    for n in range(6):
        (folder / f"note-{n}.txt").write_text(f"Note {n} about the weather in town. " * 5, encoding="utf-8")
    original = (folder / "note-1.txt").read_text(encoding="utf-8")
    index([str(folder), *milvus_args(server, "half_synced", "--retrieval", "bm25", "--passage-words", "20")], env)
    (folder / "note-1.txt").write_text("Edited: herons wait at the edge of the pond. " * 15, encoding="utf-8")
    (folder / "note-2.txt").write_text("Edited: egrets fish in the shallows. " * 15, encoding="utf-8")
    real_send = milvus_build._Inserter.send

    def send_then_die(inserter):
        real_send(inserter)
        raise KeyboardInterrupt  # as a kill after the first batch

    monkeypatch.setattr(milvus_build._Inserter, "send", send_then_die)
    with pytest.raises(KeyboardInterrupt):
        milvus_build.sync_milvus_index(
            [folder], server.uri, "half_synced", passage_words=20, batch_size=3, show_progress=False
        )
    monkeypatch.setattr(milvus_build._Inserter, "send", real_send)
    (folder / "note-1.txt").write_text(original, encoding="utf-8")

    out = index(
        [str(folder), *milvus_args(server, "half_synced", "--passage-words", "20"), "--ray", cluster.address], env
    )
    index([str(folder), *milvus_args(server, "half_synced_fresh", "--retrieval", "bm25", "--passage-words", "20")], env)
    assert said(out.stdout)[0].startswith("added 0, updated 1, removed 0, unchanged 5")
    with milvus(server) as client:
        rows, fresh = rows_of(client, "half_synced"), rows_of(client, "half_synced_fresh")
        count = client.query("half_synced", filter="", output_fields=["count(*)"])[0]["count(*)"]
    passages = sorted((row["passage_id"], row["text"]) for row in rows.values())
    assert passages == sorted((row["passage_id"], row["text"]) for row in fresh.values())  # each once, as now
    assert count == len(fresh)


def build_collections(client, name: str) -> list[str]:
    return [n for n in client.list_collections() if n.startswith(name + "__build_")]


def wait_for(condition, process: subprocess.Popen, log: Path, what: str) -> None:
    """Until `condition()` holds; fails if the driver ends first (then there is nothing left to interrupt).
    A Milvus call that fails while polling counts as not yet: milvus-lite closes a client's channel now and then
    ("too many pings" from gRPC keepalives), and the next poll opens a new one."""
    while True:
        try:
            if condition():
                return
        except Exception:
            pass
        if process.poll() is not None:
            pytest.fail(f"the run ended before {what}: {log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.2)


def test_a_driver_killed_mid_run_resumes_on_rerun_with_nothing_lost_or_duplicated(
    cluster, server, corpus, env, reference, tmp_path
):
    args = [str(corpus), *milvus_args(server, "resumed"), "--ray", cluster.address]
    log = tmp_path / "driver.log"
    driver = start_index(args, env, log)

    def files_recorded() -> bool:  # the ledger's first entry lists the files planned, the next ones those done
        with milvus(server) as poll:
            return any("typedrag.ray.1.1" in properties_of(poll, name) for name in build_collections(poll, "resumed"))

    wait_for(files_recorded, driver, log, "a file was recorded as written")
    os.kill(driver.pid, signal.SIGKILL)
    driver.wait()
    with milvus(server) as client:
        assert "resumed" not in [
            a for n in client.list_collections() for a in client.list_aliases(n).get("aliases", [])
        ]

    rerun = index(args, env)
    assert "already written by an interrupted run, kept" in rerun.stderr
    with milvus(server) as client:
        assert len(build_collections(client, "resumed")) == 1  # the interrupted build was resumed, not started again
        assert_same_index(client, "single", "resumed")


def test_a_worker_killed_mid_run_loses_and_duplicates_nothing(cluster, server, corpus, env, reference, tmp_path):
    args = [str(corpus), *milvus_args(server, "survivor"), "--ray", cluster.address]
    log = tmp_path / "driver.log"
    driver = start_index(args, env, log)

    def embedding_actor() -> int | None:
        return next((pid for pid, command in cluster.processes().items() if "MapBatches(Embed)" in command), None)

    def rows_written() -> bool:
        with milvus(server) as poll:
            names = build_collections(poll, "survivor")
            return bool(names) and poll.query(names[0], filter="", output_fields=["count(*)"])[0]["count(*)"] > 0

    wait_for(lambda: rows_written() and embedding_actor() is not None, driver, log, "an embedding actor was at work")
    victim = embedding_actor()
    os.kill(victim, signal.SIGKILL)  # a real worker process of the cluster dies mid-run
    driver.wait(timeout=DRIVER_TIMEOUT)
    output = log.read_text(errors="replace")
    if driver.returncode != 0:  # Ray gave up on the pipeline: a rerun resumes it
        assert "re-run `typedrag index --ray`" in output, output[-2000:]
        index(args, env)
    print(
        f"\nembedding actor {victim} killed; the run {'recovered by itself' if driver.returncode == 0 else 'failed and was resumed'}"
    )
    with milvus(server) as client:
        assert_same_index(client, "single", "survivor")


def test_spans_of_every_stage_reach_the_collector_in_one_trace(cluster, server, env, tmp_path):
    from typedrag.testing.otlp_receiver import OTLPReceiver

    folder = tmp_path / "small"
    folder.mkdir()
    for n in range(3):
        (folder / f"note-{n}.txt").write_text(
            f"Note {n}: the heron waits at the edge of pond number {n}.\n", encoding="utf-8"
        )
    with OTLPReceiver() as receiver:
        traced = dict(
            env,
            OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint,
            OTEL_SERVICE_NAME="ingest-test",
            OTEL_BSP_SCHEDULE_DELAY="100",
        )
        index([str(folder), *milvus_args(server, "traced"), "--ray", cluster.address], traced)
        deadline = time.monotonic() + 60
        names: set[str] = set()
        while time.monotonic() < deadline and not {"typedrag.ingest.read", "typedrag.ingest.write"} <= names:
            time.sleep(0.2)
            names = {span.name for span in receiver.spans}
        spans = list(receiver.spans)
    by_name = {span.name: span for span in spans}
    for name in (
        "typedrag.ingest",
        "typedrag.ingest.plan",
        "typedrag.ingest.ray",
        "typedrag.ingest.publish",
        "typedrag.ingest.read",
        "typedrag.ingest.embed",
        "typedrag.ingest.write",
    ):
        assert name in by_name, f"{name} missing from {sorted(by_name)}"
    root = by_name["typedrag.ingest"]
    assert {span.trace_id for span in spans if span.name.startswith("typedrag.ingest")} == {root.trace_id}
    reads = [span for span in spans if span.name == "typedrag.ingest.read"]
    assert len(reads) == 3 and all(span.parent_span_id == by_name["typedrag.ingest.ray"].span_id for span in reads)
    assert sum(span.attributes["typedrag.passages"] for span in reads) == 3
    assert root.attributes["typedrag.passages"] == 3 and root.attributes["typedrag.vectors"] == 3


def test_strict_stops_at_the_first_problem_in_one_line(cluster, server, env, tmp_path):
    folder = tmp_path / "strict"
    folder.mkdir()
    (folder / "good.txt").write_text("A good note about herons.\n", encoding="utf-8")
    write_jsonl(folder / "records.jsonl", [{"id": "r1", "title": "R", "text": "fine"}, "{not json"])
    out = index(
        [
            str(folder),
            "--backend",
            "milvus",
            "--uri",
            server.uri,
            "--collection",
            "strict",
            "--strict",
            "--ray",
            cluster.address,
        ],
        env,
        check=False,
    )
    assert out.returncode == 2, out.stdout + out.stderr
    assert f"error: {folder / 'records.jsonl'}:2: bad JSON" in " ".join(out.stderr.split())  # rich may wrap a long line
    with milvus(server) as client:
        assert "strict" not in [a for n in client.list_collections() for a in client.list_aliases(n).get("aliases", [])]


def test_ray_needs_the_milvus_backend(env, tmp_path):
    (tmp_path / "a.txt").write_text("words", encoding="utf-8")
    out = index([str(tmp_path / "a.txt"), "--index", str(tmp_path / "idx"), "--ray", "auto"], env, check=False)
    assert out.returncode == 2
    assert (
        " ".join(out.stderr.split())
        == "error: --ray writes to Milvus: add --backend milvus --uri URI (or set TYPEDRAG_BACKEND=milvus)"
    )


def test_without_the_ray_extra_the_error_names_it(monkeypatch, tmp_path):
    from test_extras import hide, one_line
    from typer.testing import CliRunner

    from typedrag.cli import app

    hide(monkeypatch, "ray", "ray.data")
    (tmp_path / "a.txt").write_text("words", encoding="utf-8")
    out = CliRunner().invoke(
        app, ["index", str(tmp_path / "a.txt"), "--backend", "milvus", "--uri", "http://127.0.0.1:1", "--ray", "auto"]
    )
    assert out.exit_code == 2, out.output
    assert "typedrag index --ray needs the 'ray' extra: pip install 'typedrag[ray]'" in one_line(out.output)
