"""Shared test setup. Triton kernels run on CPU tensors through the interpreter, which must
be switched on before triton is first imported (docs/toolchain.md)."""
import os
import shutil

if shutil.which("nvidia-smi") is None:
    os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
