"""Ahead-of-time compilation of every Triton kernel variant for sm_80 / sm_90 on a machine
without a GPU, and the facts read from the binaries (docs/gpu_kernels.md).

    variants.py  KernelVariant: one launch configuration a launcher can pick, described
                 without tensors; each kernel module lists its own (`compile_specs`).
    driver.py    a stand-in Triton driver reporting GPUTarget("cuda", arch, 32).
    sass.py      registers, stack, spill instructions and hot-loop instruction counts from
                 `cuobjdump` (shipped with triton in backends/nvidia/bin).
    build.py     compiles a list of variants (deduplicated binaries) and checks the limits.
    model.py     the throughput model of an H200 and an A100: issue, MUFU, memory and
                 tensor-core time of a variant at its shape.

`python -m sharpo_kernels.compiled` compiles everything and exits 1 on any violation; it
must run without TRITON_INTERPRET (the test suite's interpreter switch).
"""
