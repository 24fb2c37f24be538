"""The engine trusts nothing a candidate leaves behind (issue 31, section 1).

Each test plants, in a candidate's workspace, a link to a file outside it or a file over the
size cap, at a place one of the engine's readers looks: the scoring of out-of-fold and test
predictions and of the submission, the logs' tails, the copy into ``best/``, the ensemble's
copy of its members' predictions, ``mcgs export``'s model files. The payload is hidden from
the static Code Review (paths built at run time), so the sandbox and the engine must hold even
when the review is fooled. Each node ends ``invalid_output`` with the file and the reason named,
and a sentinel file's content never shows in storage, logs, errors, the report or ``best/``.
"""

from __future__ import annotations

import textwrap
import uuid
from pathlib import Path

import pytest

from mcgs.node import NodeState
from mcgs.search import create_search
from mcgs.settings import SearchSettings

from test_task import WRITE_OUTPUTS, write_task

pytestmark = pytest.mark.timeout(300)

# A valid candidate for write_task's binary task (standard library only), then ATTACK.
PROGRAM = '''
import csv, json, os
task = json.load(open("input/task.json"))
col = task["prediction_columns"][0]
''' + WRITE_OUTPUTS + '''print("outputs written")
'''

# Each attack: (code run after the outputs, the file named in the verdict, the reason's words).
ATTACKS = {
    "submission link": ("os.remove('submission/submission.csv'); os.symlink(ANSWERS, 'submission/submission.csv')",
                        "submission/submission.csv", "symbolic link"),
    "test predictions link": ("os.remove('working/test_pred.csv'); os.symlink(SECRET, 'working/test_pred.csv')",
                              "working/test_pred.csv", "symbolic link"),
    "oof link": ("os.remove('working/oof.csv'); os.symlink(SECRET, 'working/oof.csv')", "working/oof.csv", "symbolic link"),
    "working folder link": ("import shutil; shutil.rmtree('working'); os.symlink(os.path.dirname(SECRET), 'working')",
                            "working/oof.csv", "working is a symbolic link"),
    "oof fifo": ("os.remove('working/oof.csv'); os.mkfifo('working/oof.csv')", "working/oof.csv", "FIFO"),
    "oof over the cap": ("open('working/oof.csv', 'a').write('#' * (2 << 20))", "working/oof.csv", "over the cap of 1 MiB"),
    "test predictions over the cap": ("open('working/test_pred.csv', 'a').write('#' * (2 << 20))", "working/test_pred.csv", "over the cap of 1 MiB"),
    "submission over the cap": ("open('submission/submission.csv', 'a').write(' ' * (2 << 20))", "submission/submission.csv", "over the cap of 1 MiB"),
}


def _hidden(path: Path) -> str:
    """``path`` as an expression the static review cannot read as a path."""
    return f"bytes.fromhex({str(path).encode().hex()!r}).decode()"


@pytest.fixture
def planted(tmp_path):
    """A task, a sentinel secret outside every workspace and a private 'answers' file that would
    pass as a submission."""
    task = write_task(tmp_path / "task", task={"metric": "accuracy"})
    token = f"SENTINEL-{uuid.uuid4().hex}"
    secret = tmp_path / "elsewhere" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text(f"row,label\n{token}\n")
    (secret.parent / "oof.csv").write_text(f"row,label\n0,{token}\n")
    answers = tmp_path / "private" / "answers.csv"
    answers.parent.mkdir()
    answers.write_text("pid,label\n" + "".join(f"{i:04d}_02,no\n" for i in range(20)) + f"# {token}\n")
    return task, token, secret, answers


def _program(attack: str, secret: Path, answers: Path) -> str:
    return PROGRAM + f"SECRET = {_hidden(secret)}\nANSWERS = {_hidden(answers)}\n" + attack + "\n"


def _search(task, run_dir: Path, baseline: Path, **kw):
    settings = SearchSettings(time_budget_s=120, per_run_timeout_s=30, max_nodes=1, ensemble=False, max_output_mb=1, **kw)
    return create_search(task, run_dir, settings=settings, baseline=baseline)


def _assert_nowhere(token: str, *folders: Path) -> None:
    """No regular file under ``folders`` (storage, WAL, logs, best/, reports) holds ``token``."""
    for folder in folders:
        for p in folder.rglob("*"):
            if p.is_file() and not p.is_symlink():
                assert token.encode() not in p.read_bytes(), f"{p} holds the sentinel"


