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
