"""The bad-input corpus: each malformed input gets a clear error naming the file, column or
setting and the fix (exit code 2, no traceback), or is handled and the search runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from mcgs.cli import app
from test_task import write_task

RUN = ["--max-nodes", "1", "--time-budget", "60s", "--plans", "0", "--coder", "recipe"]


def _csv(f: Path, name: str, df: pd.DataFrame) -> None:
    df.to_csv(f / name, index=False)


def _rd(f: Path, name: str) -> pd.DataFrame:
    return pd.read_csv(f / name)


def _yaml(text):
    return lambda f: (f / "task.yaml").write_text(text)


# (case, how to break the task folder, extra CLI arguments or None, env, words the message must hold)
ERRORS = [
    ("non-UTF-8 text", lambda f: (f / "train.csv").write_bytes(_rd(f, "train.csv").assign(cat=["é", "ü", "ø"] * 20).to_csv(index=False).encode("latin-1")),
     None, {}, ["train.csv", "not UTF-8", "iconv"]),
    ("semicolons", lambda f: (f / "train.csv").write_text(_rd(f, "train.csv").to_csv(index=False, sep=";")), None, {}, ["train.csv", "semicolons", "comma-separated"]),
    ("tabs", lambda f: (f / "test.csv").write_text(_rd(f, "test.csv").to_csv(index=False, sep="\t")), None, {}, ["test.csv", "tabs"]),
    ("empty train", lambda f: (f / "train.csv").write_text(""), None, {}, ["train.csv", "is empty"]),
    ("header-only train", lambda f: (f / "train.csv").write_text("pid,x,cat,label\n"), None, {}, ["train.csv", "no rows"]),
    ("header-only test", lambda f: (f / "test.csv").write_text("pid,x,cat\n"), None, {}, ["test.csv", "no rows"]),
    ("missing target", _yaml("metric: accuracy\ntarget: nope\n"), None, {}, ["'nope'", "not in the training file"]),
    ("target in test", lambda f: _csv(f, "test.csv", _rd(f, "test.csv").assign(label="no")), None, {}, ["'label'", "also in the test file"]),
    ("duplicate test ids", lambda f: (_csv(f, "test.csv", _rd(f, "test.csv").assign(pid=["0000_02"] * 20)), _csv(f, "sample_submission.csv", _rd(f, "sample_submission.csv").assign(pid=["0000_02"] * 20))),
     None, {}, ["'pid'", "not unique", "id_column"]),
    ("test ids differ from the sample", lambda f: _csv(f, "sample_submission.csv", _rd(f, "sample_submission.csv").assign(pid=[f"x{i}" for i in range(20)])),
     None, {}, ["ids of sample_submission.csv and the test file differ", "'x0'"]),
    ("a test row without id", lambda f: _csv(f, "test.csv", _rd(f, "test.csv").assign(pid=[None] + [f"{i:04d}_02" for i in range(1, 20)])), None, {}, ["'pid'", "1 missing values"]),
    ("constant target", lambda f: _csv(f, "train.csv", _rd(f, "train.csv").assign(label="yes")), None, {}, ["'label'", "single class"]),
    ("test file without the id", lambda f: _csv(f, "test.csv", _rd(f, "test.csv").drop(columns="pid")), None, {},
     ["'pid'", "looks like the id", "test file has no column 'pid'", "no_id_column"]),
    ("text in a numeric test column", lambda f: _csv(f, "test.csv", _rd(f, "test.csv").assign(x=lambda d: d["x"].astype(object).where(d.index != 4, "abc"))),
     None, {}, ["'x'", "numbers in train.csv", "test.csv", "'abc'", "line(s) 6", "fix those values"]),
    ("constant regression target", lambda f: (_csv(f, "train.csv", _rd(f, "train.csv").assign(label=1.5)), _yaml("metric: rmse\n")(f)), None, {},
     ["'label'", "single value 1.5", "different target values"]),
    ("target all missing", lambda f: _csv(f, "train.csv", _rd(f, "train.csv").assign(label=np.nan)), None, {}, ["'label'", "missing values"]),
    ("unknown metric", _yaml("metric: f2_weird\n"), None, {}, ["unknown metric 'f2_weird'", "known metrics"]),
    ("invalid YAML", _yaml("metric: [accuracy\n"), None, {}, ["task.yaml", "not valid YAML"]),
    ("YAML list", _yaml("- accuracy\n"), None, {}, ["task.yaml", "must be a mapping"]),
    ("unknown task.yaml key", _yaml("metric: accuracy\nbudget: 3\n"), None, {}, ["budget", "unknown setting"]),
    ("no test file", lambda f: (f / "test.csv").unlink(), None, {}, ["test.csv", "does not exist"]),
    ("train is a folder", lambda f: ((f / "train.csv").unlink(), (f / "train.csv").mkdir()), None, {}, ["train.csv", "is a folder"]),
    ("sample row count", lambda f: _csv(f, "sample_submission.csv", _rd(f, "sample_submission.csv").iloc[:5]), None, {}, ["sample_submission.csv has 5 rows", "test file has 20"]),
    ("regression metric on labels", _yaml("metric: rmse\n"), None, {}, ["regression metric", "'label' is not numeric", "classification metric"]),
    ("rarest class below n_splits", lambda f: _csv(f, "train.csv", _rd(f, "train.csv").assign(label=["yes"] * 58 + ["no"] * 2)), None, {}, ["rarest class", "n_splits"]),
    # issue 31: refused at load rather than failing in every program or on every resume
    ("rmsle with a target at or below -1", lambda f: (_csv(f, "train.csv", _rd(f, "train.csv").assign(label=[-3.0, -1.0] + [float(i) for i in range(58)])),
                                                      _yaml("metric: rmsle\n")(f)), None, {},
     ["rmsle", "above -1", "'label'", "2 value(s)", "-3, -1", "line(s) 2, 3", "rmse"]),
    ("probability metric on one label column of many classes", lambda f: (_csv(f, "train.csv", _rd(f, "train.csv").assign(label=["a", "b", "c"] * 20)),
                                                                         _csv(f, "sample_submission.csv", _rd(f, "sample_submission.csv").assign(label="a")),
                                                                         _yaml("metric: roc_auc\n")(f)), None, {},
     ["single column 'label' for the 3 classes", "roc_auc scores class probabilities", "accuracy", "one probability column per class (pid, a, b, c)"]),
    ("time split over mixed date formats", lambda f: (_csv(f, "train.csv", _rd(f, "train.csv").assign(day=[f"2021-03-{i % 28 + 1:02d}" if i % 3 else f"{i % 28 + 1:02d}/04/2021" for i in range(60)])),
                                                      _yaml("metric: accuracy\nvalidation: {kind: time_split, time_column: day}\n")(f)), None, {},
     ["validation.time_column 'day'", "51 value(s) that do not parse", "such as '01/04/2021'", "'2021-03-02'", "validation.time_format", "mixed"]),
    ("extra file outside the task folder", _yaml("metric: accuracy\nextra_files: ['/etc']\n"), None, {}, ["extra_files entry '/etc'", "not a file or folder directly inside"]),
    ("group k-fold with too few groups", lambda f: (_csv(f, "train.csv", _rd(f, "train.csv").assign(team=["a", "b", "c"] * 20)),
                                                    _yaml("metric: accuracy\nvalidation: {kind: group_kfold, group_column: team}\n")(f)), None, {},
     ["validation.group_column 'team' has 3 distinct group(s)", "validation.n_splits=5", "n_splits: 3"]),
    ("stratified folds on a regression target", lambda f: (_csv(f, "train.csv", _rd(f, "train.csv").assign(label=[float(i) for i in range(60)])),
                                                           _yaml("metric: rmse\nvalidation: {kind: stratified_kfold}\n")(f)), None, {},
     ["validation.kind stratified_kfold", "regression task", "kind: kfold"]),
    ("sample id column spelled in another case", lambda f: _csv(f, "sample_submission.csv", _rd(f, "sample_submission.csv").rename(columns={"pid": "PID"})), None, {},
     ["column 'PID' of sample_submission.csv matches column 'pid'", "case-sensitive"]),
    ("zero budget", lambda f: None, ["--time-budget", "0"], {}, ["--time-budget", "must be positive"]),
    ("negative budget", lambda f: None, ["--time-budget", "-5m"], {}, ["--time-budget", "must be positive"]),
    ("budget in words", lambda f: None, ["--time-budget", "ten minutes"], {}, ["--time-budget", "ten minutes"]),
    ("memory too small", lambda f: None, ["--memory-mb", "10"], {}, ["memory_mb", "256"]),
    ("setting from the environment", lambda f: None, [], {"MCGS_NUM_DRAFTS": "abc"}, ["num_drafts", "MCGS_"]),
    ("unknown policy", lambda f: None, ["--policy", "random"], {}, ["--policy", "mcgs"]),
    ("unwritable run folder", lambda f: None, ["--out", "/proc/mcgs-run"], {}, ["cannot write", "/proc/mcgs-run"]),
]


@pytest.mark.parametrize("case, mutate, extra, env, words", ERRORS, ids=[c[0] for c in ERRORS])
def test_bad_input_gets_a_clear_error(tmp_path, case, mutate, extra, env, words):
    folder = write_task(tmp_path / "task", task={"metric": "accuracy"})
    mutate(folder)
    args = ["run", str(folder), "--out", str(tmp_path / "run"), *RUN]
    if extra:
        if "--out" in extra:  # replace the default run folder
            i = args.index("--out")
            del args[i:i + 2]
        args += extra
    res = CliRunner().invoke(app, args, env=env)
    text = " ".join(res.output.split())
    assert res.exit_code == 2, (res.exit_code, text, res.exception)
    assert res.exception is None or isinstance(res.exception, SystemExit)
    for w in words:
        assert w in text, (w, text)


def test_a_second_run_into_the_same_folder_is_refused(tmp_path):
    folder = write_task(tmp_path / "task", task={"metric": "accuracy"})
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "mcgs.db").write_text("")
    res = CliRunner().invoke(app, ["run", str(folder), "--out", str(tmp_path / "run"), *RUN])
    assert res.exit_code == 2 and "already holds a run" in res.output and "mcgs resume" in res.output


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else b"" for p in sorted(folder.rglob("*"))}


def test_a_folder_of_the_users_is_never_written_into(tmp_path):
    """--out naming a folder with someone's files in it, even under the names a run writes
    (best/, nodes/, input/, a best/ that links elsewhere): refused before anything is written."""
    from mcgs.search import create_search

    folder = write_task(tmp_path / "task", task={"metric": "accuracy"})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "solution.py").write_text("mine")
    cases = {  # entries of the user's folder -> what the error must name
        "notes and a task/ of theirs": ({"notes.txt": "my notes", "task/train.csv": "a\n1\n"}, ["notes.txt", "task/"]),
        "a best/ of theirs": ({"best/solution.py": "mine", "best/submission.csv": "id\n"}, ["best/"]),
        "a nodes/ of theirs": ({"nodes/mine.txt": "mine"}, ["nodes/"]),
        "an input/ of theirs": ({"input/mine.txt": "mine"}, ["input/"]),
        "a best/ that links elsewhere": ({}, ["best/"]),
    }
    for case, (files, names) in cases.items():
        mine = tmp_path / case.replace(" ", "_").replace("/", "")
        mine.mkdir()
        for rel, text in files.items():
            (mine / rel).parent.mkdir(parents=True, exist_ok=True)
            (mine / rel).write_text(text)
        if not files:
            (mine / "best").symlink_to(elsewhere, target_is_directory=True)
        before, outside = _files(mine), _files(elsewhere)
        for args in (["run", str(folder), "--out", str(mine), *RUN],
                     ["run", "--prompt", "predict label, judged by accuracy", "--data", str(folder), "--out", str(mine), *RUN]):
            res = CliRunner().invoke(app, args)
            text = " ".join(res.output.split())
            assert res.exit_code == 2, (case, res.exit_code, text, res.exception)
            assert "not an mcgs run's" in text and "new or empty folder" in text and all(n in text for n in names), (case, text)
            assert _files(mine) == before and _files(elsewhere) == outside, case
    demo = tmp_path / "demo"
    (demo / "run" / "best").mkdir(parents=True)
    (demo / "run" / "best" / "solution.py").write_text("keep")  # not a run: no mcgs.db
    res = CliRunner().invoke(app, ["demo", "--out", str(demo)])
    assert res.exit_code == 2 and "is not an mcgs run" in " ".join(res.output.split()), res.output
    assert (demo / "run" / "best" / "solution.py").read_text() == "keep" and not (demo / "task").exists()
    import shutil

    shutil.rmtree(demo / "run")
    (demo / "task").mkdir()
    (demo / "task" / "task.yaml").write_text("metric: accuracy\n")  # a task of theirs where the demo writes its own
    res = CliRunner().invoke(app, ["demo", "--out", str(demo)])
    assert res.exit_code == 2 and "not the demo task's" in " ".join(res.output.split()), res.output
    assert (demo / "task" / "task.yaml").read_text() == "metric: accuracy\n" and not (demo / "task" / "train.csv").exists()
    # the task/ that --prompt wrote before a run that failed to start is the run's own: reused
    left = tmp_path / "left"
    (left / "task").mkdir(parents=True)
    (left / "task" / "request.json").write_text("{}")
    create_search(folder, left).storage.close()
    assert (left / "mcgs.db").is_file()


# inputs that are odd but valid: the search handles them and a node is valid
HANDLED = [
    ("all-missing column", lambda f: (_csv(f, "train.csv", _rd(f, "train.csv").assign(z=np.nan)), _csv(f, "test.csv", _rd(f, "test.csv").assign(z=np.nan)))),
    ("infinities", lambda f: _csv(f, "train.csv", _rd(f, "train.csv").assign(x=[np.inf if i % 5 == 0 else -np.inf if i % 7 == 0 else i for i in range(60)]))),
    ("unicode column names", lambda f: (_csv(f, "train.csv", _rd(f, "train.csv").rename(columns={"x": "größe ✓"})), _csv(f, "test.csv", _rd(f, "test.csv").rename(columns={"x": "größe ✓"})))),
    ("duplicate column names", lambda f: (f / "train.csv").write_text("pid,x,x,cat,label\n" + "\n".join(f"{i:04d}_01,{i % 7},{i},a,{'yes' if i % 2 else 'no'}" for i in range(60)))),
    ("constant feature", lambda f: (_csv(f, "train.csv", _rd(f, "train.csv").assign(k=1)), _csv(f, "test.csv", _rd(f, "test.csv").assign(k=1)))),
    # issue 31: ids that look like numbers keep their leading zeros from the files to the submission
    ("ids with leading zeros", lambda f: (_csv(f, "train.csv", _rd(f, "train.csv").assign(pid=[f"{i:05d}" for i in range(60)])),
                                          _csv(f, "test.csv", _rd(f, "test.csv").assign(pid=[f"{i:05d}" for i in range(100, 120)])),
                                          _csv(f, "sample_submission.csv", _rd(f, "sample_submission.csv").assign(pid=[f"{i:05d}" for i in range(100, 120)])))),
    # issue 31: feature names with JSON special characters (LightGBM refuses them as they are)
    ("column names with brackets and quotes", lambda f: (_csv(f, "train.csv", _rd(f, "train.csv").rename(columns={"x": 'radius[mm]', "cat": 'kind:"a",{b}'})),
                                                          _csv(f, "test.csv", _rd(f, "test.csv").rename(columns={"x": 'radius[mm]', "cat": 'kind:"a",{b}'})))),
]


@pytest.mark.parametrize("case, mutate", HANDLED, ids=[c[0] for c in HANDLED])
def test_odd_but_valid_input_is_handled(tmp_path, case, mutate):
    from mcgs.search import open_search

    folder = write_task(tmp_path / "task", task={"metric": "accuracy"})
    mutate(folder)
    res = CliRunner().invoke(app, ["run", str(folder), "--out", str(tmp_path / "run"), *RUN])
    assert res.exit_code == 0, res.output
    nodes = [n for n in open_search(tmp_path / "run").nodes() if n.parent_id is not None]
    assert nodes and nodes[0].is_valid, (nodes[0].state, nodes[0].error, nodes[0].stderr_tail[-500:])


def test_a_request_over_a_semicolon_file_is_a_problem_and_a_retry_uses_the_new_data(tmp_path):
    """`mcgs request` names the delimiter; `run --prompt` into the same folder after the data was
    fixed links the new files (not the old ones) and a failed attempt leaves nothing behind."""
    from mcgs.request import parse_request

    good = write_task(tmp_path / "good", task=None)
    bad = write_task(tmp_path / "bad", task=None)
    (bad / "train.csv").write_text(_rd(bad, "train.csv").to_csv(index=False, sep=";"))
    parsed = parse_request("Predict label; judged by accuracy.", bad)
    assert any("semicolons" in str(p) for p in parsed.problems)
    out = tmp_path / "run"
    first = CliRunner().invoke(app, ["run", "--prompt", "Predict label; judged by accuracy.", "--data", str(good), "--out", str(out), *RUN])
    assert first.exit_code == 0, first.output
    from mcgs.request import write_task_folder

    again = write_task_folder(parse_request("Predict label; judged by accuracy.", good), good, tmp_path / "t2")
    (tmp_path / "t2" / "train.csv").unlink()
    (tmp_path / "t2" / "train.csv").symlink_to(bad / "train.csv")  # a stale link from an earlier attempt
    write_task_folder(parse_request("Predict label; judged by accuracy.", good), good, again)
    assert (again / "train.csv").resolve() == (good / "train.csv").resolve()
    ids_differ = write_task(tmp_path / "ids", task=None)
    _csv(ids_differ, "sample_submission.csv", _rd(ids_differ, "sample_submission.csv").assign(pid=[f"x{i}" for i in range(20)]))
    res = CliRunner().invoke(app, ["run", "--prompt", "Predict label; judged by accuracy.", "--data", str(ids_differ), "--out", str(tmp_path / "r3"), *RUN])
    assert res.exit_code == 2 and "differ" in res.output and not (tmp_path / "r3").exists()


def test_an_error_prints_brackets_and_whole_paths_on_a_narrow_terminal(tmp_path):
    """Error text is not rich markup (a column called "[label]" is named, not swallowed as a
    style tag) and is never folded, so a long path can be copied from a 40-column terminal."""
    folder = write_task(tmp_path / "a-folder-with-a-rather-long-name-for-this-test" / "task", task={"metric": "accuracy"})
    (folder / "task.yaml").write_text("metric: accuracy\ntarget: '[label]'\n")
    res = CliRunner().invoke(app, ["run", str(folder), "--out", str(tmp_path / "run"), *RUN], env={"COLUMNS": "40"})
    assert res.exit_code == 2, res.output
    assert "'[label]'" in res.output and "not in the training file" in res.output, res.output
    assert str(folder / "train.csv") in res.output or str(folder) in res.output, res.output  # on one line, unbroken


def test_the_target_of_a_probability_submission_is_inferred_and_said(tmp_path):
    """An MLE-bench-style folder: the sample submission holds one probability column per class
    (pid,F,L,M,VF), the training table the labels (label). The training column the test file lacks,
    whose values are those columns, is the target; the run says so in its first lines (issue 31)."""
    folder = write_task(tmp_path / "task", task={"metric": "log_loss"})
    _csv(folder, "train.csv", _rd(folder, "train.csv").assign(label=["F", "L", "M", "VF"] * 15))
    sample = _rd(folder, "sample_submission.csv")[["pid"]].assign(F=0.25, L=0.25, M=0.25, VF=0.25)
    _csv(folder, "sample_submission.csv", sample)
    res = CliRunner().invoke(app, ["run", str(folder), "--out", str(tmp_path / "run"), *RUN])
    text = " ".join(res.output.split())
    assert res.exit_code == 0, text
    assert "note: target: 'label' (the training column that the test file lacks" in text and "set `target:`" in text
    from mcgs.search import open_search

    search = open_search(tmp_path / "run")
    assert search.task.target_columns == ["label"] and search.task.submission_columns == ["pid", "F", "L", "M", "VF"]
    assert any(n.is_valid for n in search.nodes())
