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
import json
import logging
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from .registry import (
    LEAF_CLASSES,
    SPOOKY_CLASSES,
    CompetitionSpec,
    MLEBenchError,
    get_competition,
)

__all__ = [
    "ChecksumMismatchError",
    "prepare_competition",
    "prepare_spaceship_titanic",
    "prepare_nomad2018_predict_transparent_conductors",
    "prepare_leaf_classification",
    "prepare_spooky_author_identification",
    "prepare_random_acts_of_pizza",
    "prepare_detecting_insults_in_social_commentary",
    "prepare_aerial_cactus_identification",
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


def _one_hot(df: pd.DataFrame, id_column: str, target: str, classes: Sequence[str]) -> pd.DataFrame:
    """One 0/1 column per class, in ``classes`` order, after the id column.

    Same frame (index, column order, int 0/1 values) as MLE-bench
    ``mlebench/competitions/utils.py`` ``df_to_one_hot``, built without a row loop.

    Raises:
        MLEBenchError: a label is not one of ``classes``.
    """
    classes = list(classes)
    unknown = sorted(set(df[target]) - set(classes))
    if unknown:
        raise MLEBenchError(f"labels {unknown} of {target!r} are not among the known classes")
    onehot = pd.DataFrame(0, index=df.index, columns=[id_column, *classes])
    onehot[id_column] = df[id_column]
    positions = pd.Index(classes).get_indexer(df[target])
    values = np.zeros((len(df), len(classes)), dtype=onehot[classes[0]].dtype)
    values[np.arange(len(df)), positions] = 1
    onehot[classes] = values
    return onehot


def prepare_nomad2018_predict_transparent_conductors(
    raw: Path, public: Path, private: Path
) -> None:
    """Prepare nomad2018-predict-transparent-conductors exactly as MLE-bench does.

    Source: MLE-bench ``mlebench/competitions/nomad2018-predict-transparent-conductors/
    prepare.py``: ``train_test_split(train.csv, test_size=0.1, random_state=0)``; ids of each
    part renumbered 1..n in row order; the geometry file of every (old) train id copied to
    ``public/train/<new id>/geometry.xyz`` or ``public/test/<new id>/geometry.xyz``; the
    sample submission predicts 0.1779 and 1.8892 for every test id. Kaggle's own test set is
    not used.

    The raw folder holds the geometry files as ``geometry.tar.xz`` (members
    ``train/<id>/geometry.xyz``) instead of Kaggle's ``train.zip``; the bytes copied are the
    same.

    Args:
        raw: Folder holding Kaggle's ``train.csv`` and ``geometry.tar.xz``.
        public: Output folder for the agent-visible files.
        private: Output folder for the answers.
    """
    import tarfile

    from sklearn.model_selection import train_test_split

    targets = ["formation_energy_ev_natom", "bandgap_energy_ev"]
    old_train = read_csv(raw / "train.csv")
    new_train, new_test = train_test_split(old_train, test_size=0.1, random_state=0)
    new_train = new_train.copy()
    new_test = new_test.copy()
    train_ids = {old: new for new, old in enumerate(new_train["id"], start=1)}
    test_ids = {old: new for new, old in enumerate(new_test["id"], start=1)}
    new_train["id"] = new_train["id"].map(train_ids)
    new_test["id"] = new_test["id"].map(test_ids)

    new_train.to_csv(public / "train.csv", index=False)
    new_test.to_csv(private / "test.csv", index=False)
    new_test.drop(columns=targets).to_csv(public / "test.csv", index=False)

    copied = {"train": 0, "test": 0}
    with tarfile.open(raw / "geometry.tar.xz") as archive:
        for member in archive:
            parts = Path(member.name).parts
            if not member.isfile() or len(parts) != 3 or parts[0] != "train":
                continue  # Kaggle's own test geometries are not used
            if parts[2] != "geometry.xyz":
                continue
            old_id = int(parts[1])
            for split, mapping in (("train", train_ids), ("test", test_ids)):
                if old_id in mapping:
                    dest = public / split / str(mapping[old_id])
                    dest.mkdir(parents=True, exist_ok=True)
                    (dest / "geometry.xyz").write_bytes(archive.extractfile(member).read())
                    copied[split] += 1
    for split, frame in (("train", new_train), ("test", new_test)):
        if copied[split] != len(frame):
            raise MLEBenchError(
                f"{raw / 'geometry.tar.xz'}: found {copied[split]} geometry files for the "
                f"{len(frame)} new {split} rows; expected one train/<id>/geometry.xyz per id"
            )

    sample = pd.DataFrame({"id": new_test["id"], targets[0]: 0.1779, targets[1]: 1.8892})
    sample.to_csv(public / "sample_submission.csv", index=False)


def prepare_leaf_classification(raw: Path, public: Path, private: Path) -> None:
    """Prepare leaf-classification exactly as MLE-bench does (the CSV files).

    Source: MLE-bench ``mlebench/competitions/leaf-classification/prepare.py``:
    ``train_test_split(train.csv, test_size=0.1, random_state=0)``; the answers are the new
    test ids one-hot encoded over the 99 species of ``classes.py`` (:data:`LEAF_CLASSES`);
    the sample submission gives every class 1/99.

    MLE-bench also copies the leaf images to ``public/images/``; the raw folder has no
    images, so none are copied (``prepared/public/images/`` is absent).

    Args:
        raw: Folder holding Kaggle's ``train.csv``.
        public: Output folder for the agent-visible files.
        private: Output folder for the answers.
    """
    from sklearn.model_selection import train_test_split

    old_train = read_csv(raw / "train.csv")
    new_train, new_test = train_test_split(old_train, test_size=0.1, random_state=0)
    new_test_without_labels = new_test.drop(columns=["species"])
    answers = _one_hot(new_test[["id", "species"]], "id", "species", LEAF_CLASSES)
    sample = answers.copy()
    sample[list(LEAF_CLASSES)] = 1 / len(LEAF_CLASSES)

    new_train.to_csv(public / "train.csv", index=False)
    answers.to_csv(private / "test.csv", index=False)
    new_test_without_labels.to_csv(public / "test.csv", index=False)
    sample.to_csv(public / "sample_submission.csv", index=False)


def prepare_spooky_author_identification(raw: Path, public: Path, private: Path) -> None:
    """Prepare spooky-author-identification exactly as MLE-bench does.

    Source: MLE-bench ``mlebench/competitions/spooky-author-identification/prepare.py``:
    ``train_test_split(train.csv, test_size=0.1, random_state=0)``; the answers are the new
    test ids one-hot encoded over ``EAP, HPL, MWS``; the sample submission holds Kaggle's
    constant probabilities 0.403493538995863, 0.287808366106543, 0.308698094897594.

    Args:
        raw: Folder holding Kaggle's ``train.csv``.
        public: Output folder for the agent-visible files.
        private: Output folder for the answers.
    """
    from sklearn.model_selection import train_test_split

    old_train = read_csv(raw / "train.csv")
    new_train, new_test = train_test_split(old_train, test_size=0.1, random_state=0)
    answers = _one_hot(new_test.drop(columns=["text"]), "id", "author", SPOOKY_CLASSES)
    sample = answers.copy()
    sample["EAP"] = 0.403493538995863
    sample["HPL"] = 0.287808366106543
    sample["MWS"] = 0.308698094897594

    new_train.to_csv(public / "train.csv", index=False)
    new_test.drop(columns=["author"]).to_csv(public / "test.csv", index=False)
    sample.to_csv(public / "sample_submission.csv", index=False)
    answers.to_csv(private / "test.csv", index=False)


def _read_zipped_json(path: Path) -> Any:
    """The JSON document inside a one-file zip archive (Kaggle's ``*.json.zip``)."""
    import zipfile

    with zipfile.ZipFile(path) as archive:
        names = [n for n in archive.namelist() if n.endswith(".json")]
        if len(names) != 1:
            raise MLEBenchError(f"{path} should hold exactly one .json file, found {names}")
        return json.loads(archive.read(names[0]).decode("utf-8"))


def prepare_random_acts_of_pizza(raw: Path, public: Path, private: Path) -> None:
    """Prepare random-acts-of-pizza exactly as MLE-bench does.

    Source: MLE-bench ``mlebench/competitions/random-acts-of-pizza/prepare.py``: the train
    records are split with ``train_test_split(records, test_size=n_test / (n_train + n_test),
    random_state=0)`` (Kaggle's test set only gives the ratio); the new test records keep only
    the fields of Kaggle's test records (the label and the 14 retrieval-time fields are
    dropped); both are written with ``json.dump(..., indent=4)`` and also zipped
    (``train.zip``, ``test.zip``); the answers are ``request_id`` and the label as 0/1; the
    sample submission (``sampleSubmission.csv``) predicts 0.

    Args:
        raw: Folder holding Kaggle's ``train.json.zip`` and ``test.json.zip``.
        public: Output folder for the agent-visible files.
        private: Output folder for the answers.
    """
    from sklearn.model_selection import train_test_split

    old_train = _read_zipped_json(raw / "train.json.zip")
    old_test = _read_zipped_json(raw / "test.json.zip")
    test_ratio = len(old_test) / (len(old_train) + len(old_test))
    test_fields = list(old_test[0].keys())
    for where, records in (("train", old_train), ("test", old_test)):
        fields = set(records[0])
        if any(set(r) != fields for r in records):
            raise MLEBenchError(f"{where}.json records do not all have the same fields")

    new_train, new_test = train_test_split(old_train, test_size=test_ratio, random_state=0)
    new_test_without_labels = [{key: rec[key] for key in test_fields} for rec in new_test]

    with open(public / "train.json", "w") as fh:
        json.dump(new_train, fh, indent=4)
    with open(public / "test.json", "w") as fh:
        json.dump(new_test_without_labels, fh, indent=4)
    shutil.make_archive(str(public / "train"), "zip", public, "train.json")
    shutil.make_archive(str(public / "test"), "zip", public, "test.json")

    answers = pd.DataFrame(
        {
            "request_id": [rec["request_id"] for rec in new_test],
            "requester_received_pizza": [int(rec["requester_received_pizza"]) for rec in new_test],
        }
    )
    answers.to_csv(private / "test.csv", index=False)
    sample = answers.copy()
    sample["requester_received_pizza"] = 0
    sample.to_csv(public / "sampleSubmission.csv", index=False)


def prepare_detecting_insults_in_social_commentary(raw: Path, public: Path, private: Path) -> None:
    """Prepare detecting-insults-in-social-commentary exactly as MLE-bench does.

    Source: MLE-bench ``mlebench/competitions/detecting-insults-in-social-commentary/
    prepare.py``: no split; Kaggle's ``train.csv`` is the public train set and Kaggle's
    labelled ``test_with_solutions.csv`` the answers (copied byte for byte); the gold
    submission is its ``Insult, Date, Comment`` columns, the public test its ``Date, Comment``
    columns, and the sample submission (``sample_submission_null.csv``) predicts 0. There is
    no id column: submissions are matched to answers by ``Comment``.

    Args:
        raw: Folder holding Kaggle's ``train.csv`` and ``test_with_solutions.csv``.
        public: Output folder for the agent-visible files.
        private: Output folder for the answers.
    """
    shutil.copyfile(raw / "train.csv", public / "train.csv")
    shutil.copyfile(raw / "test_with_solutions.csv", private / "test.csv")

    gold = read_csv(private / "test.csv")[["Insult", "Date", "Comment"]]
    gold.to_csv(private / "gold_submission.csv", index=False)
    gold.drop(columns=["Insult"]).to_csv(public / "test.csv", index=False)
    sample = gold.copy()
    sample["Insult"] = 0
    sample.to_csv(public / "sample_submission_null.csv", index=False)


def _zip_members(archive_path: Path, prefix: str, names, dest: Path) -> None:
    """Write the members ``prefix + name`` of a zip archive into a new zip ``dest`` under ``name``
    (at its root), deflated, in the order given.

    Raises:
        MLEBenchError: a member is missing from the archive (named, with the archive).
    """
    import zipfile

    with zipfile.ZipFile(archive_path) as src, zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as out:
        present = set(src.namelist())
        missing = [n for n in names if prefix + n not in present]
        if missing:
            raise MLEBenchError(f"{archive_path} lacks {len(missing)} of the files the split needs, e.g. "
                                f"{prefix + missing[0]!r}; the raw archive must hold Kaggle's {prefix}<id> files")
        for name in names:
            out.writestr(name, src.read(prefix + name))


def prepare_aerial_cactus_identification(raw: Path, public: Path, private: Path) -> None:
    """Prepare aerial-cactus-identification as MLE-bench does.

    Source: MLE-bench ``mlebench/competitions/aerial-cactus-identification/prepare.py``:
    ``train_test_split(train.csv, test_size=0.19, random_state=0)`` (Kaggle's 4 000 unlabelled
    test images are not used); the new train rows are the public ``train.csv``, the new test rows
    (with their labels) the answers, and the sample submission is the answers with ``has_cactus``
    0.5. The images of each part are put into ``public/train.zip`` and ``public/test.zip``,
    deflated, with the ``<id>`` files at the archive's root (MLE-bench's ``compress``). There is no
    public ``test.csv``: the test ids are the sample submission's.

    MLE-bench extracts Kaggle's ``train.zip`` into the raw folder first; this reads the members
    from the archive instead, so the raw folder may be read-only. The archives' bytes are not in
    ``checksums.yaml`` (only the CSVs are); the image bytes are copied unchanged.

    Args:
        raw: Folder holding Kaggle's ``train.csv`` and ``train.zip`` (members ``train/<id>``).
        public: Output folder for the agent-visible files.
        private: Output folder for the answers.
    """
    from sklearn.model_selection import train_test_split

    old_train = read_csv(raw / "train.csv")
    new_train, new_test = train_test_split(old_train, test_size=0.19, random_state=0)
    new_train.to_csv(public / "train.csv", index=False)
    new_test.to_csv(private / "test.csv", index=False)
    sample = new_test.copy()
    sample["has_cactus"] = 0.5
    sample.to_csv(public / "sample_submission.csv", index=False)
    _zip_members(raw / "train.zip", "train/", list(new_train["id"]), public / "train.zip")
    _zip_members(raw / "train.zip", "train/", list(new_test["id"]), public / "test.zip")


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
