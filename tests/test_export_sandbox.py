"""`mcgs export` runs node code only in the sandbox (issue 31, section 2), and reads the node's
model files as safely as every other candidate file (section 1)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from mcgs.export import ExportError, export_node
from mcgs.sandbox import namespace_isolation_available
from mcgs.search import create_search
from mcgs.settings import SearchSettings

from test_task import WRITE_OUTPUTS, write_task

pytestmark = pytest.mark.timeout(300)

# A contract-1.1 candidate with the standard library only: search mode writes its outputs and a
# "model"; predict mode runs the code put at #PREDICT_MODE# (with OUT, the output path) and writes predictions.
PROGRAM = '''
import csv, json, os, sys
MODE = os.environ.get("MCGS_MODE", "search")
task = json.load(open("input/task.json"))
col = task["prediction_columns"][0]
if MODE == "predict":
    test = list(csv.DictReader(open(os.environ["MCGS_PREDICT_INPUT"])))
    OUT = os.environ["MCGS_PREDICT_OUTPUT"]
#PREDICT_MODE#
    with open(OUT, "w") as f:
        f.write(task["id_column"] + "," + col + "\\n" + "".join(r[task["id_column"]] + ",yes\\n" for r in test))
    with open(OUT + ".raw.csv", "w") as f:
        f.write("row," + col + "\\n" + "".join(f"{i},0.5\\n" for i in range(len(test))))
    sys.exit(0)
''' + WRITE_OUTPUTS + '''with open(os.environ.get("MCGS_MODEL_FILE", "working/model.joblib"), "w") as f:
    f.write("a model")
'''


def _exported_run(tmp_path: Path, predict: str):
    task = write_task(tmp_path / "task", task={"metric": "accuracy"})
    baseline = tmp_path / "baseline.py"
    baseline.write_text(PROGRAM.replace("#PREDICT_MODE#", predict))
    settings = SearchSettings(time_budget_s=120, per_run_timeout_s=30, max_nodes=1, ensemble=False)
    search = create_search(task, tmp_path / "run", settings=settings, baseline=baseline)
    search.run()
    node = next(n for n in search.nodes() if n.config.get("baseline"))
    assert node.is_valid, node.error
    return search, node


def test_exports_measurement_runs_in_the_sandbox_without_secrets_network_or_host_files(tmp_path, monkeypatch):
    if not namespace_isolation_available():
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("CI=true but the namespace sandbox (bubblewrap) is unavailable")
        pytest.skip("bubblewrap is not installed or cannot create namespaces here")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-placeholder-export-key")
    monkeypatch.setenv("MY_DB_PASSWORD", "hunter2-placeholder")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)  # a connection would wait in the backlog, accepted or not
    hidden_shadow = "bytes.fromhex(" + repr(b"/etc/shadow".hex()) + ").decode()"
    predict = f"""
    s = getattr(__builtins__, "__im" + "port__")("soc" + "ket")
    found = ["ENV " + " ".join(sorted(os.environ))]
    found += [k + "=" + v for k, v in os.environ.items() if "KEY" in k or "PASSWORD" in k]
    try:
        found.append("SHADOW " + open({hidden_shadow}).read()[:40])
    except OSError as exc:
        found.append("shadow refused " + type(exc).__name__)
    try:
        s.create_connection(("127.0.0.1", {server.getsockname()[1]}), timeout=3)
        found.append("CONNECTED")
    except OSError as exc:
        found.append("connect refused " + type(exc).__name__)
    sys.exit("\\n".join(found))
"""
    search, node = _exported_run(tmp_path, predict)
    with pytest.raises(ExportError, match="failed in predict mode") as info:
        export_node(search, tmp_path / "model", node_seq=node.seq)
    said = str(info.value)
    assert "shadow refused" in said and "connect refused" in said and "ENV " in said, said
    assert "sk-placeholder" not in said and "hunter2" not in said and "SHADOW" not in said and "CONNECTED" not in said
    assert "ANTHROPIC_API_KEY" not in said and "MY_DB_PASSWORD" not in said
    server.settimeout(0.5)
    with pytest.raises(TimeoutError):
        server.accept()
    server.close()
    assert not (tmp_path / "model").exists() and not list(tmp_path.glob("model.*"))


def test_a_sandboxed_measurement_of_a_well_behaved_node_passes_and_leaves_the_export_untouched(tmp_path):
    predict = "    open('working/left_by_predict.txt', 'w').write('x')\n"
    search, node = _exported_run(tmp_path, predict)
    result = export_node(search, tmp_path / "model", node_seq=node.seq)
    assert result.measurements["ms_per_row"] > 0
    assert not (result.path / "working" / "left_by_predict.txt").exists()  # it ran on a throwaway copy
    assert os.stat(result.path / "solution.py").st_uid == os.geteuid()
    card = (result.path / "MODEL_CARD.md").read_text()
    assert "nothing sandboxes it here" in card


@pytest.mark.parametrize("plant", ["link", "too large"])
def test_a_model_file_that_is_a_link_or_too_large_is_not_exported(tmp_path, plant):
    search, node = _exported_run(tmp_path, "    pass\n")
    secret = tmp_path / "secret.bin"
    secret.write_text("SENTINEL-MODEL")
    model = search.node_dir(node) / "working" / "model.joblib"
    model.unlink()
    if plant == "link":
        model.symlink_to(secret)
    else:
        search.settings = search.settings.model_copy(update={"max_output_mb": 1})
        model.write_bytes(b"0" * (2 << 20))
    with pytest.raises(ExportError, match="working/model.joblib") as info:
        export_node(search, tmp_path / "model", node_seq=node.seq)
    assert ("over the cap of 1 MiB" if plant == "too large" else "working/model.joblib is a symbolic link") in str(info.value)
    assert "SENTINEL" not in str(info.value)
    assert not (tmp_path / "model").exists()
