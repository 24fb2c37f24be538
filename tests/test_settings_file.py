"""Settings come from arguments, then MCGS_* environment variables, then a TOML settings file
(MCGS_SETTINGS_FILE, else ./mcgs.toml), then defaults; a bad file gets a clear error."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from mcgs.cli import app
from mcgs.settings import SearchSettings


def test_precedence_arguments_then_environment_then_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MCGS_NUM_DRAFTS", raising=False)
    monkeypatch.delenv("MCGS_SETTINGS_FILE", raising=False)
    (tmp_path / "mcgs.toml").write_text("num_drafts = 3\nseed = 7\n[llm]\nmax_cost_usd = 2.5\n")
    s = SearchSettings()
    assert (s.num_drafts, s.seed, s.llm.max_cost_usd) == (3, 7, 2.5)
    monkeypatch.setenv("MCGS_NUM_DRAFTS", "4")
    assert SearchSettings().num_drafts == 4 and SearchSettings(num_drafts=6).num_drafts == 6
    other = tmp_path / "other.toml"
    other.write_text("seed = 11\n")
    monkeypatch.setenv("MCGS_SETTINGS_FILE", str(other))
    assert SearchSettings().seed == 11  # the named file replaces ./mcgs.toml


def test_a_bad_settings_file_is_named_with_the_fix(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MCGS_SETTINGS_FILE", raising=False)
    (tmp_path / "mcgs.toml").write_text("num_drafts = \n")
    with pytest.raises(ValueError, match="settings file mcgs.toml: Invalid value"):
        SearchSettings()
    (tmp_path / "mcgs.toml").write_text("num_draft = 3\n")
    res = CliRunner().invoke(app, ["run", str(tmp_path), "--out", str(tmp_path / "run")], env={"COLUMNS": "200"})
    assert res.exit_code == 2 and "num_draft: unknown setting" in res.output and "settings file mcgs.toml" in res.output
    monkeypatch.setenv("MCGS_SETTINGS_FILE", str(tmp_path / "missing.toml"))
    with pytest.raises(ValueError, match="MCGS_SETTINGS_FILE=.*missing.toml: no such file"):
        SearchSettings()


def _settings_of_run_command(monkeypatch, args: list[str], env: dict[str, str]) -> SearchSettings:
    """The SearchSettings `mcgs run ARGS` hands to the search (the search itself is not run)."""
    import mcgs
    import mcgs.cli

    seen: list[SearchSettings] = []

    def capture(task, *, run_dir, settings, **kwargs):
        seen.append(settings)
        return None

    monkeypatch.setattr(mcgs, "create_search", capture)  # the public factory the CLI calls
    monkeypatch.setattr(mcgs.cli, "_drive", lambda search: None)
    res = CliRunner().invoke(app, ["run", *args], env={"COLUMNS": "200", **env})
    assert res.exit_code == 0, res.output
    return seen[0]


def test_mcgs_run_takes_what_its_options_leave_out_from_the_environment_and_the_settings_file(tmp_path, monkeypatch):
    """Only the options given on the command line override MCGS_* variables and mcgs.toml; an
    option left out used to pass its default and silently hide them."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MCGS_SETTINGS_FILE", raising=False)
    for name in ("MCGS_POLICY", "MCGS_PLAN_CANDIDATES", "MCGS_CPU_THREADS", "MCGS_WORKERS", "MCGS_MEMORY_MB"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "mcgs.toml").write_text("workers = 2\nmemory_mb = 4096\n")
    env = {"MCGS_POLICY": "tree", "MCGS_PLAN_CANDIDATES": "0"}
    s = _settings_of_run_command(monkeypatch, [str(tmp_path), "--out", str(tmp_path / "run")], env)
    assert (s.policy, s.plan_candidates, s.workers, s.memory_mb) == ("tree", 0, 2, 4096)
    assert (s.time_budget_s, s.per_run_timeout_s, s.seed, s.cpu_threads, s.coder) == (600.0, 300.0, 0, 2, "auto")  # defaults
    given = ["--policy", "greedy", "--plans", "3", "--workers", "1", "--memory-mb", "2048", "--time-budget", "90s", "--seed", "4"]
    s = _settings_of_run_command(monkeypatch, [str(tmp_path), "--out", str(tmp_path / "run"), *given], env)
    assert (s.policy, s.plan_candidates, s.workers, s.memory_mb, s.time_budget_s, s.seed) == ("greedy", 3, 1, 2048, 90.0, 4)


