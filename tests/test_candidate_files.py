"""mcgs.candidate_files: the one way the engine reads what a candidate left in its workspace."""

from __future__ import annotations

import os
import stat
import threading

import pytest

from mcgs.candidate_files import (
    CandidateFileError,
    candidate_file_exists,
    copy_candidate_file,
    disk_usage_bytes,
    read_candidate_file,
    remove_tree,
)

CAP = 1 << 20


@pytest.fixture
def ws(tmp_path):
    ws = tmp_path / "ws"
    (ws / "working").mkdir(parents=True)
    (ws / "working" / "oof.csv").write_text("row,p\n0,0.5\n")
    return ws


@pytest.fixture
def secret(tmp_path):
    path = tmp_path / "outside" / "secret.txt"
    path.parent.mkdir()
    path.write_text("SECRET-CONTENT\n")
    return path


def test_a_regular_file_is_read_and_copied(ws, tmp_path):
    assert read_candidate_file(ws, "working/oof.csv", max_bytes=CAP) == b"row,p\n0,0.5\n"
    copy_candidate_file(ws, "working/oof.csv", tmp_path / "out" / "copy.csv", max_bytes=CAP)
    assert (tmp_path / "out" / "copy.csv").read_bytes() == b"row,p\n0,0.5\n"
    assert stat.S_IMODE((tmp_path / "out" / "copy.csv").stat().st_mode) == 0o644
    assert candidate_file_exists(ws, "working/oof.csv") and not candidate_file_exists(ws, "working/none.csv")


def test_a_link_to_a_file_outside_is_never_followed(ws, secret, tmp_path):
    (ws / "working" / "oof.csv").unlink()
    (ws / "working" / "oof.csv").symlink_to(secret)
    with pytest.raises(CandidateFileError, match=r"working/oof.csv is a symbolic link") as info:
        read_candidate_file(ws, "working/oof.csv", max_bytes=CAP)
    assert info.value.kind == "link" and "SECRET" not in str(info.value)
    with pytest.raises(CandidateFileError):
        copy_candidate_file(ws, "working/oof.csv", tmp_path / "copy.csv", max_bytes=CAP)
    assert not (tmp_path / "copy.csv").exists() and list(tmp_path.glob(".copy.csv*")) == []
    assert not candidate_file_exists(ws, "working/oof.csv")


def test_a_folder_link_on_the_path_is_refused(ws, secret):
    (ws / "working" / "oof.csv").unlink()
    (ws / "working").rmdir()
    (secret.parent / "oof.csv").write_text("row,p\n0,SECRET\n")
    (ws / "working").symlink_to(secret.parent, target_is_directory=True)
    with pytest.raises(CandidateFileError, match=r"working/oof.csv: working is a symbolic link"):
        read_candidate_file(ws, "working/oof.csv", max_bytes=CAP)


def test_a_workspace_that_is_a_link_is_refused(ws, tmp_path):
    moved = tmp_path / "moved"
    ws.rename(moved)
    ws.symlink_to(moved, target_is_directory=True)
    with pytest.raises(CandidateFileError, match="is not a real folder"):
        read_candidate_file(ws, "working/oof.csv", max_bytes=CAP)


def test_a_hard_link_is_refused(ws, tmp_path):
    other = tmp_path / "other.csv"
    other.write_text("row,p\n0,SECRET\n")
    (ws / "working" / "oof.csv").unlink()
    os.link(other, ws / "working" / "oof.csv")
    with pytest.raises(CandidateFileError, match="has 2 hard links") as info:
        read_candidate_file(ws, "working/oof.csv", max_bytes=CAP)
    assert info.value.kind == "hardlink"


def test_a_fifo_a_folder_and_a_device_are_refused_without_blocking(ws):
    os.mkfifo(ws / "working" / "test_pred.csv")  # opening a FIFO for reading would block forever
    (ws / "submission").mkdir()
    (ws / "submission" / "submission.csv").mkdir()
    (ws / "dev").symlink_to("/dev/zero")
    done = threading.Event()

    def check():
        with pytest.raises(CandidateFileError, match="is a FIFO"):
            read_candidate_file(ws, "working/test_pred.csv", max_bytes=CAP)
        with pytest.raises(CandidateFileError, match="is a directory"):
            read_candidate_file(ws, "submission/submission.csv", max_bytes=CAP)
        with pytest.raises(CandidateFileError, match="symbolic link"):
            read_candidate_file(ws, "dev", max_bytes=CAP)
        done.set()

    t = threading.Thread(target=check, daemon=True)
    t.start()
    t.join(10)
    assert done.is_set()


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
def test_a_device_node_is_refused(ws):
    os.mknod(ws / "working" / "zero", 0o644 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero: endless bytes
    with pytest.raises(CandidateFileError, match="is a character device"):
        read_candidate_file(ws, "working/zero", max_bytes=CAP)


def test_a_file_over_the_cap_is_refused_naming_file_and_cap(ws, tmp_path):
    (ws / "working" / "oof.csv").write_bytes(b"x" * (CAP + 1))
    with pytest.raises(CandidateFileError, match=r"working/oof.csv is 1.0 MiB, over the cap of 1 MiB .*max_output_mb") as info:
        read_candidate_file(ws, "working/oof.csv", max_bytes=CAP)
    assert info.value.kind == "too_large"
    with pytest.raises(CandidateFileError, match="over the cap"):
        copy_candidate_file(ws, "working/oof.csv", tmp_path / "copy.csv", max_bytes=CAP)
    assert not (tmp_path / "copy.csv").exists()


@pytest.mark.parametrize("rel", ["/etc/passwd", "../secret.txt", "working/../../x", ""])
def test_paths_that_leave_the_workspace_are_refused(ws, rel):
    with pytest.raises(CandidateFileError, match="not a path inside the workspace"):
        read_candidate_file(ws, rel, max_bytes=CAP)


def test_disk_usage_counts_files_once_and_follows_no_link(ws, tmp_path):
    big = tmp_path / "outside" / "big.bin"
    big.parent.mkdir()
    big.write_bytes(os.urandom(4 << 20))
    (ws / "link").symlink_to(big.parent, target_is_directory=True)
    (ws / "working" / "data.bin").write_bytes(os.urandom(1 << 20))
    os.link(ws / "working" / "data.bin", ws / "working" / "again.bin")
    used = disk_usage_bytes(ws)
    assert (1 << 20) <= used < (2 << 20)


def test_remove_tree_removes_what_a_candidate_locked_and_never_what_links_point_to(ws, secret):
    (ws / "working" / "locked").mkdir()
    (ws / "working" / "locked" / "f").write_text("x")
    (ws / "working" / "locked").chmod(0)
    (ws / "working" / "link").symlink_to(secret.parent, target_is_directory=True)
    remove_tree(ws)
    assert not ws.exists() and secret.read_text() == "SECRET-CONTENT\n"
    link = secret.parent.parent / "wslink"
    link.symlink_to(secret.parent, target_is_directory=True)
    remove_tree(link)
    assert not link.is_symlink() and secret.is_file()
