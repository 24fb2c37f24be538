"""Published evaluation protocols of research data sets, prepared as plain mcgs task folders.

A protocol turns a data set's raw files into a task folder (``task.yaml`` and its tables, the
published split kept) and a separate answers file that only grading reads, as
``mcgs mlebench prepare`` does for MLE-bench competitions. ``mcgs protocol prepare NAME --raw
DIR --out DIR`` and ``mcgs protocol grade NAME SUBMISSION --answers FILE`` are the commands.

Registered: ``cora`` and ``citeseer`` (:mod:`mcgs.protocols.planetoid`: node classification on
Planetoid's public split).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable

__all__ = ["Protocol", "ProtocolError", "get_protocol", "protocol_names", "prepare_protocol", "grade_protocol"]


class ProtocolError(ValueError):
    """Unknown protocol, missing raw file, or a submission that cannot be graded; the message
    names the file or value and the fix."""


@dataclasses.dataclass(frozen=True)
class Protocol:
    """One registered protocol.

    Attributes:
        name: Its name on the command line (``cora``).
        description: One line: data, task and split.
        prepare: ``fn(raw_dir, task_dir, answers_path)``: writes the task folder and the answers.
        grade: ``fn(submission, answers) -> float``: the protocol's metric on the test rows.
        metric: The metric's name and direction, for messages.
    """

    name: str
    description: str
    prepare: Callable[[Path, Path, Path], None]
    grade: Callable[["object", "object"], float]
    metric: str


def _registry() -> dict[str, Protocol]:
    from mcgs.protocols import planetoid

    return {p.name: p for p in planetoid.PROTOCOLS}


def protocol_names() -> list[str]:
    """The registered protocols' names, sorted."""
    return sorted(_registry())


def get_protocol(name: str) -> Protocol:
    """The protocol called ``name``.

    Raises:
        ProtocolError: no such protocol (the message lists the registered ones).
    """
    reg = _registry()
    if name not in reg:
        raise ProtocolError(f"unknown protocol {name!r}; registered: {', '.join(sorted(reg))}")
    return reg[name]


def prepare_protocol(name: str, raw_dir: str | Path, out_dir: str | Path) -> Path:
    """Prepare protocol ``name`` from ``raw_dir`` into ``out_dir``: the task folder
    ``out_dir/task`` (what ``mcgs run`` takes) and the answers ``out_dir/answers.csv`` (only
    grading reads them; keep them out of the task folder). Preparing again rewrites the same
    bytes.

    Returns:
        The task folder.

    Raises:
        ProtocolError: unknown protocol, or ``raw_dir`` lacks a file the protocol reads.
    """
    proto = get_protocol(name)
    raw_dir, out_dir = Path(raw_dir), Path(out_dir)
    if not raw_dir.is_dir():
        raise ProtocolError(f"--raw {raw_dir} is not a folder; give the data set's raw folder (e.g. ../shared/data/{name}/raw)")
    task_dir = out_dir / "task"
    task_dir.mkdir(parents=True, exist_ok=True)
    proto.prepare(raw_dir, task_dir, out_dir / "answers.csv")
    return task_dir


def grade_protocol(name: str, submission: str | Path, answers: str | Path) -> float:
    """Score a submission file against a protocol's answers with its metric.

    Raises:
        ProtocolError: unknown protocol, unreadable files, or a submission whose rows or columns
            do not match the answers (the message says which).
    """
    import pandas as pd

    proto = get_protocol(name)
    frames = []
    for what, path in (("submission", submission), ("answers", answers)):
        try:
            frames.append(pd.read_csv(path))
        except (OSError, ValueError) as exc:
            raise ProtocolError(f"cannot read the {what} {path}: {exc}") from None
    return proto.grade(*frames)