def test_create_search_keeps_the_policy_and_coder_of_its_settings_and_environment(tmp_path, monkeypatch):
    """`mcgs.create_search` without ``policy=`` / ``coder=`` takes them from ``settings`` or
    MCGS_POLICY / MCGS_CODER (it used to reset them to mcgs / auto)."""
    import mcgs
    from recipe_runs import make_task

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MCGS_SETTINGS_FILE", raising=False)
    monkeypatch.delenv("MCGS_CODER", raising=False)
    task = make_task(tmp_path / "task", "binary")
    search = mcgs.create_search(task, run_dir=tmp_path / "a", settings=SearchSettings(policy="tree", coder="recipe"))
    assert (search.settings.policy, search.settings.coder) == ("tree", "recipe")
    monkeypatch.setenv("MCGS_POLICY", "greedy")
    monkeypatch.setenv("MCGS_CODER", "recipe")
    search = mcgs.create_search(task, run_dir=tmp_path / "b")
    assert (search.settings.policy, search.settings.coder) == ("greedy", "recipe")
    search = mcgs.create_search(task, run_dir=tmp_path / "c", policy="mcgs")
    assert search.settings.policy == "mcgs"


def test_run_help_shows_the_settings_defaults_and_choices(monkeypatch):
    """`mcgs run --help` reads its defaults and choices from SearchSettings, so they cannot
    drift apart (the help once repeated them as literals)."""
    from mcgs.settings import format_duration, parse_duration, setting_choices, setting_default

    monkeypatch.setenv("COLUMNS", "200")
    out = CliRunner().invoke(app, ["run", "--help"]).output
    d = SearchSettings.model_fields
    assert parse_duration(format_duration(d["time_budget_s"].default)) == d["time_budget_s"].default
    for shown in (format_duration(setting_default("time_budget_s")), format_duration(setting_default("per_run_timeout_s")),
                  str(setting_default("memory_mb")), setting_default("policy"), setting_default("coder")):
        assert f"[default: ({shown})]" in out
    assert setting_choices("policy") == ("mcgs", "tree", "greedy")
    with pytest.raises(ValueError):
        setting_choices("seed")
    bad = CliRunner().invoke(app, ["run", "x", "--out", "y", "--policy", "bogus"])
    assert bad.exit_code != 0 and all(p in bad.output for p in setting_choices("policy"))


def test_a_mistyped_mcgs_variable_is_named_with_the_setting_it_resembles(tmp_path):
    """pydantic-settings reads only the MCGS_* names it knows, so MCGS_CREDIT_SHAR=0.5 ran with
    the default credit share and said nothing; every command that searches now warns."""
    from mcgs.demo import build_demo_task
    from mcgs.settings import unknown_environment

    env = {"MCGS_CREDIT_SHAR": "0.5", "MCGS_LLM__MAX_TOKEN": "100", "MCGS_ZZZ": "1", "MCGS_CREDIT_SHARE": "0.5",
           "MCGS_LLM__BASE_URL": "http://x", "MCGS_SETTINGS_FILE": "a.toml", "MCGS_MODE": "predict", "PATH": "/bin"}
    warned = unknown_environment(env)
    assert len(warned) == 3
    assert "MCGS_CREDIT_SHAR is not a setting" in warned[0] and "did you mean MCGS_CREDIT_SHARE?" in warned[0]
    assert "MCGS_LLM__MAX_TOKEN is not a setting" in warned[1] and "MCGS_LLM__MAX_TOKENS?" in warned[1]
    assert "MCGS_ZZZ" in warned[2] and "docs/user_guide.md" in warned[2]
    task = build_demo_task(tmp_path / "task")
    result = CliRunner().invoke(app, ["run", str(task), "--out", str(tmp_path / "run"), "--max-nodes", "0"],
                                env={"MCGS_CREDIT_SHAR": "0.5", "COLUMNS": "200"})
    assert "warning: MCGS_CREDIT_SHAR is not a setting and is ignored; did you mean MCGS_CREDIT_SHARE?" in result.output, result.output


