"""Published evaluation protocols of research data sets, prepared as plain mcgs task folders.

A protocol turns a data set's raw files into a task folder (``task.yaml`` and its tables, the
published split kept) and a separate answers file that only grading reads, as
``mcgs mlebench prepare`` does for MLE-bench competitions. ``mcgs protocol prepare NAME --raw
DIR --out DIR`` and ``mcgs protocol grade NAME SUBMISSION --answers FILE`` are the commands.

Registered: ``cora`` and ``citeseer`` (:mod:`mcgs.protocols.planetoid`: node classification on
Planetoid's public split); ``etth1-H`` and ``weather-H`` for H in 96, 192, 336, 720
(:mod:`mcgs.protocols.tslib`: long-horizon forecasting with the Time-Series-Library protocol;
their submission is a run's ``best/test_forecast.npy``, their answers ``answers.npz``).
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
        grade: ``fn(submission, answers) -> float`` (or a dict of metrics, the first the main
            one): the protocol's metric on the test rows.
        metric: The metric's name and direction, for messages.
        raw_name: The data set's folder under the shared data (default: ``name``).
        answers: The answers' file name beside the task folder (``answers.csv``, or
            ``answers.npz`` for arrays).
    """

    name: str
    description: str
    prepare: Callable[[Path, Path, Path], None]
    grade: Callable[["object", "object"], "float | dict[str, float]"]
    metric: str
    raw_name: str | None = None
    answers: str = "answers.csv"

    @property
    def raw_folder(self) -> str:
        """The data set's folder name under the shared data."""
        return self.raw_name or self.name


def _registry() -> dict[str, Protocol]:
    from mcgs.protocols import planetoid, tslib

    return {p.name: p for p in (*planetoid.PROTOCOLS, *tslib.PROTOCOLS)}


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
    ``out_dir/task`` (what ``mcgs run`` takes) and the answers ``out_dir/answers.csv`` (or
    ``.npz``: :attr:`Protocol.answers`; only
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
        raise ProtocolError(f"--raw {raw_dir} is not a folder; give the data set's raw folder (e.g. ../shared/data/{proto.raw_folder}/raw)")
    task_dir = out_dir / "task"
    task_dir.mkdir(parents=True, exist_ok=True)
    proto.prepare(raw_dir, task_dir, out_dir / proto.answers)
    return task_dir


def grade_protocol(name: str, submission: str | Path, answers: str | Path) -> "float | dict[str, float]":
    """Score a submission file against a protocol's answers with its metric (arrays, for a
    forecasting protocol: ``.npy`` forecasts against ``answers.npz``; a dict of its metrics).

    Raises:
        ProtocolError: unknown protocol, unreadable files, or a submission whose rows or columns
            do not match the answers (the message says which).
    """
    import pandas as pd

    proto = get_protocol(name)
    frames = []
    for what, path in (("submission", submission), ("answers", answers)):
        try:
            if proto.answers.endswith(".npz"):
                import numpy as np

                frames.append(np.load(path, allow_pickle=False))
            else:
                frames.append(pd.read_csv(path))
        except (OSError, ValueError) as exc:
            raise ProtocolError(f"cannot read the {what} {path}: {exc}") from None
    return proto.grade(*frames)
