"""atomic_write: the file appears whole or not at all, no temporary is left behind, and the umask sets its mode."""
import os
import stat

import pytest

from zoo._atomic import atomic_write


def test_write_creates_folders_and_replaces_the_file(tmp_path):
    path = tmp_path / "a" / "b.bin"
    atomic_write(path, lambda handle: handle.write(b"first"))
    atomic_write(path, lambda handle: handle.write(b"second"))
    assert path.read_bytes() == b"second" and [p.name for p in path.parent.iterdir()] == ["b.bin"]


def test_a_failing_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "b.bin"
    path.write_bytes(b"old")

    def fail(handle):
        handle.write(b"half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_write(path, fail)
    assert path.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["b.bin"]


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_the_file_mode_follows_the_umask_like_open(tmp_path, umask):
    old = os.umask(umask)
    try:
        atomic_write(tmp_path / "atomic.bin", lambda handle: handle.write(b"x"))
        (tmp_path / "plain.bin").write_bytes(b"x")  # the reference: what open() gives under this umask
    finally:
        os.umask(old)
    mode = stat.S_IMODE((tmp_path / "atomic.bin").stat().st_mode)
    assert mode == stat.S_IMODE((tmp_path / "plain.bin").stat().st_mode) == 0o666 & ~umask
