"""Registry of the MLE-bench competitions mcgs can prepare and grade offline.

One :class:`CompetitionSpec` per competition holds what MLE-bench keeps in
``mlebench/competitions/<id>/config.yaml`` (id, name, type, grader name, answers and sample
submission paths) plus the two facts mcgs needs to run the task (target and id column).

The preparer and the grading function are named by import string (``"module:function"``),
as MLE-bench's ``config.yaml`` does (``preparer:`` and ``grader.grade_fn:``). This keeps this
module free of pandas and scikit-learn and free of imports of :mod:`.prepare` and
:mod:`.grade`, which both import it.

Registered: ``spaceship-titanic``, ``nomad2018-predict-transparent-conductors``,
``leaf-classification``, ``random-acts-of-pizza``, ``spooky-author-identification``,
``detecting-insults-in-social-commentary``, ``aerial-cactus-identification`` (images).

Adding a competition:

1. write ``prepare_<id>(raw, public, private)`` in :mod:`mcgs.mlebench.prepare`, replicating
   MLE-bench's ``mlebench/competitions/<id>/prepare.py`` byte for byte (the md5 check in
   :func:`~mcgs.mlebench.prepare.prepare_competition` tells you when it does);
2. reuse or write a grading function in :mod:`mcgs.mlebench.grade` with the signature
   ``fn(submission, answers, spec) -> float`` that raises
   :class:`~mcgs.mlebench.grade.InvalidSubmissionError` on a bad submission;
3. add a :class:`CompetitionSpec` to ``_SPECS`` below, and a checksum test.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any, Callable

__all__ = [
    "MLEBenchError",
    "CompetitionSpec",
    "get_competition",
    "competition_ids",
    "LEAF_CLASSES",
    "SPOOKY_CLASSES",
]

#: MLE-bench ``mlebench/competitions/leaf-classification/classes.py`` ``CLASSES``: the 99
#: species, sorted; the one-hot columns of the answers and of a submission, in this order.
LEAF_CLASSES: tuple[str, ...] = (
    "Acer_Capillipes", "Acer_Circinatum", "Acer_Mono", "Acer_Opalus", "Acer_Palmatum",
    "Acer_Pictum", "Acer_Platanoids", "Acer_Rubrum", "Acer_Rufinerve", "Acer_Saccharinum",
    "Alnus_Cordata", "Alnus_Maximowiczii", "Alnus_Rubra", "Alnus_Sieboldiana", "Alnus_Viridis",
    "Arundinaria_Simonii", "Betula_Austrosinensis", "Betula_Pendula", "Callicarpa_Bodinieri",
    "Castanea_Sativa", "Celtis_Koraiensis", "Cercis_Siliquastrum", "Cornus_Chinensis",
    "Cornus_Controversa", "Cornus_Macrophylla", "Cotinus_Coggygria", "Crataegus_Monogyna",
    "Cytisus_Battandieri", "Eucalyptus_Glaucescens", "Eucalyptus_Neglecta",
    "Eucalyptus_Urnigera", "Fagus_Sylvatica", "Ginkgo_Biloba", "Ilex_Aquifolium",
    "Ilex_Cornuta", "Liquidambar_Styraciflua", "Liriodendron_Tulipifera",
    "Lithocarpus_Cleistocarpus", "Lithocarpus_Edulis", "Magnolia_Heptapeta",
    "Magnolia_Salicifolia", "Morus_Nigra", "Olea_Europaea", "Phildelphus", "Populus_Adenopoda",
    "Populus_Grandidentata", "Populus_Nigra", "Prunus_Avium", "Prunus_X_Shmittii",
    "Pterocarya_Stenoptera", "Quercus_Afares", "Quercus_Agrifolia", "Quercus_Alnifolia",
    "Quercus_Brantii", "Quercus_Canariensis", "Quercus_Castaneifolia", "Quercus_Cerris",
    "Quercus_Chrysolepis", "Quercus_Coccifera", "Quercus_Coccinea", "Quercus_Crassifolia",
    "Quercus_Crassipes", "Quercus_Dolicholepis", "Quercus_Ellipsoidalis", "Quercus_Greggii",
    "Quercus_Hartwissiana", "Quercus_Ilex", "Quercus_Imbricaria", "Quercus_Infectoria_sub",
    "Quercus_Kewensis", "Quercus_Nigra", "Quercus_Palustris", "Quercus_Phellos",
    "Quercus_Phillyraeoides", "Quercus_Pontica", "Quercus_Pubescens", "Quercus_Pyrenaica",
    "Quercus_Rhysophylla", "Quercus_Rubra", "Quercus_Semecarpifolia", "Quercus_Shumardii",
    "Quercus_Suber", "Quercus_Texana", "Quercus_Trojana", "Quercus_Variabilis",
    "Quercus_Vulcanica", "Quercus_x_Hispanica", "Quercus_x_Turneri",
    "Rhododendron_x_Russellianum", "Salix_Fragilis", "Salix_Intergra", "Sorbus_Aria",
    "Tilia_Oliveri", "Tilia_Platyphyllos", "Tilia_Tomentosa", "Ulmus_Bergmanniana",
    "Viburnum_Tinus", "Viburnum_x_Rhytidophylloides", "Zelkova_Serrata",
)  # fmt: skip

#: MLE-bench ``mlebench/competitions/spooky-author-identification/classes.py`` ``CLASSES``.
SPOOKY_CLASSES: tuple[str, ...] = ("EAP", "HPL", "MWS")


class MLEBenchError(ValueError):
    """Raised for bad inputs to preparation or grading (unknown id, missing folder or file).

    The message names the offending id or path and says how to fix it.
    """


@dataclasses.dataclass(frozen=True)
class CompetitionSpec:
    """Static description of one MLE-bench competition.

    Attributes:
        id: MLE-bench / Kaggle competition id (``spaceship-titanic``).
        name: Human-readable name, as in MLE-bench's ``config.yaml``.
        competition_type: MLE-bench's ``competition_type`` (``simple``, or ``code`` for a code competition such as aerial-cactus).
        grader_name: MLE-bench's ``grader.name``; also accepted by :func:`mcgs.metrics.get_metric`
            when mcgs implements that metric.
        target: Target column, or columns for multi-target tasks. For the one-hot
            competitions (leaf, spooky) it is the label column of the train set; the
            submission has one probability column per class instead (see ``classes``).
        id_column: Column that identifies a row in the test set and the submission, or
            ``None`` when the submission has no id column (detecting-insults).
        preparer: ``"module:function"`` called as ``fn(raw=..., public=..., private=...)``
            (MLE-bench's preparer signature, ``mlebench/data.py`` ``is_valid_prepare_fn``).
        grade_fn: ``"module:function"`` called as ``fn(submission, answers, spec) -> float``.
        raw_files: Files that must exist in the raw folder before preparing.
        answers: Answers file, relative to the competition folder.
        sample_submission: Sample submission, relative to the competition folder.
        match_column: Column the grader matches submission rows to answer rows on, when it
            is not ``id_column`` (``Comment`` for detecting-insults). ``None``: ``id_column``.
        classes: Class columns of a one-hot submission (leaf, spooky), in MLE-bench's order;
            empty for other competitions.
        train_file: Train file inside ``prepared/public`` (``train.json`` for pizza).
        test_file: Test file inside ``prepared/public`` (``test.json`` for pizza).
        gold_submission: MLE-bench's ``dataset.gold_submission``, when it has one.
        metric: mcgs metric name (:func:`mcgs.metrics.get_metric`) written as ``metric`` in
            ``config.yaml``; ``None``: the grader name (an accepted alias).
    """

    id: str
    name: str
    competition_type: str
    grader_name: str
    target: str | tuple[str, ...]
    id_column: str | None
    preparer: str
    grade_fn: str
    raw_files: tuple[str, ...]
    answers: str = "prepared/private/test.csv"
    sample_submission: str = "prepared/public/sample_submission.csv"
    match_column: str | None = None
    classes: tuple[str, ...] = ()
    train_file: str = "train.csv"
    test_file: str = "test.csv"
    gold_submission: str | None = None
    metric: str | None = None

    @property
    def key_column(self) -> str:
        """Column the grader matches submission rows to answer rows on."""
        key = self.match_column or self.id_column
        if key is None:  # a registry bug, not a user error
            raise MLEBenchError(f"competition {self.id!r} has neither id_column nor match_column")
        return key

    @property
    def targets(self) -> tuple[str, ...]:
        """The target column(s) as a tuple, whether one or several."""
        return (self.target,) if isinstance(self.target, str) else tuple(self.target)

    def load_preparer(self) -> Callable[..., None]:
        """Import and return the preparer function."""
        return _import_callable(self.preparer)

    def load_grade_fn(self) -> Callable[..., float]:
        """Import and return the grading function."""
        return _import_callable(self.grade_fn)

    def to_config(self) -> dict[str, Any]:
        """The ``config.yaml`` written next to the prepared data.

        MLE-bench's keys (``id``, ``name``, ``competition_type``, ``description``, ``dataset``,
        ``grader``) first, with paths relative to the competition folder, then the keys mcgs
        reads to run the task (``target``, ``id_column``, ``metric``, and, only when they
        differ from :func:`mcgs.task.load_task`'s defaults, ``no_id_column``,
        ``train_file``, ``test_file``, ``sample_submission_file``).
        """
        dataset = {"answers": self.answers}
        if self.gold_submission is not None:
            dataset["gold_submission"] = self.gold_submission
        dataset["sample_submission"] = self.sample_submission
        config: dict[str, Any] = {
            "id": self.id,
            "name": self.name,
            "competition_type": self.competition_type,
            "description": "prepared/public/description.md",
            "dataset": dataset,
            "grader": {"name": self.grader_name},
            "target": self.target if isinstance(self.target, str) else list(self.target),
            "id_column": self.id_column,
            "metric": self.metric or self.grader_name,
        }
        if self.id_column is None:
            config["no_id_column"] = True
        if self.train_file != "train.csv":
            config["train_file"] = self.train_file
        if self.test_file != "test.csv":
            config["test_file"] = self.test_file
        sample_name = self.sample_submission.rsplit("/", 1)[-1]
        if sample_name != "sample_submission.csv":
            config["sample_submission_file"] = sample_name
        return config


def _import_callable(ref: str) -> Callable[..., Any]:
    """Import ``"package.module:function"`` (MLE-bench ``mlebench/utils.py`` ``import_fn``)."""
    module_name, _, fn_name = ref.partition(":")
    return getattr(importlib.import_module(module_name), fn_name)


_SPECS: dict[str, CompetitionSpec] = {
    spec.id: spec
    for spec in (
        # MLE-bench mlebench/competitions/spaceship-titanic/{config.yaml,prepare.py,grade.py}.
        CompetitionSpec(
            id="spaceship-titanic",
            name="Spaceship Titanic",
            competition_type="simple",
            grader_name="accuracy",
            target="Transported",
            id_column="PassengerId",
            preparer="mcgs.mlebench.prepare:prepare_spaceship_titanic",
            grade_fn="mcgs.mlebench.grade:grade_accuracy",
            raw_files=("train.csv",),
        ),
        # MLE-bench mlebench/competitions/nomad2018-predict-transparent-conductors/.
        # Grader name mean-column-wise-rmsle = mcgs metric mean_column_rmsle.
        CompetitionSpec(
            id="nomad2018-predict-transparent-conductors",
            name="Nomad2018 Predicting Transparent Conductors",
            competition_type="simple",
            grader_name="mean-column-wise-rmsle",
            metric="mean_column_rmsle",
            target=("formation_energy_ev_natom", "bandgap_energy_ev"),
            id_column="id",
            preparer="mcgs.mlebench.prepare:prepare_nomad2018_predict_transparent_conductors",
            grade_fn="mcgs.mlebench.grade:grade_mean_column_rmsle",
            raw_files=("train.csv", "geometry.tar.xz"),
        ),
        # MLE-bench mlebench/competitions/leaf-classification/ (multi-class-log-loss = log_loss).
        CompetitionSpec(
            id="leaf-classification",
            name="Leaf Classification",
            competition_type="simple",
            grader_name="multi-class-log-loss",
            metric="log_loss",
            target="species",
            id_column="id",
            preparer="mcgs.mlebench.prepare:prepare_leaf_classification",
            grade_fn="mcgs.mlebench.grade:grade_one_hot_log_loss",
            raw_files=("train.csv",),
            classes=LEAF_CLASSES,
        ),
        # MLE-bench mlebench/competitions/random-acts-of-pizza/ (auc-roc = roc_auc).
        CompetitionSpec(
            id="random-acts-of-pizza",
            name="Random Acts of Pizza",
            competition_type="simple",
            grader_name="auc-roc",
            metric="roc_auc",
            target="requester_received_pizza",
            id_column="request_id",
            preparer="mcgs.mlebench.prepare:prepare_random_acts_of_pizza",
            grade_fn="mcgs.mlebench.grade:grade_auc_roc",
            raw_files=("train.json.zip", "test.json.zip"),
            sample_submission="prepared/public/sampleSubmission.csv",
            train_file="train.json",
            test_file="test.json",
        ),
        # MLE-bench mlebench/competitions/spooky-author-identification/.
        CompetitionSpec(
            id="spooky-author-identification",
            name="Spooky Author Identification",
            competition_type="simple",
            grader_name="multi-class-log-loss",
            metric="log_loss",
            target="author",
            id_column="id",
            preparer="mcgs.mlebench.prepare:prepare_spooky_author_identification",
            grade_fn="mcgs.mlebench.grade:grade_one_hot_log_loss",
            raw_files=("train.csv",),
            classes=SPOOKY_CLASSES,
        ),
        # MLE-bench mlebench/competitions/detecting-insults-in-social-commentary/: no id
        # column, rows matched by Comment; the sample submission also carries Date.
        CompetitionSpec(
            id="detecting-insults-in-social-commentary",
            name="Detecting Insults in Social Commentary",
            competition_type="simple",
            grader_name="auc-roc",
            metric="roc_auc",
            target="Insult",
            id_column=None,
            preparer="mcgs.mlebench.prepare:prepare_detecting_insults_in_social_commentary",
            grade_fn="mcgs.mlebench.grade:grade_auc_roc",
            raw_files=("train.csv", "test_with_solutions.csv"),
            sample_submission="prepared/public/sample_submission_null.csv",
            match_column="Comment",
            gold_submission="prepared/private/gold_submission.csv",
        ),
        # MLE-bench mlebench/competitions/aerial-cactus-identification/: images in train.zip and
        # test.zip (files at the root, named by id); no public test table (the test ids are the
        # sample submission's).
        CompetitionSpec(
            id="aerial-cactus-identification",
            name="Aerial Cactus Identification",
            competition_type="code",
            grader_name="auc-roc",
            metric="roc_auc",
            target="has_cactus",
            id_column="id",
            preparer="mcgs.mlebench.prepare:prepare_aerial_cactus_identification",
            grade_fn="mcgs.mlebench.grade:grade_auc_roc",
            raw_files=("train.csv", "train.zip"),
            test_file="sample_submission.csv",
        ),
    )
}


def competition_ids() -> list[str]:
    """Ids of all registered competitions, sorted."""
    return sorted(_SPECS)


def get_competition(competition_id: str) -> CompetitionSpec:
    """Look a competition up by its MLE-bench id.

    Args:
        competition_id: MLE-bench competition id, e.g. ``spaceship-titanic``.

    Returns:
        The competition's spec.

    Raises:
        MLEBenchError: when the id is not registered; the message lists the known ids.
    """
    try:
        return _SPECS[competition_id]
    except KeyError:
        raise MLEBenchError(
            f"unknown MLE-bench competition {competition_id!r}; known competitions: "
            f"{', '.join(competition_ids())}. Register new ones in mcgs/mlebench/registry.py."
        ) from None
