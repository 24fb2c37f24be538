"""Command line: ``mcgs run / resume / status / demo`` and ``mcgs mlebench prepare / grade``.

Thin over the library: parse, call, render (rich). Errors in the user's input are printed as
one clear message (no traceback) with exit code 2; Ctrl-C or SIGTERM stops a run cleanly with
exit code 130 and it can be resumed.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import os
import signal
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from mcgs.node import RunStatus
from mcgs.settings import format_duration, setting_choices, setting_default

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Monte Carlo Graph Search over ML solution programs.")
mlebench_app = typer.Typer(no_args_is_help=True, help="Prepare and grade MLE-bench competitions offline.")
app.add_typer(mlebench_app, name="mlebench")
experience_app = typer.Typer(no_args_is_help=True, help="The experience store: what finished runs learned, which new runs on similar data start from.")
app.add_typer(experience_app, name="experience")
protocol_app = typer.Typer(no_args_is_help=True, help="Prepare and grade research data sets with their published protocol (cora, citeseer, etth1-96 ... weather-720).")
app.add_typer(protocol_app, name="protocol")

class _Console(Console):
    """A rich Console that goes quiet when its reader goes away (``mcgs run ... | head``):
    rich's own hook exits with 1, which stopped the search in the middle (progress on stderr)
    or turned a finished run's exit code into "no valid submission" (summary on stdout)."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        # what Python's buffer still holds goes nowhere at exit instead of failing there
        # (docs.python.org/3/library/signal.html#note-on-sigpipe)
        with contextlib.suppress(OSError, ValueError, AttributeError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), self.file.fileno())


console = _Console(stderr=True)
out = _Console()


class _UserError(Exception):
    pass


def _say(msg: str) -> None:
    """Print one of the engine's messages to stderr as text (plan tags like "[draft 1 of 5]"
    and file names are not rich markup)."""
    console.print(msg, highlight=False, markup=False)


def _fail(msg: str) -> None:
    # the message names files and columns: printed as text (a "[...]" in it is not markup) and
    # never folded, so a path can be copied whole from any terminal width
    console.print(f"[bold red]error:[/] {escape(msg)}", highlight=False, soft_wrap=True)
    raise typer.Exit(2)


def _stopped_batch(report: Path, kept: str) -> None:
    """A campaign or bench stopped by Ctrl-C or SIGTERM: say what is kept and how to go on
    (exit code 130, as a shell reports an interrupt)."""
    console.print(f"[yellow]stopped.[/] The {kept} are saved and reported in {escape(str(report))}; "
                  "rerun the same command to continue (they are skipped, an interrupted mcgs run resumes).", soft_wrap=True)
    raise typer.Exit(130)


@contextlib.contextmanager
def _user_errors(out_option: str = "--out"):
    """Turn input errors into one clear message and exit code 2; ``out_option`` is the option
    named when a file cannot be written."""
    from mcgs.metrics import UnknownMetricError
    from mcgs.run_folder import RunError
    from mcgs.storage import StorageError
    from mcgs.task import TaskError

    from pydantic import ValidationError
    from pydantic_settings import SettingsError

    from mcgs._validation import describe_validation_error

    try:
        yield
    except ValidationError as exc:  # settings from options or MCGS_* environment variables
        from mcgs.settings import setting_variables, settings_file

        try:
            path = settings_file()
        except ValueError:
            path = None
        loc = exc.errors()[0].get("loc") if exc.errors() else None
        env = " or ".join(setting_variables(loc)) if loc else "MCGS_<NAME>"
        source = (f"a command-line option or the environment variable {env}" if loc else
                  "command-line options or MCGS_* environment variables")
        _fail(
            f"invalid {exc.title} value:\n" + describe_validation_error(exc)
            + f"\n  (set by {source}" + (f", or in the settings file {path}" if path else "") + ")"
        )
    except SettingsError as exc:  # an MCGS_* value that is not JSON where a list is expected
        from mcgs.settings import describe_settings_error

        _fail(describe_settings_error(exc))
    except (TaskError, RunError, StorageError, UnknownMetricError, _UserError, ValueError) as exc:
        _fail(str(exc))
    except OSError as exc:  # a folder that cannot be created or written
        where = f" {exc.filename}" if exc.filename else ""
        _fail(f"cannot write{where}: {exc.strerror or exc}; choose a path you can write to ({out_option})")


def _duration(option: str, text: str) -> float:
    from mcgs.settings import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise _UserError(f"{option}: {exc}") from None


def _choice(option: str, value: str, allowed: tuple[str, ...]) -> str:
    v = value.strip().lower()
    if v not in allowed:
        raise _UserError(f"{option}: {value!r} is not one of {', '.join(allowed)}")
    return v


def _sigterm_as_interrupt():
    def handler(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, handler)


def _stop_on_signals(search) -> None:
    """Ctrl-C and SIGTERM stop the search in order: the first signal only sets the search's stop
    flag, which the loop, the sandbox (within its poll interval) and every worker check, so the
    running candidates are killed and recorded ``interrupted`` and :meth:`Search.run` raises
    KeyboardInterrupt itself. Raising from the handler instead could land between a
    candidate's start and its supervision and leave it running. A second signal interrupts at
    once."""

    def handler(signum, frame):
        if search.stop_requested:
            raise KeyboardInterrupt(f"signal {signum} (second)")
        search.request_stop()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, handler)
        signal.signal(signal.SIGTERM, handler)


def _setup_logging(verbose: bool) -> None:
    from rich.logging import RichHandler

    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(message)s",
        handlers=[RichHandler(console=console, show_path=False)],
    )
    from mcgs.settings import unknown_environment

    for message in unknown_environment():  # a typo'd MCGS_* variable would be silently ignored
        console.print(f"warning: {message}", highlight=False, markup=False, soft_wrap=True)


