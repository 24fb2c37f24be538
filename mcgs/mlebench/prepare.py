"""Rebuild MLE-bench's prepared split of a competition from Kaggle's raw files.

MLE-bench never uses Kaggle's hidden test set: its ``prepare.py`` for each competition cuts a
new labelled test set out of Kaggle's ``train.csv``, gives the agent ``prepared/public/`` and
grades against ``prepared/private/``. :func:`prepare_competition` replays that preparation
locally and checks every file against MLE-bench's ``checksums.yaml``, so a score graded here is
graded on exactly the rows MLE-bench uses.

Layout written under ``out_dir/<id>/`` (MLE-bench's, ``mlebench/data.py`` and
``mlebench/registry.py``)::

    config.yaml                       written last; its presence marks a verified preparation
    leaderboard.csv                   Kaggle leaderboard MLE-bench grades against
    checksums.yaml                    MLE-bench's md5s of the prepared files
    prepared/public/                  what an agent may see (train, test, sample, description)
    prepared/private/test.csv         answers
"""

from __future__ import annotations

import hashlib
import logging
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from .registry import CompetitionSpec, MLEBenchError, get_competition

__all__ = [
    "ChecksumMismatchError",
    "prepare_competition",
    "prepare_spaceship_titanic",
    "read_csv",
    "file_md5",
    "verify_checksums",
]

logger = logging.getLogger(__name__)

CONFIG_FILE = "config.yaml"
LEADERBOARD_FILE = "leaderboard.csv"
CHECKSUMS_FILE = "checksums.yaml"
DESCRIPTION_FILE = "description.md"


class ChecksumMismatchError(MLEBenchError):
    """Raised when a prepared file's md5 differs from MLE-bench's ``checksums.yaml``."""


def read_csv(path: Path) -> pd.DataFrame:
    """Read a CSV the way MLE-bench does (``mlebench/utils.py`` ``read_csv``).

    MLE-bench passes ``float_precision="round_trip"``. pandas 3 parses floats round-trip
    exactly by default and deprecates the option, so it is passed only on pandas < 3.

    Args:
        path: CSV file.

    Returns:
        The parsed frame.
    """
    kwargs: dict[str, Any] = {}
    if int(pd.__version__.split(".")[0]) < 3:
        kwargs["float_precision"] = "round_trip"
    return pd.read_csv(path, **kwargs)


def file_md5(path: Path) -> str:
    """Hex md5 of a file (MLE-bench ``mlebench/data.py`` ``get_checksum``)."""
    digest = hashlib.md5()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


# --- per-competition preparers (signature fixed by MLE-bench: raw, public, private) ---------


def prepare_spaceship_titanic(raw: Path, public: Path, private: Path) -> None:
    """Prepare spaceship-titanic exactly as MLE-bench does.

    Source: MLE-bench ``mlebench/competitions/spaceship-titanic/prepare.py``: the new test
    set is ``train_test_split(train.csv, test_size=0.1, random_state=0)``; the sample
    submission predicts ``Transported = False`` for every new test passenger; every file is
    written with ``to_csv(index=False)``.

    Args:
        raw: Folder holding Kaggle's ``train.csv``.
        public: Output folder for the agent-visible files.
        private: Output folder for the answers.
    """
    from sklearn.model_selection import train_test_split

    old_train = read_csv(raw / "train.csv")
    new_train, new_test = train_test_split(old_train, test_size=0.1, random_state=0)

    sample = new_test[["PassengerId", "Transported"]].copy()
    sample["Transported"] = False
    sample.to_csv(public / "sample_submission.csv", index=False)

    new_test.to_csv(private / "test.csv", index=False)

    new_train.to_csv(public / "train.csv", index=False)
    new_test.drop(columns="Transported").to_csv(public / "test.csv", index=False)


# --- driver ----------------------------------------------------------------------------------