@pytest.mark.parametrize("name", list(ATTACKS))
def test_a_planted_link_or_oversized_output_makes_the_node_invalid(planted, tmp_path, name):
    task, token, secret, answers = planted
    attack, rel, reason = ATTACKS[name]
    baseline = tmp_path / "baseline.py"
    baseline.write_text(_program(attack, secret, answers))
    search = _search(task, tmp_path / "run", baseline)
    search.run()
    node = next(n for n in search.nodes() if n.config.get("baseline"))
    assert node.review["verdict"] != "rejected", node.review  # the review was fooled: the engine must hold
    assert node.state is NodeState.INVALID_OUTPUT, (node.state, node.error)
    assert rel in node.error and reason in node.error, node.error
    assert not (tmp_path / "run" / "best" / "submission.csv").exists()
    from mcgs.report import write_report

    write_report(search, tmp_path / "report.html")
    search.storage.close()
    _assert_nowhere(token, tmp_path / "run", tmp_path / "report.html")


def test_logs_replaced_by_links_are_not_read(planted, tmp_path):
    """The log tails come from the engine's own descriptors, not from the paths."""
    task, token, secret, answers = planted
    attack = "import sys; sys.stdout.flush(); os.remove('logs/stdout.txt'); os.symlink(SECRET, 'logs/stdout.txt')\n" \
             "os.remove('logs/stderr.txt'); os.symlink(SECRET, 'logs/stderr.txt')"
    baseline = tmp_path / "baseline.py"
    baseline.write_text(_program(attack, secret, answers))
    search = _search(task, tmp_path / "run", baseline)
    search.run()
    node = next(n for n in search.nodes() if n.config.get("baseline"))
    assert node.state is NodeState.VALID and "outputs written" in node.stdout_tail
    assert token not in node.stdout_tail + node.stderr_tail
    search.storage.close()
    _assert_nowhere(token, tmp_path / "run")


def test_a_retried_node_cannot_make_the_engine_write_through_its_links(planted, tmp_path):
    """A node tried again gets a fresh workspace: links its first attempt left in place of
    solution.py, input/ or the logs are removed, never written through or bound."""
    task, token, secret, answers = planted
    victim = tmp_path / "elsewhere" / "victim.txt"
    victim.write_text("keep me\n")
    attack = textwrap.dedent(f"""
        import sys
        VICTIM = {_hidden(victim)}
        for name in ('solution.py', 'logs/stdout.txt', 'tmp'):
            try:
                os.remove(name)
            except IsADirectoryError:
                os.rmdir(name)
            os.symlink(VICTIM, name)
        os.remove('input'); os.symlink(os.path.dirname(SECRET), 'input')
        sys.exit(3)
    """)
    baseline = tmp_path / "baseline.py"
    baseline.write_text(_program(attack, secret, answers))
    search = _search(task, tmp_path / "run", baseline)
    search.run()
    node = next(n for n in search.nodes() if n.config.get("baseline"))
    assert node.state is NodeState.BUGGY
    from mcgs.contract import prepare_workspace

    ws = prepare_workspace(search.input_dir, search.node_dir(node), "print('second attempt')\n")
    assert victim.read_text() == "keep me\n"
    assert (ws / "input").resolve() == search.input_dir.resolve()
    assert not (ws / "solution.py").is_symlink() and (ws / "solution.py").read_text() == "print('second attempt')\n"
    search.storage.close()


def test_best_and_the_ensemble_read_no_member_file_changed_into_a_link(planted, tmp_path):
    """A node's files replaced after it was scored (by a candidate running as the engine's
    user, say): the final ensemble leaves the member out, and best/ never copies through it."""
    from mcgs.coders.recipe import RecipeCoder

    task, token, secret, answers = planted
    settings = SearchSettings(time_budget_s=300, per_run_timeout_s=60, max_nodes=3, ensemble=False, max_output_mb=1, num_drafts=3)
    search = create_search(task, tmp_path / "run", settings=settings, coder=RecipeCoder(models=["model.logistic_regression", "model.knn", "model.random_forest"]))
    search.run()
    valid = sorted((n for n in search.nodes() if n.is_valid), key=lambda n: -n.score)
    assert len(valid) >= 3
    best_ws = search.node_dir(valid[0])
    for rel in ("working/oof.csv", "working/test_pred.csv", "submission/submission.csv"):
        (best_ws / rel).unlink()
        (best_ws / rel).symlink_to(secret)
    big_ws = search.node_dir(valid[1])
    with open(big_ws / "working" / "test_pred.csv", "a") as fh:
        fh.write("#" * (2 << 20))
    search.settings = search.settings.model_copy(update={"ensemble": True})
    ens = search.build_ensemble()
    chosen = search.final_node
    assert chosen is not None and chosen.id != valid[0].id  # its artifacts are lost: passed over
    if ens is not None:
        assert str(valid[0].id) not in ens.config["weights"]
        if str(valid[1].id) in ens.config["weights"]:  # its OOF is fine, its test predictions are not
            assert ens.state is NodeState.INVALID_OUTPUT and "over the cap" in ens.error
    search.export_best(chosen)
    search.storage.close()
    _assert_nowhere(token, tmp_path / "run")
