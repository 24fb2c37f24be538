"""Storage round-trip: every node, edge and score persisted; the graph rebuilt from storage alone."""

from __future__ import annotations

import sqlite3

import pytest

from mcgs.graph import best_node, build_graph, children, root_of
from mcgs.node import EdgeKind, NodeRole, NodeState, Operator
from mcgs.storage import SCHEMA_VERSION, ClaimLost, Storage, StorageError


def new_run(st: Storage, name="r"):
    return st.create_run(name=name, task_json="{}", settings={"seed": 1}, seed=1, data_fingerprint="abc", package_versions={"numpy": "2"}, isolation="process-session")


def test_round_trip_rebuilds_the_graph(storage_url):
    url = storage_url
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


def test_finished_nodes_are_immutable(storage_url):
    st = Storage(storage_url)
    run = new_run(st)
    n = st.add_node(run.id, parent_id=st.get_nodes(run.id)[0].id, operator=Operator.DRAFT, plan="", code="")
    st.finish_node(n.id, state=NodeState.VALID, score=1.0, reward=2.0)
    with pytest.raises(StorageError, match="already finished"):
        st.finish_node(n.id, state=NodeState.BUGGY)


def test_interrupt_unfinished_marks_running_nodes(storage_url):
    st = Storage(storage_url)
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


#: The node columns each schema version added, newest last (what an older mcgs did not write).
RESOURCES = ("peak_rss_mb", "gpu", "peak_gpu_mb")
COLUMNS_SINCE = {4: ("role", "fidelity", *RESOURCES), 5: ("fidelity", *RESOURCES), 6: RESOURCES}
#: The alembic revision a database of each schema version is stamped with.
REVISION_OF = {4: "0003", 5: "0004", 6: "0005"}


def _as_written_by_schema(path, version: int) -> None:
    """Make the database at ``path`` look as an mcgs of schema ``version`` (4 to 6) wrote it."""
    con = sqlite3.connect(path)
    for column in COLUMNS_SINCE[version]:
        con.execute(f"alter table nodes drop column {column}")
    con.execute(f"update alembic_version set version_num = '{REVISION_OF[version]}'")
    con.execute(f"update schema_info set value = '{version}' where key = 'schema_version'")
    con.commit()
    con.close()


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
    for column in ("owner", "lease_expires_at", "attempts", "role", "fidelity", *RESOURCES):  # ... before claims (schema 4), roles (5), fidelity (6), resources (7)
        con.execute(f"alter table nodes drop column {column}")
    con.execute("drop table alembic_version")
    con.execute("update schema_info set value = '2' where key = 'schema_version'")
    con.commit()
    con.close()
    st = Storage(f"sqlite:///{path}")
    assert st.schema_version == SCHEMA_VERSION == 7
    st.add_llm_call(run.id, LLMCall(operator="draft", model="m", output_tokens=10, cost_usd=0.5))
    assert st.llm_spend_usd(run.id) == 0.5 and st.llm_calls(run.id)[0].output_tokens == 10
    assert [n.attempts for n in st.get_nodes(run.id)] == [0]  # the root, with the new column's default
    con = sqlite3.connect(path)
    assert con.execute("select version_num from alembic_version").fetchone()[0] == "0006"
    con.close()


def test_a_version_4_database_stores_the_final_ensemble_as_a_role_when_opened(tmp_path):
    """Runs written before the role column found their final ensemble by its plan's tag; the
    migration fills the role from that tag, so the final choice of an old run is unchanged."""
    path = tmp_path / "mcgs.db"
    st = Storage(f"sqlite:///{path}")
    run = new_run(st)
    root = st.get_nodes(run.id)[0]
    during = st.add_node(run.id, parent_id=root.id, operator=Operator.ENSEMBLE, plan="[ensemble during the search] greedy", code="")
    final = st.add_node(run.id, parent_id=root.id, operator=Operator.ENSEMBLE, plan="[final ensemble] greedy", code="")
    draft = st.add_node(run.id, parent_id=root.id, operator=Operator.DRAFT, plan="[final ensemble] is only text here", code="")
    st.close()
    _as_written_by_schema(path, 4)  # before roles
    st = Storage(f"sqlite:///{path}")
    roles = {n.id: n.role for n in st.get_nodes(run.id)}
    assert roles == {root.id: NodeRole.CANDIDATE, during.id: NodeRole.CANDIDATE, final.id: NodeRole.FINAL_ENSEMBLE, draft.id: NodeRole.CANDIDATE}
    assert st.schema_version == 7
    st.close()


