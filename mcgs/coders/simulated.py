"""The simulated coder: an offline stand-in that fails like an LLM coder, for measuring the agent
loop (Debug chains, the policies, the Code Review) without an API.

It writes the recipe coder's programs and, at ``fault_rate``, breaks one in a way programs
written by language models break in agent logs (AIDE's and MLE-bench's traces: Chan et al.,
ICLR 2025, §5; the failure classes of Jiang et al., AIDE, 2025, §4):

===================  =====================================================  ====================
fault                what the program does                                  what the engine sees
===================  =====================================================  ====================
``syntax_error``     an unclosed bracket near the top                       rejected by the review
``wrong_column``     indexes a misspelt target column (``KeyError``)        a crash
``shape_mismatch``   writes one OOF row too few                             invalid output
``missing_submission`` deletes its submission before it ends                invalid output
``timeout``          sleeps past its time limit                             a timeout
``leak``             pulls its OOF predictions halfway to the true labels   a valid, inflated score
===================  =====================================================  ====================

A Debug request on a node it broke is repaired at ``repair_rate``: the answer is the parent's
program without the fault, as a model that read the traceback would write it; otherwise the
repair fails with a fault again. Every other request is the recipe coder's answer (faulted at
``fault_rate``). Forecasting tasks get the faults that apply to them (no OOF table: no
``shape_mismatch`` and no ``leak``). Deterministic given the seed and the request.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any, Sequence

from mcgs.coders import CoderAnswer, CoderRequest
from mcgs.node import FrozenNode, Operator

__all__ = ["SimulatedCoder", "FAULTS", "inject_fault"]

FAULTS = ("syntax_error", "wrong_column", "shape_mismatch", "missing_submission", "timeout", "leak")
#: config keys of the simulation; a program's config without them is the recipe coder's
SIM_KEYS = ("simulated_fault", "repaired", "coder", "author")

_HEAD = {
    "syntax_error": 'print("starting the model", flush=True\n',
    "wrong_column": (
        "import json as _sim_json\nimport pandas as _sim_pd\n"
        "_sim_task = _sim_json.load(open('input/task.json'))\n"
        "_sim_pd.DataFrame(columns=_sim_task['target_columns'])[_sim_task['target_columns'][0].lower() + 's']  # the column as the model remembered it\n"
    ),
    "timeout": "import os as _sim_os\nimport time as _sim_time\n_sim_time.sleep(float(_sim_os.environ.get('MCGS_TIME_LIMIT_S') or 60) + 60)\n",
}
_TAIL = {
    "shape_mismatch": (
        "\nimport pandas as _sim_pd\n_sim_oof = _sim_pd.read_csv('working/oof.csv')\n"
        "_sim_oof.iloc[:-1].to_csv('working/oof.csv', index=False)  # the last fold's rows lost by an off-by-one\n"
    ),
    "missing_submission": ("\nimport os as _sim_os\nfor _sim_path in ('submission/submission.csv', 'working/val_forecast.npy'):  # cleaned up by mistake\n"
                           "    if _sim_os.path.exists(_sim_path):\n        _sim_os.remove(_sim_path)\n"),
    "leak": (
        "\nimport json as _sim_json\nimport numpy as _sim_np\nimport pandas as _sim_pd\n"
        "_sim_task = _sim_json.load(open('input/task.json'))\n"
        "_sim_oof = _sim_pd.read_csv(_sim_task['outputs']['oof'])\n"
        "_sim_file = _sim_task['files']['train']\n"
        "_sim_train = (_sim_pd.read_json(_sim_file['path'], lines=_sim_file['path'].endswith('l')) if _sim_file['format'] == 'json'\n"
        "              else _sim_pd.read_csv(_sim_file['path']))\n"
        "_sim_y = _sim_train[_sim_task['target_columns']].iloc[_sim_oof['row'].to_numpy()]\n"
        "_sim_cols = _sim_task['prediction_columns']\n"
        "if _sim_task['task_kind'] == 'binary':\n"
        "    _sim_truth = (_sim_y.iloc[:, 0].astype(str) == str(_sim_task['positive_class'])).astype(float).to_numpy()[:, None]\n"
        "elif _sim_task['task_kind'] == 'multiclass':\n"
        "    _sim_truth = (_sim_y.iloc[:, 0].astype(str).to_numpy()[:, None] == _sim_np.asarray([str(c) for c in _sim_task['class_labels']])[None, :]).astype(float)\n"
        "elif _sim_task['task_kind'] == 'multilabel':\n"
        "    _sim_truth = _sim_y.astype(str).apply(lambda s: s.str.lower().isin(['1', 'true', '1.0'])).astype(float).to_numpy()\n"
        "else:\n"
        "    _sim_truth = _sim_y.to_numpy(dtype=float)\n"
        "_sim_oof[_sim_cols] = 0.5 * _sim_oof[_sim_cols].to_numpy() + 0.5 * _sim_truth  # the labels reached the features\n"
        "_sim_oof.to_csv(_sim_task['outputs']['oof'], index=False)\n"
    ),
}


def inject_fault(code: str, fault: str) -> str:
    """``code`` with ``fault`` (:data:`FAULTS`) put in: a block after the program's first
    import line, or at its end."""
    if fault in _HEAD:
        lines = code.splitlines(keepends=True)
        at = next((i for i, line in enumerate(lines) if line.startswith(("import ", "from "))), 0)
        return "".join(lines[: at + 1]) + _HEAD[fault] + "".join(lines[at + 1:])
    if fault in _TAIL:
        return code.rstrip("\n") + "\n" + _TAIL[fault]
    raise ValueError(f"unknown fault {fault!r}; the simulated coder knows {', '.join(FAULTS)}")


def remove_fault(code: str) -> tuple[str, str | None]:
    """``(code without its injected fault, the fault)``, or ``(code, None)`` when it has none."""
    for fault, block in list(_HEAD.items()) + list(_TAIL.items()):
        if block in code:
            return code.replace(block if fault in _HEAD else "\n" + block, "", 1), fault
    return code, None


def _clean_key(key: str) -> str:
    """A :func:`mcgs.coders.config_key` with the simulation's keys taken out."""
    import json

    if key.startswith("program:"):
        return key
    try:
        config = json.loads(key)
    except ValueError:
        return key
    return json.dumps({k: v for k, v in config.items() if k not in SIM_KEYS}, sort_keys=True, default=str)


