"""The test session's OpenBLAS pin (`tests/conftest.py`): on x86-64 NumPy's and SciPy's OpenBLAS
run their AVX2 kernels, in this process and in the processes it starts, whatever the CPU; a
module that loaded NumPy before the pin was set would leave the CPU's own kernels in place."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import numpy  # noqa: F401  (its OpenBLAS, as loaded in this test process)
import pytest
import scipy.linalg  # noqa: F401  (SciPy's OpenBLAS too)
import threadpoolctl

pytestmark = pytest.mark.skipif(
    platform.machine() not in ("x86_64", "AMD64"), reason="the pin applies on x86-64"
)
#: OpenBLAS's AVX-512 kernel sets (what it picks by itself on such a CPU).
AVX512 = {"skylakex", "cooperlake", "sapphirerapids"}


def _architectures() -> set[str]:
    return {
        str(info.get("architecture"))
        for info in threadpoolctl.threadpool_info()
        if info.get("internal_api") == "openblas"
    }


def test_this_process_runs_openblas_avx2_kernels() -> None:
    assert os.environ.get("OPENBLAS_CORETYPE"), "tests/conftest.py sets it on x86-64"
    found = {a.lower() for a in _architectures()}
    assert len(found) == 1 and not found & AVX512, found  # NumPy's and SciPy's alike


def test_a_started_process_inherits_the_pin() -> None:
    probe = (
        "import numpy, scipy.linalg, threadpoolctl; print(sorted({str(i.get('architecture')) "
        "for i in threadpoolctl.threadpool_info() if i.get('internal_api') == 'openblas'}))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == str(sorted(_architectures()))
