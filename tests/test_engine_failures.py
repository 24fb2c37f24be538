"""The engine's own failures (issue 31, section 4): each ends with a clear message, and the run
can be finished by `mcgs resume`: a full disk, a node folder deleted, a read-only run folder,
an interrupted draft."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mcgs.cli import app
from mcgs.coders.recipe import RecipeCoder
from mcgs.node import NodeState, Operator
from mcgs.search import create_search, open_search
from mcgs.settings import SearchSettings

from test_task import write_task

pytestmark = pytest.mark.timeout(300)
FAST = ("model.logistic_regression", "model.knn")


def _invoke(*args):
    res = CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})
    return res.exit_code, res.output


@contextlib.contextmanager
def _mount(kind: str, target: Path, *options: str, source: str | None = None):
    """Mount (as root) for the length of the block; skips the test where mounting is not allowed."""
    target.mkdir(parents=True, exist_ok=True)
    cmd = ["mount", *options, *(["-t", kind] if kind else []), source or kind, str(target)]
    if os.geteuid() != 0 or subprocess.run(cmd, capture_output=True).returncode != 0:
        pytest.skip(f"cannot mount here ({' '.join(cmd)}): needs root in a machine that allows mounts")
    try:
        yield target
    finally:
        subprocess.run(["umount", "-l", str(target)], capture_output=True)


def _fill(folder: Path) -> Path:
    """Take every free byte of ``folder``'s file system."""
    filler = folder / "filler.bin"
    with open(filler, "wb") as fh:
        with contextlib.suppress(OSError):
            while True:
                fh.write(b"\0" * (1 << 20))
                fh.flush()
    return filler


def test_a_full_disk_pauses_the_run_which_goes_on_when_space_is_freed(tmp_path):
    task = write_task(tmp_path / "task", task={"metric": "accuracy"})
    with _mount("tmpfs", tmp_path / "small", "-o", "size=48m") as small:
        run = small / "run"
        settings = SearchSettings(time_budget_s=600, per_run_timeout_s=60, max_nodes=3, ensemble=False, min_free_disk_mb=0,
                                  disk_mb=8, policy="greedy")
        said: list[str] = []
        filled: list[Path] = []

        def fill_after_first(search, node):
            if not filled:
                filled.append(_fill(small))

        def say(msg):
            said.append(msg)
            if msg.startswith("paused: the disk holding"):  # the user frees space a moment later
                threading.Timer(1.0, lambda: filled[0].unlink()).start()

        search = create_search(task, run, settings=settings, coder=RecipeCoder(models=FAST), callbacks=[fill_after_first])
        search.say = say
        search.run()
        paused = [m for m in said if m.startswith("paused: the disk holding")]
        assert len(paused) == 1 and str(small) in paused[0] and "free some space" in paused[0], said
        assert any("the run continues" in m for m in said), said
        nodes = [n for n in search.nodes() if n.parent_id is not None]
        assert sum(n.is_valid for n in nodes) == 3 and search.storage.get_run(search.run_record.name).status == "finished"
        search.storage.close()

        # `mcgs resume` on a disk that is still full: it pauses too (it crashed with a traceback)
        filler = _fill(small)
        env = {**os.environ, "COLUMNS": "200"}
        proc = subprocess.Popen([sys.executable, "-m", "mcgs", "resume", str(run), "--max-nodes", "4"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env)
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
        reader.start()
        deadline = time.monotonic() + 60
        while not any("paused: the disk holding" in ln for ln in lines) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert any("paused: the disk holding" in ln for ln in lines), "".join(lines)
        filler.unlink()
        out, _ = proc.communicate(timeout=120)
        reader.join(5)
        assert proc.returncode == 0, "".join(lines)[-3000:]
        assert "Traceback" not in "".join(lines)
        assert "chosen node" in out


def test_a_storage_that_is_full_for_another_reason_is_named_not_a_traceback(tmp_path):
    """SQLite's own limit (max_page_count) reports a full database although the disk has room:
    waiting cannot help, so the write fails as StorageFull naming the file."""
    from sqlalchemy import event

    from mcgs.storage import Storage, StorageFull

    db = tmp_path / "mcgs.db"
    store = Storage(f"sqlite:///{db}")
    run = store.create_run(name="r", task_json="{}", settings={}, seed=0, data_fingerprint="x", package_versions={}, isolation="x")
    store.close()
    store = Storage(f"sqlite:///{db}")
    event.listen(store.engine, "connect", lambda con, _rec: con.execute("PRAGMA max_page_count=1"))
    store.engine.dispose()
    with pytest.raises(StorageFull, match=rf"the disk holding {db} is full \(database or disk is full\)"):
        for i in range(50):
            store.update_run(run.id, settings_json="x" * 100_000)


def _finished_run(tmp_path, max_nodes: int) -> Path:
    """A run of ``max_nodes`` fast recipe nodes on write_task's task, made with `mcgs run`."""
    task = write_task(tmp_path / "task", task={"metric": "accuracy"})
    run = tmp_path / "run"
    code, output = _invoke("run", task, "--out", run, "--max-nodes", str(max_nodes), "--plans", "0", "--time-budget", "5m",
                           "--models", ",".join(FAST), "--coder", "recipe")
    assert code == 0, output
    return run


def test_a_deleted_node_folder_is_lost_artifacts_and_the_run_finishes(tmp_path):
    run = _finished_run(tmp_path, 3)
    import json

    best = json.loads((run / "best" / "node.json").read_text())["node"]
    shutil.rmtree(run / "nodes" / f"{best:05d}")
    code, output = _invoke("resume", run, "--max-nodes", "4")
    text = " ".join(output.split())
    assert code == 0 and "Traceback" not in output, output
    assert f"node {best}'s artifacts are lost" in text and "chooses among the other nodes" in text, text
    search = open_search(run, read_only=True)
    assert search.storage.get_run(search.run_record.name).status == "finished"
    final = search.final_node
    assert final is not None and final.seq != best and json.loads((run / "best" / "node.json").read_text())["node"] == final.seq
    if final.operator is Operator.ENSEMBLE:
        by_seq = {n.id: n.seq for n in search.nodes()}
        assert best not in {by_seq[int(i)] for i in final.config["weights"]}


def test_status_and_report_work_on_a_read_only_run_folder(tmp_path):
    run = _finished_run(tmp_path, 2)
    shutil.rmtree(tmp_path / "task")  # archived without its task folder
    with _mount("", tmp_path / "archive", "--bind", "-o", "ro", source=str(run)) as archive:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(archive)], check=True)
        with pytest.raises(OSError):
            (archive / "probe").write_text("x")
        before = sorted(p.name for p in archive.iterdir())
        code, output = _invoke("status", archive)
        assert code == 0 and "finished" in output and "Traceback" not in output, output
        code, output = _invoke("report", archive, "-o", tmp_path / "report.html")
        assert code == 0 and (tmp_path / "report.html").stat().st_size > 10_000, output
        code, output = _invoke("resume", archive)
        assert code == 2 and "Traceback" not in output, output
        assert sorted(p.name for p in archive.iterdir()) == before


