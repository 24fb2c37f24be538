"""The command line: clear errors without tracebacks, Ctrl-C that stops cleanly, resume."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from mcgs.cli import app
from mcgs.demo import build_demo_task
from mcgs.sandbox import live_candidates

runner = CliRunner()


def invoke(*args):
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, result.output


def test_folder_without_task_yaml(tmp_path):
    (tmp_path / "train.csv").write_text("a,b\n1,2\n")
    code, output = invoke("run", tmp_path, "--out", tmp_path / "run")
    assert code == 2
    assert "add a task.yaml with at least `metric" in output and "no task.yaml" in output
    assert "Traceback" not in output


def test_bad_duration_and_missing_run(tmp_path):
    task = build_demo_task(tmp_path / "task")
    code, output = invoke("run", task, "--out", tmp_path / "run", "--time-budget", "ten minutes")
    assert code == 2 and "--time-budget: cannot read duration 'ten minutes'" in output
    code, output = invoke("resume", tmp_path / "nowhere")
    assert code == 2 and "holds no mcgs run" in output


def test_unknown_competition_lists_known_ones(tmp_path):
    code, output = invoke("mlebench", "prepare", "no-such-comp", "--raw", tmp_path, "--out", tmp_path / "data")
    assert code == 2 and "spaceship-titanic" in output and "Traceback" not in output


@pytest.mark.realdata
def test_grade_json_has_mlebench_fields(shared_data, tmp_path):
    raw = shared_data / "spaceship-titanic" / "raw"
    code, output = invoke("mlebench", "prepare", "spaceship-titanic", "--raw", raw, "--out", tmp_path / "data")
    assert code == 0, output
    sample = tmp_path / "data" / "spaceship-titanic" / "prepared" / "public" / "sample_submission.csv"
    code, output = invoke("mlebench", "grade", "spaceship-titanic", sample, "--data", tmp_path / "data", "--json")
    assert code == 0, output
    report = json.loads(output)
    for field in ("score", "gold_threshold", "silver_threshold", "bronze_threshold", "median_threshold", "any_medal", "above_median", "valid_submission", "is_lower_better"):
        assert field in report
    assert report["valid_submission"] is True and report["bronze_threshold"] == pytest.approx(0.80967)
    assert 0.4 < report["score"] < 0.6  # all-False baseline on a balanced target


def _running_node(db):
    if not db.exists():
        return None
    try:
        con = sqlite3.connect(db, timeout=5)
        row = con.execute("select seq from nodes where state = 'running'").fetchone()
        con.close()
        return row
    except sqlite3.Error:
        return None


def test_ctrl_c_stops_cleanly_and_resume_finishes(tmp_path):
    task = build_demo_task(tmp_path / "task")
    run = tmp_path / "run"
    env = {k: v for k, v in os.environ.items()}
    env["MCGS_ENSEMBLE"] = "false"
    env.pop("COLUMNS", None)  # the layout width of piped output is checked below
    # The test is about stopping and resuming, not about the per-candidate limit: on a loaded
    # machine a boosting draft can pass a quarter of the budget and leave fewer valid nodes.
    env["MCGS_NODE_TIMEOUT_SHARE"] = "1.0"
    cmd = [sys.executable, "-m", "mcgs", "run", str(task), "--out", str(run), "--max-nodes", "3", "--time-budget", "10m",
           "--plans", "0", "--models", "model.logistic_regression,model.lightgbm"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 60
    while _running_node(run / "mcgs.db") is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _running_node(run / "mcgs.db") is not None, "no candidate started"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    assert "mcgs resume" in err and "Traceback" not in err
    assert live_candidates(under=tmp_path) == []
    con = sqlite3.connect(run / "mcgs.db")
    assert con.execute("select status from runs").fetchone()[0] == "stopped"
    assert con.execute("select count(*) from nodes where state = 'interrupted'").fetchone()[0] == 1
    con.close()
    res = subprocess.run([sys.executable, "-m", "mcgs", "resume", str(run)], capture_output=True, text=True, env=env, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "best solution" in res.stdout and "chosen node (roc_auc)" in res.stdout and "out-of-fold" in res.stdout
    assert "1 interrupted (stopped by the run's end or a stop signal, not by its program)" in " ".join(res.stdout.split())
    # piped, not a terminal: laid out LOG_WIDTH (120) columns wide rather than rich's 80; the
    # commands to run next are whole lines however long the run's path is, so they paste
    lines = res.stdout.splitlines()
    commands = [f"mcgs report {run} -o {run / 'report.html'}", f"mcgs export {run} --out MODEL_DIR"]
    assert [line.strip() for line in lines if line.strip() in commands] == commands, res.stdout
    widths = [len(line) for line in lines if line.strip() not in commands]
    assert 80 < max(widths) <= 120, res.stdout
    con = sqlite3.connect(run / "mcgs.db")
    assert con.execute("select status from runs").fetchone()[0] == "finished"
    assert con.execute("select count(*) from nodes where state = 'valid'").fetchone()[0] == 3
    con.close()
    assert (run / "best" / "submission.csv").is_file()
    assert live_candidates(under=tmp_path) == []
    # finished by its node budget: a plain resume says so; --max-nodes raises the budget
    code, output = invoke("resume", run)
    assert code == 2 and "node budget of 3 nodes is already spent" in output and "--max-nodes" in output, output
    code, output = invoke("resume", run, "--max-nodes", "4")
    assert code == 0, output
    con = sqlite3.connect(run / "mcgs.db")
    assert con.execute("select count(*) from nodes where state = 'valid'").fetchone()[0] == 4
    assert json.loads(con.execute("select settings_json from runs").fetchone()[0])["max_nodes"] == 4
    con.close()


def test_a_reader_that_goes_away_does_not_stop_the_search(tmp_path):
    """`mcgs run ... 2>&1 | head -1`: the pipe closes after the first node's line; the search
    stopped there with exit code 1 (rich's broken-pipe hook), now it finishes and exits 0."""
    task = build_demo_task(tmp_path / "task")
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "mcgs", "run", str(task), "--out", str(run), "--max-nodes", "3", "--plans", "0",
           "--models", "model.logistic_regression", "--time-budget", "10m"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    first = proc.stdout.readline()
    proc.stdout.close()  # as `head -1` does
    assert proc.wait(timeout=300) == 0, first
    con = sqlite3.connect(run / "mcgs.db")
    assert con.execute("select status from runs").fetchone()[0] == "finished"
    assert con.execute("select count(*) from nodes where state = 'valid' and operator != 'ensemble'").fetchone()[0] == 3
    con.close()
    assert (run / "best" / "submission.csv").is_file()


def test_watch_shows_the_end_of_a_run_that_ends_while_it_draws(tmp_path, monkeypatch):
    """`mcgs status --watch` into a pipe: the engine stores "finished" and exits while a view is
    drawn (a slow reader holds the print). The lock, read after the stale record, says the engine
    is gone; the watch must show the finished run, not end on the running one."""
    import mcgs.status_view
    from mcgs.engine_lock import acquire
    from mcgs.search import create_search

    task = build_demo_task(tmp_path / "task")
    search = create_search(task, tmp_path / "run")
    search.storage.update_run(search.run_id, status="running")
    lock = acquire(tmp_path / "run")  # a live engine
    real = mcgs.status_view.status_view

    def draw_then_finish(s):
        view = real(s)
        if not lock.closed:  # the engine stores "finished" and exits meanwhile
            search.storage.update_run(search.run_id, status="finished")
            lock.close()
        return view

    monkeypatch.setattr(mcgs.status_view, "status_view", draw_then_finish)
    code, output = invoke("status", tmp_path / "run", "--watch", "--interval", "0.2")
    views = re.findall(r" (running|finished|stopped) budget ", " ".join(output.split()))  # one per view, however wrapped
    assert code == 0 and views == ["running", "finished"] and "resume:" not in output, output
    search.storage.close()


def test_the_loser_of_two_resumes_at_once_is_told_the_engine_is_alive(tmp_path, monkeypatch):
    """Two `mcgs resume` at once: both pass the early check, one takes the engine lock first. The
    other got a traceback (exit 1); it must get the "being searched" message and exit 2."""
    import mcgs.engine_lock
    from mcgs.engine_lock import acquire
    from mcgs.search import create_search

    task = build_demo_task(tmp_path / "task")
    search = create_search(task, tmp_path / "run")
    search.storage.update_run(search.run_id, status="stopped")
    search.storage.close()
    monkeypatch.setattr(mcgs.engine_lock, "engine_holder", lambda run_dir: None)  # its check ran before the winner started
    lock = acquire(tmp_path / "run")  # the winner
    code, output = invoke("resume", tmp_path / "run")
    lock.close()
    text = " ".join(output.split())
    assert code == 2 and "is being searched by process" in text and "one engine per run" in text and "Traceback" not in output, output


def test_an_engine_is_not_refused_for_a_readers_momentary_check(tmp_path):
    """`mcgs status` checks the lock by taking it shared for an instant; an engine starting at that
    instant waits for it instead of being refused as if another engine held the run."""
    import fcntl
    import threading

    from mcgs.engine_lock import LOCK_NAME, acquire

    (tmp_path / LOCK_NAME).write_text("{}")
    reader = open(tmp_path / LOCK_NAME)
    fcntl.flock(reader, fcntl.LOCK_SH | fcntl.LOCK_NB)
    threading.Timer(0.3, reader.close).start()
    lock = acquire(tmp_path)
    assert not lock.closed
    lock.close()


def test_resume_of_a_run_finished_on_time_says_its_budget_is_spent(tmp_path):
    """Finished with 20 s left, which the final ensemble's reserve keeps from any candidate: a
    plain resume has nothing to do and says so (it exited 0 after reprinting the summary)."""
    from mcgs.search import create_search

    task = build_demo_task(tmp_path / "task")
    search = create_search(task, tmp_path / "run")
    search.storage.update_run(search.run_id, status="finished", elapsed_s=search.clock.budget_s - 20)
    search.storage.close()
    code, output = invoke("resume", tmp_path / "run")
    assert code == 2 and "is spent" in output and "too little left for a candidate" in output and "--time-budget" in output, output


def test_a_run_without_a_valid_submission_exits_nonzero(tmp_path):
    """Scripts must see that nothing can be handed in: a starter program that fails, one node."""
    task = build_demo_task(tmp_path / "task")
    broken = tmp_path / "broken.py"
    broken.write_text("raise SystemExit('this starter program fails')\n")
    code, output = invoke("run", task, "--out", tmp_path / "run", "--baseline", broken, "--max-nodes", "1", "--time-budget", "2m", "--plans", "0")
    assert code == 1, output
    assert "no candidate produced a valid submission" in output and "report" in output and "Traceback" not in output


def test_set_report_and_storage_errors_name_the_file_and_leave_nothing_behind(tmp_path):
    from mcgs.search import create_search

    task = build_demo_task(tmp_path / "task")
    create_search(task, tmp_path / "run").storage.close()
    code, output = invoke("set", tmp_path / "run", "min_free_disk_mb=inf")
    assert code == 2 and "min_free_disk_mb='inf'" in output
    (tmp_path / "run" / "overrides.json").write_text("[1, 2]")
    code, output = invoke("set", tmp_path / "run", "min_free_disk_mb=500")
    assert code == 2 and "overrides.json is not a JSON object" in output and "delete it" in output and "Traceback" not in output
    (tmp_path / "run" / "overrides.json").unlink()
    code, output = invoke("set", tmp_path / "run", "min_free_disk_mb=500")
    assert code == 0 and json.loads((tmp_path / "run" / "overrides.json").read_text()) == {"min_free_disk_mb": 500.0}
    # a report aimed at a folder: refused by name, no temporary file left
    (tmp_path / "adir").mkdir()
    code, output = invoke("report", tmp_path / "run", "-o", tmp_path / "adir")
    assert code == 2 and "it is a folder" in output and "-o/--output" in output
    assert list(tmp_path.glob("adir*")) == [tmp_path / "adir"] and not any((tmp_path / "adir").iterdir())
    # a report aimed at the run's own storage or at a file that is not HTML: refused, both kept
    db_before = (tmp_path / "run" / "mcgs.db").read_bytes()
    (tmp_path / "notes.csv").write_text("a,b\n1,2\n")
    for target, says in ((tmp_path / "run" / "mcgs.db", "one of the run's own files"), (tmp_path / "notes.csv", "is not an HTML file")):
        code, output = invoke("report", tmp_path / "run", "-o", target)
        assert code == 2 and says in output and "Traceback" not in output, output
    assert (tmp_path / "run" / "mcgs.db").read_bytes() == db_before and (tmp_path / "notes.csv").read_text() == "a,b\n1,2\n"
    code, output = invoke("report", tmp_path / "run", "-o", tmp_path / "run" / "report.html")
    assert code == 0 and (tmp_path / "run" / "report.html").stat().st_size > 1000
    code, output = invoke("report", tmp_path / "run", "-o", tmp_path / "run" / "report.html")  # an earlier report is replaced
    assert code == 0, output
    # a damaged storage file: named, with what to do
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / "mcgs.db").write_bytes(os.urandom(4096))
    for cmd in (("set", damaged, "min_free_disk_mb=500"), ("status", damaged)):
        code, output = invoke(*cmd)
        assert code == 2 and "mcgs.db" in output and "start a new run with another --out" in output, output
    assert not (damaged / "overrides.json").exists()
    # a SQLite file without the schema (a foreign file, or a starting run's file before its schema is written)
    (damaged / "mcgs.db").unlink()
    with sqlite3.connect(damaged / "mcgs.db") as conn:
        conn.execute("create table notes (x integer)")
    conn.close()
    code, output = invoke("status", damaged)
    assert code == 2 and "holds no mcgs schema yet" in output and "try again" in output and "another --out" in output, output
    (damaged / "mcgs.db").write_bytes(b"")  # truncated to nothing: said so, and left at 0 bytes
    for cmd in (("status", damaged), ("report", damaged, "-o", tmp_path / "r.html"), ("resume", damaged)):
        code, output = invoke(*cmd)
        assert code == 2 and "is empty (0 bytes)" in output and "start a new run with another --out" in output, output
    assert (damaged / "mcgs.db").stat().st_size == 0
    # a storage URL that does not open leaves no empty run folder
    code, output = invoke("run", task, "--out", tmp_path / "new", "--storage", "nosuch://x")
    assert code == 2 and "cannot open the storage" in output and "such as sqlite:///" in output and not (tmp_path / "new").exists()
    code, output = invoke("run", task, "--out", tmp_path / "new", "--max-nodes", "0")
    assert code == 2 and "MCGS_MAX_NODES" in output and "MCGS_NUM_DRAFTS" not in output