def _drive(search) -> None:
    """Run a search with a live progress line; print the summary at the end."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from mcgs.run_folder import RunError
    from mcgs.storage import StorageError

    budget = search.clock.budget_s
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[clock]}"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )
    metric = f"{search.task.metric} ({'higher' if search.task.higher_is_better else 'lower'} is better)"

    def describe() -> str:
        # ended nodes, interrupted ones included: at the end this is the summary's count
        nodes = [n for n in search.nodes() if n.parent_id is not None and n.state.value not in ("pending", "running")]
        best = search.best_node
        best_txt = f"{best.score:.5f}" if best else "-"
        return f"nodes {len(nodes)} | valid {sum(n.is_valid for n in nodes)} | best {metric} {best_txt}"

    _stop_on_signals(search)
    stop = threading.Event()
    search.say = lambda msg: progress.console.print(msg, highlight=False, markup=False)
    with progress:
        task_id = progress.add_task(describe(), total=budget, completed=search.clock.elapsed, clock="")

        def tick():
            while not stop.wait(0.5):
                el = search.clock.elapsed
                progress.update(task_id, completed=min(el, budget), clock=f"{el:5.0f}s / {budget:.0f}s")

        def on_node(_search, node):
            progress.update(task_id, description=describe())
            took = f"({node.runtime_s:.0f}s)" if node.runtime_s is not None else ""
            if node.is_valid:
                line = f"score {node.score:.5f} {took}"
            else:
                reason = escape((node.error or "").strip().splitlines()[0][:120]) if node.error else ""
                if node.state.value == "timeout" and reason.startswith("timed out"):
                    reason, took = "", f"(limit {node.runtime_s:.0f}s per candidate)" if node.runtime_s is not None else took
                line = f"[{'yellow' if node.state.value == 'interrupted' else 'red'}]{node.state.value}[/] {took} {reason}".rstrip()
            progress.console.print(f"  node {node.seq} {node.operator.value}: {line}", highlight=False)

        search.callbacks.append(on_node)
        ticker = threading.Thread(target=tick, daemon=True)
        ticker.start()
        try:
            search.run()
        except (RunError, StorageError) as exc:  # another engine took the run between the check and
            stop.set()  # the start; a storage that cannot be written (a full disk a pause cannot fix)
            progress.stop()
            _fail(str(exc) + (f"; then: mcgs resume {search.run_dir}" if isinstance(exc, StorageError) else ""))
        except KeyboardInterrupt:
            stop.set()
            progress.stop()
            console.print(f"[yellow]stopped.[/] Every finished node is saved; continue with: mcgs resume {escape(str(search.run_dir))}", soft_wrap=True)
            _summary(search)
            raise typer.Exit(130)
        finally:
            stop.set()
        progress.update(task_id, description=describe())  # nodes that ended without a callback (interrupted at the deadline)
    if _summary(search) is None:  # scripts see a failed run: nothing to hand in
        console.print(f"[bold red]error:[/] no candidate produced a valid submission; `mcgs report {escape(str(search.run_dir))} -o {escape(str(search.run_dir / 'report.html'))}` shows each node's error", soft_wrap=True)
        raise typer.Exit(1)


def _forecast_rows(t, best: Path, forecast) -> None:
    """A forecasting run's test forecasts in the summary (:mod:`mcgs.forecast_mode`)."""
    import json

    score = best / "test_score.json"
    if (best / "test_forecast.npy").is_file():
        t.add_row("test forecasts", f"{best / 'test_forecast.npy'} (windows x horizon x series, scaled values)")
    if score.is_file():
        info = json.loads(score.read_text())
        t.add_row("test windows", f"mse {info['scores']['mse']:.4f}, mae {info['scores']['mae']:.4f} over {info['windows']} windows "
                                  f"(look-back {info['lookback']})")
    elif (best / "submission.csv").is_file():
        t.add_row("forecast", f"{best / 'submission.csv'} (the next {forecast.horizon} steps, in the history's units)")


#: What the summary says after the states that a newcomer could read as a broken program.
_STATE_GLOSS = {"interrupted": "stopped by the run's end or a stop signal, not by its program",
                "timeout": "ran past its own time limit"}


def _summary(search):
    """Print the run's summary table and spend; returns the chosen node (None without a valid node)."""
    nodes = [n for n in search.nodes() if n.state.is_finished()]
    best = search.final_node
    path = search.export_best(best) if best else None
    t = Table(show_header=False, box=None)
    t.add_row("run", str(search.run_dir))
    everything = [n for n in search.nodes() if n.parent_id is not None]
    states = Counter(n.state.value for n in everything if not n.is_valid)
    detail = ", ".join([f"{sum(n.is_valid for n in nodes)} valid"]
                       + [f"{v} {k}" + (f" ({_STATE_GLOSS[k]})" if k in _STATE_GLOSS else "") for k, v in sorted(states.items())])
    t.add_row("nodes", f"{len(everything)} ({detail})")
    if best is None:
        t.add_row("chosen node", "none: no candidate produced a valid submission")
    else:
        from mcgs.ensemble import honest_score

        # an ensemble's own OOF score is optimistic (its weights were fitted on those rows): the
        # cross-fitted one is what the choice used, and what the progress line's best cannot show
        honest = honest_score(best)
        crossfit = f", {honest:.6f} cross-fitted (the honest estimate)" if honest != best.score else ""
        where = "on the validation windows" if search.task.forecast is not None else "out-of-fold"
        t.add_row(f"chosen node ({search.task.metric})", f"node {best.seq} ({best.operator.value}): {best.score:.6f} {where}{crossfit}")
        t.add_row("best solution", f"{path / 'solution.py'} (re-run it from {path})")
        if search.task.forecast is not None:
            _forecast_rows(t, path, search.task.forecast)
        else:
            t.add_row("best submission", str(path / "submission.csv"))
    from mcgs.final_choice import choice_notes

    for label, text in choice_notes(nodes, best, search.task.higher_is_better):
        t.add_row(label, text)
    if search.stop_message:
        t.add_row("stopped because", search.stop_message)
    out.print(t)
    if best is not None:
        # printed outside the table, one command a line, never wrapped by rich: a table cell
        # broke them mid-command at 120 columns, and a wrapped command does not paste
        prog = sys.argv[0] if Path(sys.argv[0]).name == "mcgs" else "mcgs"  # as the user typed it, e.g. .venv/bin/mcgs
        out.print("next: the run as one HTML page (search graph, scores, nodes), and the chosen node as a deployable model:", highlight=False)
        out.print(f"  {prog} report {search.run_dir} -o {search.run_dir / 'report.html'}", soft_wrap=True, highlight=False)
        out.print(f"  {prog} export {search.run_dir} --out MODEL_DIR", soft_wrap=True, highlight=False)
    from mcgs.status_view import spend_view

    for part in spend_view(search.snapshot()):
        out.print(part)
    return best


EXECUTOR_HELP = ("Where candidates run: local (this machine's sandbox) or ray (each candidate a Ray task on a Ray cluster, "
                 "in the same sandbox there; needs pip install 'mcgs[ray]').")
RAY_ADDRESS_HELP = "With --executor ray: the cluster's address (auto, HOST:6379, ray://HOST:10001); default: start Ray on this machine."


