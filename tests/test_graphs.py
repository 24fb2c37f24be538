"""Graph tasks (issue 35): node classification on a graph given as an edge list, with a
published split (validation kind ``predefined``); loaded, checked, profiled and given to
candidates through the contract (small generated graphs), the graph recipes (SGC, GCN, APPNP)
and the search on them, and Planetoid's Cora / CiteSeer prepared with their public split (real
data)."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mcgs.contract import build_task_json, prepare_run_input
from mcgs.profile import profile_task
from mcgs.task import TaskError, load_task


def graph_task(folder: Path, n: int = 300, classes: int = 3, n_feat: int = 20, seed: int = 0, per_class: int = 10,
               n_val: int = 60, n_test: int = 100) -> tuple[Path, pd.DataFrame]:
    """A stochastic block model: nodes of one class link with probability 0.05, of two classes
    0.005 (label homophily about 0.85); weakly informative 0/1 features. Planetoid-like split:
    ``per_class`` training nodes per class (fold -1), ``n_val`` validated (fold 0), ``n_test``
    test nodes, the rest in nodes.csv. Returns the task folder and the test answers."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    y = rng.integers(0, classes, n)
    centers = rng.normal(0, 1, (classes, n_feat))
    X = (rng.random((n, n_feat)) < 1 / (1 + np.exp(-0.6 * centers[y]))).astype(int)
    same = y[:, None] == y[None, :]
    link = np.triu(rng.random((n, n)) < np.where(same, 0.05, 0.005), k=1)
    src, dst = np.nonzero(link)
    ids = [f"n{i}" for i in range(n)]
    order = rng.permutation(n)
    train = [i for c in range(classes) for i in [j for j in order if y[j] == c][:per_class]]
    rest = [i for i in order if i not in set(train)]
    val, test, other = rest[:n_val], rest[n_val:n_val + n_test], rest[n_val + n_test:]
    cols = [f"w{j}" for j in range(n_feat)]

    def table(rows):
        frame = pd.DataFrame(X[rows], columns=cols)
        frame.insert(0, "node", [ids[i] for i in rows])
        return frame

    tr = table(train + val)
    tr["label"] = [f"c{y[i]}" for i in train + val]
    tr["fold"] = [-1] * len(train) + [0] * len(val)
    tr.to_csv(folder / "train.csv", index=False)
    table(test).to_csv(folder / "test.csv", index=False)
    table(other).to_csv(folder / "nodes.csv", index=False)
    pd.DataFrame({"source": [ids[i] for i in src], "target": [ids[j] for j in dst]}).to_csv(folder / "edges.csv", index=False)
    pd.DataFrame({"node": [ids[i] for i in test], "label": "c0"}).to_csv(folder / "sample_submission.csv", index=False)
    (folder / "task.yaml").write_text("metric: accuracy\nid_column: node\ngraph: {edges: edges.csv, nodes: nodes.csv}\n"
                                      "validation: {kind: predefined, fold_column: fold}\n")
    return folder, pd.DataFrame({"node": [ids[i] for i in test], "label": [f"c{y[i]}" for i in test]})


def _accuracy(spec, test_pred: np.ndarray, answers: pd.DataFrame) -> float:
    labels = np.asarray([str(c) for c in spec.class_labels])
    return float(np.mean(labels[test_pred.argmax(axis=1)] == answers["label"].to_numpy()))


# --- loading, checking, profiling ---------------------------------------------------------------


