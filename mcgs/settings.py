"""Search settings: every constant of the search is a setting, with its source.

Settings come from arguments, then environment variables prefixed ``MCGS_`` (e.g.
``MCGS_NUM_DRAFTS=8``), then a settings file, then defaults (DESIGN §7). The settings file is
TOML: ``MCGS_SETTINGS_FILE`` names it, else ``mcgs.toml`` in the working directory is read when
present (keys are the field names; ``[llm]`` holds the :class:`LLMSettings`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["SearchSettings", "LLMSettings", "GROUPS", "flatten_groups", "ModelPrice", "parse_duration", "format_duration", "format_usd", "setting_choices", "setting_default", "settings_file", "setting_variables", "unknown_environment", "describe_settings_error"]

SETTINGS_FILE_ENV = "MCGS_SETTINGS_FILE"
DEFAULT_SETTINGS_FILE = "mcgs.toml"


def settings_file() -> Path | None:
    """The settings file in force: ``$MCGS_SETTINGS_FILE`` (which must exist), else
    ``./mcgs.toml`` when present, else None.

    Raises:
        ValueError: ``MCGS_SETTINGS_FILE`` names a file that does not exist.
    """
    named = os.environ.get(SETTINGS_FILE_ENV)
    if named:
        path = Path(named)
        if not path.is_file():
            raise ValueError(f"{SETTINGS_FILE_ENV}={named}: no such file; create it or unset the variable")
        return path
    path = Path(DEFAULT_SETTINGS_FILE)
    return path if path.is_file() else None


def parse_duration(text: str | float | int) -> float:
    """Parse ``"90"``, ``"90s"``, ``"10m"``, ``"1.5h"`` into seconds.

    Raises:
        ValueError: naming the text and the accepted forms.
    """
    if isinstance(text, (int, float)):
        return float(text)
    t = str(text).strip().lower()
    units = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
    try:
        if t and t[-1] in units:
            value = float(t[:-1]) * units[t[-1]]
        else:
            value = float(t)
    except ValueError:
        raise ValueError(f"cannot read duration {text!r}; use seconds (90, 90s) or minutes/hours (10m, 1.5h)") from None
    if value <= 0:
        raise ValueError(f"duration {text!r} must be positive")
    return value


def format_usd(amount: float) -> str:
    """US dollars as people read them: cents above one cent (``$2.50``), else two significant
    digits (``$0.0001``, ``$0.0035``), so a sub-cent budget does not print as ``$0.00``."""
    if amount == 0:
        return "$0"
    if abs(amount) >= 0.01:
        return f"${amount:,.2f}"
    import numpy as np

    return "$" + np.format_float_positional(amount, precision=2, unique=False, fractional=False, trim="-")


def format_duration(seconds: float) -> str:
    """The shortest form :func:`parse_duration` reads back: ``600`` -> ``"10m"``, ``90`` -> ``"90s"``."""
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("m", 60.0)):
        if seconds >= size and float(seconds / size).is_integer():
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


class ModelPrice(BaseModel):
    """Price of one model in US dollars per million tokens.

    ``cache_write`` is the price of input tokens written to the prompt cache (5-minute TTL),
    ``cache_read`` of input tokens read from it; ``input`` of the other input tokens.
    """

    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_write: float = Field(ge=0)
    cache_read: float = Field(ge=0)

    def cost(self, input_tokens: int, output_tokens: int, cache_write_tokens: int = 0, cache_read_tokens: int = 0) -> float:
        """Cost of one call in US dollars."""
        return (
            input_tokens * self.input + output_tokens * self.output + cache_write_tokens * self.cache_write + cache_read_tokens * self.cache_read
        ) / 1e6


# Anthropic's published list prices (USD per million tokens, platform.claude.com pricing page,
# 2026): cache writes cost 1.25x input, cache reads 0.1x input. A setting, so a user can update it.
DEFAULT_PRICES = {
    "claude-haiku-4-5": ModelPrice(input=1.0, output=5.0, cache_write=1.25, cache_read=0.10),
    "claude-sonnet-4-5": ModelPrice(input=3.0, output=15.0, cache_write=3.75, cache_read=0.30),
    "claude-opus-4-5": ModelPrice(input=5.0, output=25.0, cache_write=6.25, cache_read=0.50),
}


class LLMSettings(BaseModel):
    """Settings of the language-model coders, Anthropic's and OpenAI-compatible ones (DESIGN §5); environment variables
    ``MCGS_LLM__<NAME>`` (e.g. ``MCGS_LLM__MAX_COST_USD=2``).

    Attributes:
        cheap_model: Model that writes by default (BudgetMLAgent's cheap base model).
        strong_model: Model of the cascade's escalation and of "ask the expert" planning calls.
        escalate_after: Consecutive failed nodes on a chain (the parent and its failed primary
            ancestors) after which the strong model writes the next fix; the first valid node
            de-escalates (BudgetMLAgent, Gandhi et al. 2024, §3: cascade on failure).
        max_expert_calls: "Ask the expert" planning calls to the strong model per run, made when
            the search is stagnant (Evolve, Fusion, Aggregate); 0 = never.
        max_tokens: Output token limit of one call; at most 21 000, because the SDK refuses a
            non-streaming call whose worst case exceeds ten minutes (3 600 s x max_tokens / 128 000).
        max_cost_usd: Spending limit of the run in US dollars (None = no limit). Checked before
            each call against the worst case of that call (its prompt priced as cache writes
            plus ``max_tokens`` of output).
        on_budget_spent: ``recipe`` (the recipe coder writes the remaining nodes) or ``stop``
            (the run stops).
        max_reasks: Extra attempts after a malformed answer (no tool call, invalid fields, code
            that does not parse) or a program the graph already has, before the recipe coder
            writes the node.
        max_retries: The SDK's own retries of transient errors (429 with retry-after, 5xx, 529
            overloaded, timeouts, connection errors).
        request_timeout_s: Time limit of one HTTP request, seconds.
        base_url: API base URL (None = the SDK's default, or ``ANTHROPIC_BASE_URL`` /
            ``OPENAI_BASE_URL``); for ``--coder openai``, the OpenAI-compatible server
            (``http://localhost:8000/v1`` for vLLM, ``http://localhost:11434/v1`` for Ollama).
        prices: Model name -> :class:`ModelPrice`; a model missing here is priced as the
            most expensive entry, so the budget never under-counts.
        max_log_chars: Characters of a parent's stdout/stderr tail shown in a prompt.
        model_review: The Code Review operator's model review: after the static review passes a
            program a model wrote, the cheap model reads it (leakage, contract breaches, a run
            time past the timeout) and passes it or returns its problems with a revised program,
            which runs instead (once; MLEvolve reviews every generated program). One call per
            LLM-written node; the recipe coder's programs skip it. False turns it off.
    """

    model_config = ConfigDict(extra="forbid")

    cheap_model: str = "claude-haiku-4-5"
    strong_model: str = "claude-sonnet-4-5"
    escalate_after: int = Field(2, ge=1)
    max_expert_calls: int = Field(3, ge=0)
    max_tokens: int = Field(8192, ge=256, le=21000)
    max_cost_usd: float | None = Field(None, ge=0)
    on_budget_spent: Literal["recipe", "stop"] = "recipe"
    max_reasks: int = Field(1, ge=0)
    max_retries: int = Field(4, ge=0)
    request_timeout_s: float = Field(300.0, gt=0)
    base_url: str | None = None
    prices: dict[str, ModelPrice] = Field(default_factory=lambda: dict(DEFAULT_PRICES))
    max_log_chars: int = Field(3000, ge=200)
    model_review: bool = True

    def price(self, model: str, free_unknown: bool = False) -> ModelPrice:
        """Price of ``model``; unknown models cost as much as the dearest known one, or nothing
        with ``free_unknown`` (a local server's models: :func:`mcgs.llm.unknown_models_free`)."""
        if model in self.prices:
            return self.prices[model]
        if free_unknown:
            return ModelPrice(input=0, output=0, cache_write=0, cache_read=0)
        return max(self.prices.values(), key=lambda p: p.output) if self.prices else ModelPrice(input=0, output=0, cache_write=0, cache_read=0)


#: The settings of each concern: group -> {the name inside the group: the flat field}. The
#: flat names are what ``MCGS_*`` variables, ``mcgs.toml`` keys, stored runs and keyword
#: arguments use; a group's section (``[sandbox]`` in ``mcgs.toml``, ``sandbox={...}`` as an
#: argument) takes the same settings by their names inside the group. Every field not named
#: here but ``llm`` (its own model) belongs to ``search``.
GROUPS: dict[str, dict[str, str]] = {
    "sandbox": {name: name for name in ("memory_mb", "cpu_threads", "gpus", "candidates_per_gpu", "isolation", "disk_mb", "max_output_mb", "keep_workspaces")},
    "ensemble": {
        "enabled": "ensemble", "reserve_s": "ensemble_reserve_s", "max_members": "ensemble_max_members",
        "method": "ensemble_method", "gross_error_sd": "ensemble_gross_error_sd", "every": "ensemble_every",
        "time_share": "ensemble_time_share",
    },
    "storage": {name: name for name in ("lease_s", "max_attempts", "min_free_disk_mb", "executor", "ray_address")},
}


class SearchSettings(BaseSettings):
    """Budgets and constants of the search.

    The fields are flat (``memory_mb``), as ``MCGS_*`` variables, ``mcgs.toml`` and stored runs
    name them; they are grouped by concern (:data:`GROUPS`) and read as groups through
    :attr:`search`, :attr:`sandbox`, :attr:`ensembles`, :attr:`storage` and :attr:`llm`
    (``settings.sandbox.memory_mb``). A group's section is accepted as input too:
    ``SearchSettings(sandbox={"memory_mb": 4096})``, or ``[sandbox]`` in ``mcgs.toml``.

    Attributes:
        time_budget_s: Wall-clock budget of the whole run, seconds.
        per_run_timeout_s: Wall-clock limit of one candidate, seconds (the effective limit is
            ``min(per_run_timeout_s, remaining budget)``).
        max_nodes: Node budget (None = unlimited); the run stops at whichever budget ends first.
        node_timeout_share: No candidate may run longer than this share of ``time_budget_s``
            (the limit of one candidate is ``min(per_run_timeout_s, share * time_budget_s,
            remaining budget)``). AIDE and ML-Master bound a step at a small share of the run
            (1 h of 24 h); 0.25 keeps one slow family (a 99-class random forest at one thread
            takes 200 s) from eating a short run. 1.0 disables it.
        cost_penalty_share: Cost-aware UCT: a child's UCT value is lowered by its branch's mean
            candidate runtime divided by ``cost_penalty_share * time_budget_s``, so a node that
            costs that share of the budget must promise one reward unit more than a free one.
            The idea (prefer the cheaper of two equally promising arms) follows FLAML's
            estimated cost for improvement (Wang et al., MLSys 2021); 0 disables it.
        memory_mb: Memory limit of one candidate, MiB.
        cpu_threads: Threads all running candidates may use together (BLAS/OpenMP/LightGBM),
            default 2 cores; each of ``workers`` candidates gets ``cpu_threads // workers``.
        workers: Candidates run at once (parallel workers on one machine, DESIGN §7). Virtual
            loss on in-flight nodes spreads them across branches.
        gpus: GPUs candidates may use: ``auto`` (every GPU nvidia-smi lists), ``none`` (the
            CPU only) or indices (``0,1``). Each running candidate gets a GPU of its own while
            one is free (``CUDA_VISIBLE_DEVICES``; :mod:`mcgs.gpus`), else none and the CPU.
        candidates_per_gpu: Candidates that may hold one GPU at once (1: none share).
        experience_store: The experience store a finished run adds to and a new run learns
            from (:mod:`mcgs.experience`): ``default`` (``~/.local/share/mcgs/experience.db``),
            a file path, a SQLAlchemy URL, or ``none`` (off; what tests, benches and campaigns
            use, so that they stay reproducible).
        experience_same_task: Let a run learn from earlier runs on the same data (same
            fingerprint); off, so an evaluation never learns from itself.
        executor: Where candidates run (:mod:`mcgs.executors`): ``local`` (this machine's
            sandbox) or ``ray`` (each candidate a Ray task on a Ray cluster, in the same sandbox
            there; needs the ``mcgs[ray]`` extra). Stored with the run, so a resume keeps it.
        ray_address: With ``executor="ray"``: the cluster's address (``auto``, ``host:6379``,
            ``ray://host:10001``); None starts Ray on this machine for the run.
        weights_dir: A folder of pretrained network weights (``resnet18.pth``, or torchvision's
            ``resnet18-f37072fd.pth``) copied into each run's ``input/weights/``; the recipe
            coder fine-tunes a pretrained backbone on image tasks only when they are there.
            Nothing is downloaded.
        num_drafts: Draft children of the root. 5 in AIDE (``search.num_drafts``) and ML-Master
            (``utils/config_mcts.yaml``).
        num_debug_children: Debug children per buggy node at a time. 1 in ML-Master (``num_bugs``).
        num_improve_children: Improve children per valid node. 3 in ML-Master (``num_improves``).
        max_debug_depth: Consecutive debug steps on one chain before it is abandoned. 3 in AIDE
            (``search.max_debug_depth``).
        uct_c_start, uct_c_end: Exploration constant of UCT, decayed piecewise from 1.414 to
            0.5 (ML-Master ``decay.exploration_constant`` / ``lower_bound``).
        uct_decay_phases: Fractions of the budget where the decay starts and ends (ML-Master
            ``piecewise_decay.phase_ratios`` = [0.3, 0.7]); C is constant before the first,
            linear between them, and at ``uct_c_end`` after the second.
        improvement_threshold: Minimum gain for a node to count as a new best. 1e-4 as in
            ML-Master (``metric_improvement_threshold``).
        branch_patience: Successful improve steps without gain on a branch before Improve
            escalates to the next tier (MLEvolve-style patience; 3 as in DESIGN §4).
        virtual_loss: Reward assumed for an in-flight node while selecting (parallel workers).
        ensemble: Build an ensemble node at the end of the run (greedy forward selection
            over the OOF predictions of valid nodes, Caruana et al. 2004).
        ensemble_reserve_s: Seconds of the wall budget reserved for that final step (at most
            a tenth of the budget).
        ensemble_max_members: The best this-many valid nodes are the ensemble's candidates.
        ensemble_method: ``greedy`` (weighted average chosen by greedy forward selection with
            replacement, Caruana et al. 2004) or ``stacking`` (a second-level logistic / positive
            linear regression on the members chosen by greedy selection, cross-validated on the
            same folds; Wolpert 1992).
        ensemble_gross_error_sd: For regression tasks scored by RMSE / RMSLE, OOF rows whose
            residual from the members' median prediction is beyond this many robust standard
            deviations are left out of ensemble selection (trimmed least squares on the blend
            weights; at most 1 % of the rows, else none). The ensemble is still scored on every
            row. 0 = keep every row. 8 from the house-prices holdout study in docs/search.md,
            where every value from 5 to 10 gave the same gain.
        policy: ``mcgs`` (the Monte Carlo Graph Search: UCT plus Evolve, Fusion, Aggregate and
            ensembles during the search, with credit along fuses/references edges), ``tree``
            (the same UCT tree without any graph operator, as ML-Master) or ``greedy`` (AIDE's
            policy: drafts, then debug a buggy leaf with probability ``debug_prob``, else improve
            the best node). All three end with the same final ensemble, so they compare on
            equal terms.
        debug_prob: Probability that the greedy policy debugs a buggy leaf instead of improving
            the best node. 0.5 in AIDE (``search.debug_prob``).
        rescue_at: Share of the wall budget after which a run with no valid full-fidelity node
            yet has the recipe coder draft its cheapest program (:func:`mcgs.operators.draft.rescue_answer`),
            so that a run whose coder keeps failing still hands in a submission; 1 turns it off.
        branch_stagnation: A branch is stagnant when its last this-many successful nodes did not
            beat its best (3, DESIGN §4); its best node then gets Evolve and Fusion children.
        global_stagnation: The search is stagnant when its last this-many finished nodes
            (drafts and ensembles aside) set no new global best (4, DESIGN §4); with two good
            branches or more, Aggregate runs.
        graph_children: Evolve plus Fusion children one node may have.
        max_fusion_refs: Nodes of other branches a Fusion takes (best 1-2; at most 5 references).
        credit_share: Share of a node's reward (and visit) credited to each fuses/references
            source and its primary ancestors, so ideas that help other branches earn credit.
        ensemble_every: Build an ensemble node during the search each time this many new valid
            nodes have appeared since the last one (0 = only at the end); ``mcgs`` policy only.
        ensemble_time_share: A due ensemble during the search is put off while the engine's
            time spent selecting such ensembles (reading OOF predictions, greedy selection and
            its cross-fitted score) exceeds this share of the run's elapsed wall time (0 = no
            cap). With candidates of a few seconds (the demo task) selection would otherwise
            take most of the engine's own share of the wall; with candidates of 10 s or more
            it does not bind (``experiments/engine_cost.py``). The final ensemble is never put off.
        exploit_start, exploit_full: Fractions of the budget between which the share of
            selections taken from the global top-K rises linearly from 0 to
            ``exploit_max_share`` (about 50-70 %, as in ML-Master's switch to exploitation).
        exploit_top_k: K of that global top-K.
        exploit_per_branch: At most this many of the top-K come from one branch.
        plan_candidates: Draft plans the coder writes before the first draft; each runs on a
            row subsample and the search drafts the best-ranked first (multi-plan drafting after
            AutoML-Agent, ICML 2025, §3.3; :mod:`mcgs.screening`). 0 = no screening.
        screen_rows: Training rows of the screening subsample at least; it grows to a tenth of
            the task's rows, up to ten times this (:func:`mcgs.screening.screen_rows_for`).
        screen_timeout_s: Time limit of one screening run, seconds.
        screen_share: Share of the wall budget the screening may take in all.
        halving_rungs: Lower fidelities (row subsamples) the search may run candidates at, for
            asynchronous successive halving (:mod:`mcgs.fidelity`); 0 = every node runs on the
            full data.
        halving_eta: The halving factor: each rung has ``1 / eta`` of the rows of the one above,
            and a rung's top ``1 / eta`` is promoted (3, as in Hyperband and ASHA: Li et al.,
            JMLR 2018; MLSys 2020).
        halving_min_rows: Training rows the lowest rung keeps at least; a task with fewer than
            ``eta`` times this many rows runs at full fidelity only. 25 000 is ours, not
            tuned; on the suite's three tasks with rungs, the config best on all rows was in
            the top third of every rung (docs/results/fidelity.md).
        halving_cost_share: New nodes start on a low rung only while the median full-fidelity
            node takes more than this share of ``time_budget_s`` (fewer than about 1 / share of
            them fit in the budget); 0 = whenever the task has rungs.
        timeout_factor: A recipe candidate's time limit is this many times the cost model's
            prediction of its run time (:mod:`mcgs.cost_model`), at least
            :data:`mcgs.cost_model.MIN_PREDICTED_LIMIT_S` (30 s), at most the limit above; 0 = the fixed
            limit for every candidate.
        seed: Seed of the search's own randomness (recipe choices); candidates get it too.
        fold_seed: Not here: the fold split is a property of the task (``validation.seed``).
        keep_workspaces: Keep ``working/`` of failed nodes (default removes them to save disk).
        recipe_models: Model knowledge entries the recipe coder may choose from (ids such as
            ``model.lightgbm``; like FLAML's ``estimator_list``); ``None`` allows every
            applicable one. An entry that does not apply to the task is ignored; when none
            applies, all applicable ones are used.
        coder: Who writes programs: ``recipe`` (offline), ``anthropic`` (Claude, needs
            ``ANTHROPIC_API_KEY``), ``openai`` (an OpenAI-compatible server at ``llm.base_url``:
            vLLM, Ollama, llama.cpp or a hosted API with ``OPENAI_API_KEY``) or ``auto``
            (anthropic when its key is set, else recipe), or ``simulated`` (the recipe coder
            with LLM-like faults, for measuring the agent loop offline:
            :mod:`mcgs.coders.simulated`). A run stores the coder it resolved to.
        mlflow_tracking_uri: Log every finished node to MLflow there (a tracking server, or
            ``sqlite:///mlflow.db``): :class:`mcgs.integrations.MLflowCallback`, with the
            experiment ``mlflow_experiment``; None = no tracking (``MCGS_MLFLOW_TRACKING_URI``).
        simulated_fault_rate, simulated_repair_rate, simulated_review_rate: The simulated
            coder's probabilities that a program carries a fault, that Debug repairs one, and
            that its Code Review catches one.
        llm: :class:`LLMSettings` of the language-model coders.
        min_free_disk_mb: Free space the run's disk must keep, MiB; below it the run pauses
            (not charged to the budget) with a message until space is freed or the floor is
            lowered with ``mcgs set RUN_DIR min_free_disk_mb=N``.
        lease_s: How long a worker's claim on a node lasts without a heartbeat, seconds (the
            heartbeat renews it every third of that). A claim that lapses, or whose worker
            process on this host is gone, is retried (DESIGN §7; Optuna's heartbeat for
            distributed trials follows the same idea).
        max_attempts: Times a node may be claimed before a lost claim makes it INTERRUPTED.
        max_output_mb: Cap on one file the engine reads or copies out of a candidate's workspace
            (predictions, submission, model files), MiB; a larger file makes the node
            ``invalid_output`` with the file and the cap named (:mod:`mcgs.candidate_files`).
        disk_mb: Disk cap of one candidate's workspace, MiB (the sandbox's watchdog and its
            largest-file limit); past it the node fails as ``disk``. None (default): half of the
            run disk's free space above ``min_free_disk_mb`` when the candidate starts, shared
            among the ``workers``, and at least 256 MiB.
        isolation: How candidates are isolated: ``namespaces`` (bubblewrap: no network, only
            their workspace writable, as an unprivileged user when the engine is root),
            ``process-session`` (limits and a scrubbed environment only) or ``auto``
            (namespaces when bubblewrap works here; required under ``CI=true``). A run stores
            the level it resolved to (:mod:`mcgs.sandbox`).
    """

    model_config = SettingsConfigDict(env_prefix="MCGS_", extra="forbid", env_nested_delimiter="__")

    @classmethod
    def settings_customise_sources(cls, settings_cls, init_settings, env_settings, dotenv_settings, file_secret_settings):
        """Arguments, then ``MCGS_*`` environment variables, then the TOML settings file."""
        import tomllib

        from pydantic_settings import TomlConfigSettingsSource

        path = settings_file()
        init_settings = _FlatSource(init_settings)
        env_settings = _FlatSource(_GroupedEnvironment(env_settings), "environment: ")
        if path is None:
            return (init_settings, env_settings)
        try:
            with path.open("rb") as fh:
                tomllib.load(fh)  # fail here, naming the file, rather than deep in pydantic
        except (tomllib.TOMLDecodeError, OSError) as exc:
            raise ValueError(f"settings file {path}: {exc}; fix it, or point {SETTINGS_FILE_ENV} elsewhere") from exc
        return (init_settings, env_settings, _FlatSource(TomlConfigSettingsSource(settings_cls, toml_file=path), f"settings file {path}: "))

    time_budget_s: float = Field(600.0, gt=0)
    per_run_timeout_s: float = Field(300.0, gt=0)
    max_nodes: int | None = Field(None, ge=1)
    node_timeout_share: float = Field(0.25, gt=0, le=1)
    cost_penalty_share: float = Field(0.1, ge=0)
    memory_mb: int = Field(8192, ge=256)
    cpu_threads: int = Field(2, ge=1)
    workers: int = Field(1, ge=1)
    gpus: str = "auto"
    candidates_per_gpu: int = Field(1, ge=1)
    experience_store: str = "default"
    experience_same_task: bool = False
    executor: Literal["local", "ray"] = "local"
    ray_address: str | None = None
    weights_dir: Path | None = None
    num_drafts: int = Field(5, ge=1)
    num_debug_children: int = Field(1, ge=1)
    num_improve_children: int = Field(3, ge=1)
    max_debug_depth: int = Field(3, ge=0)
    uct_c_start: float = Field(1.414, ge=0)
    uct_c_end: float = Field(0.5, ge=0)
    uct_decay_phases: tuple[float, float] = (0.3, 0.7)
    improvement_threshold: float = Field(1e-4, ge=0)
    branch_patience: int = Field(3, ge=1)
    virtual_loss: float = -1.0
    ensemble: bool = True
    ensemble_reserve_s: float = Field(20.0, ge=0)
    ensemble_max_members: int = Field(30, ge=1)
    ensemble_method: Literal["greedy", "stacking"] = "greedy"
    ensemble_gross_error_sd: float = Field(8.0, ge=0)
    policy: Literal["mcgs", "tree", "greedy"] = "mcgs"
    debug_prob: float = Field(0.5, ge=0, le=1)
    rescue_at: float = Field(0.5, ge=0, le=1)
    plan_candidates: int = Field(8, ge=0)
    screen_rows: int = Field(2000, ge=50)
    screen_timeout_s: float = Field(60.0, gt=0)
    screen_share: float = Field(0.1, ge=0, le=0.5)
    halving_rungs: int = Field(2, ge=0, le=4)
    halving_eta: int = Field(3, ge=2)
    halving_min_rows: int = Field(25_000, ge=100)
    halving_cost_share: float = Field(0.02, ge=0, le=1)
    timeout_factor: float = Field(4.0, ge=0)
    branch_stagnation: int = Field(3, ge=1)
    global_stagnation: int = Field(4, ge=1)
    graph_children: int = Field(2, ge=0)
    max_fusion_refs: int = Field(2, ge=1, le=5)
    credit_share: float = Field(0.5, ge=0, le=1)
    ensemble_every: int = Field(10, ge=0)
    ensemble_time_share: float = Field(0.02, ge=0, le=1)
    exploit_start: float = Field(0.5, ge=0, le=1)
    exploit_full: float = Field(0.7, ge=0, le=1)
    exploit_max_share: float = Field(0.5, ge=0, le=1)
    exploit_top_k: int = Field(3, ge=1)
    exploit_per_branch: int = Field(2, ge=1)
    seed: int = 0
    keep_workspaces: bool = False
    coder: Literal["auto", "recipe", "anthropic", "openai", "simulated"] = "auto"
    mlflow_tracking_uri: str | None = None
    mlflow_experiment: str = "mcgs"
    simulated_fault_rate: float = Field(0.2, ge=0, le=1)
    simulated_repair_rate: float = Field(0.7, ge=0, le=1)
    simulated_review_rate: float = Field(0.0, ge=0, le=1)
    recipe_models: list[str] | None = None
    llm: LLMSettings = Field(default_factory=LLMSettings)
    isolation: Literal["auto", "namespaces", "process-session"] = "auto"
    min_free_disk_mb: float = Field(1024.0, ge=0, allow_inf_nan=False)
    lease_s: float = Field(60.0, ge=3)
    max_attempts: int = Field(2, ge=1)
    max_output_mb: float = Field(4096.0, gt=0, allow_inf_nan=False)
    disk_mb: float | None = Field(None, gt=0, allow_inf_nan=False)

    @property
    def node_limit_s(self) -> float:
        """Time limit of one candidate before the remaining budget is considered, seconds:
        ``min(per_run_timeout_s, node_timeout_share * time_budget_s)``."""
        return min(self.per_run_timeout_s, self.node_timeout_share * self.time_budget_s)

    @field_validator("weights_dir")
    @classmethod
    def _weights_dir(cls, v: Path | None) -> Path | None:
        if v is not None and not Path(v).is_dir():
            raise ValueError(f"weights_dir {str(v)!r} is not a folder; give the folder holding the weight files (e.g. resnet18.pth)")
        return None if v is None else Path(v).resolve()

    @field_validator("gpus")
    @classmethod
    def _gpus(cls, v: str) -> str:
        from mcgs.gpus import parse_gpu_setting

        parse_gpu_setting(v)  # a GpuSettingError (a ValueError) names the value and what is accepted
        return str(v).strip().lower()

    @field_validator("time_budget_s", "per_run_timeout_s", "ensemble_reserve_s", "screen_timeout_s", "lease_s", mode="before")
    @classmethod
    def _duration_text(cls, value: Any) -> Any:
        """A duration as the CLI takes it (``"10m"``, ``"1.5h"``) in MCGS_* variables and the
        settings file too; a bare number is seconds."""
        if isinstance(value, str) and value.strip() and value.strip()[-1].lower() in "smhd":
            return parse_duration(value)
        return value

    @field_validator("ensemble_method", "policy", "coder", "isolation", mode="before")
    @classmethod
    def _choice_case(cls, value: Any) -> Any:
        """Choices in any case and with spaces around them, as the CLI's options take them
        (``MCGS_POLICY=MCGS`` as ``--policy MCGS``)."""
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("recipe_models")
    @classmethod
    def _known_models(cls, models: list[str] | None) -> list[str] | None:
        if models is None:
            return None
        from mcgs.knowledge_base import load_entries

        known = sorted(e.id for e in load_entries() if e.recipe is not None and e.recipe.kind == "model")
        unknown = [m for m in models if m not in known]
        if unknown or not models:
            raise ValueError(f"{', '.join(unknown) or 'an empty list'} is not a model entry; choose among {', '.join(known)}")
        return models

    @model_validator(mode="before")
    @classmethod
    def _flatten_groups(cls, data: Any) -> Any:
        """A group's section (``{"sandbox": {"memory_mb": 4096}}``) as its flat fields
        (:func:`flatten_groups`)."""
        return flatten_groups(data)

    def _group(self, group: str):
        names = _all_groups()[group]
        return _group_model(group)(**{key: getattr(self, flat) for key, flat in names.items()})

    @property
    def search(self):
        """The search's own settings (budgets, policy, UCT, operators, screening, seed, coder),
        read-only (:data:`GROUPS`: every field of no other group)."""
        return self._group("search")

    @property
    def sandbox(self):
        """How candidates run: ``memory_mb``, ``cpu_threads``, ``isolation``, ``disk_mb``,
        ``max_output_mb``, ``keep_workspaces``; read-only."""
        return self._group("sandbox")

    @property
    def ensembles(self):
        """Ensembles (the ``[ensemble]`` section): ``enabled``, ``reserve_s``, ``max_members``,
        ``method``, ``gross_error_sd``, ``every``, ``time_share``; read-only. (``ensemble``
        itself is the flat on/off switch.)"""
        return self._group("ensemble")

    @property
    def storage(self):
        """Claims, disk and where candidates run: ``lease_s``, ``max_attempts``,
        ``min_free_disk_mb``, ``executor``, ``ray_address``; read-only."""
        return self._group("storage")

    @model_validator(mode="after")
    def _check(self) -> "SearchSettings":
        a, b = self.uct_decay_phases
        if not 0 <= a <= b <= 1:
            raise ValueError(f"uct_decay_phases must satisfy 0 <= start <= end <= 1, got {self.uct_decay_phases}")
        if self.exploit_full < self.exploit_start:
            raise ValueError(f"exploit_full ({self.exploit_full}) must not be below exploit_start ({self.exploit_start})")
        return self


def flatten_groups(data: Any, where: str = "") -> Any:
    """Settings given as groups' sections (``{"sandbox": {"memory_mb": 4096}}``) as their flat
    fields (``{"memory_mb": 4096}``); anything else is left as it is. Each source of settings
    (arguments, the settings file) is flattened on its own before the sources are merged, so a
    flat name from one source and a section from another follow the sources' order.

    Raises:
        ValueError: a section names no setting of its group, or one source gives the same
            setting both flat and in a section, with two values.
    """
    if not isinstance(data, dict):
        return data
    data = dict(data)
    for group, names in _all_groups().items():
        section = data.get(group)
        if section is None or (group == "ensemble" and not isinstance(section, dict)):
            continue  # absent, or the flat switch `ensemble` rather than its section
        del data[group]
        if not isinstance(section, dict):
            raise ValueError(f"{where}{group}: a section of settings ({', '.join(sorted(names))}), got {section!r}")
        for key, value in section.items():
            if key not in names:
                raise ValueError(f"{where}{group}.{key}: unknown setting of the {group} group; it has {', '.join(sorted(names))}")
            flat = names[key]
            if flat in data and data[flat] != value:
                raise ValueError(f"{where}{flat} is given twice, as {flat} ({data[flat]!r}) and as {group}.{key} ({value!r}); keep one")
            data[flat] = value
    return data


class _FlatSource:
    """A settings source whose groups' sections are flattened (:func:`flatten_groups`) before
    pydantic-settings merges it with the others."""

    def __init__(self, source, where: str = ""):
        self.source, self.where = source, where

    def __call__(self) -> dict[str, Any]:
        return flatten_groups(self.source(), self.where)


class _GroupedEnvironment:
    """The ``MCGS_*`` variables pydantic-settings reads (flat names, ``MCGS_LLM__*``) plus the
    groups' names (``MCGS_SANDBOX__MEMORY_MB``, ``MCGS_ENSEMBLE__RESERVE_S``) as sections, which
    :func:`flatten_groups` then turns into flat fields. A list or table value is JSON, as for a
    flat variable."""

    def __init__(self, source):
        self.source = source

    def __call__(self) -> dict[str, Any]:
        import json
        import os

        data = dict(self.source())
        upper = {k.upper(): v for k, v in os.environ.items() if k.upper().startswith("MCGS_")}
        for var, (group, key, flat) in _grouped_variables().items():
            if var not in upper:
                continue
            value = upper[var]
            same = upper.get(f"MCGS_{flat.upper()}")
            if same is not None and same != value:
                raise ValueError(f"MCGS_{flat.upper()} ({same!r}) and {var} ({value!r}) set the same setting {flat}; unset one")
            if value.lstrip()[:1] in ("[", "{"):
                try:
                    value = json.loads(value)
                except ValueError:
                    pass  # pydantic names the variable's setting when it cannot read it
            data.pop(flat, None)
            data.setdefault(group, {})[key] = value
        return data


def _all_groups() -> dict[str, dict[str, str]]:
    """Every group, ``search`` included: group -> {name inside the group: flat field}."""
    return {**GROUPS, "search": _search_names()}


def _grouped_variables() -> dict[str, tuple[str, str, str]]:
    """``MCGS_<GROUP>__<NAME>`` -> (group, name inside the group, flat field), every group but
    ``llm`` (pydantic-settings reads ``MCGS_LLM__*`` itself)."""
    return {f"MCGS_{group.upper()}__{key.upper()}": (group, key, flat)
            for group, names in _all_groups().items() for key, flat in names.items()}


def setting_variables(loc: tuple | list) -> list[str]:
    """The ``MCGS_*`` variables that set the setting at pydantic's error location ``loc``
    (``("memory_mb",)``, ``("llm", "max_tokens")``): those set in the environment, else every
    name it is read under (``MCGS_MEMORY_MB``, ``MCGS_SANDBOX__MEMORY_MB``)."""
    import os

    head = [str(p) for p in loc[:2]]
    if head and head[0] == "llm":
        names = ["MCGS_" + "__".join(p.upper() for p in head)]
    else:
        flat = head[0] if head else "<NAME>"
        names = [f"MCGS_{flat.upper()}"] + [var for var, (_, _, field) in _grouped_variables().items() if field == flat]
    present = [n for n in names if n in {k.upper() for k in os.environ}]
    return present or names


def _search_names() -> dict[str, str]:
    """The ``search`` group: every field of no other group, by its own name (``llm`` aside)."""
    grouped = {flat for names in GROUPS.values() for flat in names.values()}
    return {name: name for name in SearchSettings.model_fields if name not in grouped and name != "llm"}


_GROUP_MODELS: dict[str, type[BaseModel]] = {}


def _group_model(group: str) -> type[BaseModel]:
    """The frozen pydantic model of one group: its fields are the flat fields' (types, defaults
    and bounds), under their names inside the group."""
    if group not in _GROUP_MODELS:
        from pydantic import create_model

        names = _all_groups()[group]
        fields = {key: (SearchSettings.model_fields[flat].annotation, SearchSettings.model_fields[flat]) for key, flat in names.items()}
        _GROUP_MODELS[group] = create_model(f"{group.capitalize()}Settings", __config__=ConfigDict(frozen=True), **fields)
    return _GROUP_MODELS[group]


def setting_default(name: str) -> Any:
    """The built-in default of a :class:`SearchSettings` field (what the CLI's help shows).

    Raises:
        KeyError: no such field.
    """
    return SearchSettings.model_fields[name].get_default(call_default_factory=True)


def setting_choices(name: str) -> tuple[str, ...]:
    """The allowed values of a :class:`SearchSettings` field typed as a ``Literal``.

    Raises:
        KeyError: no such field. ValueError: the field is not a ``Literal``.
    """
    choices = get_args(SearchSettings.model_fields[name].annotation)
    if not choices or not all(isinstance(c, str) for c in choices):
        raise ValueError(f"setting {name!r} has no fixed choices")
    return tuple(choices)


#: ``MCGS_*`` variables that are not settings: the settings file, and what the engine and an
#: exported model pass to a candidate or a predict/refit run.
NOT_SETTINGS = frozenset({"SETTINGS_FILE", "MODE", "MODEL_FILE", "PREDICT_INPUT", "PREDICT_OUTPUT", "SANDBOX_ID",
                          "SHARED_DATA", "LIVE_ANTHROPIC_API_KEY"})


def describe_settings_error(exc: Exception) -> str:
    """What to tell a user whose ``MCGS_*`` variable pydantic-settings could not read (a list
    setting given as plain text instead of JSON), naming the variable and an example of its
    JSON form (the setting's own default when it has one)."""
    import json
    import re

    field = re.search(r'field "([^"]+)"', str(exc))
    name = f"MCGS_{field.group(1).upper()}" if field else "an MCGS_* variable"
    default = setting_default(field.group(1)) if field and field.group(1) in SearchSettings.model_fields else None
    example = json.dumps(list(default)) if isinstance(default, (list, tuple)) else '["a", "b"]'  # its own default, as JSON
    return f"{name} cannot be read ({exc}): a list setting takes JSON in the environment, e.g. {name}='{example}'"


def unknown_environment(environ: dict[str, str] | None = None) -> list[str]:
    """One message per ``MCGS_*`` environment variable that names no setting (a typo is
    otherwise silently ignored: pydantic-settings reads only the names it knows), with the
    closest setting's variable when there is one.

    Args:
        environ: The environment to check; default ``os.environ``.
    """
    import difflib
    import os

    environ = os.environ if environ is None else environ
    top = {name.upper() for name in SearchSettings.model_fields}
    nested = {f"LLM__{name.upper()}" for name in LLMSettings.model_fields}
    grouped = {var[5:] for var in _grouped_variables()}
    names = sorted(top | nested | grouped)
    known = set(names) | NOT_SETTINGS
    out = []
    for var in sorted(environ):
        if not var.upper().startswith("MCGS_"):
            continue
        name = var[5:].upper()
        if name in known:
            continue
        close = difflib.get_close_matches(name, names, n=1)
        out.append(f"{var} is not a setting and is ignored" + (f"; did you mean MCGS_{close[0]}?" if close else
                                                               "; see mcgs/settings.py or docs/user_guide.md, section Settings"))
    return out