@app.command()
def run(
    task: Optional[Path] = typer.Argument(None, help="Task folder (task.yaml + CSVs) or an MLE-bench competition folder."),
    out_dir: Path = typer.Option(..., "--out", help="Run directory to create (storage, node workspaces, best/)."),
    prompt: Optional[str] = typer.Option(
        None, "--prompt", help="Instead of TASK: a request in plain words (what to predict, the metric, constraints); needs --data."
    ),
    data: Optional[Path] = typer.Option(None, "--data", help="With --prompt: the folder holding train.csv and test.csv (not written to)."),
    # Options left out are None here and are not passed on, so MCGS_* environment variables and
    # the settings file can set them (docs/user_guide.md, Settings); the help shows the default.
    time_budget: Optional[str] = typer.Option(None, show_default=format_duration(setting_default("time_budget_s")), help="Wall-clock budget of the whole run, e.g. 90s, 10m, 2h."),
    per_run_timeout: Optional[str] = typer.Option(None, show_default=format_duration(setting_default("per_run_timeout_s")), help="Wall-clock limit of one candidate program."),
    seed: Optional[int] = typer.Option(None, show_default=str(setting_default("seed")), help="Seed of the search."),
    max_nodes: Optional[int] = typer.Option(None, help="Stop searching after this many finished nodes (the final ensemble comes on top)."),
    memory_mb: Optional[int] = typer.Option(None, show_default=str(setting_default("memory_mb")), help="Memory limit of one candidate, MiB."),
    workers: Optional[int] = typer.Option(None, min=1, show_default=str(setting_default("workers")), help="Candidates run at once; each gets an equal share of --cpu-threads."),
    cpu_threads: Optional[int] = typer.Option(
        None, min=1, show_default=str(setting_default("cpu_threads")), help="Threads all running candidates may use together (cores to give the search)."
    ),
    gpus: Optional[str] = typer.Option(None, show_default=setting_default("gpus"), help="GPUs candidates may use: auto (every GPU nvidia-smi lists), none (CPU only) or indices such as 0,1; each running candidate gets one of its own."),
    weights_dir: Optional[Path] = typer.Option(None, help="Folder of pretrained weights (resnet18.pth) for image tasks' networks; nothing is downloaded."),
    plans: Optional[int] = typer.Option(
        None, min=0, show_default=str(setting_default("plan_candidates")), help="Draft plans screened on a row subsample before the first draft; the best are drafted first (0 = off)."
    ),
    policy: Optional[str] = typer.Option(
        None,
        show_default=setting_default("policy"),
        help="Search policy: mcgs (UCT + Evolve/Fusion/Aggregate/ensembles), tree (UCT only) or greedy (AIDE's).",
    ),
    coder: Optional[str] = typer.Option(
        None,
        show_default=setting_default("coder"),
        help="Who writes programs: recipe (offline), anthropic (Claude; needs ANTHROPIC_API_KEY), openai (an OpenAI-compatible server: "
        "--base-url and --model; vLLM, Ollama, llama.cpp, or a hosted API with OPENAI_API_KEY) or auto (anthropic when its key is set).",
    ),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="With --coder openai (or anthropic): the API's base URL, e.g. http://localhost:11434/v1."),
    llm_model: Optional[str] = typer.Option(None, "--model", help="With an LLM coder: the model that writes (cheap and strong both unless MCGS_LLM__STRONG_MODEL is set)."),
    max_cost_usd: Optional[float] = typer.Option(None, min=0, help="With an LLM coder: stop calling the API before this many US dollars are spent."),
    models: Optional[str] = typer.Option(
        None, help="Model families the recipe coder may use, comma-separated knowledge ids, e.g. model.lightgbm,model.logistic_regression (default: every one that applies)."
    ),
    baseline: Optional[Path] = typer.Option(
        None, help="A starter program (following docs/solution_contract.md) run as the first node; the search builds from it."
    ),
    storage: Optional[str] = typer.Option(
        None, help="Storage URL shared with `mcgs worker` processes, e.g. postgresql+psycopg://host/db (default: sqlite in RUN_DIR)."
    ),
    executor: Optional[str] = typer.Option(None, show_default=setting_default("executor"), help=EXECUTOR_HELP),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help=RAY_ADDRESS_HELP),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log engine decisions."),
) -> None:
    """Search for a solution to TASK (or to a --prompt request on --data) and write
    RUN_DIR/best/{solution.py,submission.csv}."""
    _setup_logging(verbose)
    _sigterm_as_interrupt()
    with _user_errors():
        import mcgs
        from mcgs.settings import SearchSettings

        given = {
            "time_budget_s": None if time_budget is None else _duration("--time-budget", time_budget),
            "per_run_timeout_s": None if per_run_timeout is None else _duration("--per-run-timeout", per_run_timeout),
            "seed": seed, "max_nodes": max_nodes, "memory_mb": memory_mb, "workers": workers, "cpu_threads": cpu_threads, "gpus": gpus,
            "weights_dir": weights_dir,
            "policy": None if policy is None else _choice("--policy", policy, setting_choices("policy")),
            "plan_candidates": plans,
            "coder": None if coder is None else _choice("--coder", coder, setting_choices("coder")),
            "recipe_models": None if models is None else [m.strip() for m in models.split(",") if m.strip()],
            "executor": None if executor is None else _choice("--executor", executor, setting_choices("executor")),
            "ray_address": ray_address,
        }
        # an option given wins; the others come from MCGS_* variables, the settings file or the default
        settings = SearchSettings(**{k: v for k, v in given.items() if v is not None})
        settings = _llm_options(settings, base_url=base_url, model=llm_model, max_cost_usd=max_cost_usd)
        reader = _request_reader(settings.coder, settings.llm) if prompt is not None else None
        task = _task_argument(task, prompt, data, out_dir, reader=reader)
        _check_llm_key(settings.coder, settings.llm)
        search = mcgs.create_search(task, run_dir=out_dir, settings=settings, baseline=baseline, storage=storage)
        if reader is not None and reader.usage is not None:  # the request's reading goes in the ledger
            search.record_llm_call("request", "request", reader.usage)
    _drive(search)


def _llm_options(settings, *, base_url: str | None, model: str | None, max_cost_usd: float | None):
    """``settings`` with the LLM options given on the command line (each wins over MCGS_LLM__*)."""
    update = {}
    if base_url is not None:
        update["base_url"] = base_url
    if model is not None:
        update["cheap_model"] = model
        if not os.environ.get("MCGS_LLM__STRONG_MODEL"):
            update["strong_model"] = model
    if max_cost_usd is not None:
        update["max_cost_usd"] = max_cost_usd
    return settings.model_copy(update={"llm": settings.llm.model_copy(update=update)}) if update else settings


