#!/usr/bin/env bash
# The prepared GPU run: one call on a lent H100/H200 (about 3 minutes, at most 5: the step
# limits below add up to 295 s, plus the machine lines), from the repository root, nothing
# installed beyond the machine's own torch, triton and nvcc (and benchmarks/wheels/*.whl when
# `make gpu-wheels` filled it: Liger-Kernel and Cut Cross-Entropy, installed --no-index):
#
#     OUT=DIR bash benchmarks/gpu_session.sh
#
# 1. builds the native module in place with its CUDA kernels (the default architectures,
#    setup.py) and lists the GPU code in it (cuobjdump);
# 2. benchmarks/gpu_segment.py (about a minute; stopped at 90 s): segment_advantage, every GPU backend
#    against torch, timed at three shapes and as a CUDA graph replay, and
#    timed (DIR/segment_advantage_gpu.md);
# 3. benchmarks/gpu.py: the Triton log-prob kernels against the float64 reference, then
#    timed against naive torch and the other installed implementations, next to the
#    compiled bound, and the RL rows (benchmarks/gpu_rl.py; no new row starts after 65 s)
#    (DIR/logprobs_gpu.md).
# 4. benchmarks/gpu_linear_fwd.py: the sm_90 forward candidates of linear_logprobs (issue 45
#    item 3) beside today's default, naive torch and cuBLAS's product alone, at N=8192
#    H=4096 V=151936 bf16, with % of bf16 peak (about 20 s; no row starts after 20 s)
#    (DIR/linear_fwd_gpu.md).
# Each step has its own time limit, so one that hangs leaves the others' results; the whole
# log is DIR/session.log. Exit status: the number of steps that failed.
set -u
OUT=${OUT:-/tmp/sharpo-gpu}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
failed=0
step() { echo "== $* ($(date -u +%T))"; }
{
  step machine
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  python3 -c "import torch, triton, sys; print('python', sys.version.split()[0], 'torch', \
torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name(0))"
  nvcc --version | tail -n 2

  step "native module (CUDA kernels, default architectures)"
  start=$(date +%s)
  if timeout 60 python3 setup.py -q build_ext --inplace >"$OUT/build.log" 2>&1; then
    echo "built in $(( $(date +%s) - start )) s"
    so=$(ls _sharpo_native*.so | head -n 1)
    cuobjdump --list-elf "$so"; cuobjdump --list-ptx "$so"
    python3 -c "import torch; from sharpo_kernels import _backend as b; print('native CUDA kernels:', \
b.native_has_cuda(), 'runs on this GPU:', b.native_cuda_code_for(torch.device('cuda')))"
  else
    echo "build FAILED (rc $?), last lines of build.log:"; tail -n 25 "$OUT/build.log"
    failed=$((failed + 1))
  fi

  step "Liger-Kernel and Cut Cross-Entropy wheels (make gpu-wheels), for gpu.py's RL rows"
  if ls benchmarks/wheels/*.whl >/dev/null 2>&1; then
    timeout 20 python3 -m pip install -q --no-index --no-deps benchmarks/wheels/*.whl \
      || echo "wheel install failed (rc $?): their rows will say 'not installed'"
  else
    echo "no benchmarks/wheels/*.whl: their rows will say 'not installed'"
  fi

  step "segment_advantage on the GPU"
  timeout 90 python3 benchmarks/gpu_segment.py --out "$OUT/segment_advantage_gpu.md" \
    || { echo "gpu_segment.py rc $?"; failed=$((failed + 1)); }

  step "log-prob kernels on the GPU"
  timeout 95 python3 benchmarks/gpu.py --budget-s 65 --out "$OUT/logprobs_gpu.md" \
    || { echo "gpu.py rc $?"; failed=$((failed + 1)); }

  step "linear_logprobs forward candidates (sm_90)"
  timeout 30 python3 benchmarks/gpu_linear_fwd.py --budget-s 20 --out "$OUT/linear_fwd_gpu.md" \
    || { echo "gpu_linear_fwd.py rc $?"; failed=$((failed + 1)); }
  step "done: $failed step(s) failed"
  exit "$failed"
} 2>&1 | tee "$OUT/session.log"
exit "${PIPESTATUS[0]}"
