"""zoo.engine.memory: the high-water mark of resident memory against memory this test touches,
and the parsing of /proc/self/status on hand-written files."""
import mmap

import pytest

from zoo.engine.memory import gigabytes, peak_resident_bytes, reset_peak

MIB = 1 << 20


def test_the_peak_counts_touched_memory_and_a_reset_lowers_it():
    if not reset_peak():
        pytest.skip("this kernel offers no /proc/self/clear_refs reset")
    before = peak_resident_bytes()
    size = 256 * MIB
    block = mmap.mmap(-1, size)  # anonymous pages of our own, unmapped on close whatever malloc keeps
    for offset in range(0, size, mmap.PAGESIZE):
        block[offset] = 1
    touched = peak_resident_bytes()
    block.close()
    assert touched - before >= 240 * MIB
    assert peak_resident_bytes() - before >= 240 * MIB  # a high-water mark: unmapping does not lower it
    assert reset_peak()
    assert peak_resident_bytes() <= touched - 240 * MIB


def test_status_files_as_the_kernel_writes_them(tmp_path):
    (tmp_path / "status").write_text("Name:\tpython\nVmPeak:\t 9000 kB\nVmHWM:\t    1676 kB\nVmRSS:\t 1500 kB\n")
    assert peak_resident_bytes(tmp_path) == 1676 * 1024
    (tmp_path / "status").write_text("Name:\tpython\n")  # a kernel without the field
    assert peak_resident_bytes(tmp_path) is None
    (tmp_path / "status").write_text("VmHWM:\t 3 MB\n")
    with pytest.raises(ValueError, match="VmHWM in 'MB', expected kB"):
        peak_resident_bytes(tmp_path)
    assert peak_resident_bytes(tmp_path / "missing") is None  # no /proc
    assert reset_peak(tmp_path / "missing") is False


def test_gigabytes_are_decimal():
    assert (gigabytes(1_949_999_999), gigabytes(10**9), gigabytes(None)) == ("1.9 GB", "1.0 GB", "-")
