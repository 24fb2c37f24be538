"""``RUN_DIR/best/``: the chosen node's program, submission and facts, runnable on their own.

``cd RUN_DIR/best && python solution.py`` re-creates ``submission/submission.csv``: the folder
holds ``solution.py``, ``submission.csv`` (a forecasting task: ``val_forecast.npy``, and at the
end of the run the test forecasts of :mod:`mcgs.forecast_mode`), ``node.json`` and what the program reads (``input``,
a link to the run's read-only input; for an ensemble node, its members' prediction files under
``members/``). Every file is copied out of a workspace safely (:mod:`mcgs.candidate_files`) and
written atomically.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Mapping

from mcgs.candidate_files import copy_candidate_file
from mcgs.contract import OOF_PATH, SUBMISSION_PATH, TEST_PRED_PATH
from mcgs.forecast import VAL_FORECAST_PATH
from mcgs.node import FrozenNode, Operator

__all__ = ["atomic_write", "copy_members", "member_files", "write_best"]


def atomic_write(dst: Path, data: bytes) -> None:
    """Write ``data`` to ``dst`` through a temp file, fsync and rename (mode 644)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dst.parent, prefix=f".{dst.name}.")
    with os.fdopen(fd, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.chmod(tmp, 0o644)
    os.replace(tmp, dst)


def copy_members(node: FrozenNode, by_id: Mapping[int, FrozenNode], node_dir: Callable[[FrozenNode], Path], dest: Path,
                 max_bytes: int, files: tuple[str, ...] = (OOF_PATH, TEST_PRED_PATH)) -> None:
    """Copy an ensemble node's members' prediction files to ``dest/members/<node>/``.

    Args:
        node: The ensemble node (``config["weights"]`` keys are member ids).
        by_id: The run's nodes by id.
        node_dir: The workspace of a node.
        dest: Folder to copy into (the ensemble's workspace, or ``best/``).
        max_bytes: Cap on one file.
        files: The members' files to copy (a forecasting task's: ``working/val_forecast.npy``).

    Raises:
        CandidateFileError: a member's file is gone, a link, or over the size cap.
    """
    for member_id in node.config["weights"]:
        member = node_dir(by_id[int(member_id)])
        for name in files:
            copy_candidate_file(member, name, dest / "members" / member.name / name, max_bytes=max_bytes)


def member_files(task) -> tuple[str, ...]:
    """The files of an ensemble's members that it reads: their OOF and test predictions, or a
    forecasting task's validation forecasts."""
    return (VAL_FORECAST_PATH,) if task.forecast is not None else (OOF_PATH, TEST_PRED_PATH)


def write_best(run_dir: Path, input_dir: Path, node: FrozenNode, by_id: Mapping[int, FrozenNode],
               node_dir: Callable[[FrozenNode], Path], task, max_bytes: int) -> Path:
    """Write ``run_dir/best/`` for ``node`` (module docstring).

    Args:
        run_dir: The run directory.
        input_dir: The run's read-only input (``best/input`` links to it).
        node: The node to hand in.
        by_id: The run's nodes by id (an ensemble's members).
        node_dir: The workspace of a node.
        task: The task (metric and direction go into ``node.json``).
        max_bytes: Cap on one file copied out of a workspace.

    Returns:
        The ``best`` folder.

    Raises:
        CandidateFileError: the node's submission (or a member's predictions) is gone, a link or
            too large.
        OSError: the folder cannot be written (a full disk: the caller pauses and retries).
    """
    ws = node_dir(node)
    best = run_dir / "best"
    best.mkdir(exist_ok=True)
    link = best / "input"
    if not link.is_symlink():
        link.symlink_to(os.path.relpath(input_dir, best), target_is_directory=True)
    if node.operator is Operator.ENSEMBLE:
        shutil.rmtree(best / "members", ignore_errors=True)
        copy_members(node, by_id, node_dir, best, max_bytes, member_files(task))
    atomic_write(best / "solution.py", node.code.encode())
    if task.forecast is not None:  # its test windows are forecast by the engine at the end (mcgs.forecast_mode)
        copy_candidate_file(ws, VAL_FORECAST_PATH, best / "val_forecast.npy", max_bytes=max_bytes)
    else:
        copy_candidate_file(ws, SUBMISSION_PATH, best / "submission.csv", max_bytes=max_bytes)
    info = {
        "node": node.seq,
        "storage_id": node.id,
        "operator": node.operator.value,
        "score": node.score,
        "metric": task.metric,
        "higher_is_better": task.higher_is_better,
        "plan": node.plan,
    }
    atomic_write(best / "node.json", json.dumps(info, indent=2).encode())
    return best