def _check_llm_key(coder: str, llm) -> None:
    """Refuse an LLM coder whose key is missing, saying what to set."""
    from mcgs.llm.openai_client import is_local_url

    if coder == "anthropic" and not os.environ.get("ANTHROPIC_API_KEY"):
        raise _UserError("--coder anthropic needs ANTHROPIC_API_KEY in the environment (or use --coder recipe, which runs offline)")
    if coder == "openai":
        url = llm.base_url or os.environ.get("OPENAI_BASE_URL")
        if not os.environ.get("OPENAI_API_KEY") and not is_local_url(url):
            raise _UserError("--coder openai needs OPENAI_API_KEY for a hosted API, or --base-url of a server on this machine or network "
                             "(e.g. http://localhost:11434/v1 for Ollama, http://localhost:8000/v1 for vLLM)")
        if llm.cheap_model.startswith("claude-"):
            raise _UserError("--coder openai: name the server's model with --model (or MCGS_LLM__CHEAP_MODEL), e.g. --model qwen2.5-coder:32b")


def _request_reader(coder: str, llm=None):
    """A language-model request reader when the coder resolves to an LLM, else None."""
    if coder == "recipe" or (coder == "auto" and not os.environ.get("ANTHROPIC_API_KEY")):
        return None
    from mcgs.request import RequestReader
    from mcgs.settings import SearchSettings

    llm = llm or SearchSettings().llm
    provider = "openai" if coder == "openai" else "anthropic"
    _check_llm_key(provider, llm)
    return RequestReader(llm, provider=provider)


def _task_argument(task: Path | None, prompt: str | None, data: Path | None, out_dir: Path, reader=None) -> Path:
    """The task folder to run: TASK itself, or one written under RUN_DIR/task from a request
    (parsed and verified first; nothing is written when the request has problems)."""
    if prompt is None:
        if task is None:
            raise _UserError("give a TASK folder, or a request with --prompt \"...\" --data FOLDER")
        if data is not None:
            raise _UserError("--data goes with --prompt; a TASK folder already names its data")
        return task
    if task is not None:
        raise _UserError("give either a TASK folder or --prompt, not both")
    if data is None:
        raise _UserError("--prompt needs --data FOLDER (the folder holding train.csv and test.csv)")
    from mcgs.request import parse_request, write_task_folder
    from mcgs.run_folder import DB_NAME, check_run_folder

    if (out_dir / DB_NAME).exists():
        raise _UserError(f"{out_dir} already holds a run; resume it with `mcgs resume {out_dir}` or choose another --out")
    check_run_folder(out_dir)  # RUN_DIR/task is written before create_search checks: never among the user's files
    parsed = parse_request(prompt, data, reader=reader)
    _show_request(parsed)
    folder = write_task_folder(parsed, data, out_dir / "task", prompt=prompt)
    from mcgs.task import TaskError, load_task

    try:  # check it loads before anything else is written; name the user's files, not the links
        load_task(folder)
    except TaskError as exc:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
        with contextlib.suppress(OSError):
            out_dir.rmdir()  # only when it is now empty
        raise _UserError(str(exc).replace(str(folder), str(data))) from None
    return folder


def _show_request(parsed) -> None:
    for note in parsed.notes:
        console.print(f"[dim]request:[/] {escape(note)}", highlight=False)


@app.command()
def request(
    prompt: str = typer.Argument(..., help="The request in plain words."),
    data: Path = typer.Option(..., "--data", help="Folder holding train.csv and test.csv, or one history to forecast (series.csv)."),
    coder: str = typer.Option("auto", help="recipe: rules only; anthropic: Claude reads the request too (needs ANTHROPIC_API_KEY); auto: anthropic when the key is set."),
) -> None:
    """Parse and verify a request against a data folder without searching: print the task
    spec it becomes (JSON), or each missing or contradictory fact and how to fix it."""
    with _user_errors():
        from mcgs.request import RequestError, parse_request

        parsed = parse_request(prompt, data, reader=_request_reader(_choice("--coder", coder, setting_choices("coder"))))
        _show_request(parsed)
        if parsed.problems:
            raise RequestError(parsed.problems)
        shown = parsed.request.model_dump(mode="json") | ({"forecast": parsed.forecast} if parsed.forecast else {})
        console.print_json(json.dumps(shown))


@app.command()
def resume(
    run_dir: Path = typer.Argument(..., help="Run directory of a stopped run."),
    time_budget: Optional[str] = typer.Option(None, help="New total budget (default: the run's own)."),
    max_nodes: Optional[int] = typer.Option(None, min=1, help="New total node budget (default: the run's own; the final ensemble comes on top)."),
    storage: Optional[str] = typer.Option(None, help="Storage URL, when the run's storage needs a password (see RUN_DIR/storage.json)."),
    executor: Optional[str] = typer.Option(None, help=EXECUTOR_HELP + " Default: the run's own."),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help=RAY_ADDRESS_HELP),
    verbose: bool = typer.Option(False, "--verbose", "-v"),
) -> None:
    """Continue a stopped run from its storage."""
    _setup_logging(verbose)
    _sigterm_as_interrupt()
    with _user_errors():
        from mcgs.budget import MIN_CANDIDATE_S, StopReason
        from mcgs.engine_lock import EngineBusy, engine_holder
        import mcgs
        from mcgs.forecast_mode import finish_forecast, pending_test_forecast
        from mcgs.run_folder import wait_for_free_space

        holder = engine_holder(run_dir)  # checked again, race-free, when the search starts
        if holder is not None:
            raise _UserError(str(EngineBusy(run_dir, holder)))
        if storage is None and run_dir.is_dir():
            try:
                wait_for_free_space(run_dir, _say)
            except KeyboardInterrupt:
                raise typer.Exit(130) from None
        search = mcgs.load_search(storage or run_dir, run_dir=run_dir,
                                  time_budget_s=_duration("--time-budget", time_budget) if time_budget else None)
        changes = {k: v for k, v in (("max_nodes", max_nodes), ("ray_address", ray_address),
                                     ("executor", executor and _choice("--executor", executor, setting_choices("executor")))) if v is not None}
        if changes:  # stored with the run when it starts
            search.settings = search.settings.model_copy(update=changes)
        spent = search.budget_exhausted() if search.run_record.status is RunStatus.FINISHED else None
        pending = pending_test_forecast(search) if search.clock.remaining < MIN_CANDIDATE_S or spent is not None else None
        if pending is not None:  # the search is done; what it lacks is the chosen node's test forecast
            _say(f"the run's budget is spent and its test forecast is missing: forecasting the test windows with node {pending.seq}")
            finish_forecast(search, pending)
            return
        if search.clock.remaining < MIN_CANDIDATE_S:
            raise _UserError(
                f"the run's budget of {search.clock.budget_s:.0f}s is already spent; give a larger total with --time-budget"
            )
        if spent is StopReason.NODES:
            raise _UserError(
                f"the run's node budget of {search.settings.max_nodes} nodes is already spent; give a larger total with --max-nodes"
            )
        if spent is StopReason.TIME:  # finished with too little left for a candidate
            raise _UserError(
                f"the run's budget of {search.clock.budget_s:.0f}s is spent ({search.clock.elapsed:.0f}s used, too little left for "
                f"a candidate); give a larger total with --time-budget"
            )
    _drive(search)


