"""Graph tasks: node classification (or regression) on a graph given as an edge list.

A graph task is a table task whose rows are the nodes of a graph: the training table holds the
labelled nodes, the test table the nodes to predict, both keyed by the task's id column (the
node id), and ``task.yaml``'s ``graph`` setting names the edge list and, optionally, a table of
the graph's other nodes (features only: unlabelled nodes that a transductive method propagates
through, as Planetoid's citation graphs have)::

    train.csv   node, f0, f1, ..., label, fold      the labelled nodes
    test.csv    node, f0, f1, ...                   the nodes to predict
    nodes.csv   node, f0, f1, ...                   the other nodes (optional)
    edges.csv   source, target                      one edge per line (node ids)
    task.yaml   metric: accuracy
                graph: {edges: edges.csv, nodes: nodes.csv}
                validation: {kind: predefined, fold_column: fold}   # a published split

Candidates read the files read-only through ``task.json``'s ``graph`` entry (solution contract
1.4). Every edge's endpoints must be nodes of the three tables and every node id must appear
once; both are checked before the search starts. The data profile's ``graph`` section gives the
counts, the degree distribution and the label homophily of the training nodes
(:func:`describe_graph`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = ["GraphSetting", "GraphSpec", "GraphError", "check_graph", "describe_graph", "read_graph_nodes"]


class GraphError(ValueError):
    """A graph task's edge list or node table is missing, malformed or names unknown nodes."""


class GraphSetting(BaseModel):
    """task.yaml's ``graph``: the edge list and the table of the graph's other nodes.

    Attributes:
        edges: CSV file in the task folder, one edge per line.
        source, target: Its columns holding the two node ids (default: its first two columns).
        nodes: CSV file of the nodes in neither the training nor the test table, with the test
            table's columns (features, no label); None when every node is in one of them.
        directed: Whether an edge's direction means something (citations: source cites target).
            Recipes treat the graph as undirected either way; the flag is for coders.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    edges: str = "edges.csv"
    source: str | None = None
    target: str | None = None
    nodes: str | None = None
    directed: bool = False


class GraphSpec(BaseModel):
    """A checked graph: :class:`GraphSetting` with its columns resolved and its size.

    Attributes:
        edges, nodes: File names inside the task folder (``nodes`` None when absent).
        source, target: The edge list's node-id columns.
        directed: As set.
        n_nodes: Nodes of the training, test and other-node tables together.
        n_edges: Lines of the edge list.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    edges: str
    nodes: str | None
    source: str
    target: str
    directed: bool
    n_nodes: int
    n_edges: int

    def files(self) -> list[str]:
        """The graph's files, for the task's ``extra_files``."""
        return [self.edges] + ([self.nodes] if self.nodes else [])


def _read_csv(path: Path, what: str, where: str):
    import pandas as pd

    if not path.is_file():
        raise GraphError(f"{where}: graph.{what} {path.name!r} is not a file in {path.parent}; name the {what} file relative to the task folder")
    try:
        return pd.read_csv(path, dtype=str, keep_default_na=False)
    except (ValueError, OSError, UnicodeDecodeError) as exc:
        raise GraphError(f"{where}: cannot read graph.{what} {path}: {exc}") from None


def read_graph_nodes(data_dir: Path, setting: GraphSetting | GraphSpec, id_column: str, train, test, where: str = "task.yaml"):
    """The node ids of the three tables, as text, in table order: ``(train_ids, test_ids,
    other_ids, other_table)`` (``other_table`` the other-node table, or None).

    Raises:
        GraphError: a table lacks the id column, or the other-node table lacks a test column.
    """
    for frame, name in ((train, "training"), (test, "test")):
        if id_column not in frame.columns:
            raise GraphError(f"{where}: a graph task's {name} table needs the node-id column {id_column!r} (id_column)")
    other = None
    if setting.nodes:
        other = _read_csv(data_dir / setting.nodes, "nodes", where)
        missing = [c for c in test.columns if c not in other.columns]
        if missing:
            raise GraphError(f"{where}: graph.nodes {setting.nodes!r} lacks the test table's column(s) {missing[:5]}; "
                             f"it holds the other nodes with the same columns as the test table (no label)")
    ids = [frame[id_column].astype(str).tolist() for frame in (train, test)]
    return ids[0], ids[1], (other[id_column].astype(str).tolist() if other is not None else []), other


