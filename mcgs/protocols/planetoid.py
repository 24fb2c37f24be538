"""Planetoid's citation graphs (Cora, CiteSeer) with their public split, as graph tasks.

The raw files are Planetoid's (Yang, Cohen & Salakhutdinov, *Revisiting Semi-Supervised
Learning with Graph Embeddings*, ICML 2016; the files GCN, GAT and PyTorch Geometric read):
``ind.<name>.{x,y,tx,ty,allx,ally,graph,test.index}``. They are Python-2 pickles, read with an
unpickler that builds only the numpy / scipy / list objects they hold (nothing else can run).

Nodes are ordered as GCN's loader orders them (Kipf & Welling, ICLR 2017, ``gcn/utils.py``
``load_data``): ``allx`` then ``tx``, the test rows moved to the positions ``test.index`` names
(CiteSeer's 15 test-range slots without a row are isolated nodes with zero features and no
label). The public split: the first 20 x classes nodes train (fold -1 of the training table:
they only ever train), the next 500 validate (fold 0), the 1000 ``test.index`` nodes are the
test table; every other node is in ``nodes.csv`` (features, no label). The task folder::

    task.yaml   metric accuracy, id_column node, graph {edges, nodes}, validation predefined
    train.csv   node, w0..w{d-1}, label, fold      (140 + 500 rows for Cora)
    test.csv    node, w0..w{d-1}                   (1000 rows)
    nodes.csv   node, w0..w{d-1}                   (the other nodes)
    edges.csv   source, target                     (each undirected edge once; no self-loops)
    sample_submission.csv, description.md

and ``answers.csv`` (node, label) beside it.
"""

from __future__ import annotations

import pickle
from pathlib import Path

from mcgs.protocols import Protocol, ProtocolError

#: Planetoid's one-hot label columns, in order, as LINQS names the classes (matched by class
#: counts: ../shared/data/<name>/SOURCE.md).
CLASSES = {
    "cora": ("Theory", "Reinforcement_Learning", "Genetic_Algorithms", "Neural_Networks", "Probabilistic_Methods", "Case_Based", "Rule_Learning"),
    "citeseer": ("AI", "ML", "IR", "DB", "Agents", "HCI"),
}
#: Validation nodes of the public split (after the training nodes).
N_VALIDATION = 500

_ALLOWED = {
    ("numpy", "ndarray"), ("numpy", "dtype"), ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("scipy.sparse.csr", "csr_matrix"), ("scipy.sparse._csr", "csr_matrix"), ("collections", "defaultdict"),
    ("__builtin__", "list"), ("builtins", "list"),
}


class _PlanetoidUnpickler(pickle.Unpickler):
    """Builds only the classes Planetoid's files hold; anything else is refused."""

    def find_class(self, module, name):
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(f"{module}.{name} is not a class Planetoid's files hold")
        if module.startswith("scipy.sparse"):
            import scipy.sparse

            return scipy.sparse.csr_matrix
        return super().find_class(module, name)


def _load(raw: Path, name: str, part: str):
    path = raw / f"ind.{name}.{part}"
    if not path.is_file():
        raise ProtocolError(f"{path} is missing; the raw folder needs Planetoid's ind.{name}.{{x,y,tx,ty,allx,ally,graph,test.index}} "
                            f"(in ../shared/data/{name}/raw/planetoid)")
    if part == "test.index":
        return [int(line) for line in path.read_text().split()]
    try:
        with open(path, "rb") as fh:
            return _PlanetoidUnpickler(fh, encoding="latin1").load()
    except (pickle.UnpicklingError, EOFError, ValueError) as exc:
        raise ProtocolError(f"{path} is not one of Planetoid's files: {exc}") from None


def _raw_folder(raw: Path, name: str) -> Path:
    """The folder holding the ind.* files: ``raw`` itself or its ``planetoid/``."""
    return raw / "planetoid" if (raw / "planetoid" / f"ind.{name}.x").is_file() else raw