def test_the_summary_says_why_the_progress_lines_best_ensemble_was_not_handed_in():
    """The demo ends with the progress line at 0.99543 (node 11, an ensemble during the search)
    and hands in node 25 (the final ensemble, 0.99536 out-of-fold): the summary must say why."""
    from mcgs.final_choice import choice_notes
    from mcgs.node import FrozenNode, NodeState, Operator

    def node(seq, score, op=Operator.IMPROVE, nested=None):
        return FrozenNode(id=seq + 1, seq=seq, parent_id=1, operator=op, state=NodeState.VALID, score=score,
                          config={} if nested is None else {"nested_score": nested})

    single = node(9, 0.9950)
    in_search = node(11, 0.99543, Operator.ENSEMBLE, nested=0.99380)
    final = node(25, 0.99536, Operator.ENSEMBLE, nested=0.99390)
    notes = dict(choice_notes([single, in_search, final], final, higher_is_better=True))
    assert set(notes) == {"top out-of-fold", "ensemble chosen"}
    assert "node 11" in notes["top out-of-fold"] and "0.995430" in notes["top out-of-fold"] and "0.993800" in notes["top out-of-fold"]
    # the choice compared the ensemble's cross-fitted 0.99390 with node 9's 0.99500: say so
    assert "node 9 scored 0.995000" in notes["ensemble chosen"] and "0.993900 cross-fitted" in notes["ensemble chosen"]
    # the chosen ensemble's cross-fitted score is the top score: nothing to explain
    top = node(25, 0.99536, Operator.ENSEMBLE, nested=0.99510)
    assert choice_notes([single, top], top, higher_is_better=True) == []
    # lower is better, a single node chosen over a later ensemble: the existing note, not the new one
    best, ens = node(19, 0.06019), node(21, 0.06000, Operator.ENSEMBLE, nested=0.06300)
    notes = dict(choice_notes([best, ens], best, higher_is_better=False))
    assert set(notes) == {"ensemble"} and "built after node 19" in notes["ensemble"] and "0.063000" in notes["ensemble"]
