"""Reading a run without an engine (mcgs.snapshot.load_run, `mcgs status`): the snapshot holds
what the engine stored, and reading it changes no byte of the run folder."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mcgs.cli import app
from mcgs.coders.recipe import RecipeCoder
from mcgs.node import NodeState
from mcgs.run_folder import RunError
from mcgs.search import create_search
from mcgs.settings import SearchSettings
from mcgs.snapshot import load_run

from test_task import write_task


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("snapshot")
    task = write_task(base / "task", task={"metric": "accuracy"})
    settings = SearchSettings(time_budget_s=300, max_nodes=3, num_drafts=2, plan_candidates=0, coder="recipe")
    search = create_search(task, base / "run", settings=settings, coder=RecipeCoder(models=("model.logistic_regression", "model.knn")))
    final = search.run()
    search.storage.close()
    return base / "run", final, search


def _fingerprint(folder: Path) -> dict[str, tuple[int, str]]:
    """Every entry under ``folder``: mode and the hash of its content (of its target, for a link)."""
    out = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            p = Path(root) / name
            st = p.lstat()
            if p.is_symlink():
                digest = "link:" + os.readlink(p)
            elif p.is_file():
                digest = hashlib.sha256(p.read_bytes()).hexdigest()
            else:
                digest = "dir"
            out[str(p.relative_to(folder))] = (st.st_mode, digest)
    return out


def test_the_snapshot_holds_what_the_engine_stored(finished_run):
    run_dir, final, search = finished_run
    snap = load_run(run_dir)
    assert snap.status == "finished" and not snap.engine_gone
    assert snap.chosen_node is not None and snap.chosen_node.id == final.id
    assert [n.seq for n in snap.nodes] == list(range(len(snap.nodes))) and snap.nodes[0].parent_id is None
    valid = [n for n in snap.search_nodes if n.state is NodeState.VALID]
    assert len(valid) >= 3 and all(n.code == "" and n.stdout_tail == "" for n in snap.nodes)  # summaries: no programs
    best = snap.best_single_node
    assert best.score == max(n.score for n in valid if n.operator.value != "ensemble")
    detailed = load_run(run_dir, details=True)
    assert all(n.code for n in detailed.search_nodes) and detailed.chosen_node.code == final.code
    assert {(e.src, e.dst, e.kind) for e in snap.edges} == {(e.src, e.dst, e.kind) for e in search.storage.get_edges(search.run_id)}


def test_status_leaves_the_run_folder_byte_identical(finished_run):
    run_dir = finished_run[0]
    before = _fingerprint(run_dir)
    res = CliRunner().invoke(app, ["status", str(run_dir)], env={"COLUMNS": "200"})
    assert res.exit_code == 0 and "chosen accuracy" in res.output and "top " in res.output, res.output
    assert "nodes by operator and state" in res.output  # a table's title is not wrapped to its narrow columns
    chosen = load_run(run_dir).chosen_node
    assert chosen.operator.value == "ensemble" and chosen.config.get("nested_score") is not None
    assert f"cross-fitted {chosen.config['nested_score']:.6f}" in res.output  # the honest score beside the optimistic OOF one
    load_run(run_dir, details=True)
    assert _fingerprint(run_dir) == before


def test_report_reads_a_snapshot_and_leaves_the_run_folder_byte_identical(finished_run, tmp_path):
    """``mcgs report`` starts no engine: it writes the report and nothing in the run folder,
    and the report of the snapshot is the report of the live search."""
    from mcgs.report import render_report

    run_dir, final, search = finished_run
    before = _fingerprint(run_dir)
    res = CliRunner().invoke(app, ["report", str(run_dir), "-o", str(tmp_path / "report.html")])
    assert res.exit_code == 0, res.output
    assert _fingerprint(run_dir) == before
    page = (tmp_path / "report.html").read_text()
    assert f"node {final.seq}" in page and search.task.metric in page
    with pytest.raises(ValueError, match="details=True"):
        render_report(load_run(run_dir))


def test_export_reads_a_snapshot_and_leaves_the_run_folder_byte_identical(finished_run, tmp_path):
    run_dir, final, _ = finished_run
    before = _fingerprint(run_dir)
    res = CliRunner().invoke(app, ["export", str(run_dir), "--out", str(tmp_path / "model")])
    assert res.exit_code == 0, res.output
    assert f"exported node {final.seq}" in res.output and (tmp_path / "model" / "predict.py").is_file()
    assert _fingerprint(run_dir) == before


def test_a_folder_that_holds_no_run_is_named(tmp_path):
    task = write_task(tmp_path / "task", task={"metric": "accuracy"})
    with pytest.raises(RunError, match="holds no mcgs run .* looks like a task folder"):
        load_run(task)
    assert sorted(p.name for p in task.iterdir()) == sorted(p.name for p in write_task(tmp_path / "again", task={"metric": "accuracy"}).iterdir())
