"""Shipping a candidate's run to a machine without the run folder (mcgs.executors.shipping):
the input cached once, the workspace and the outputs moved without trusting what the program left."""

from __future__ import annotations

import os
import threading

import pytest

from mcgs.executors.shipping import (ShippedRun, cached_input, collect_outputs, input_key, pack_folder, run_shipped, unpack_folder,
                                     write_outputs)
from mcgs.sandbox import ISOLATION_SESSION, Outcome, SandboxLimits


def _input(tmp_path):
    inp = tmp_path / "input"
    inp.mkdir()
    (inp / "train.csv").write_text("id,x,y\n1,0.5,1\n2,0.1,0\n")
    (inp / "sub").mkdir()
    (inp / "sub" / "task.json").write_text('{"metric": "roc_auc"}')
    return inp


def test_the_input_is_fetched_once_per_machine_and_read_only_there(tmp_path):
    inp = _input(tmp_path)
    key = input_key(inp)
    data = pack_folder(inp)
    fetched = []

    def fetch():
        fetched.append(1)
        return data

    cache = tmp_path / "cache"
    threads = [threading.Thread(target=cached_input, args=(key, fetch, cache)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = cached_input(key, fetch, cache)
    assert len(fetched) == 1  # four candidates at once and a fifth later: one fetch
    assert (got / "train.csv").read_text() == (inp / "train.csv").read_text() and (got / "sub" / "task.json").is_file()
    assert not os.access(got / "train.csv", os.W_OK) or os.geteuid() == 0
    assert (got / "train.csv").stat().st_mode & 0o777 == 0o444 and got.stat().st_mode & 0o777 == 0o555
    (inp / "train.csv").write_text("id,x,y\n1,0.5,1\n")  # another content: another key
    assert input_key(inp) != key


def test_outputs_come_back_as_regular_files_only_and_links_are_never_followed(tmp_path):
    ws = tmp_path / "ws"
    (ws / "working").mkdir(parents=True)
    (ws / "submission").mkdir()
    (ws / "tmp").mkdir()
    (ws / "working" / "oof.csv").write_text("row,y\n0,0.5\n")
    (ws / "submission" / "submission.csv").write_text("id,y\n1,0.5\n")
    (ws / "tmp" / "scratch.bin").write_bytes(b"x" * 100)
    secret = tmp_path / "held_out_answers.csv"
    secret.write_text("id,y\n1,1\n")
    (ws / "working" / "test_pred.csv").symlink_to(secret)  # a program pointing the engine at answers
    os.link(secret, ws / "working" / "hard.csv")  # a hard link to a file outside
    os.mkfifo(ws / "working" / "fifo")
    (ws / "working" / "big.npy").write_bytes(b"0" * 5000)
    (ws / "input").symlink_to(tmp_path, target_is_directory=True)
    files, refused = collect_outputs(ws, max_file_bytes=4000, max_total_bytes=10_000)
    assert set(files) == {"working/oof.csv", "submission/submission.csv"}
    why = "\n".join(refused)
    for name in ("test_pred.csv", "hard.csv", "fifo", "big.npy"):
        assert f"working/{name}" in why
    assert "tmp/" not in why and "input" not in why  # never looked at
    assert b"id,y\n1,1" not in b"".join(files.values())


def test_the_engine_writes_outputs_only_as_regular_files_inside_the_workspace(tmp_path):
    ws = tmp_path / "node"
    (ws / "working").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (ws / "models").symlink_to(outside, target_is_directory=True)  # a link the engine must not write through
    skipped = write_outputs({"working/oof.csv": b"row,y\n", "../escape.txt": b"x", "/etc/x": b"x", "input/task.json": b"{}",
                             "models/m.bin": b"weights", "logs/stdout.txt": b"hello\n"}, ws)
    assert (ws / "working" / "oof.csv").read_bytes() == b"row,y\n" and (ws / "logs" / "stdout.txt").read_text() == "hello\n"
    assert not (tmp_path / "escape.txt").exists() and not list(outside.iterdir())
    assert sorted(s.split(":")[0] for s in skipped) == ["../escape.txt", "/etc/x", "input/task.json", "models/m.bin"]


def test_a_shipped_program_runs_in_the_sandbox_against_the_cached_input(tmp_path, monkeypatch):
    monkeypatch.setenv("MCGS_INPUT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("MCGS_WORKSPACES", str(tmp_path / "workspaces"))
    gone = tmp_path / "workspaces" / "999999999-left"  # left by a worker process killed mid-candidate
    gone.mkdir(parents=True)
    inp = _input(tmp_path)
    ws = tmp_path / "prepared"
    (ws / "working").mkdir(parents=True)
    (ws / "solution.py").write_text(
        "import os\n"
        "rows = open('input/train.csv').read().count('\\n')\n"
        "open('working/oof.csv', 'w').write(f'rows,{rows},{os.environ[\"MCGS_SEED\"]}\\n')\n"
        "try:\n    open('input/train.csv', 'a').write('x')\nexcept OSError:\n    print('input is read-only')\n")
    job = ShippedRun(workspace=pack_folder(ws), input_key=input_key(inp), limits=SandboxLimits(timeout_s=60, cpu_threads=1, isolation=ISOLATION_SESSION),
                     env={"MCGS_SEED": "7"}, cancel_after_s=None, max_file_bytes=2**20, max_total_bytes=2**22)
    out = run_shipped(job, lambda: pack_folder(inp))
    assert out.result.outcome is Outcome.OK, out.result.stderr_tail
    assert out.files["working/oof.csv"] == b"rows,3,7\n"
    assert "logs/stdout.txt" in out.files and "solution.py" in out.files
    if os.geteuid() != 0:  # root ignores file modes; the namespace sandbox mounts input read-only instead
        assert "input is read-only" in out.files["logs/stdout.txt"].decode()
    assert not list((tmp_path / "workspaces").iterdir())  # its workspace is gone, and the one a dead process left


def test_unpacking_refuses_archives_that_leave_the_folder(tmp_path):
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("../evil.txt")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(tarfile.TarError):
        unpack_folder(buf.getvalue(), tmp_path / "dest")
    assert not (tmp_path / "evil.txt").exists()
