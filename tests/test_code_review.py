"""The static Code Review passes clean programs, repairs mechanical problems and rejects
programs that break the contract or the sandbox rules, with reasons."""

from __future__ import annotations

import pytest

from mcgs.coders.recipe import FEATURE_ORDER, RecipeCoder, render_program
from mcgs.knowledge_base import retrieve
from mcgs.operators.code_review import review_program
from mcgs.profile import profile_task
from recipe_runs import make_task

# A small but complete candidate, written the way an LLM coder would write one.
CLEAN = '''
import json, os
import numpy as np, pandas as pd
from sklearn.linear_model import LogisticRegression

TASK = json.load(open("input/task.json"))
train = pd.read_csv(TASK["files"]["train"]["path"])
test = pd.read_csv(TASK["files"]["test"]["path"])
folds = pd.read_csv("input/folds.csv")["fold"].to_numpy()
X, y = train[["a", "b"]].to_numpy(), train["target"].to_numpy()
oof = np.zeros(len(train))
for k in sorted(set(folds)):
    tr_idx, va_idx = np.flatnonzero(folds != k), np.flatnonzero(folds == k)
    model = LogisticRegression(n_jobs=-1).fit(X[tr_idx], y[tr_idx])
    oof[va_idx] = model.predict_proba(X[va_idx])[:, 1]
os.makedirs("working", exist_ok=True); os.makedirs("submission", exist_ok=True)
pd.DataFrame({"row": np.arange(len(train)), "target": oof}).to_csv("working/oof.csv", index=False)
pd.DataFrame({"row": np.arange(len(test)), "target": 0.5}).to_csv("working/test_pred.csv", index=False)
pd.DataFrame({"id": test["id"], "target": 0.5}).to_csv("submission/submission.csv", index=False)
'''


def test_clean_program_passes_after_its_core_count_is_repaired():
    review = review_program(CLEAN)
    assert review.verdict == "fixed" and "n_jobs=-1" in review.reasons[0]
    assert "n_jobs=-1" not in review.code and "OMP_NUM_THREADS" in review.code
    compile(review.code, "solution.py", "exec")
    again = review_program(review.code)
    assert again.verdict == "passed" and again.reasons == ()


@pytest.mark.parametrize(
    "change, reason",
    [
        (('"input/folds.csv"', '"../private/answers.csv"'), "held-out"),
        (('"input/folds.csv"', '"/work/shared/data/leaf/train.csv"'), "absolute path"),
        (("import json, os", "import json, os, socket\ns = socket.socket()"), "network"),
        (("import json, os", "import json, os\nfrom urllib.request import urlopen"), "network"),
        (("import json, os", "import json, os, subprocess\nsubprocess.run(['ls'])"), "start processes"),
        (("import json, os", "import json, os\nos.system('curl example.com')"), "start processes"),
        (("import json, os", "import json, os\nexec(open('x.py').read())"), "run time"),
        (("fit(X[tr_idx], y[tr_idx])", "fit(X[va_idx], y[va_idx])"), "validation rows"),
        (('.to_csv("working/test_pred.csv", index=False)', ".sum()"), "working/test_pred.csv"),
        (("oof = np.zeros(len(train))", "oof = np.zeros(len(train)"), "does not parse"),
    ],
)
def test_breaking_programs_are_rejected_with_a_reason(change, reason):
    old, new = change
    assert old in CLEAN
    review = review_program(CLEAN.replace(old, new))
    assert review.rejected
    assert any(reason in r for r in review.reasons), review.reasons


def test_labels_that_look_like_words_are_not_paths():
    code = CLEAN.replace('train[["a", "b"]]', 'train[["a", "b"]].assign(p=train["kind"] == "Private")')
    assert not review_program(code).rejected


def test_every_recipe_program_passes_review(tmp_path):
    """The offline coder's own programs, for every model entry and feature block, pass untouched."""
    prof = profile_task(make_task(tmp_path / "t", "multiclass"))
    coder = RecipeCoder()
    for entry in retrieve(prof, recipe_kind="model"):
        config = coder.default_config(entry.id, prof) | {"seed": 0}
        config["features"] = {f: True for f in FEATURE_ORDER}
        code, _ = render_program(config, title="t", plan="t", profile=prof)
        review = review_program(code)
        assert review.verdict == "passed", (entry.id, review.reasons)
