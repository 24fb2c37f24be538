#!/usr/bin/env python
"""Starter program: LightGBM with default parameters on the raw columns.

The baseline of MLAgentBench-style runs (``mcgs run --baseline`` and
``experiments/mlagentbench.py``). It follows the mcgs solution contract 1.0: one model per fold
on the rows the fold rule allows, out-of-fold and test predictions, and a submission in the
sample submission's format. No feature engineering, no target transform, no tuning: every
column present in both tables except the id, numbers as they are, text columns as pandas
categories (LightGBM's native categorical handling).
"""
import json
import os

import lightgbm as lgb
import numpy as np
import pandas as pd

TASK = json.load(open("input/task.json"))
SEED = int(os.environ.get("MCGS_SEED", "0"))


def read(spec):
    return pd.read_json(spec["path"]) if spec["format"] == "json" else pd.read_csv(spec["path"])


train, test = read(TASK["files"]["train"]), read(TASK["files"]["test"])
folds = pd.read_csv(TASK["validation"]["folds_file"])
targets, kind, ID = TASK["target_columns"], TASK["task_kind"], TASK["id_column"]
features = [c for c in train.columns if c in test.columns and c != ID and c not in targets]
X, X_test = train[features].copy(), test[features].copy()
for c in features:
    if not pd.api.types.is_numeric_dtype(X[c]):
        cats = pd.Categorical(pd.concat([X[c], X_test[c]]).astype(str)).categories
        X[c] = pd.Categorical(X[c].astype(str), categories=cats)
        X_test[c] = pd.Categorical(X_test[c].astype(str), categories=cats)

pred_cols = TASK["prediction_columns"]
validated = folds[folds["fold"] >= 0]
oof = np.zeros((len(validated), len(pred_cols)))
test_pred = np.zeros((len(test), len(pred_cols)))
pos = {r: i for i, r in enumerate(validated["row"])}
fold_ids = sorted(validated["fold"].unique())
for k in fold_ids:
    fit_rows = folds.loc[folds["fold"] != k, "row"].to_numpy()
    val_rows = folds.loc[folds["fold"] == k, "row"].to_numpy()
    idx = [pos[r] for r in val_rows]
    for j, t in enumerate(targets if kind in ("regression", "multi_target_regression") else [targets[0]]):
        y = train[t]
        if kind in ("regression", "multi_target_regression"):
            m = lgb.LGBMRegressor(random_state=SEED, verbose=-1).fit(X.iloc[fit_rows], y.iloc[fit_rows])
            oof[idx, j] = m.predict(X.iloc[val_rows])
            test_pred[:, j] += m.predict(X_test) / len(fold_ids)
        else:
            labels = [str(c) for c in TASK["class_labels"]]
            m = lgb.LGBMClassifier(random_state=SEED, verbose=-1).fit(X.iloc[fit_rows], y.iloc[fit_rows].astype(str))
            order = [list(m.classes_).index(c) for c in labels]
            p_val, p_test = m.predict_proba(X.iloc[val_rows])[:, order], m.predict_proba(X_test)[:, order]
            if kind == "binary":
                pos_i = labels.index(str(TASK["positive_class"]))
                p_val, p_test = p_val[:, [pos_i]], p_test[:, [pos_i]]
            oof[idx] = p_val
            test_pred += p_test / len(fold_ids)

os.makedirs("working", exist_ok=True)
os.makedirs("submission", exist_ok=True)
pd.DataFrame(oof, columns=pred_cols).assign(row=validated["row"].to_numpy())[["row", *pred_cols]].to_csv(TASK["outputs"]["oof"], index=False)
pd.DataFrame(test_pred, columns=pred_cols).assign(row=np.arange(len(test)))[["row", *pred_cols]].to_csv(TASK["outputs"]["test_pred"], index=False)
sub = pd.DataFrame({ID: test[ID]}) if ID else pd.DataFrame(index=range(len(test)))
if kind in ("regression", "multi_target_regression"):
    for j, t in enumerate(targets):
        sub[t] = test_pred[:, j]
elif TASK["submission_format"] == "label":
    labels = np.asarray([str(c) for c in TASK["class_labels"]])
    if kind == "binary":
        neg = [c for c in labels if c != str(TASK["positive_class"])][0]
        sub[targets[0]] = np.where(test_pred[:, 0] >= 0.5, str(TASK["positive_class"]), neg)
    else:
        sub[targets[0]] = labels[test_pred.argmax(axis=1)]
elif kind == "binary":
    sub[targets[0]] = test_pred[:, 0]
else:
    for i, c in enumerate(TASK["class_labels"]):
        sub[str(c)] = test_pred[:, i]
sub[TASK["submission_columns"]].to_csv(TASK["outputs"]["submission"], index=False)
print("wrote", TASK["outputs"]["oof"], TASK["outputs"]["test_pred"], TASK["outputs"]["submission"])