def test_a_graph_task_loads_with_its_split_and_reaches_candidates_through_the_contract(tmp_path):
    folder, _ = graph_task(tmp_path / "t")
    spec = load_task(folder)
    assert (spec.graph.n_nodes, spec.graph.source, spec.graph.target) == (300, "source", "target")
    assert spec.graph.n_edges == len(pd.read_csv(folder / "edges.csv"))
    assert set(spec.extra_files) >= {"edges.csv", "nodes.csv"}
    assert spec.validation.kind == "predefined" and (spec.n_train, spec.n_test) == (90, 100)
    tj = build_task_json(spec)
    assert tj.contract_version == "1.5"
    assert tj.graph.model_dump() == {"edges": "input/edges.csv", "nodes": "input/nodes.csv", "id_column": "node",
                                     "source": "source", "target": "target", "directed": False}
    inp = prepare_run_input(spec, tmp_path / "run")
    folds = pd.read_csv(inp / "folds.csv")
    train = pd.read_csv(folder / "train.csv")
    assert folds["fold"].tolist() == train["fold"].tolist()  # the published split, row for row
    assert (inp / "edges.csv").is_file() and (inp / "nodes.csv").is_file()
    prof = profile_task(spec)
    assert prof["modality"] == "graph" and prof["train_only_columns"] == []  # the split is not a feature, nor a leak
    g = prof["graph"]
    assert g["nodes"] == 300 and g["labelled_nodes"] == 90 and g["degree"]["max"] >= g["degree"]["median"] > 0
    assert 0.7 < g["label_homophily"] < 1.0  # 0.05 within a class against 0.005 across: mostly same-label edges


@pytest.mark.parametrize("case, message", [
    ("unknown_node", r"names nodes that are in no table \(line \d+: 'ghost'"),
    ("duplicate", r"node 'n\d+' is in the training table and the graph.nodes nodes.csv"),
    ("no_fold_column", r"validation.kind predefined needs validation.fold_column naming a column of train.csv"),
    ("bad_folds", r"must hold integers >= -1 .* e.g. \['x'"),
    ("no_validated_fold", r"has no validated row \(fold 0 or above\)"),
    ("fold_in_test", r"'fold' is also a column of the test table"),
    ("nodes_lack_columns", r"graph.nodes 'nodes.csv' lacks the test table's column\(s\) \['w3'\]"),
    ("no_edges_file", r"graph.edges 'links.csv' is not a file"),
    ("one_column_edges", r"has 1 column\(s\); it needs two"),
])
def test_bad_graph_inputs_are_named_before_the_search(tmp_path, case, message):
    folder, _ = graph_task(tmp_path / "t")
    yaml = folder / "task.yaml"
    train, test = pd.read_csv(folder / "train.csv"), pd.read_csv(folder / "test.csv")
    if case == "unknown_node":
        e = pd.read_csv(folder / "edges.csv")
        e.loc[3, "target"] = "ghost"
        e.to_csv(folder / "edges.csv", index=False)
    elif case == "duplicate":
        other = pd.read_csv(folder / "nodes.csv")
        other.loc[0, "node"] = train.loc[0, "node"]
        other.to_csv(folder / "nodes.csv", index=False)
    elif case == "no_fold_column":
        yaml.write_text(yaml.read_text().replace("fold_column: fold", "fold_column: split"))
    elif case == "bad_folds":
        train["fold"] = train["fold"].astype(str)
        train.loc[5, "fold"] = "x"
        train.to_csv(folder / "train.csv", index=False)
    elif case == "no_validated_fold":
        train["fold"] = -1
        train.to_csv(folder / "train.csv", index=False)
    elif case == "fold_in_test":
        test["fold"] = 0
        test.to_csv(folder / "test.csv", index=False)
        pd.read_csv(folder / "nodes.csv").assign(fold=0).to_csv(folder / "nodes.csv", index=False)
    elif case == "nodes_lack_columns":
        pd.read_csv(folder / "nodes.csv").drop(columns=["w3"]).to_csv(folder / "nodes.csv", index=False)
    elif case == "no_edges_file":
        yaml.write_text(yaml.read_text().replace("edges: edges.csv", "edges: links.csv"))
    elif case == "one_column_edges":
        pd.read_csv(folder / "edges.csv")[["source"]].to_csv(folder / "edges.csv", index=False)
    with pytest.raises(TaskError, match=message):
        load_task(folder)


# --- recipes and the search ----------------------------------------------------------------------