def check_graph(data_dir: Path, setting: GraphSetting, id_column: str | None, train, test, where: str = "task.yaml") -> GraphSpec:
    """Check a graph task's files against its tables and return its :class:`GraphSpec`.

    Node ids are compared as text. Reads the whole edge list (a few MB for graphs of 10^5
    edges).

    Raises:
        GraphError: no id column; a node id in two tables or twice in one; an edge list without
            two id columns, with an empty id, or naming a node of no table (the first few are
            named with their line numbers).
    """
    if id_column is None:
        raise GraphError(f"{where}: a graph task needs id_column, the column holding each node's id in the training and test tables")
    train_ids, test_ids, other_ids, _ = read_graph_nodes(data_dir, setting, id_column, train, test, where)
    seen: dict[str, str] = {}
    for ids, table in ((train_ids, "training table"), (test_ids, "test table"), (other_ids, f"graph.nodes {setting.nodes}")):
        for node in ids:
            if node in seen:
                again = "twice in the " + table if seen[node] == table else f"in the {seen[node]} and the {table}"
                raise GraphError(f"{where}: node {node!r} is {again}; each node id must appear once across the training, test and node tables")
            seen[node] = table
    edges = _read_csv(data_dir / setting.edges, "edges", where)
    if edges.shape[1] < 2:
        raise GraphError(f"{where}: graph.edges {setting.edges!r} has {edges.shape[1]} column(s); it needs two, the ids of each edge's nodes")
    source = setting.source or str(edges.columns[0])
    target = setting.target or str(edges.columns[1])
    for key, col in (("source", source), ("target", target)):
        if col not in edges.columns:
            raise GraphError(f"{where}: graph.{key} {col!r} is not a column of {setting.edges}; columns: {list(edges.columns)[:10]}")
    known = set(seen)
    unknown = []
    for col in (source, target):
        bad = ~edges[col].isin(known)
        unknown += [(int(i) + 2, node) for i, node in zip(bad.to_numpy().nonzero()[0][:5], edges[col][bad].head(5))]
    if unknown:
        shown = ", ".join(f"line {line}: {node!r}" for line, node in sorted(unknown)[:5])
        raise GraphError(f"{where}: graph.edges {setting.edges!r} names nodes that are in no table ({shown}); every edge must join "
                         f"two nodes of the training, test or graph.nodes table (add the missing nodes to graph.nodes, or drop the edges)")
    return GraphSpec(edges=setting.edges, nodes=setting.nodes, source=source, target=target, directed=setting.directed,
                     n_nodes=len(seen), n_edges=len(edges))


def describe_graph(data_dir: Path, graph: GraphSpec, id_column: str, train, test, target: str | None) -> dict[str, Any]:
    """The data profile's ``graph`` section.

    Returns:
        ``{"nodes", "edges" (distinct undirected, self-loops left out), "self_loops",
        "degree": {"mean", "median", "max", "isolated"}, "labelled_nodes", "label_homophily",
        "feature_density"}``; ``feature_density`` is the share of the training and test
        nodes' numeric feature cells that are not zero (bag-of-words: about 0.01; None
        without numeric features), what a sparse first layer's work grows with;
        ``label_homophily`` is the share of edges between two training nodes that join nodes of
        one label (the edge homophily of Zhu et al., *Beyond Homophily in Graph Neural
        Networks*, NeurIPS 2020; None without such edges or for a numeric target): high values
        (citation graphs: about 0.8) say that neighbours' features and labels help.
    """
    import numpy as np
    import pandas as pd

    train_ids, test_ids, other_ids, _ = read_graph_nodes(data_dir, graph, id_column, train, test)
    ids = train_ids + test_ids + other_ids
    index = {node: i for i, node in enumerate(ids)}
    edges = pd.read_csv(data_dir / graph.edges, dtype=str, keep_default_na=False, usecols=[graph.source, graph.target])
    a = edges[graph.source].map(index).to_numpy(dtype=np.int64)
    b = edges[graph.target].map(index).to_numpy(dtype=np.int64)
    loops = a == b
    lo, hi = np.minimum(a, b)[~loops], np.maximum(a, b)[~loops]
    pairs = np.unique(lo * len(ids) + hi)
    u, v = pairs // len(ids), pairs % len(ids)
    degree = np.bincount(np.concatenate([u, v]), minlength=len(ids))
    homophily = None
    if target is not None and target in train.columns and not pd.api.types.is_float_dtype(train[target]):
        labels = np.full(len(ids), None, dtype=object)
        labels[: len(train_ids)] = train[target].astype(str).to_numpy()
        both = (u < len(train_ids)) & (v < len(train_ids))
        if both.any():
            homophily = round(float(np.mean(labels[u[both]] == labels[v[both]])), 4)
    features = [c for c in test.columns if c != id_column and c in train.columns and pd.api.types.is_numeric_dtype(test[c])]
    cells = (len(train) + len(test)) * len(features)
    nonzero = sum(int(np.count_nonzero(frame[features].to_numpy(dtype=np.float64, na_value=0.0))) for frame in (train, test)) if features else 0
    return {
        "nodes": len(ids),
        "edges": int(len(pairs)),
        "self_loops": int(loops.sum()),
        "directed": graph.directed,
        "degree": {"mean": round(float(degree.mean()), 3), "median": float(np.median(degree)), "max": int(degree.max(initial=0)),
                   "isolated": int((degree == 0).sum())},
        "labelled_nodes": len(train_ids),
        "label_homophily": homophily,
        "feature_density": round(nonzero / cells, 5) if cells else None,
    }