@app.command()
def worker(
    artifacts: Path = typer.Option(..., "--artifacts", help="The run's folder of artifacts (its RUN_DIR), reachable from this machine."),
    storage: Optional[str] = typer.Option(None, help="Storage URL of the run (default: RUN_DIR/storage.json, else sqlite in RUN_DIR)."),
    run_name: Optional[str] = typer.Option(None, "--run", help="Name of the run in that storage (default: the only one)."),
    drain: bool = typer.Option(False, help="Only run queued nodes, and exit when none is left."),
    verbose: bool = typer.Option(False, "--verbose", "-v"),
) -> None:
    """Work on a run started by `mcgs run` (on this or another machine): claim queued nodes,
    select and write new ones, and record their verdicts, until the run finishes."""
    _setup_logging(verbose)
    _sigterm_as_interrupt()
    with _user_errors():
        import mcgs

        search = mcgs.load_search(storage or artifacts, run_name, run_dir=artifacts)
    status = search.storage.get_run(search.run_record.name).status
    if status in (RunStatus.FINISHED, RunStatus.ENSEMBLING):
        search.storage.close()
        out.print(f"the run in {artifacts} is {status}: no node is left to work on (a worker joins a run while it searches)", soft_wrap=True)
        return
    import socket

    from mcgs.engine_lock import engine_holder

    holder = engine_holder(artifacts) or {}
    cores = os.cpu_count() or 1
    if holder.get("host") == socket.gethostname() and search.settings.cpu_threads * 2 > cores:
        console.print(f"warning: the run's engine (process {holder.get('pid')}) runs on this machine too, with up to "
                      f"{search.settings.cpu_threads} CPU thread(s) for its candidates, and so will this worker: {cores} core(s) "
                      f"in all, so candidates compete and may time out; lower the run's --cpu-threads, or run workers on "
                      f"other machines", highlight=False, markup=False, soft_wrap=True)
    search.say = _say
    _stop_on_signals(search)
    try:
        done = search.work(drain=drain)
    except KeyboardInterrupt:
        console.print("worker stopped; its running node is recorded as interrupted")
        raise typer.Exit(130)
    finally:
        search.storage.close()
    out.print(f"worker {search.owner}: {done} node(s) finished")


@app.command()
def status(
    run_dir: Path = typer.Argument(..., help="Run directory."),
    watch: bool = typer.Option(False, "--watch", "-w", help="Keep the view live (refreshed every --interval) until the run ends or Ctrl-C."),
    interval: float = typer.Option(2.0, min=0.2, help="Seconds between refreshes with --watch."),
    storage: Optional[str] = typer.Option(None, help="Storage URL, when the run's storage needs a password."),
) -> None:
    """Show a run: budget, best node and its lineage, nodes by operator and state, the top nodes,
    nodes in flight, isolation and LLM spend. Works on a finished, stopped or running search."""
    with _user_errors():
        from mcgs.run_folder import locate_run
        from mcgs.snapshot import read_snapshot
        from mcgs.snapshot import engine_gone
        from mcgs.status_view import status_view

        store, record = locate_run(run_dir, storage=storage, read_only=True)  # read only: no engine, nothing written

        def snapshot():
            return read_snapshot(store, run_dir, record.name)

        first = snapshot()

    def resume_hint() -> None:  # the command on a line of its own, never wrapped, so it pastes
        if engine_gone(run_dir, store.get_run(record.name)):
            out.print(f"resume: mcgs resume {run_dir}", soft_wrap=True, highlight=False)

    if not watch:
        try:
            out.print(status_view(first))
            resume_hint()
        finally:
            store.close()
        return
    from rich.live import Live

    def ended(rec) -> bool | None:
        """True when the run shown from ``rec`` has ended (finished, stopped, or its engine is
        gone); None when it ended after ``rec`` was read, so one more view is due. The lock is
        read after the record (and, piped, after a print that waits on a slow reader): an
        engine that stored "finished" and exited in between looks gone from a stale record."""
        if rec.status in (RunStatus.FINISHED, RunStatus.STOPPED):
            return True
        if not engine_gone(run_dir, rec):
            return False
        return True if store.get_run(record.name).status == rec.status else None

    if not out.is_terminal:  # a pipe or a file: a snapshot whenever the run has changed
        try:
            last = None
            while True:
                snap = snapshot()
                key = (snap.record.status, len(snap.nodes), sum(n.state.is_finished() for n in snap.nodes))
                if key != last:
                    out.print(status_view(snap))  # drawn after the record was read: it shows at least its state
                    last = key
                done = ended(snap.record)
                if done:
                    resume_hint()
                    break
                if done is False:
                    time.sleep(interval)
        except KeyboardInterrupt:
            pass
        finally:
            store.close()
        return
    try:
        with Live(status_view(first), console=out, refresh_per_second=4, screen=False) as live:
            done = False
            while not done:
                if done is False:
                    time.sleep(interval)
                snap = snapshot()
                live.update(status_view(snap))
                done = ended(snap.record)
        resume_hint()
    except KeyboardInterrupt:
        pass
    finally:
        store.close()


@app.command()
def report(
    run_dir: Path = typer.Argument(..., help="Run directory (finished, stopped or still running)."),
    output: Path = typer.Option(Path("report.html"), "--output", "-o", help="HTML file to write."),
    storage: Optional[str] = typer.Option(None, help="Storage URL, when the run's storage needs a password."),
) -> None:
    """Write one self-contained HTML report of a run: the search graph (click a node for its plan,
    program, diff and output), the best score over time and a table of nodes."""
    with _user_errors(out_option="-o/--output"):
        from mcgs.report import write_report
        from mcgs.snapshot import load_run

        path = write_report(load_run(run_dir, storage=storage, details=True), output)
    out.print(f"report written to {path} ({path.stat().st_size / 2**20:.1f} MiB; opens without a network)")


