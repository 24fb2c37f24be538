"""The curated knowledge base: breadth, distinctness, sources, schema, and retrieval that picks
text entries for a text task and time-series entries for a time-indexed task."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
import yaml

from mcgs.knowledge_base import KnowledgeBaseError, load_entries, rank_entries
from mcgs.profile import profile_task
from mcgs.request import task_from_request
from mcgs.task import load_task

TEXT = {"model.tfidf_linear", "model.naive_bayes_text", "model.pretrained_text_encoder", "data.text_statistics", "data.text_cleaning"}
TIME = {"data.datetime_parts", "data.cyclical_time", "data.covariate_lags", "strategy.time_series_validation"}


def test_forty_distinct_entries_at_three_levels_each_with_a_source():
    entries = load_entries()
    assert len(entries) >= 40
    assert {e.level for e in entries} == {"model", "data", "strategy"}
    assert min(sum(e.level == lv for e in entries) for lv in ("model", "data", "strategy")) >= 10
    assert sum(e.recipe is not None for e in entries) >= 15
    for e in entries:
        assert len(e.source) > 20 and len(e.guidance.split()) >= 30, e.id
    # none is a rewording of another: guidance texts share little vocabulary pairwise
    from sklearn.feature_extraction.text import TfidfVectorizer

    m = TfidfVectorizer(stop_words="english").fit_transform([e.guidance for e in entries])
    sim = (m @ m.T).toarray()
    pairs = [(entries[i].id, entries[j].id, round(sim[i, j], 2)) for i, j in itertools.combinations(range(len(entries)), 2) if sim[i, j] > 0.45]
    assert not pairs


def test_schema_rejects_unknown_conditions_and_names_the_file(tmp_path):
    (tmp_path / "typo.yaml").write_text(yaml.safe_dump({
        "id": "data.x", "level": "data", "title": "t", "guidance": "g", "source": "s",
        "applies_to": {"has_dates": True},
    }))
    with pytest.raises(KnowledgeBaseError, match=r"(?s)typo\.yaml.*applies_to.has_dates: unknown field"):
        load_entries(str(tmp_path))


def _task(folder, frame: pd.DataFrame, test: pd.DataFrame, cfg: dict):
    folder.mkdir(parents=True)
    frame.to_csv(folder / "train.csv", index=False)
    test.to_csv(folder / "test.csv", index=False)
    sample = test[["row"]].assign(**{cfg["target"]: frame[cfg["target"]].iloc[0]})
    sample.to_csv(folder / "sample_submission.csv", index=False)
    (folder / "task.yaml").write_text(yaml.safe_dump(cfg))
    return load_task(folder)


def test_retrieval_ranks_text_entries_first_for_a_text_task(tmp_path):
    rng = np.random.default_rng(0)
    words = np.array("good bad awful great terrible fine nice stupid lovely horrible".split())
    text = [" ".join(rng.choice(words, 8)) for _ in range(400)]
    df = pd.DataFrame({"row": range(400), "comment": text, "y": [int("bad" in t) for t in text]})
    spec = _task(tmp_path / "t", df.iloc[:300], df.iloc[300:].drop(columns="y"), {"metric": "roc_auc", "target": "y"})
    ranked = [e.id for e, _ in rank_entries(profile_task(spec), "Is this comment an insult?", top_k=5)]
    assert len(TEXT & set(ranked)) >= 3, ranked
    models = [e.id for e, _ in rank_entries(profile_task(spec), "", level="model")]
    assert models[0] in TEXT
    assert not TIME & set(ranked)


def test_retrieval_ranks_time_entries_first_for_a_time_indexed_task(tmp_path):
    n = 24 * 30
    t = pd.date_range("2021-01-01", periods=n, freq="h")
    df = pd.DataFrame({"row": range(n), "when": t.strftime("%Y-%m-%d %H:%M:%S"), "temp": np.sin(np.arange(n) / 24), "y": np.arange(n) % 24})
    cfg = {"metric": "rmse", "target": "y", "validation": {"kind": "time_split", "time_column": "when"}}
    spec = _task(tmp_path / "t", df.iloc[:600], df.iloc[600:].drop(columns="y"), cfg)
    prof = profile_task(spec)
    assert prof["time_indexed"] and prof["columns"]["when"] == "datetime"
    ranked = [e.id for e, _ in rank_entries(prof, "hourly demand", top_k=4)]
    assert set(ranked) == TIME, ranked
    plain = [e.id for e, _ in rank_entries(prof | {"time_indexed": False}, "", top_k=10)]
    assert "data.covariate_lags" not in plain and "strategy.time_series_validation" not in plain


@pytest.mark.realdata
def test_retrieval_on_real_text_and_time_tasks(shared_data, tmp_path):
    insults, _ = task_from_request("Predict Insult, judged by AUC.", shared_data / "detecting-insults-in-social-commentary/raw", tmp_path / "a")
    top = [e.id for e, _ in rank_entries(profile_task(insults), insults.description, top_k=5)]
    assert len(TEXT & set(top)) >= 3, top
    bikes, _ = task_from_request("Forecast the hourly rental count; RMSLE.", shared_data / "bike-sharing-demand/raw", tmp_path / "b")
    top = [e.id for e, _ in rank_entries(profile_task(bikes), bikes.description, top_k=4)]
    assert len(TIME & set(top)) >= 3, top


def _applies_to_text(entry) -> str:
    """An entry's conditions as docs/knowledge_base.md's table writes them."""
    from mcgs.knowledge_base import Applicability

    every_kind = set(Applicability().task_kinds)
    parts = []
    for name, value in entry.applies_to.model_dump().items():
        if name == "task_kinds":
            if set(value) != every_kind:
                parts.append("kinds=" + "/".join(value))
        elif name == "modalities":
            if value != ["table"]:
                parts.append("modalities=" + "/".join(value))
        elif value is not None:
            parts.append(f"{name}={value}")
    return ", ".join(parts) or "always"


def test_every_entry_is_documented_with_the_conditions_it_has():
    import re
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "knowledge_base.md").read_text()
    missing = [e.id for e in load_entries() if f"`{e.id}`" not in doc]
    assert not missing, f"add to docs/knowledge_base.md: {missing}"
    stale = {}
    for e in load_entries():
        row = re.search(r"^\| `" + re.escape(e.id) + r"` \| [^|]+\| [^|]+\| ([^|]+) \|", doc, re.M)
        if row is None or row.group(1).strip() != _applies_to_text(e):
            stale[e.id] = _applies_to_text(e)
    assert not stale, f"docs/knowledge_base.md: set the 'applies to' cell of these entries to {stale}"
