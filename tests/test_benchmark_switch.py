"""The root conftest's `--benchmark` switch: `pytest --benchmark` runs the benchmarks and
not the unit suite, and prints each benchmark module's table when that module finishes."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

BENCH = '''
import pytest

@pytest.fixture(scope="module", autouse=True)
def summary():
    yield
    print("TABLE-" + __name__)

def test_fast(benchmark):
    benchmark.pedantic(sum, args=([1, 2],), rounds=1, iterations=1)
'''


def test_benchmark_runs_only_benchmarks_and_prints_tables(tmp_path):
    pytest.importorskip("pytest_benchmark")
    shutil.copy(ROOT / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "pytest.ini").write_text("[pytest]\ntestpaths = tests\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_unit.py").write_text("def test_unit():\n    pass\n")
    (tmp_path / "benchmarks").mkdir()
    for name in ("bench_a", "bench_b"):
        (tmp_path / "benchmarks" / f"{name}.py").write_text(BENCH)
    run = subprocess.run([sys.executable, "-m", "pytest", "--benchmark", "-p", "no:cacheprovider",
                          "-v"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "test_unit" not in run.stdout
    assert "bench_a.py::test_fast PASSED" in run.stdout
    # each table appears right after its module, before the next module's results
    a, b = run.stdout.index("TABLE-bench_a"), run.stdout.index("TABLE-bench_b")
    assert a < run.stdout.index("bench_b.py::test_fast") < b
    # without --benchmark: the unit tests only
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "test_unit PASSED" in run.stdout and "bench_" not in run.stdout
