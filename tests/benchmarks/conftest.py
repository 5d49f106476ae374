"""Fixtures of the benchmark-script tests."""
import sys

import pytest

from bench_scripts import load_script


@pytest.fixture(scope="module")
def ceiling():
    """benchmarks/ceiling.py as a module, one copy per test module."""
    mod = load_script("ceiling", "sharpo_bench_ceiling")
    yield mod
    sys.modules.pop(mod.__name__, None)