def test_a_version_5_database_gains_the_fidelity_column_with_full_fidelity_for_every_node(tmp_path):
    """Every node stored before fidelities existed ran on the full data: the migration says so,
    and a node stored after it keeps the fidelity it is given."""
    path = tmp_path / "mcgs.db"
    st = Storage(f"sqlite:///{path}")
    run = new_run(st)
    root = st.get_nodes(run.id)[0]
    old = st.add_node(run.id, parent_id=root.id, operator=Operator.DRAFT, plan="", code="")
    st.close()
    _as_written_by_schema(path, 5)  # before fidelities
    st = Storage(f"sqlite:///{path}")
    assert st.schema_version == 7 and st.get_node(old.id).fidelity == 1.0 and st.get_node(old.id).full_fidelity
    low = st.add_node(run.id, parent_id=old.id, operator=Operator.IMPROVE, plan="", code="", fidelity=1 / 3)
    assert st.get_node(low.id).fidelity == pytest.approx(1 / 3) and not st.get_node(low.id).full_fidelity
    st.close()


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


def test_unknown_run_and_foreign_parent(storage_url):
    st = Storage(storage_url)
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


# ---------------------------------------------------------------- claims and leases (issue 8)


def _queued(st, run, k):
    root = st.get_nodes(run.id)[0]
    return [st.add_node(run.id, parent_id=root.id, operator=Operator.DRAFT, plan=f"q{i}", code=f"print({i})") for i in range(k)]


def test_queued_nodes_are_claimed_oldest_first_and_only_once(storage_url):
    st = Storage(storage_url)
    run = new_run(st)
    q = _queued(st, run, 3)
    a = st.claim_node(run.id, "host:1:1", lease_s=60)
    b = st.claim_node(run.id, "host:2:1", lease_s=60)
    assert (a.id, a.owner, a.attempts) == (q[0].id, "host:1:1", 1) and (b.id, b.owner) == (q[1].id, "host:2:1")
    own = st.add_node(run.id, parent_id=st.get_nodes(run.id)[0].id, operator=Operator.DRAFT, plan="mine", code="", owner="host:3:1")
    assert own.owner == "host:3:1" and own.attempts == 1  # stored claimed: never handed to another worker
    assert st.claim_node(run.id, "host:4:1", lease_s=60).id == q[2].id
    assert st.claim_node(run.id, "host:4:1", lease_s=60) is None
    with pytest.raises(ClaimLost, match="no longer held by host:2:1"):
        st.finish_node(a.id, state=NodeState.VALID, score=1.0, owner="host:2:1")
    assert st.finish_node(a.id, state=NodeState.VALID, score=1.0, owner="host:1:1").state is NodeState.VALID
    st.close()


def test_an_expired_lease_is_queued_again_then_interrupted_after_max_attempts(storage_url):
    st = Storage(storage_url)
    run = new_run(st)
    (n,) = _queued(st, run, 1)
    remote = "elsewhere.example:77:1"  # another host: only its lease can tell whether it lives
    st.claim_node(run.id, remote, lease_s=60)
    st.set_running(n.id, "nodes/00001")
    assert st.requeue_lost(run.id, max_attempts=2) == ([], [])  # lease still running
    assert st.renew_leases(remote, lease_s=0.01) == 1
    import time

    time.sleep(0.05)
    assert st.requeue_lost(run.id, max_attempts=2) == ([n.id], [])
    again = st.get_node(n.id)
    assert (again.state, again.owner) == (NodeState.PENDING, None) and "stopped renewing its lease" in again.error
    with pytest.raises(ClaimLost):  # the lost worker comes back too late: its verdict is dropped
        st.finish_node(n.id, state=NodeState.VALID, score=1.0, owner=remote)
    second = st.claim_node(run.id, "host:9:1", lease_s=0.01)
    assert second.attempts == 2
    time.sleep(0.05)
    assert st.requeue_lost(run.id, max_attempts=2) == ([], [n.id])
    assert st.get_node(n.id).state is NodeState.INTERRUPTED and "attempt 2 of 2" in st.get_node(n.id).error
    st.close()


def test_a_dead_worker_on_this_host_is_noticed_without_waiting_for_its_lease(storage_url):
    import socket

    from mcgs.storage import owner_alive, owner_id

    me = owner_id()
    dead = f"{socket.gethostname()}:4194304:1"  # above Linux's pid limit: no such process
    assert owner_alive(me) is True and owner_alive(dead) is False and owner_alive("other-host:1:1") is None
    st = Storage(storage_url)
    run = new_run(st)
    a, b = _queued(st, run, 2)
    st.claim_node(run.id, dead, lease_s=3600)
    st.claim_node(run.id, me, lease_s=3600)
    assert st.requeue_lost(run.id, max_attempts=3) == ([a.id], [])  # ours is alive: untouched
    assert st.interrupt_unfinished(run.id, owner=me) == [b.id]  # a stopping worker only stops its own
    assert st.get_node(a.id).state is NodeState.PENDING
    st.close()


