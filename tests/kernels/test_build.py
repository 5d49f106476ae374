"""The native build (CMakeLists.txt, setup.py, csrc/): the module is importable, the CUDA
sources compile with the machine's nvcc for sm_90 (so a syntax or type error fails CI even
without a GPU), the installed module holds code for every GPU generation of the default
architecture list (cuobjdump), and a configure without nvcc skips CUDA with one clear line."""
import glob
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NVCC = shutil.which("nvcc")


def _cuobjdump():
    """cuobjdump from the CUDA toolkit, else the copy triton ships; None when neither."""
    exe = shutil.which("cuobjdump")
    if exe is None and NVCC is not None:
        cand = Path(NVCC).resolve().parent / "cuobjdump"
        exe = str(cand) if cand.exists() else None
    if exe is None and importlib.util.find_spec("triton") is not None:
        cand = Path(importlib.util.find_spec("triton").origin).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
        exe = str(cand) if cand.exists() else None
    return exe


def _setup_default_archs():
    text = (ROOT / "setup.py").read_text()
    return re.search(r'^DEFAULT_CUDA_ARCHS = "([^"]+)"', text, re.M).group(1)


def test_native_module_is_built():
    """`pip install .` builds `_sharpo_native`; without it the cpp backend is missing."""
    import _sharpo_native as native
    assert isinstance(native.has_cuda(), bool)
    assert callable(native.segment_advantage_cpu)
    if native.has_cuda():
        assert callable(native.segment_advantage_cuda)


def test_build_requirements_exclude_torch():
    import tomllib
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    assert not [r for r in requires if r.split("=")[0].split(">")[0].strip().lower() == "torch"]


@pytest.mark.skipif(NVCC is None, reason="nvcc not found: CUDA compile check skipped")
@pytest.mark.parametrize("source", sorted(Path(p).name for p in glob.glob(str(ROOT / "csrc" / "*.cu")))
                         or [None])
def test_cuda_sources_compile_for_sm90(source, tmp_path):
    if source is None:
        pytest.skip("no .cu sources")
    cmd = [NVCC, "-c", "-arch=sm_90", "-std=c++17", "-Werror", "all-warnings",
           "-I", str(ROOT / "csrc"), str(ROOT / "csrc" / source), "-o", str(tmp_path / "k.o")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "k.o").stat().st_size > 0


def _configure(tmp_path, *extra, env=None):
    pybind11 = pytest.importorskip("pybind11")
    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.skip("cmake not found")
    cmd = [cmake, "-S", str(ROOT), "-B", str(tmp_path / "b"), f"-DPython_EXECUTABLE={sys.executable}",
           f"-Dpybind11_DIR={pybind11.get_cmake_dir()}", *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)


def test_configure_without_nvcc_skips_cuda_with_one_line(tmp_path):
    """PATH without nvcc: the configure succeeds (C++ only) and says so exactly once."""
    env = dict(os.environ)
    env.pop("CUDACXX", None)
    env["PATH"] = os.pathsep.join(d for d in env.get("PATH", "").split(os.pathsep)
                                  if d and not os.path.exists(os.path.join(d, "nvcc")))
    proc = _configure(tmp_path, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("sharpo: nvcc not found, CUDA kernels skipped") == 1, proc.stdout
    assert "CUDA kernels enabled" not in proc.stdout


def test_configure_with_cuda_disabled(tmp_path):
    proc = _configure(tmp_path, "-DSHARPO_DISABLE_CUDA=ON")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("sharpo: SHARPO_DISABLE_CUDA is set, CUDA kernels skipped") == 1


def test_default_cuda_architectures_agree():
    """setup.py passes its default explicitly (a reused build tree keeps no stale value);
    CMakeLists.txt has the same default for direct cmake builds: SASS for sm_80, 86, 89,
    90 and compute_90 PTX (NN-real = SASS only, NN = SASS + PTX)."""
    default = _setup_default_archs()
    assert default == "80-real;86-real;89-real;90"
    cmake = (ROOT / "CMakeLists.txt").read_text()
    assert f'set(CMAKE_CUDA_ARCHITECTURES "{default}")' in cmake


@pytest.mark.skipif(NVCC is None, reason="nvcc not found: the native module has no CUDA code")
def test_native_module_holds_code_for_every_gpu():
    """The installed `_sharpo_native` (pip install . with nvcc present) lists SASS for sm_80,
    sm_86, sm_89, sm_90 and compute_90 PTX, and says so through cuda_archs() (what the
    automatic backend choice reads, sharpo_kernels/_backend.py)."""
    import _sharpo_native as native
    if not native.has_cuda():
        pytest.skip("the installed _sharpo_native was built without CUDA "
                    "(SHARPO_DISABLE_CUDA=1, or nvcc was not found at install time)")
    tool = _cuobjdump()
    if tool is None:
        pytest.skip("cuobjdump not found (CUDA toolkit bin/ or triton's backends/nvidia/bin)")
    assert hasattr(native, "cuda_archs"), "stale build: reinstall (pip install .)"
    so = native.__file__
    elf = subprocess.run([tool, "--list-elf", so], capture_output=True, text=True, timeout=60)
    ptx = subprocess.run([tool, "--list-ptx", so], capture_output=True, text=True, timeout=60)
    elf_archs = sorted(set(re.findall(r"\.(sm_\d+[af]?)\.cubin", elf.stdout)))
    ptx_archs = sorted(set(re.findall(r"\.(sm_\d+[af]?)\.ptx", ptx.stdout)))
    built = native.cuda_archs().replace(",", ";")
    if os.environ.get("SHARPO_CUDA_ARCHS") is None:
        assert built == _setup_default_archs()
    if built == _setup_default_archs():
        assert elf_archs == ["sm_80", "sm_86", "sm_89", "sm_90"], elf.stdout + elf.stderr
        assert ptx_archs == ["sm_90"], ptx.stdout + ptx.stderr