def _run(spec, model: str, folder: Path, params: dict | None = None):
    from recipe_runs import run_recipe

    from mcgs.coders.recipe_config import default_config

    config = default_config(model, profile_task(spec))
    config["params"].update(params or {})
    return run_recipe(spec, config, folder, env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"})


def test_sgc_reads_the_neighbourhood_through_the_propagated_features(tmp_path):
    folder, answers = graph_task(tmp_path / "t")
    spec = load_task(folder)
    plain, _, _ = _run(spec, "model.logistic_regression", tmp_path / "lr")  # features and their propagation, scaled
    ev, out, ids = _run(spec, "model.sgc", tmp_path / "sgc")
    assert "graph: 300 nodes" in out and "60 propagated features from 20 columns" in out
    assert {"data.graph_propagation", "model.sgc"} <= set(ids)
    assert ev.score > 0.85 and _accuracy(spec, ev.test_pred, answers) > 0.85
    assert ev.score > plain.score  # unscaled propagated features beat the scaled table model


@pytest.mark.parametrize("model", ["model.gcn", "model.appnp", "model.grand"])
def test_graph_networks_train_on_the_whole_graph(tmp_path, model):
    pytest.importorskip("torch")
    folder, answers = graph_task(tmp_path / "t")
    spec = load_task(folder)
    ev, out, ids = _run(spec, model, tmp_path / "w", params={"epochs": 100})
    assert "100 of 100 epochs" in out and model in ids
    assert ev.score > 0.8 and _accuracy(spec, ev.test_pred, answers) > 0.75  # chance 0.33, the features alone about 0.58


def test_a_graph_network_short_of_time_drops_seeds_rather_than_epochs(tmp_path):
    """Three seeds asked, time for about one: the fold averages the networks that had their full
    epochs instead of three cut short (an aggregate node once scored below its single-seed parent
    that way)."""
    pytest.importorskip("torch")
    from recipe_runs import run_recipe

    from mcgs.coders.recipe_config import default_config

    folder, _ = graph_task(tmp_path / "t")
    spec = load_task(folder)
    config = default_config("model.gcn", profile_task(spec))
    config["params"]["epochs"] = 5000
    config["n_seeds"] = 3
    ev, out, _ = run_recipe(spec, config, tmp_path / "w", env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1", "MCGS_TIME_LIMIT_S": "2"})
    assert "fold 0: 1 of 3 seeds (no time for another full-length network)" in out
    assert out.count("epochs in") == 1 and ev.score is not None


@pytest.mark.slow
def test_the_search_on_a_graph_task_drafts_graph_models_hands_in_a_submission_and_exports_them(tmp_path):
    pytest.importorskip("torch")
    from mcgs.export import export_node
    from mcgs.search import create_search
    from mcgs.settings import SearchSettings

    folder, answers = graph_task(tmp_path / "t")
    settings = SearchSettings(time_budget_s=600, max_nodes=5, seed=0, cpu_threads=1)  # plans screened first
    search = create_search(load_task(folder), tmp_path / "run", settings=settings)
    search.run()
    drafts = {n.config.get("model"): n for n in search.nodes() if n.operator.value == "draft"}
    assert {"model.sgc", "model.appnp"} <= set(drafts), set(drafts)
    assert all(n.is_valid for n in drafts.values()), [(n.seq, n.error) for n in drafts.values() if not n.is_valid]
    sub = pd.read_csv(tmp_path / "run" / "best" / "submission.csv")
    assert sub["node"].tolist() == answers["node"].tolist()
    assert (sub["label"] == answers["label"]).mean() > 0.85
    # export: the node's saved fold models predict the graph's nodes as the run did, and new nodes joining it
    import subprocess
    import sys

    for node in (drafts["model.appnp"], drafts["model.sgc"]):  # a graph network; a table model on propagated features
        out = export_node(search, tmp_path / f"model{node.seq}", node_seq=node.seq).path
        res = subprocess.run([sys.executable, "predict.py", "input/test.csv", str(tmp_path / "p.csv")], cwd=out, capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
        own = pd.read_csv(search.node_dir(node) / "submission" / "submission.csv")
        assert pd.read_csv(tmp_path / "p.csv")["label"].tolist() == own["label"].tolist()
        # the test nodes again under new ids, linked to the neighbours of the nodes they copy
        test = pd.read_csv(folder / "test.csv")
        renamed = test.assign(node="new_" + test["node"])
        edges = pd.read_csv(folder / "edges.csv")
        copy = edges[edges["source"].isin(test["node"]) | edges["target"].isin(test["node"])].copy()
        for c in ("source", "target"):
            copy[c] = copy[c].where(~copy[c].isin(test["node"]), "new_" + copy[c])
        renamed.to_csv(tmp_path / "new.csv", index=False)
        copy.to_csv(tmp_path / "new_edges.csv", index=False)
        res = subprocess.run([sys.executable, "predict.py", str(tmp_path / "new.csv"), str(tmp_path / "q.csv"), "--edges", str(tmp_path / "new_edges.csv")],
                             cwd=out, capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
        new = pd.read_csv(tmp_path / "q.csv")
        assert new["node"].tolist() == renamed["node"].tolist()
        assert (new["label"] == answers["label"]).mean() > 0.8, node.config["model"]  # the features alone: about 0.58
        assert (new["label"] == own["label"]).mean() > 0.85
    card = (tmp_path / f"model{drafts['model.sgc'].seq}" / "MODEL_CARD.md").read_text()
    assert "--edges new_edges.csv" in card
    res = subprocess.run([sys.executable, "predict.py", str(tmp_path / "new.csv"), str(tmp_path / "q.csv"), "--edges", "nowhere.csv"],
                         cwd=out, capture_output=True, text=True)
    assert res.returncode != 0 and "--edges nowhere.csv: no such file" in res.stderr


# --- Planetoid's Cora and CiteSeer, real data ------------------------------------------------------


@pytest.mark.realdata
@pytest.mark.parametrize("name, n_nodes, n_edges, n_features, n_other", [("cora", 2708, 5278, 1433, 1068), ("citeseer", 3327, 4552, 3703, 1707)])
def test_planetoid_is_prepared_with_its_public_split(shared_data, tmp_path, name, n_nodes, n_edges, n_features, n_other):
    from mcgs.protocols import grade_protocol, prepare_protocol

    task_dir = prepare_protocol(name, shared_data / name / "raw", tmp_path)
    spec = load_task(task_dir)
    train = pd.read_csv(task_dir / "train.csv")
    assert (spec.graph.n_nodes, spec.graph.n_edges, spec.n_test) == (n_nodes, n_edges, 1000)
    assert len(pd.read_csv(task_dir / "nodes.csv")) == n_other and train.shape[1] == n_features + 3
    assert (train["fold"] == -1).sum() == 20 * len(spec.class_labels) and (train["fold"] == 0).sum() == 500
    assert train.loc[train["fold"] == -1, "label"].value_counts().eq(20).all()  # 20 per class
    answers = pd.read_csv(tmp_path / "answers.csv")
    assert "label" not in pd.read_csv(task_dir / "test.csv").columns and len(answers) == 1000
    assert grade_protocol(name, tmp_path / "answers.csv", tmp_path / "answers.csv") == 1.0
    wrong = answers.assign(label=answers["label"].iloc[::-1].to_numpy())
    wrong.to_csv(tmp_path / "wrong.csv", index=False)
    assert grade_protocol(name, tmp_path / "wrong.csv", tmp_path / "answers.csv") < 0.5


def test_a_planetoid_file_that_would_run_code_is_refused(tmp_path):
    from mcgs.protocols import ProtocolError
    from mcgs.protocols.planetoid import planetoid_arrays

    class Evil:
        def __reduce__(self):
            return (print, ("ran",))

    for part in ("x", "y", "tx", "ty", "allx", "ally", "graph"):
        (tmp_path / f"ind.cora.{part}").write_bytes(pickle.dumps(Evil()))
    (tmp_path / "ind.cora.test.index").write_text("1\n")
    with pytest.raises(ProtocolError, match="is not one of Planetoid's files: builtins.print is not a class"):
        planetoid_arrays(tmp_path, "cora")


def test_grading_names_missing_test_nodes(tmp_path):
    from mcgs.protocols import ProtocolError, grade_protocol

    pd.DataFrame({"node": [1, 2, 3], "label": ["a", "b", "c"]}).to_csv(tmp_path / "answers.csv", index=False)
    pd.DataFrame({"node": [1, 2], "label": ["a", "b"]}).to_csv(tmp_path / "sub.csv", index=False)
    with pytest.raises(ProtocolError, match="lacks 1 of the 3 test nodes"):
        grade_protocol("cora", tmp_path / "sub.csv", tmp_path / "answers.csv")
    with pytest.raises(ProtocolError, match="unknown protocol 'pubmed'; registered: citeseer, cora"):
        grade_protocol("pubmed", tmp_path / "sub.csv", tmp_path / "answers.csv")


def test_a_request_on_a_folder_with_an_edge_list_becomes_a_graph_task(tmp_path):
    from mcgs.request import task_from_request

    folder, _ = graph_task(tmp_path / "data")
    (folder / "task.yaml").unlink()  # the request alone says what to do
    spec, parsed = task_from_request("Classify the papers by topic from the citation graph; accuracy.", folder, tmp_path / "task")
    assert spec.graph is not None and spec.graph.nodes == "nodes.csv" and spec.graph.n_nodes == 300
    assert spec.validation.kind == "predefined" and spec.validation.fold_column == "fold"
    assert spec.target_columns == ["label"] and spec.metric == "accuracy" and spec.id_column == "node"
    assert any("graph task" in n for n in parsed.notes) and profile_task(spec)["modality"] == "graph"
    # the words, on the tables and the graph alone (no sample submission, no metric named)
    (folder / "sample_submission.csv").unlink()
    spec, parsed = task_from_request("classify the papers from the citation graph", folder, tmp_path / "task2")
    assert spec.metric == "accuracy" and spec.id_column == "node" and spec.graph is not None
    assert any("node-classification default" in n for n in parsed.notes)


def test_a_subsample_of_a_graph_task_keeps_every_node_of_the_graph(tmp_path):
    """Screening and the low fidelities run on a row subsample; the rows left out stay in the graph
    as unlabelled nodes, so the subsample loads, every edge joins known nodes and no label of a
    row left out is written."""
    from mcgs.screening import build_screen_task

    folder, _ = graph_task(tmp_path / "t", n=900, n_val=400, n_test=400)  # 430 training rows, 400 test rows
    spec = load_task(folder)
    sub = build_screen_task(spec, tmp_path / "sub", max_rows=200, seed=0)
    assert (sub.n_train, sub.n_test) == (200, 300)
    nodes = pd.read_csv(sub.data_dir / sub.graph.nodes)
    assert "label" not in nodes.columns and len(nodes) == 900 - 200 - 300
    ids = set(pd.read_csv(sub.data_dir / sub.train_file)["node"]) | set(pd.read_csv(sub.data_dir / sub.test_file)["node"]) | set(nodes["node"])
    edges = pd.read_csv(sub.data_dir / sub.graph.edges)
    assert len(ids) == 900 and set(edges["source"]) | set(edges["target"]) <= ids
    from recipe_runs import run_recipe

    from mcgs.coders.recipe_config import default_config

    ev, _, _ = run_recipe(sub, default_config("model.sgc", profile_task(spec)), tmp_path / "ws", env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"})
    assert ev.score > 0.8


def test_the_llm_prompt_of_a_wide_graph_task_keeps_its_graph_within_the_profile(tmp_path):
    """A graph task of 1 500 feature columns: the prompt's profile shows 40 columns and counts the
    rest, so the graph section (homophily) and the graph paragraph reach the model."""
    from mcgs.coders import CoderRequest
    from mcgs.coders.anthropic import AnthropicCoder, compact_profile
    from mcgs.coders.recipe import RecipeCoder
    from mcgs.llm import AnthropicClient
    from mcgs.node import Operator
    from mcgs.settings import SearchSettings

    folder, _ = graph_task(tmp_path / "t", n_feat=1500)
    spec = load_task(folder)
    prof = profile_task(spec)
    small = compact_profile(prof)
    assert len(small["columns"]) == 41 and small["columns"]["..."] == "1460 more columns: 1460 numeric"
    settings = SearchSettings(coder="anthropic")
    coder = AnthropicCoder(settings, fallback=RecipeCoder(), client=AnthropicClient(settings.llm, api_key="test-key"))
    text = coder.system_prompt(CoderRequest(operator=Operator.DRAFT, task=spec, profile=prof))
    assert "label_homophily" in text and "# The graph of this task" in text and "input/edges.csv" in text