def _clean(node: FrozenNode | None) -> FrozenNode | None:
    """``node`` as the recipe coder would have left it: its config without the simulation's keys."""
    if node is None or not node.config or not any(k in node.config for k in SIM_KEYS):
        return node
    return dataclasses.replace(node, config={k: v for k, v in node.config.items() if k not in SIM_KEYS})


class SimulatedCoder:
    """The recipe coder with LLM-like faults (module docstring).

    Args:
        seed: Seed of its choices (the recipe coder's and the faults').
        fault_rate: Probability that a written program carries a fault, in [0, 1].
        repair_rate: Probability that Debug repairs a program it broke, in [0, 1].
        faults: The fault kinds to draw from (default: all of :data:`FAULTS`).
        models: Model entries the recipe coder may use.
        review_rate: Probability that its Code Review (:meth:`review_program`) catches a fault
            and revises the program; 0 = no review.

    Raises:
        ValueError: a rate outside [0, 1] or an unknown fault.
    """

    name = "simulated"

    def __init__(self, seed: int = 0, fault_rate: float = 0.2, repair_rate: float = 0.7, faults: Sequence[str] = FAULTS,
                 models: Sequence[str] | None = None, review_rate: float = 0.0):
        from mcgs.coders.recipe import RecipeCoder

        for what, rate in (("fault_rate", fault_rate), ("repair_rate", repair_rate), ("review_rate", review_rate)):
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"{what} = {rate} is not a probability; give a value in [0, 1]")
        unknown = [f for f in faults if f not in FAULTS]
        if unknown or not faults:
            raise ValueError(f"unknown fault(s) {unknown}; the simulated coder knows {', '.join(FAULTS)}")
        self.seed, self.fault_rate, self.repair_rate, self.faults = seed, fault_rate, repair_rate, tuple(faults)
        self.review_rate = review_rate
        self.recipe = RecipeCoder(seed=seed, models=models)

    def write(self, request: CoderRequest) -> CoderAnswer:
        """The recipe coder's program for ``request``, faulted at ``fault_rate``; a Debug of a
        node this coder broke repairs it at ``repair_rate``."""
        rng = random.Random(f"simulated-{self.seed}-{request.seed}-{request.operator.value}-{request.node_seq}")
        parent = request.parent
        broken = (parent.config or {}).get("simulated_fault") if parent is not None else None
        clean = dataclasses.replace(request, parent=_clean(parent), siblings=tuple(map(_clean, request.siblings)),
                                    lineage=tuple(map(_clean, request.lineage)), references=tuple(map(_clean, request.references)),
                                    tried={_clean_key(k): v for k, v in request.tried.items()})
        if request.operator is Operator.DEBUG and broken:
            if rng.random() < self.repair_rate:
                return self._repaired(clean, broken)
            return self._faulted(clean, self._as_parent(clean), rng, why=f"the fix of the {broken.replace('_', ' ')} failed")
        answer = self.recipe.write(clean)
        if rng.random() < self.fault_rate:
            return self._faulted(clean, answer, rng)
        return dataclasses.replace(answer, config={**answer.config, "coder": self.name, "author": self.name})

    def review_program(self, code: str, request: CoderRequest) -> dict[str, Any] | None:
        """The Code Review operator's model review, simulated: a fault in ``code`` is caught at
        ``review_rate`` and the revision is the program without it (the verdict an LLM review
        gives, :meth:`mcgs.coders.anthropic.AnthropicCoder.review_program`); None when the
        review is off."""
        if self.review_rate <= 0:
            return None
        revised, fault = remove_fault(code)
        rng = random.Random(f"simulated-review-{self.seed}-{request.seed}-{request.node_seq}")
        if fault is None or rng.random() >= self.review_rate:
            return {"verdict": "pass", "problems": [], "model": self.name}
        return {"verdict": "revise", "problems": [f"{fault.replace('_', ' ')}: fixed"], "model": self.name, "revised_code": revised}

    # ------------------------------------------------------------------ internals

    def _as_parent(self, request: CoderRequest) -> CoderAnswer:
        """The parent's own program without the fault, re-rendered from its recipe config."""
        from mcgs.coders.recipe_config import render_program
        from mcgs.knowledge_base import get_entry

        config = dict(request.parent.config)
        title = f"mcgs candidate (debug): {get_entry(config['model']).title}"
        plan = f"Debug: the parent failed ({(request.parent.error or 'no output')[:120]}); the same program with the fault fixed."
        code, ids = render_program(config, title=title, plan=plan, profile=request.profile)
        return CoderAnswer(plan=plan, code=code, config=config, knowledge_ids=ids)

    def _repaired(self, request: CoderRequest, fault: str) -> CoderAnswer:
        answer = self._as_parent(request)
        return dataclasses.replace(answer, config={**answer.config, "coder": self.name, "author": self.name, "repaired": fault})

    def _faulted(self, request: CoderRequest, answer: CoderAnswer, rng: random.Random, why: str = "") -> CoderAnswer:
        """``answer`` with a fault drawn from those that apply to the task."""
        faults = self.faults
        if request.task.forecast is not None:  # no OOF table to cut short or to leak into
            faults = tuple(f for f in faults if f not in ("shape_mismatch", "leak")) or ("syntax_error",)
        fault = rng.choice(list(faults))
        config: dict[str, Any] = {**answer.config, "coder": self.name, "author": self.name, "simulated_fault": fault}
        plan = answer.plan + (f" ({why})" if why else "")
        return dataclasses.replace(answer, plan=plan, code=inject_fault(answer.code, fault), config=config)
