"""`mcgs export` (issue 9): a deployable folder that predicts without mcgs and reproduces the
run's test predictions; the task's constraints measured on it, a node that breaks one giving way
to the next best that passes."""

from __future__ import annotations

import json
import site
import subprocess
import sys
import sysconfig

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from mcgs.cli import app
from mcgs.coders.recipe import RecipeCoder
from mcgs.demo import build_demo_task
from mcgs.export import ExportError, export_node
from mcgs.search import create_search, open_search
from mcgs.settings import SearchSettings

MODELS = ("model.logistic_regression", "model.lightgbm", "model.knn")


def _run(base, constraints: str = "", ensemble: bool = False):
    task = build_demo_task(base / "task")
    if constraints:
        yaml = task / "task.yaml"
        yaml.write_text(yaml.read_text() + constraints)
    settings = SearchSettings(time_budget_s=300, max_nodes=3, num_drafts=3, plan_candidates=0, node_timeout_share=1.0, coder="recipe", ensemble=ensemble)
    search = create_search(task, base / "run", settings=settings, coder=RecipeCoder(models=MODELS))
    search.run()
    return open_search(base / "run")


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("export"), ensemble=True)


def _fresh_venv(path):
    """A new virtual environment (--system-site-packages) that sees this interpreter's
    third-party packages through a .pth line, but not mcgs: an editable install is itself a .pth
    file in site-packages, and .pth files are not read in directories a .pth line adds."""
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(path)], check=True, timeout=120)
    py = path / "bin" / "python"
    target = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True, check=True).stdout.strip()
    libs = [p for p in {sysconfig.get_paths()["purelib"], *site.getsitepackages()} if p]
    with open(f"{target}/third_party.pth", "w") as fh:
        fh.write("\n".join(libs) + "\n")
    return py


