"""The docs stay true: the CLI reference is generated from the commands' help texts and must
match them (regenerate with `make docs`)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_cli_reference_matches_the_commands(tmp_path):
    typer_bin = Path(sys.executable).with_name("typer")
    cmd = [str(typer_bin) if typer_bin.exists() else shutil.which("typer") or "typer", "mcgs.cli", "utils", "docs", "--name", "mcgs",
           "--output", str(tmp_path / "cli.md")]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=REPO)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "cli.md").read_text() == (REPO / "docs" / "cli.md").read_text(), "docs/cli.md is stale: run `make docs`"


def _blocks(md: Path, lang: str) -> list[str]:
    import re

    return re.findall(rf"```{lang}\n(.*?)```", md.read_text(), flags=re.S)


def test_the_user_guide_examples_are_valid_task_yaml_and_settings():
    import textwrap
    import tomllib

    import yaml

    from mcgs.settings import SearchSettings
    from mcgs.task import _TaskYaml

    guide = REPO / "docs" / "user_guide.md"
    examples = _blocks(guide, "yaml")
    assert len(examples) >= 2  # the full task.yaml and the graph task's
    for task_yaml in examples:
        _TaskYaml.model_validate(yaml.safe_load(task_yaml))  # every field of each example exists and is valid
    (toml_text,) = _blocks(guide, "toml")
    data = tomllib.loads(textwrap.dedent(toml_text))
    s = SearchSettings(**data)
    assert s.num_drafts == 8 and s.llm.max_cost_usd == 5.0