def prepare_competition(
    competition_id: str,
    raw_dir: Path,
    out_dir: Path,
    *,
    mlebench_dir: Path | None = None,
) -> Path:
    """Rebuild MLE-bench's prepared split of one competition and verify it.

    Runs the competition's preparer on ``raw_dir``, copies ``description.md`` into
    ``prepared/public/``, copies ``leaderboard.csv`` and ``checksums.yaml`` next to it, checks
    each prepared file's md5 against ``checksums.yaml`` (when that file exists), and writes
    ``config.yaml`` last. Preparing again overwrites the same files with the same bytes.

    Args:
        competition_id: MLE-bench competition id, e.g. ``spaceship-titanic``.
        raw_dir: Folder with Kaggle's files as downloaded (e.g.
            ``shared/data/spaceship-titanic/raw``).
        out_dir: Data folder; the competition is written to ``out_dir/<competition_id>``.
        mlebench_dir: Folder with MLE-bench's ``description.md``, ``leaderboard.csv`` and
            (optional) ``checksums.yaml``; defaults to ``raw_dir.parent / "mlebench"``.

    Returns:
        The competition folder ``out_dir/<competition_id>``, which
        :func:`mcgs.mlebench.grade.grade_submission` reads as ``data_dir/<competition_id>``.

    Raises:
        MLEBenchError: unknown competition id, or a missing raw folder, raw file, MLE-bench
            folder, ``description.md`` or ``leaderboard.csv``.
        ChecksumMismatchError: a prepared file's md5 differs from ``checksums.yaml``; the
            message names each file with its expected and actual md5.
    """
    spec = get_competition(competition_id)
    raw_dir = Path(raw_dir)
    out_dir = Path(out_dir)
    mlebench_dir = Path(mlebench_dir) if mlebench_dir is not None else raw_dir.parent / "mlebench"
    _check_inputs(spec, raw_dir, mlebench_dir)

    comp_dir = out_dir / spec.id
    public = comp_dir / "prepared" / "public"
    private = comp_dir / "prepared" / "private"
    public.mkdir(parents=True, exist_ok=True)
    private.mkdir(parents=True, exist_ok=True)
    # A stale config.yaml would mark a half-rewritten folder as prepared; it is rewritten last.
    (comp_dir / CONFIG_FILE).unlink(missing_ok=True)

    logger.info("preparing %s from %s into %s", spec.id, raw_dir, comp_dir)
    spec.load_preparer()(raw=raw_dir, public=public, private=private)

    # copyfile, not copy2: the sources may be read-only, and copying their mode would make a
    # second preparation fail to overwrite.
    shutil.copyfile(mlebench_dir / DESCRIPTION_FILE, public / DESCRIPTION_FILE)
    shutil.copyfile(mlebench_dir / LEADERBOARD_FILE, comp_dir / LEADERBOARD_FILE)
    checksums_src = mlebench_dir / CHECKSUMS_FILE
    if checksums_src.is_file():
        shutil.copyfile(checksums_src, comp_dir / CHECKSUMS_FILE)
        checksums = yaml.safe_load(checksums_src.read_text()) or {}
        verify_checksums(comp_dir, checksums)
    else:
        logger.warning(
            "%s has no %s: the prepared split of %s is not verified against MLE-bench",
            mlebench_dir,
            CHECKSUMS_FILE,
            spec.id,
        )

    with open(comp_dir / CONFIG_FILE, "w") as fh:
        yaml.safe_dump(spec.to_config(), fh, sort_keys=False)
    logger.info("prepared %s in %s", spec.id, comp_dir)
    return comp_dir


def verify_checksums(comp_dir: Path, checksums: dict[str, Any]) -> None:
    """Compare prepared files with MLE-bench's md5s.

    ``checksums`` has MLE-bench's layout (``mlebench/data.py`` ``generate_checksums``):
    ``{"public": {file: md5}, "private": {file: md5}, "zip": md5}``. The ``zip`` entry is the
    md5 of Kaggle's download archive; we start from extracted files, so it is not checked.

    Args:
        comp_dir: Competition folder holding ``prepared/public`` and ``prepared/private``.
        checksums: Parsed ``checksums.yaml``.

    Raises:
        ChecksumMismatchError: naming every file whose md5 differs or that is missing, with
            the expected and actual md5.
    """
    problems: list[str] = []
    checked = 0
    for section in ("public", "private"):
        for name, expected in (checksums.get(section) or {}).items():
            path = comp_dir / "prepared" / section / name
            if not path.is_file():
                problems.append(f"prepared/{section}/{name}: expected md5 {expected}, file missing")
                continue
            actual = file_md5(path)
            checked += 1
            if actual != expected:
                problems.append(
                    f"prepared/{section}/{name}: expected md5 {expected}, actual md5 {actual}"
                )
    if problems:
        raise ChecksumMismatchError(
            f"prepared files in {comp_dir} do not match MLE-bench's {CHECKSUMS_FILE}: "
            + "; ".join(problems)
            + ". The raw files or the preparer differ from MLE-bench's; check the raw folder "
            "holds Kaggle's original files."
        )
    logger.info("%d prepared file(s) in %s match MLE-bench's md5s", checked, comp_dir)


def _check_inputs(spec: CompetitionSpec, raw_dir: Path, mlebench_dir: Path) -> None:
    """Fail early, naming the path and the fix, when an input folder or file is missing."""
    if not raw_dir.is_dir():
        raise MLEBenchError(
            f"raw folder {raw_dir} for {spec.id!r} does not exist; pass the folder holding "
            f"Kaggle's {', '.join(spec.raw_files)} (e.g. shared/data/{spec.id}/raw)"
        )
    for name in spec.raw_files:
        if not (raw_dir / name).is_file():
            raise MLEBenchError(
                f"raw file {raw_dir / name} for {spec.id!r} is missing; the raw folder must "
                f"hold Kaggle's {', '.join(spec.raw_files)} as downloaded"
            )
    if not mlebench_dir.is_dir():
        raise MLEBenchError(
            f"MLE-bench folder {mlebench_dir} for {spec.id!r} does not exist; pass "
            f"mlebench_dir= a folder with MLE-bench's {DESCRIPTION_FILE} and {LEADERBOARD_FILE} "
            f"(e.g. shared/data/{spec.id}/mlebench)"
        )
    for name in (DESCRIPTION_FILE, LEADERBOARD_FILE):
        if not (mlebench_dir / name).is_file():
            raise MLEBenchError(
                f"{mlebench_dir / name} for {spec.id!r} is missing; copy it from "
                f"openai/mle-bench mlebench/competitions/{spec.id}/"
            )