def planetoid_arrays(raw: Path, name: str):
    """``(features, labels, train, val, test, edges)`` in GCN's node order: features a dense
    float32 array (nodes, d); labels an int array (nodes,) with -1 for nodes without one;
    train / val / test node index arrays of the public split; edges an int array (m, 2), each
    undirected edge once (smaller index first), self-loops left out.

    Raises:
        ProtocolError: a file is missing or is not Planetoid's.
    """
    import numpy as np
    import scipy.sparse as sp

    raw = _raw_folder(raw, name)
    x, y, tx, ty, allx, ally, graph = (_load(raw, name, p) for p in ("x", "y", "tx", "ty", "allx", "ally", "graph"))
    test_order = np.asarray(_load(raw, name, "test.index"))
    test_sorted = np.sort(test_order)
    lo, hi = int(test_sorted[0]), int(test_sorted[-1])
    if name == "citeseer":  # isolated test-range nodes without a row: zero features, no label
        full_tx = sp.lil_matrix((hi - lo + 1, tx.shape[1]))
        full_tx[test_sorted - lo, :] = tx
        tx = full_tx
        full_ty = np.zeros((hi - lo + 1, y.shape[1]))
        full_ty[test_sorted - lo, :] = ty
        ty = full_ty
    features = sp.vstack((allx, tx)).tolil()
    features[test_order, :] = features[test_sorted, :]
    onehot = np.vstack((ally, ty))
    onehot[test_order, :] = onehot[test_sorted, :]
    labels = np.where(onehot.sum(axis=1) > 0, onehot.argmax(axis=1), -1)
    n = features.shape[0]
    pairs = {(min(a, b), max(a, b)) for a, nbrs in graph.items() for b in nbrs if a != b and a < n and b < n}
    edges = np.asarray(sorted(pairs), dtype=np.int64).reshape(-1, 2)
    train = np.arange(y.shape[0])
    val = np.arange(y.shape[0], y.shape[0] + N_VALIDATION)
    return np.asarray(features.todense(), dtype=np.float32), labels, train, val, test_sorted, edges


def _prepare(name: str):
    def prepare(raw: Path, task_dir: Path, answers_path: Path) -> None:
        import numpy as np
        import pandas as pd

        features, labels, train, val, test, edges = planetoid_arrays(raw, name)
        classes = np.asarray(CLASSES[name])
        cols = [f"w{j}" for j in range(features.shape[1])]
        if np.all(features == features.round()):  # 0/1 word flags: written as integers
            features = features.astype(np.int64)

        def table(rows):
            frame = pd.DataFrame(features[rows], columns=cols)
            frame.insert(0, "node", rows)
            return frame

        labelled = np.r_[train, val]
        tr = table(labelled)
        tr["label"] = classes[labels[labelled]]
        tr["fold"] = np.r_[np.full(len(train), -1), np.zeros(len(val), dtype=int)]
        tr.to_csv(task_dir / "train.csv", index=False)
        table(test).to_csv(task_dir / "test.csv", index=False)
        others = np.setdiff1d(np.arange(len(features)), np.r_[labelled, test])
        table(others).to_csv(task_dir / "nodes.csv", index=False)
        pd.DataFrame(edges, columns=["source", "target"]).to_csv(task_dir / "edges.csv", index=False)
        pd.DataFrame({"node": test, "label": classes[0]}).to_csv(task_dir / "sample_submission.csv", index=False)
        pd.DataFrame({"node": test, "label": classes[labels[test]]}).to_csv(answers_path, index=False)
        (task_dir / "task.yaml").write_text(
            "metric: accuracy\ntarget: label\nid_column: node\n"
            "graph: {edges: edges.csv, nodes: nodes.csv}\n"
            "validation: {kind: predefined, fold_column: fold}\n")
        (task_dir / "description.md").write_text(
            f"# {name}: classify scientific papers by topic from a citation graph\n\n"
            f"Each node is a paper, described by {len(cols)} binary word-presence features (w0..w{len(cols) - 1}); an edge is a "
            f"citation (taken as undirected). Predict each test paper's topic, one of {len(classes)}: {', '.join(classes)}. "
            f"Planetoid's public split: {len(train)} labelled training papers (20 per topic), {len(val)} validation papers, "
            f"{len(test)} test papers; the other {len(others)} papers are in nodes.csv without labels. The graph is "
            f"transductive: every node's features and edges are visible. Metric: accuracy on the test papers.\n")

    return prepare


def grade_accuracy(submission, answers) -> float:
    """Accuracy of ``submission`` (node, label) on the answers' nodes.

    Raises:
        ProtocolError: a column or an answer node missing from the submission.
    """
    for col in ("node", "label"):
        if col not in submission.columns:
            raise ProtocolError(f"the submission has no column {col!r}; it needs node,label (as sample_submission.csv)")
    merged = answers.merge(submission[["node", "label"]], on="node", how="left", suffixes=("", "_sub"))
    missing = merged["label_sub"].isna().sum()
    if missing:
        raise ProtocolError(f"the submission lacks {missing} of the {len(answers)} test nodes (e.g. {merged.loc[merged['label_sub'].isna(), 'node'].head(3).tolist()})")
    return float((merged["label"].astype(str) == merged["label_sub"].astype(str)).mean())


PROTOCOLS = tuple(
    Protocol(name=name, description=f"{name}: node classification on Planetoid's public split (accuracy on 1000 test nodes)",
             prepare=_prepare(name), grade=grade_accuracy, metric="accuracy (higher is better)")
    for name in ("cora", "citeseer")
)
