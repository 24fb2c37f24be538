"""Storage round-trip: every node, edge and score persisted; the graph rebuilt from storage alone."""

from __future__ import annotations

import sqlite3

import pytest

from mcgs.graph import best_node, build_graph, children, root_of
from mcgs.node import EdgeKind, NodeState, Operator
from mcgs.storage import SCHEMA_VERSION, Storage, StorageError


def new_run(st: Storage, name="r"):
    return st.create_run(name=name, task_json="{}", settings={"seed": 1}, seed=1, data_fingerprint="abc", package_versions={"numpy": "2"}, isolation="process-session")


def test_round_trip_rebuilds_the_graph(tmp_path):
    url = f"sqlite:///{tmp_path / 'mcgs.db'}"
    st = Storage(url)
    run = new_run(st)
    root = st.get_nodes(run.id)[0]
    a = st.add_node(run.id, parent_id=root.id, operator=Operator.DRAFT, plan="lgbm", code="print(1)", config={"model": "m"}, knowledge_ids=["model.lightgbm"])
    b = st.add_node(run.id, parent_id=root.id, operator=Operator.DRAFT, plan="cat", code="print(2)")
    st.finish_node(a.id, state=NodeState.VALID, score=0.8, reward=2.0, stdout_tail="ok", runtime_s=3.5)
    st.finish_node(b.id, state=NodeState.BUGGY, reward=-1.0, error="KeyError: 'x'")
    c = st.add_node(run.id, parent_id=b.id, operator=Operator.DEBUG, plan="fix", code="print(3)", extra_edges=[(a.id, EdgeKind.REFERENCES, {"why": "good sibling"})])
    st.finish_node(c.id, state=NodeState.VALID, score=0.85, reward=2.0)
    st.update_run(run.id, elapsed_s=12.5, status="stopped", best_node_id=c.id)
    st.close()

    st2 = Storage(url)
    run2 = st2.get_run("r")
    assert (run2.elapsed_s, run2.status, run2.best_node_id, run2.data_fingerprint) == (12.5, "stopped", c.id, "abc")
    assert run2.package_versions == {"numpy": "2"}
    nodes = st2.get_nodes(run2.id)
    assert [n.seq for n in nodes] == [0, 1, 2, 3]
    assert nodes[1].config == {"model": "m"} and nodes[1].knowledge_ids == ("model.lightgbm",)
    assert nodes[1].stdout_tail == "ok" and nodes[1].runtime_s == 3.5
    assert nodes[2].error == "KeyError: 'x'"
    g = build_graph(nodes, st2.get_edges(run2.id))
    r = root_of(g)
    assert children(g, r) == [a.id, b.id]
    assert children(g, b.id) == [c.id]
    assert children(g, a.id, EdgeKind.REFERENCES) == [c.id]
    assert nodes[3].depth == 2
    assert best_node(g, higher_is_better=True).id == c.id
    assert best_node(g, higher_is_better=False).id == a.id
    assert st2.schema_version == SCHEMA_VERSION


def test_finished_nodes_are_immutable(tmp_path):
    st = Storage(f"sqlite:///{tmp_path / 'mcgs.db'}")
    run = new_run(st)
    n = st.add_node(run.id, parent_id=st.get_nodes(run.id)[0].id, operator=Operator.DRAFT, plan="", code="")
    st.finish_node(n.id, state=NodeState.VALID, score=1.0, reward=2.0)
    with pytest.raises(StorageError, match="already finished"):
        st.finish_node(n.id, state=NodeState.BUGGY)


def test_interrupt_unfinished_marks_running_nodes(tmp_path):
    st = Storage(f"sqlite:///{tmp_path / 'mcgs.db'}")
    run = new_run(st)
    root = st.get_nodes(run.id)[0]
    n = st.add_node(run.id, parent_id=root.id, operator=Operator.DRAFT, plan="", code="")
    st.set_running(n.id, "nodes/00001")
    assert st.interrupt_unfinished(run.id) == [n.id]
    assert st.get_node(n.id).state is NodeState.INTERRUPTED
    assert st.interrupt_unfinished(run.id) == []


def test_schema_version_mismatch_is_refused(tmp_path):
    path = tmp_path / "mcgs.db"
    Storage(f"sqlite:///{path}").close()
    con = sqlite3.connect(path)
    con.execute("update schema_info set value = '999' where key = 'schema_version'")
    con.commit()
    con.close()
    with pytest.raises(StorageError, match="schema version 999"):
        Storage(f"sqlite:///{path}")


def test_a_version_2_database_gains_the_cost_ledger_when_opened(tmp_path):
    """Runs written before the cost ledger and the migrations (schema 2) open and resume: the
    database is stamped at the first revision and migrated."""
    from mcgs.storage import LLMCall

    path = tmp_path / "mcgs.db"
    st = Storage(f"sqlite:///{path}")
    run = new_run(st)
    st.close()
    con = sqlite3.connect(path)
    con.execute("drop table llm_calls")  # as written by mcgs before the ledger and the migrations
    con.execute("drop table alembic_version")
    con.execute("update schema_info set value = '2' where key = 'schema_version'")
    con.commit()
    con.close()
    st = Storage(f"sqlite:///{path}")
    assert st.schema_version == SCHEMA_VERSION == 3
    st.add_llm_call(run.id, LLMCall(operator="draft", model="m", output_tokens=10, cost_usd=0.5))
    assert st.llm_spend_usd(run.id) == 0.5 and st.llm_calls(run.id)[0].output_tokens == 10
    con = sqlite3.connect(path)
    assert con.execute("select version_num from alembic_version").fetchone()[0] == "0002"
    con.close()


def test_a_database_from_a_newer_mcgs_is_refused(tmp_path):
    path = tmp_path / "mcgs.db"
    Storage(f"sqlite:///{path}").close()
    con = sqlite3.connect(path)
    con.execute("update alembic_version set version_num = '0099'")
    con.commit()
    con.close()
    with pytest.raises(StorageError, match="newer mcgs"):
        Storage(f"sqlite:///{path}")


def test_migrations_build_the_same_schema_as_the_models(tmp_path):
    """A database built by the migrations has every table and column the models declare."""
    from sqlalchemy import create_engine, inspect

    from mcgs.storage.models import Base

    Storage(f"sqlite:///{tmp_path / 'mcgs.db'}").close()
    insp = inspect(create_engine(f"sqlite:///{tmp_path / 'mcgs.db'}"))
    for table in Base.metadata.sorted_tables:
        assert {c["name"] for c in insp.get_columns(table.name)} == {c.name for c in table.columns}, table.name


def test_unknown_run_and_foreign_parent(tmp_path):
    st = Storage(f"sqlite:///{tmp_path / 'mcgs.db'}")
    r1 = new_run(st, "one")
    r2 = new_run(st, "two")
    with pytest.raises(StorageError, match="no run named 'three'"):
        st.get_run("three")
    with pytest.raises(StorageError, match="is not in run"):
        st.add_node(r2.id, parent_id=st.get_nodes(r1.id)[0].id, operator=Operator.DRAFT, plan="", code="")


def test_sqlite_uses_wal(tmp_path):
    path = tmp_path / "mcgs.db"
    Storage(f"sqlite:///{path}")
    assert sqlite3.connect(path).execute("pragma journal_mode").fetchone()[0] == "wal"