def test_the_run_view_reads_only_what_changed_and_always_matches_storage(storage_url):
    """The search loop's view of a run (mcgs.storage.RunView) re-reads only new and still-open
    nodes, yet after every kind of write it equals a full read; a row that appears out of id
    order (a concurrent writer on PostgreSQL) makes it read everything again."""
    st = Storage(storage_url)
    run = new_run(st)
    view = st.run_view(run.id)
    root = st.get_nodes(run.id)[0]

    # an incremental reader (as the search's graph is): what changed since its last version
    mirror = {"epoch": -1}

    def same():
        got = view.nodes()
        assert got == st.get_nodes(run.id)
        assert view.edges() == st.get_edges(run.id)
        if mirror["epoch"] != view.epoch:
            mirror.update(epoch=view.epoch, nodes={n.id: n for n in got}, edges=view.edges())
        else:
            nodes, edges = view.changes_since(mirror["version"], mirror["n_edges"])
            mirror["nodes"].update({n.id: n for n in nodes})
            mirror["edges"] += edges
        mirror.update(version=view.version, n_edges=view.edge_count)
        assert sorted(mirror["nodes"].values(), key=lambda n: n.seq) == got
        assert mirror["edges"] == view.edges()

    same()
    a = st.add_node(run.id, parent_id=root.id, operator=Operator.DRAFT, plan="a", code="print(1)")
    b = st.add_node(run.id, parent_id=root.id, operator=Operator.DRAFT, plan="b", code="print(2)")
    same()
    st.set_running(a.id, "nodes/00001")
    same()
    st.finish_node(a.id, state=NodeState.VALID, score=0.8, reward=2.0, runtime_s=1.0)
    c = st.add_node(run.id, parent_id=a.id, operator=Operator.FUSION, plan="c", code="print(3)", extra_edges=[(b.id, EdgeKind.FUSES, {})])
    same()
    assert st.claim_node(run.id, "host:1:1", lease_s=60).id == b.id
    same()
    st.interrupt_unfinished(run.id)
    same()
    assert {n.id: n.state for n in view.nodes()}[c.id] is NodeState.INTERRUPTED
    assert view.full_reads == 1  # the first read only

    # a node stored with a smaller id than one the view has seen: the counts differ, one full read
    from sqlalchemy import insert

    from mcgs.storage.models import NodeModel

    with st._session.begin() as s:
        s.execute(insert(NodeModel).values(id=c.id + 100, run_id=run.id, seq=50, parent_id=root.id, operator="draft", state="pending", depth=1))
    same()
    with st._session.begin() as s:
        s.execute(insert(NodeModel).values(id=c.id + 50, run_id=run.id, seq=40, parent_id=root.id, operator="draft", state="pending", depth=1))
    same()
    assert view.full_reads == 2 and view.epoch == 2
    st.close()


def test_a_version_6_database_gains_the_resource_columns_empty_and_a_verdict_records_them(tmp_path):
    """Nodes stored before resources were recorded keep them empty (nothing was measured); a
    verdict stored after the migration keeps its peak memory, GPU and GPU memory."""
    path = tmp_path / "mcgs.db"
    st = Storage(f"sqlite:///{path}")
    run = new_run(st)
    root = st.get_nodes(run.id)[0]
    old = st.add_node(run.id, parent_id=root.id, operator=Operator.DRAFT, plan="", code="")
    st.finish_node(old.id, state=NodeState.VALID, score=0.5, runtime_s=1.0)
    st.close()
    _as_written_by_schema(path, 6)
    st = Storage(f"sqlite:///{path}")
    assert st.schema_version == 7
    n = st.get_node(old.id)
    assert (n.peak_rss_mb, n.gpu, n.peak_gpu_mb, n.score) == (None, None, None, 0.5)
    new = st.add_node(run.id, parent_id=old.id, operator=Operator.IMPROVE, plan="", code="")
    st.finish_node(new.id, state=NodeState.VALID, score=0.6, runtime_s=2.0, resources=(812.5, 1, 2048.0))
    n = st.get_node(new.id)
    assert (n.peak_rss_mb, n.gpu, n.peak_gpu_mb) == (812.5, 1, 2048.0)
    st.close()