@app.command()
def dashboard(
    run_dir: Path = typer.Argument(..., help="Run directory (running, finished, stopped, or an archived read-only copy)."),
    port: int = typer.Option(8080, help="Port to listen on."),
    host: str = typer.Option("127.0.0.1", help="Address to listen on; any other than this machine needs --token."),
    token: Optional[str] = typer.Option(None, help="A secret every visitor must give once (?token=...); generated when --host is not local."),
    run: Optional[str] = typer.Option(None, help="The run's name, when its storage holds several."),
    storage: Optional[str] = typer.Option(None, help="Storage URL, when it is not the run folder's own (a PostgreSQL run shared by workers)."),
) -> None:
    """Watch a run in a browser, live: its state, budget and spend, the search graph (click a node
    for its plan, program, diff to its parent, logs, knowledge and LLM calls), scores over time
    and the chosen ensemble. It only reads the run's storage and changes nothing."""
    import secrets

    with _user_errors():
        from mcgs.dashboard import create_app, is_loopback

        if not is_loopback(host) and not token:
            token = secrets.token_urlsafe(16)
        app_ = create_app(run_dir, run=run, storage=storage, token=token)  # a missing run is said here, before listening
    shown = "localhost" if is_loopback(host) else host
    out.print(f"dashboard of {run_dir} at http://{shown}:{port}/" + (f"?token={token}" if token else "") + "   (Ctrl-C stops it)")
    import uvicorn

    uvicorn.run(app_, host=host, port=port, log_level="warning")


@app.command()
def export(
    run_dir: Path = typer.Argument(..., help="Run directory."),
    out_dir: Path = typer.Option(..., "--out", help="Folder to write: new, empty, or an earlier export (which is replaced)."),
    node: Optional[int] = typer.Option(None, help="Node number to export (default: the run's chosen node)."),
    storage: Optional[str] = typer.Option(None, help="Storage URL, when the run's storage needs a password."),
) -> None:
    """Write a deployable folder for a node: its fitted fold models, predict.py (CSV in, CSV out;
    or predict(DataFrame)), train.py (refit on all rows), pinned requirements and a model card;
    for a forecasting task, forecast.py (a history in, the next steps out).
    The task's constraints (inference ms per row, model size, interpretability) are measured on
    it; without --node, a chosen node that breaks one gives way to the next best that passes."""
    with _user_errors():
        from mcgs.export import ExportError, export_node
        from mcgs.snapshot import load_run

        run = load_run(run_dir, storage=storage, details=True)
        try:
            result = export_node(run, out_dir, node_seq=node)
        except ExportError as exc:
            raise _UserError(str(exc)) from None
    m = result.measurements
    forecasting = (result.path / "forecast.py").is_file()
    out.print(f"exported node {result.node_seq} to {result.path}: {m['ms_per_row']} ms per {'forecast' if forecasting else 'row'}, "
              f"model {m['model_mb']} MiB"
              + (f"; constraints passed: {', '.join(m['passed'])}" if m["passed"] else "")
              + (f"; {len(result.rejected)} better node(s) broke a constraint (see MODEL_CARD.md)" if result.rejected else ""))
    out.print(f"use: pip install -r {result.path / 'requirements.txt'}  (once, in the environment that will predict)")
    if forecasting:
        out.print(f"     python {result.path / 'forecast.py'} HISTORY.csv OUT.csv   (the steps after HISTORY's last row; "
                  f"try {result.path / 'example_history.csv'}; or: from forecast import forecast; forecast(dataframe))")
    else:
        graph = " [--edges EDGES.csv: new nodes join the graph]" if run.task.graph is not None else ""
        out.print(f"     python {result.path / 'predict.py'} IN.csv OUT.csv{graph}   (or: from predict import predict; predict(dataframe))")


@app.command("set")
def set_live(
    run_dir: Path = typer.Argument(..., help="Run directory (the run may be running)."),
    assignment: str = typer.Argument(..., help="NAME=VALUE, e.g. min_free_disk_mb=500."),
) -> None:
    """Change a setting of a live run (read by the run at its next step): min_free_disk_mb."""
    with _user_errors():
        from mcgs.disk import set_live_setting

        name, parsed = set_live_setting(run_dir, assignment)
    out.print(f"{name} = {parsed:g} for the run in {run_dir} (a running search reads it before its next candidate; a stopped one on resume)")


@app.command()
def demo(
    out_dir: Path = typer.Option(Path("demo_run"), "--out", help="Where to write the demo task and run."),
    time_budget: str = typer.Option("2m", help="Search budget."),
    seed: int = typer.Option(0),
) -> None:
    """Build the bundled demo task (scikit-learn's breast-cancer data) and search it."""
    _setup_logging(False)
    _sigterm_as_interrupt()
    with _user_errors():
        import shutil

        import mcgs
        from mcgs.demo import build_demo_task
        from mcgs.run_folder import DB_NAME, foreign_entries
        from mcgs.settings import SearchSettings

        run_dir = out_dir / "run"
        earlier_run = run_dir.is_dir() and not run_dir.is_symlink() and (run_dir / DB_NAME).is_file()
        if not earlier_run and (run_dir.is_symlink() or run_dir.is_file() or foreign_entries(run_dir)):
            # an earlier demo's run is replaced; a folder of the user's is not
            raise _UserError(f"{run_dir} is not an mcgs run, and the demo replaces {run_dir}; give --out a new folder, e.g. --out {out_dir / 'mcgs-demo'}")
        task_dir = build_demo_task(out_dir / "task")
        if run_dir.exists():
            shutil.rmtree(run_dir)
        settings = SearchSettings(time_budget_s=_duration("--time-budget", time_budget), per_run_timeout_s=60, seed=seed)
        search = mcgs.create_search(task_dir, run_dir=run_dir, settings=settings)
    console.print(f"demo task written to {task_dir}; searching for {time_budget}")
    _drive(search)
    if search.final_node is not None:
        from mcgs.demo import grade_demo_submission

        out.print(f"held-out test ROC AUC of the best submission: {grade_demo_submission(task_dir, run_dir / 'best' / 'submission.csv'):.4f}")


@mlebench_app.command("prepare")
def mlebench_prepare(
    competition: str = typer.Argument(..., help="Competition id, e.g. spaceship-titanic."),
    raw: Path = typer.Option(..., help="Folder with the competition's raw Kaggle files."),
    out_dir: Path = typer.Option(..., "--out", help="Data directory; writes OUT/<id>/prepared/{public,private}."),
) -> None:
    """Rebuild MLE-bench's exact split of a competition."""
    with _user_errors():
        from mcgs.mlebench import prepare_competition

        path = prepare_competition(competition, raw, out_dir)
    out.print(f"prepared {competition} in {path}")