@pytest.mark.parametrize("env, toml, read, bad_env, says", [
    # choices in any case, as --policy MCGS takes them
    ({"MCGS_POLICY": "MCGS"}, 'ensemble_method = " Stacking"\ncoder = "Recipe"\n', {"policy": "mcgs", "ensemble_method": "stacking", "coder": "recipe"},
     {"MCGS_POLICY": "mcts"}, "'mcgs', 'tree' or 'greedy'"),
    # durations with units, as --time-budget 10m takes them; a bare number is seconds
    ({"MCGS_TIME_BUDGET_S": "10m"}, 'per_run_timeout_s = "90s"\nensemble_reserve_s = 0\n', {"time_budget_s": 600.0, "per_run_timeout_s": 90.0, "ensemble_reserve_s": 0.0},
     {"MCGS_TIME_BUDGET_S": "ten m"}, "cannot read duration 'ten m'"),
])
def test_the_environment_and_the_file_read_values_as_the_cli_options_do(tmp_path, monkeypatch, env, toml, read, bad_env, says):
    monkeypatch.delenv("MCGS_SETTINGS_FILE", raising=False)
    monkeypatch.chdir(tmp_path)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    (tmp_path / "mcgs.toml").write_text(toml)
    s = SearchSettings()
    assert {k: getattr(s, k) for k in read} == read
    for k, v in bad_env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(ValueError, match=says):
        SearchSettings()


@pytest.mark.parametrize("env, says", [
    ({"MCGS_EXPLOIT_START": "0.9", "MCGS_EXPLOIT_FULL": "0.5"}, ["exploit_full (0.5) must not be below exploit_start (0.9)", "MCGS_* environment variables"]),
    ({"MCGS_LLM__MAX_TOKENS": "10"}, ["llm.max_tokens", "environment variable MCGS_LLM__MAX_TOKENS"]),
    ({"MCGS_UCT_DECAY_PHASES": "0.7,0.3"}, ["MCGS_UCT_DECAY_PHASES cannot be read", "takes JSON", "'[0.3, 0.7]'"]),
    ({"MCGS_RECIPE_MODELS": "model.lightgbm"}, ["recipe_models", "a JSON list"]),
])
def test_a_bad_environment_value_names_its_variable_and_the_format(tmp_path, monkeypatch, env, says):
    from mcgs.demo import build_demo_task

    monkeypatch.delenv("MCGS_SETTINGS_FILE", raising=False)
    monkeypatch.chdir(tmp_path)
    task = build_demo_task(tmp_path / "task")
    result = CliRunner().invoke(app, ["run", str(task), "--out", str(tmp_path / "run"), "--max-nodes", "1"], env={**env, "COLUMNS": "300"})
    assert result.exit_code == 2 and all(w in result.output for w in says), result.output
    assert ": Value error" not in result.output and "MCGS_<NAME>" not in result.output and "Traceback" not in result.output
    assert not (tmp_path / "run").exists()


