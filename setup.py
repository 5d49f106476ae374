"""Build of the native module `_sharpo_native` with CMake (CMakeLists.txt, sources in csrc/).

Project metadata lives in pyproject.toml; this file only adds the CMake-built extension.
Environment knobs:
    SHARPO_DISABLE_CUDA=1       skip the CUDA kernels even when nvcc is found
    SHARPO_CUDA_ARCHS="86-real;90"  CUDA architectures, CMAKE_CUDA_ARCHITECTURES syntax
                                (default DEFAULT_CUDA_ARCHS, docs/toolchain.md)
    SHARPO_BUILD_JOBS=N         parallel compile jobs (default: CPU count)
    CMAKE_BUILD_TYPE=Debug      build type (default Release)
"""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
# SASS for A100/A30 (80), RTX 30xx/A10/A40 (86), L4/L40S/RTX 40xx (89), H100/H200 (90), and
# compute_90 PTX that the driver JIT-compiles on newer GPUs. The same default as
# CMakeLists.txt (tests/kernels/test_build.py checks they agree).
DEFAULT_CUDA_ARCHS = "80-real;86-real;89-real;90"
_ARCH = r"(\d+[af]?(-real|-virtual)?|all|all-major|native)"


def cuda_archs() -> str:
    """SHARPO_CUDA_ARCHS (CMAKE_CUDA_ARCHITECTURES syntax, ';' or ',' separated) or the
    default; a malformed value stops the build with a message naming the variable."""
    spec = os.environ.get("SHARPO_CUDA_ARCHS", "").strip() or DEFAULT_CUDA_ARCHS
    spec = spec.replace(",", ";")
    if not re.fullmatch(rf"{_ARCH}(;{_ARCH})*", spec):
        raise SystemExit(f"SHARPO_CUDA_ARCHS: expected CUDA architectures such as "
                         f"'86-real;90' (NN-real: SASS only, NN: SASS + PTX), got {spec!r}")
    return spec


class CMakeExtension(Extension):
    def __init__(self, name: str, sourcedir: Path):
        super().__init__(name, sources=[])
        self.sourcedir = str(sourcedir)


def _cmake() -> str:
    exe = shutil.which("cmake")
    if exe is None:
        try:  # the `cmake` wheel of the build requirements
            import cmake
            exe = str(Path(cmake.CMAKE_BIN_DIR) / "cmake")
        except ImportError:
            raise RuntimeError("sharpo: cmake not found; install cmake>=3.18") from None
    return exe


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        if not isinstance(ext, CMakeExtension):
            return super().build_extension(ext)
        import pybind11

        extdir = Path(self.get_ext_fullpath(ext.name)).parent.resolve()
        build_temp = Path(self.build_temp).resolve() / ext.name
        build_temp.mkdir(parents=True, exist_ok=True)
        args = [
            f"-DCMAKE_LIBRARY_OUTPUT_DIRECTORY={extdir}",
            f"-DPython_EXECUTABLE={sys.executable}",
            f"-Dpybind11_DIR={pybind11.get_cmake_dir()}",
            f"-DCMAKE_BUILD_TYPE={os.environ.get('CMAKE_BUILD_TYPE', 'Release')}",
        ]
        # Always explicit: a reused build tree must not keep a cached value.
        disable = os.environ.get("SHARPO_DISABLE_CUDA", "0") not in ("", "0")
        args.append(f"-DSHARPO_DISABLE_CUDA={'ON' if disable else 'OFF'}")
        args.append(f"-DCMAKE_CUDA_ARCHITECTURES={cuda_archs()}")
        jobs = os.environ.get("SHARPO_BUILD_JOBS", str(os.cpu_count() or 1))
        cmake = _cmake()
        subprocess.run([cmake, "-S", ext.sourcedir, "-B", str(build_temp), *args], check=True)
        subprocess.run([cmake, "--build", str(build_temp), "-j", jobs], check=True)


setup(
    ext_modules=[CMakeExtension("_sharpo_native", ROOT)],
    cmdclass={"build_ext": CMakeBuild},
)