@mlebench_app.command("grade")
def mlebench_grade(
    competition: str = typer.Argument(...),
    submission: Path = typer.Argument(..., help="submission.csv to grade."),
    data: Path = typer.Option(..., help="Data directory given to `mcgs mlebench prepare --out`."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Grade a submission on the private split with MLE-bench's rules."""
    with _user_errors():
        from mcgs.mlebench import grade_submission

        report = grade_submission(competition, submission, data)
    d = report.to_dict()
    if as_json:
        out.print_json(json.dumps(d, default=str))
        return
    t = Table(title=f"{competition}: {submission}", show_header=False)
    for k, v in d.items():
        t.add_row(k, str(v))
    out.print(t)


@protocol_app.command("prepare")
def protocol_prepare(
    name: str = typer.Argument(..., help="Protocol: cora, citeseer, etth1-H or weather-H (H: 96, 192, 336, 720)."),
    raw: Path = typer.Option(..., help="The data set's raw folder, e.g. ../shared/data/cora/raw."),
    out_dir: Path = typer.Option(..., "--out", help="Writes OUT/task (the task folder) and OUT/answers.csv (.npz for forecasting)."),
) -> None:
    """Prepare a data set as a task folder with its published split; the answers go beside it."""
    with _user_errors():
        from mcgs.protocols import prepare_protocol

        from mcgs.protocols import get_protocol

        task_dir = prepare_protocol(name, raw, out_dir)
    out.print(f"prepared {name}: task folder {task_dir}, answers {out_dir / get_protocol(name).answers} (keep them out of the task folder)")


@protocol_app.command("grade")
def protocol_grade(
    name: str = typer.Argument(..., help="Protocol: cora, citeseer, etth1-H or weather-H."),
    submission: Path = typer.Argument(..., help="What to grade: RUN_DIR/best/submission.csv (forecasting: RUN_DIR/best/test_forecast.npy)."),
    answers: Path = typer.Option(..., help="answers.csv (forecasting: answers.npz) written by `mcgs protocol prepare`."),
) -> None:
    """Score a submission on the protocol's test rows with its metric."""
    with _user_errors():
        from mcgs.protocols import get_protocol, grade_protocol

        score = grade_protocol(name, submission, answers)
        metric = get_protocol(name).metric
    if isinstance(score, dict):
        out.print(f"{name}: " + ", ".join(f"{k} {v:.4f}" for k, v in score.items()) + f" ({metric})")
    else:
        out.print(f"{name}: {metric} {score:.4f}")


@mlebench_app.command("campaign")
def mlebench_campaign(
    competitions: str = typer.Option(..., help="Comma-separated competition ids, e.g. spaceship-titanic,leaf-classification."),
    seeds: str = typer.Option("0,1,2", help="Comma-separated search seeds."),
    time_budget: str = typer.Option("10m", help="Wall budget of each run."),
    data: Path = typer.Option(..., "--data", help="Folder of prepared competitions (mcgs mlebench prepare --out)."),
    out_dir: Path = typer.Option(..., "--out", help="Campaign folder: runs/, reports/, campaign.json, campaign.md."),
    raw: Optional[Path] = typer.Option(None, "--raw", help="Folder holding <id>/raw; competitions not yet prepared in --data are prepared from it."),
    coder: str = typer.Option("recipe", help="recipe (offline), anthropic or auto."),
) -> None:
    """Search and grade every competition x seed, then aggregate as MLE-bench does (any medal,
    gold/silver/bronze, valid submissions, above median, mean ± standard error). A rerun skips
    graded pairs and resumes stopped runs."""
    _setup_logging(False)
    _sigterm_as_interrupt()
    with _user_errors():
        from mcgs.mlebench.campaign import CampaignSpec, run_campaign

        try:
            seed_list = tuple(int(x) for x in seeds.split(",") if x.strip())
        except ValueError:
            raise _UserError(f"--seeds must be comma-separated integers, got {seeds!r}") from None
        comps = tuple(c.strip() for c in competitions.split(",") if c.strip())
        if not comps or not seed_list:
            raise _UserError("give at least one competition (--competitions) and one seed (--seeds)")
        spec = CampaignSpec(
            competitions=comps, seeds=seed_list, time_budget_s=_duration("--time-budget", time_budget), data_dir=data, out_dir=out_dir,
            raw_root=raw, settings={"coder": _choice("--coder", coder, setting_choices("coder"))},
        )
        try:
            result = run_campaign(spec, say=_say)
        except KeyboardInterrupt:
            _stopped_batch(out_dir / "campaign.md", "graded runs")
    o = result["overall"]
    out.print(
        f"{o['runs']} runs: valid {o['valid_submission_pct']} %, any medal {o['any_medal_pct']} % "
        f"(gold {o['gold']}, silver {o['silver']}, bronze {o['bronze']}), above median {o['above_median_pct']} %; "
        f"report {out_dir / 'campaign.md'}"
    )
    if result["failed"]:
        out.print(f"[red]{len(result['failed'])} run(s) failed[/red] (rerun the command to try them again):")
        for line in result["failed"]:
            out.print(f"  {line}", markup=False)
        raise typer.Exit(1)


@app.command()
def bench(
    competitions: str = typer.Option("", help="Comma-separated competition ids, e.g. spaceship-titanic,leaf-classification; with --suite, task names (default: every suite task)."),
    competitors: str = typer.Option("mcgs,lightgbm,optuna,flaml", help="Comma-separated: mcgs, lightgbm (defaults), optuna (tuned LightGBM), flaml (AutoML), autogluon_medium, autogluon_best (AutoGluon's presets, in its own environment: make autogluon-env)."),
    time_budget: str = typer.Option("10m", help="Wall budget of every competitor on every competition."),
    seed: int = typer.Option(0, help="Seed given to every competitor."),
    threads: int = typer.Option(2, min=1, help="Threads (cores) every competitor may use."),
    data: Optional[Path] = typer.Option(None, "--data", help="Folder of prepared competitions (mcgs mlebench prepare --out)."),
    out_dir: Path = typer.Option(..., "--out", help="Bench folder: runs/, results/, bench.json, bench.md."),
    raw: Optional[Path] = typer.Option(None, "--raw", help="Folder holding <id>/raw; competitions not yet prepared in --data are prepared from it."),
    suite: Optional[Path] = typer.Option(None, "--suite", help="A public suite built by experiments/suite.py --out DIR: run its tasks, graded on their answers."),
) -> None:
    """Compare mcgs with LightGBM (defaults), Optuna-tuned LightGBM and FLAML AutoML on the same
    MLE-bench splits (or the public suite's tasks, --suite), cores and wall budget, each in its own process; grade every submission on
    the private split and report scores, ratios to the best and each one's budget overrun. A rerun
    skips finished pairs. FLAML and Optuna come with `pip install -e ".\\[bench]"`."""
    _setup_logging(False)
    _sigterm_as_interrupt()
    with _user_errors():
        from mcgs.mlebench.bench import ALL_COMPETITORS, BenchSpec, run_bench, suite_tasks

        comps = tuple(c.strip() for c in competitions.split(",") if c.strip())
        if suite is not None:
            comps = comps or suite_tasks(suite)
        elif data is None:
            raise _UserError("give --data (a folder of prepared competitions) or --suite (a built public suite)")
        names = tuple(c.strip() for c in competitors.split(",") if c.strip())
        if not comps or not names:
            raise _UserError("give at least one competition (--competitions) and one competitor (--competitors)")
        for name in names:
            _choice("--competitors", name, ALL_COMPETITORS)
        missing = [m for m, c in (("optuna", "optuna"), ("flaml", "flaml")) if c in names and importlib.util.find_spec(m) is None]
        if missing:
            raise _UserError(f"{' and '.join(missing)} not installed: run pip install -e \".[bench]\" in the mcgs checkout (or leave them out of --competitors)")
        if any(n.startswith("autogluon") for n in names):
            from mcgs.mlebench.competitors import autogluon_python

            try:  # before hours of other pairs: AutoGluon's own environment must be there
                autogluon_python()
            except SystemExit as exc:
                raise _UserError(str(exc).removeprefix("mcgs bench: ")) from None
        spec = BenchSpec(competitions=comps, competitors=names, time_budget_s=_duration("--time-budget", time_budget), data_dir=data or Path("data"),
                         out_dir=out_dir, raw_root=raw, seed=seed, threads=threads, suite_dir=suite)
        try:
            result = run_bench(spec, say=_say)
        except KeyboardInterrupt:
            _stopped_batch(out_dir / "bench.md", "finished pairs")
    ahead = f"mcgs ahead of FLAML on {result['mcgs_ahead_of_flaml']} of {result['compared_with_flaml']}; " if result["compared_with_flaml"] else ""
    out.print(f"{ahead}report {out_dir / 'bench.md'}")


# width of output that goes to a file or a pipe (a long run under nohup) rather than a terminal:
# rich's default there is 80 columns, which folds the summary tables and progress lines
LOG_WIDTH = 120


STORE_HELP = "The store (a file or a SQLAlchemy URL); default: the experience_store setting (~/.local/share/mcgs/experience.db)."


def _experience_store(store: Optional[str]):
    """The store named, or the setting's; a store that is off or cannot be opened is a user error."""
    from mcgs.experience import ExperienceError, ExperienceStore, store_url
    from mcgs.settings import SearchSettings

    url = store_url(store if store is not None else SearchSettings().experience_store)
    if url is None:
        raise _UserError("the experience store is off (experience_store = none); name one with --store")
    try:
        return ExperienceStore(url)
    except ExperienceError as exc:
        raise _UserError(str(exc)) from None


@experience_app.command("list")
def experience_list(store: Optional[str] = typer.Option(None, help=STORE_HELP)) -> None:
    """List the runs in the store: their data's size and kind (never its rows), metric and nodes."""
    from rich.table import Table

    from mcgs.experience import ExperienceError

    with _user_errors():
        st = _experience_store(store)
        try:
            runs = st.runs()
        except ExperienceError as exc:
            raise _UserError(str(exc)) from None
    out.print(f"experience store {st.shown}: {len(runs)} run(s)", soft_wrap=True, highlight=False)
    table = Table()
    for col in ("id", "run", "kind", "metric", "rows", "features", "nodes", "added"):
        table.add_column(col)
    for r in runs:
        f = r["features"]
        table.add_row(str(r["id"]), r["source"], f"{r['task_kind']} {r['modality']}", r["metric"], f"{10 ** f.get('log_rows', 0):,.0f}",
                      f"{10 ** f.get('log_features', 0) - 1:.0f}", str(r["n_nodes"]), r["created_at"][:19])
    out.print(table)


@experience_app.command("export")
def experience_export(store: Optional[str] = typer.Option(None, help=STORE_HELP),
                      to: Optional[Path] = typer.Option(None, "-o", "--out", help="JSON file to write (default: standard output).")) -> None:
    """Write the whole store as JSON: each run's meta-features and its nodes' configurations, ranks and run times."""
    from mcgs.experience import ExperienceError

    with _user_errors():
        st = _experience_store(store)
        try:
            runs = st.runs()
            nodes = st.nodes(r["id"] for r in runs)
        except ExperienceError as exc:
            raise _UserError(str(exc)) from None
        for r in runs:
            r["nodes"] = [{k: v for k, v in n.items() if k != "run_id"} for n in nodes if n["run_id"] == r["id"]]
        text = json.dumps({"store": st.shown, "runs": runs}, indent=1)
        if to is None:
            sys.stdout.write(text + "\n")
        else:
            to.write_text(text + "\n")
            _say(f"wrote {len(runs)} run(s) to {to}")


@experience_app.command("add")
def experience_add(run_dirs: list[Path] = typer.Argument(..., help="Finished run folders."),
                   store: Optional[str] = typer.Option(None, help=STORE_HELP)) -> None:
    """Add finished runs to the store: runs made with the store off (a campaign, a bench, an
    experiment) or with another store. A run already there is replaced, not added twice."""
    from mcgs.experience import ExperienceError, contribution
    from mcgs.search import open_search

    with _user_errors():
        st = _experience_store(store)
        for run_dir in run_dirs:
            search = open_search(run_dir, read_only=True)  # RunError: no run there, said by _user_errors
            if search.run_record.status is not RunStatus.FINISHED:
                raise _UserError(f"{run_dir}: the run is {search.run_record.status.value}, not finished; finish it with `mcgs resume {run_dir}` "
                                 f"first (a store learns from finished runs only)")
            try:
                run, rows = contribution(search)
                st.add_run(run, rows)
            except ExperienceError as exc:
                raise _UserError(str(exc)) from None
            _say(f"added {run_dir} ({len(rows)} finished node(s)) to {st.shown}")


@experience_app.command("clear")
def experience_clear(store: Optional[str] = typer.Option(None, help=STORE_HELP),
                     yes: bool = typer.Option(False, "--yes", help="Do not ask for confirmation.")) -> None:
    """Remove every run from the store."""
    from mcgs.experience import ExperienceError

    with _user_errors():
        st = _experience_store(store)
        if not yes and not typer.confirm(f"remove every run from {st.shown}?"):
            raise typer.Exit(1)
        try:
            n = st.clear()
        except ExperienceError as exc:
            raise _UserError(str(exc)) from None
    _say(f"removed {n} run(s) from {st.shown}")


def main() -> None:
    """Console-script entry point. Output to a file or pipe is laid out :data:`LOG_WIDTH`
    columns wide unless ``COLUMNS`` says otherwise."""
    if "COLUMNS" not in os.environ:
        for c in (out, console):
            if not c.is_terminal:
                c.width = LOG_WIDTH
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