def test_settings_are_grouped_by_concern_and_a_section_is_taken_as_its_flat_names(tmp_path, monkeypatch):
    """[sandbox], [ensemble], [storage] and [search] sections in mcgs.toml (or as arguments) set
    the flat settings every MCGS_* variable and stored run still names; the groups read back
    as read-only views; a setting given twice, or unknown in its group, is named."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mcgs.toml").write_text('seed = 3\n[sandbox]\nmemory_mb = 2048\n[ensemble]\nenabled = false\nmethod = "Stacking"\n'
                                         '[storage]\nlease_s = "2m"\n[search]\nnum_drafts = 4\n')
    monkeypatch.setenv("MCGS_CPU_THREADS", "3")
    s = SearchSettings()
    assert (s.seed, s.memory_mb, s.ensemble, s.ensemble_method, s.lease_s, s.num_drafts, s.cpu_threads) == (3, 2048, False, "stacking", 120.0, 4, 3)
    assert (s.sandbox.memory_mb, s.sandbox.cpu_threads, s.ensembles.enabled, s.ensembles.method, s.storage.lease_s, s.search.num_drafts) == \
        (2048, 3, False, "stacking", 120.0, 4)
    assert "sandbox" not in s.model_dump() and SearchSettings(**s.model_dump()) == s  # stored runs keep the flat form
    with pytest.raises(Exception):
        s.sandbox.memory_mb = 1  # a view, not a second copy to change
    assert SearchSettings(sandbox={"memory_mb": 4096}, ensemble=False).sandbox.memory_mb == 4096
    with pytest.raises(ValueError, match=r"memory_mb is given twice, as memory_mb \(1024\) and as sandbox.memory_mb \(4096\)"):
        SearchSettings(memory_mb=1024, sandbox={"memory_mb": 4096})
    (tmp_path / "mcgs.toml").write_text("[sandbox]\nmemroy_mb = 2048\n")
    res = CliRunner().invoke(app, ["run", str(tmp_path / "none"), "--out", str(tmp_path / "r")])
    assert res.exit_code == 2 and "sandbox.memroy_mb: unknown setting of the sandbox group" in res.output and "memory_mb" in res.output


def test_groups_names_are_accepted_as_environment_variables(tmp_path, monkeypatch):
    """MCGS_SANDBOX__MEMORY_MB and the other groups' names set the same flat settings as
    MCGS_MEMORY_MB; a flat and a grouped variable that disagree are named, and an error in
    a grouped variable names that variable."""
    from mcgs.settings import setting_variables, unknown_environment

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MCGS_SANDBOX__MEMORY_MB", "4096")
    monkeypatch.setenv("MCGS_ENSEMBLE__ENABLED", "false")
    monkeypatch.setenv("MCGS_ENSEMBLE__MAX_MEMBERS", "3")
    monkeypatch.setenv("MCGS_STORAGE__LEASE_S", "2m")
    monkeypatch.setenv("MCGS_SEARCH__NUM_DRAFTS", "2")
    monkeypatch.setenv("MCGS_SEARCH__UCT_DECAY_PHASES", "[0.1, 0.5]")
    s = SearchSettings()
    assert (s.memory_mb, s.ensemble, s.ensemble_max_members, s.lease_s, s.num_drafts, s.uct_decay_phases) == (4096, False, 3, 120.0, 2, (0.1, 0.5))
    assert unknown_environment() == []
    assert SearchSettings(memory_mb=1024).memory_mb == 1024  # an argument still wins
    monkeypatch.setenv("MCGS_MEMORY_MB", "4096")
    assert SearchSettings().memory_mb == 4096  # both names, one value
    monkeypatch.setenv("MCGS_MEMORY_MB", "2048")
    with pytest.raises(ValueError, match=r"MCGS_MEMORY_MB \('2048'\) and MCGS_SANDBOX__MEMORY_MB \('4096'\) set the same setting memory_mb"):
        SearchSettings()
    monkeypatch.delenv("MCGS_MEMORY_MB")
    assert setting_variables(("memory_mb",)) == ["MCGS_SANDBOX__MEMORY_MB"]
    monkeypatch.setenv("MCGS_SANDBOX__MEMORY_MB", "lots")
    res = CliRunner().invoke(app, ["run", "demo", "--out", str(tmp_path / "r"), "--max-nodes", "1"])
    assert res.exit_code != 0 and "environment variable MCGS_SANDBOX__MEMORY_MB" in res.output
    assert not (tmp_path / "r").exists()