@pytest.mark.slow
def test_the_export_predicts_without_mcgs_and_reproduces_the_run(finished, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # `--out model`, relative, as in the README
    res = CliRunner().invoke(app, ["export", str(finished.run_dir), "--out", "model"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    out = tmp_path / "model"
    assert not (tmp_path / "model.staging").exists()
    chosen = finished.final_node
    assert json.loads((out / "export.json").read_text())["node"] == chosen.seq
    for name in ("solution.py", "predict.py", "train.py", "requirements.txt", "MODEL_CARD.md", "input/train.csv"):
        assert (out / name).is_file(), name
    models = list(out.rglob("model.joblib"))  # the node's own, or each member's for an ensemble
    assert models and all(p.parent.name == "working" for p in models)
    reqs = (out / "requirements.txt").read_text()
    assert "pandas==" in reqs and "scikit-learn==" in reqs and "joblib==" in reqs
    card = (out / "MODEL_CARD.md").read_text()
    assert f"mcgs node {chosen.seq}" in card and f"{chosen.score:.6g}" in card and finished.run_record.data_fingerprint in card
    assert "ms per row" in card and "Lineage" in card

    py = _fresh_venv(tmp_path / "venv")
    assert subprocess.run([str(py), "-c", "import mcgs"], capture_output=True, cwd=tmp_path).returncode != 0  # no mcgs there
    test_csv = finished.input_dir / finished.task.test_file
    ran = subprocess.run([str(py), str(out / "predict.py"), str(test_csv), str(tmp_path / "raw.csv"), "--raw"], capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, ran.stderr[-3000:]
    node_dir = finished.node_dir(chosen)
    expected = pd.read_csv(node_dir / "working" / "test_pred.csv")
    got = pd.read_csv(tmp_path / "raw.csv")
    assert list(got.columns) == list(expected.columns)
    assert np.abs(got.to_numpy() - expected.to_numpy()).max() <= 1e-6
    ran = subprocess.run([str(py), str(out / "predict.py"), str(test_csv), str(tmp_path / "sub.csv")], capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, ran.stderr[-3000:]
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "sub.csv"), pd.read_csv(node_dir / "submission" / "submission.csv"))
    # the Python entry point, on a slice of rows
    code = (f"import sys, pandas as pd; sys.path.insert(0, {str(out)!r}); from predict import predict; "
            f"df = pd.read_csv({str(test_csv)!r}).head(7); p = predict(df, raw=True); print(len(p), list(p.columns)[0])")
    ran = subprocess.run([str(py), "-c", code], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert ran.returncode == 0 and ran.stdout.split()[0] == "7", ran.stderr[-3000:]
    # train.py refits on all rows; predictions keep their shape
    ran = subprocess.run([str(py), str(out / "train.py")], capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0 and len(list(out.rglob("model.cv.joblib"))) == len(models), ran.stderr[-3000:]
    ran = subprocess.run([str(py), str(out / "predict.py"), str(test_csv), str(tmp_path / "refit.csv")], capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0 and len(pd.read_csv(tmp_path / "refit.csv")) == finished.task.n_test


@pytest.mark.slow
def test_an_ensemble_is_exported_with_its_members_and_blends_as_in_the_run(finished, tmp_path):
    ensembles = [n for n in finished.nodes() if n.is_valid and n.operator.value == "ensemble"]
    assert ensembles, "the fixture run built no ensemble"
    ens = ensembles[-1]
    result = export_node(finished, tmp_path / "ens", node_seq=ens.seq)
    members = sorted(p.name for p in (tmp_path / "ens" / "members").iterdir())
    assert members == sorted(finished.node_dir(m).name for m in finished.nodes() if str(m.id) in ens.config["weights"])
    assert result.measurements["model_mb"] > 0 and result.measurements["interpretable"] is False
    test_csv = finished.input_dir / finished.task.test_file
    ran = subprocess.run([sys.executable, str(tmp_path / "ens" / "predict.py"), str(test_csv), str(tmp_path / "raw.csv"), "--raw"],
                         capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr[-3000:]
    expected = pd.read_csv(finished.node_dir(ens) / "working" / "test_pred.csv")
    assert np.abs(pd.read_csv(tmp_path / "raw.csv").to_numpy() - expected.to_numpy()).max() <= 1e-6
    assert "## Members" in (tmp_path / "ens" / "MODEL_CARD.md").read_text()


@pytest.mark.slow
def test_a_node_that_breaks_the_inference_limit_gives_way_to_one_that_passes(tmp_path):
    search = _run(tmp_path, constraints="constraints: {max_inference_ms_per_row: 100}\n")
    chosen = search.final_node
    singles = [n for n in search.nodes() if n.is_valid]
    assert len(singles) >= 2
    # Make the chosen node slow to predict (16 s for 143 rows, over 110 ms per row; the others
    # take 15-25 ms per row, mostly Python's start, and stay under 100 unless the machine is
    # loaded fourfold on two measurements): a fixture standing for a model that is accurate but
    # slow; the other nodes are left as they ran.
    program = search.node_dir(chosen) / "solution.py"
    program.write_text(program.read_text().replace('MODE = os.environ.get("MCGS_MODE", "search")',
                                                   'MODE = os.environ.get("MCGS_MODE", "search")\nif MODE == "predict":\n    import time; time.sleep(16)', 1))
    con_node = {n.id: n for n in search.nodes()}[chosen.id]
    import sqlite3

    db = sqlite3.connect(search.run_dir / "mcgs.db")  # export reads the program from storage: store the slow one too
    db.execute("update nodes set code = ? where id = ?", (program.read_text(), con_node.id))
    db.commit()
    db.close()
    search = open_search(search.run_dir)
    result = export_node(search, tmp_path / "model")
    assert result.node_seq != chosen.seq
    exported = {n.seq: n for n in search.nodes()}[result.node_seq]
    better = exported.score <= chosen.score if search.task.higher_is_better else exported.score >= chosen.score
    assert better  # a lower-scoring node, which passes
    assert result.rejected[0]["node"] == chosen.seq and result.rejected[0]["ms_per_row"] > 100
    assert result.measurements["ms_per_row"] <= 100 and result.measurements["passed"] == ["max_inference_ms_per_row=100"]
    card = (tmp_path / "model" / "MODEL_CARD.md").read_text()
    assert "limit 100 ms" in card and f"| {chosen.seq} |" in card and "max_inference_ms_per_row=100" in card
    with pytest.raises(ExportError, match="has no node 999"):
        export_node(search, tmp_path / "x", node_seq=999)


def test_an_inference_time_over_the_limit_is_measured_again_and_the_faster_run_kept(tmp_path, monkeypatch):
    # Each measurement runs on a fresh copy in the sandbox, so a slow first run (a machine busy
    # with other work at that moment) is stood in for by the measurements themselves: 30 ms per
    # row, then 12.
    from types import SimpleNamespace

    import mcgs.export as export

    readings = iter([30.0, 12.0, 31.0])
    monkeypatch.setattr(export, "_predict_ms_per_row", lambda search, folder, node: next(readings))
    constraints = SimpleNamespace(max_inference_ms_per_row=20.0, max_model_mb=None, interpretable=False)
    search = SimpleNamespace(task=SimpleNamespace(test_file="test.csv", n_test=100, constraints=constraints))
    node = SimpleNamespace(seq=1, operator=SimpleNamespace(value="ensemble"))
    out = export.measure_constraints(search, tmp_path, node)
    assert out["ms_per_row"] == 12.0 and out["passed"] == ["max_inference_ms_per_row=20"]
    # without a limit there is one measurement, the slow one included
    constraints.max_inference_ms_per_row = None
    assert export.measure_constraints(search, tmp_path, node)["ms_per_row"] == 31.0


# A program written from the contract text the LLM coder is given (operators/prompts/_prefix.j2),
# not from the recipe templates: the prompt's instructions must be enough for export to ship it.
PROMPT_STYLE_PROGRAM = '''
import json, os
import joblib
import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

MODE = os.environ.get("MCGS_MODE", "search")
MODEL_FILE = os.environ.get("MCGS_MODEL_FILE", "working/model.joblib")
task = json.load(open("input/task.json"))
train = pd.read_csv(task["files"]["train"]["path"])
test_path = os.environ["MCGS_PREDICT_INPUT"] if MODE == "predict" else task["files"]["test"]["path"]
test = pd.read_csv(test_path)
target = task["target_columns"][0]
features = [c for c in test.columns if c in train.columns and c != task["id_column"] and c != target]
y = (train[target].astype(str) == str(task["positive_class"])).astype(int).to_numpy()
saved = iter(joblib.load(MODEL_FILE)["estimators"]) if MODE == "predict" else None
fitted = []

def fit(obj, X, yy=None):
    obj = next(saved) if MODE == "predict" else (obj.fit(X, yy) if yy is not None else obj.fit(X))
    fitted.append(obj)
    return obj

folds = pd.read_csv("input/folds.csv")
if MODE == "predict":
    refit = joblib.load(MODEL_FILE)["mode"] == "refit"
else:
    refit = MODE == "refit"
splits = [None] if refit else sorted(k for k in folds["fold"].unique() if k >= 0)
oof = np.zeros(len(train))
test_pred = np.zeros(len(test))
for k in splits:
    fit_rows = np.arange(len(train)) if k is None else folds.loc[folds["fold"] != k, "row"].to_numpy()
    scaler = fit(StandardScaler(), train.loc[fit_rows, features])
    model = fit(LogisticRegression(C=0.5, max_iter=2000), scaler.transform(train.loc[fit_rows, features]), y[fit_rows])
    if k is not None:
        val = folds.loc[folds["fold"] == k, "row"].to_numpy()
        oof[val] = model.predict_proba(scaler.transform(train.loc[val, features]))[:, 1]
    test_pred += model.predict_proba(scaler.transform(test[features]))[:, 1] / len(splits)

raw = pd.DataFrame({"row": np.arange(len(test)), target: test_pred})
sub = pd.DataFrame({task["submission_columns"][0]: test[task["id_column"]], task["submission_columns"][1]: test_pred})
if MODE == "predict":
    sub.to_csv(os.environ["MCGS_PREDICT_OUTPUT"], index=False)
    raw.to_csv(os.environ["MCGS_PREDICT_OUTPUT"] + ".raw.csv", index=False)
else:
    if MODE == "search":
        val = folds.loc[folds["fold"] >= 0, "row"].to_numpy()
        os.makedirs("working", exist_ok=True)
        os.makedirs("submission", exist_ok=True)
        pd.DataFrame({"row": val, target: oof[val]}).to_csv(task["outputs"]["oof"], index=False)
        raw.to_csv(task["outputs"]["test_pred"], index=False)
        sub.to_csv(task["outputs"]["submission"], index=False)
    joblib.dump({"contract": "1.1", "mode": "refit" if refit else "cv", "estimators": fitted}, MODEL_FILE)
'''


@pytest.mark.slow
def test_a_program_written_from_the_llm_prompt_contract_exports_and_reproduces_the_run(tmp_path):
    from mcgs.coders.anthropic import prompt_environment
    from mcgs.contract import CONTRACT_VERSION

    task = build_demo_task(tmp_path / "task")
    baseline = tmp_path / "prompt_style.py"
    baseline.write_text(PROMPT_STYLE_PROGRAM)
    settings = SearchSettings(time_budget_s=120, max_nodes=1, num_drafts=1, plan_candidates=0, coder="recipe", ensemble=False)
    search = create_search(task, tmp_path / "run", settings=settings, coder=RecipeCoder(models=MODELS), baseline=baseline)
    search.run()
    search = open_search(tmp_path / "run")
    node = next(n for n in search.nodes() if n.config.get("baseline"))
    assert node.state.value == "valid", node.error
    prompt = prompt_environment().get_template("_prefix.j2").render(  # what the LLM coder is told
        contract_version=CONTRACT_VERSION, task=search.task, description="", profile_text="", knowledge=[], train_only_columns=[])
    for phrase in ("MCGS_MODE", "MCGS_MODEL_FILE", "MCGS_PREDICT_INPUT", "MCGS_PREDICT_OUTPUT", ".raw.csv", '"mode": "refit"'):
        assert phrase in prompt, phrase

    result = export_node(search, tmp_path / "model", node_seq=node.seq)
    test_csv = search.input_dir / search.task.test_file
    ran = subprocess.run([sys.executable, str(result.path / "predict.py"), str(test_csv), str(tmp_path / "raw.csv"), "--raw"], capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr[-3000:]
    expected = pd.read_csv(search.node_dir(node) / "working" / "test_pred.csv")
    assert np.abs(pd.read_csv(tmp_path / "raw.csv").to_numpy() - expected.to_numpy()).max() <= 1e-6
    ran = subprocess.run([sys.executable, str(result.path / "train.py")], capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr[-3000:]
    ran = subprocess.run([sys.executable, str(result.path / "predict.py"), str(test_csv), str(tmp_path / "refit.csv")], capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0 and len(pd.read_csv(tmp_path / "refit.csv")) == search.task.n_test, ran.stderr[-3000:]


def test_export_refuses_a_destination_it_would_destroy_and_names_a_node_it_cannot_export(finished, tmp_path):
    for dest in (finished.run_dir, finished.run_dir.parent, finished.run_dir / "model", finished.task.data_dir):
        with pytest.raises(ExportError, match="choose a new folder"):
            export_node(finished, dest)
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "notes.txt").write_text("mine")
    with pytest.raises(ExportError, match="not an earlier mcgs export"):
        export_node(finished, notes)
    assert (notes / "notes.txt").read_text() == "mine"
    with pytest.raises(ExportError, match="has no node 999"):
        export_node(finished, tmp_path / "m", node_seq=999)
    a_file = tmp_path / "model.txt"
    a_file.write_text("mine")
    with pytest.raises(ExportError, match="is a file"):
        export_node(finished, a_file)
    assert a_file.read_text() == "mine" and not (tmp_path / "model.txt.staging").exists()
    res = CliRunner().invoke(app, ["export", str(finished.task.data_dir), "--out", str(tmp_path / "m")], env={"COLUMNS": "200"})
    assert res.exit_code != 0 and "looks like a task folder" in res.output and "Traceback" not in res.output