def test_a_run_of_an_older_schema_is_read_on_a_read_only_mount_without_migrating_it(tmp_path):
    """A run written before node roles (schema 4), archived read-only: status, report and
    export read it through a migrated temporary copy; the archive is not changed and the copy
    is gone afterwards."""
    import sqlite3
    import tempfile

    from mcgs.snapshot import load_run

    run = _finished_run(tmp_path, 2)
    chosen = load_run(run).chosen_node.seq
    con = sqlite3.connect(run / "mcgs.db")
    con.execute("alter table nodes drop column role")  # as mcgs wrote it before roles (schema 4)
    con.execute("alter table nodes drop column fidelity")  # ... and before fidelities (schema 5)
    for column in ("peak_rss_mb", "gpu", "peak_gpu_mb"):  # ... and before resources were recorded (schema 6)
        con.execute(f"alter table nodes drop column {column}")
    con.execute("update alembic_version set version_num = '0003'")
    con.execute("update schema_info set value = '4' where key = 'schema_version'")
    con.commit()
    con.close()
    leftovers = set(Path(tempfile.gettempdir()).glob("mcgs-upgraded-*"))
    with _mount("", tmp_path / "archive", "--bind", "-o", "ro", source=str(run)) as archive:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(archive)], check=True)
        db = (archive / "mcgs.db").read_bytes()
        code, output = _invoke("status", archive)
        assert code == 0 and "finished" in output and "Traceback" not in output, output
        assert load_run(archive).chosen_node.seq == chosen
        code, output = _invoke("export", archive, "--out", tmp_path / "model")
        assert code == 0 and f"exported node {chosen}" in output, output
        assert (archive / "mcgs.db").read_bytes() == db
    assert set(Path(tempfile.gettempdir()).glob("mcgs-upgraded-*")) == leftovers


def test_an_interrupted_draft_is_run_again_on_resume(tmp_path):
    """Ctrl-C during the first draft (LightGBM): the resumed run runs that draft again, the same
    program in the same node, instead of dropping its model family."""
    task = write_task(tmp_path / "task", task={"metric": "accuracy"}, n=300)
    slow = RecipeCoder(models=("model.lightgbm", "model.logistic_regression"))
    settings = SearchSettings(time_budget_s=600, per_run_timeout_s=120, max_nodes=2, ensemble=False, num_drafts=2)
    search = create_search(task, tmp_path / "run", settings=settings, coder=slow)

    def stop_when_running():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if any(n.state is NodeState.RUNNING for n in search.storage.get_nodes(search.run_id)):
                search.request_stop()
                return
            time.sleep(0.05)

    threading.Thread(target=stop_when_running, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        search.run()
    first = next(n for n in search.nodes() if n.operator is Operator.DRAFT)
    assert first.state is NodeState.INTERRUPTED and first.config["model"] == "model.lightgbm"
    search.storage.close()
    resumed = open_search(tmp_path / "run", coder=RecipeCoder(models=("model.lightgbm", "model.logistic_regression")))
    resumed.run()
    nodes = {n.id: n for n in resumed.nodes()}
    assert nodes[first.id].state is NodeState.INTERRUPTED  # history stays as it was
    again = [n for n in nodes.values() if n.config.get("retry_of") == first.seq]
    assert len(again) == 1 and again[0].state is NodeState.VALID and again[0].code == first.code and again[0].parent_id == first.parent_id
    valid = [n for n in nodes.values() if n.is_valid]
    assert sorted(n.config["model"] for n in valid) == ["model.lightgbm", "model.logistic_regression"]
