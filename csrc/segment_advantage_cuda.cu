// CUDA kernels of SHARPO's segment advantage (docs/method.md §4, docs/api.md), compiled
// when nvcc is found. Inputs are validated by the caller
// (sharpo_kernels/segment_advantage/checks.py).
//
//   segment_sums:  grid (B, ceil(L / kBlock)), one thread per token: per-segment sums of
//                  delta (double atomics) and counts (int atomics), first reduced within the
//                  block over the run a warp shares when possible.
//   segment_apply: grid (B, ceil(L / kBlock)): out = A * coef[b, id] in segments, A
//                  elsewhere, 0 where the mask is 0.
// The [B, Kmax] coefficient step between them (docs/method.md §4) runs on the GPU in torch.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "segment_advantage.h"

namespace sharpo {
namespace {

constexpr int kBlock = 256;

__device__ __forceinline__ float load_logp(const void* p, int64_t i, int dtype) {
  if (dtype == kLogpBF16) return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  if (dtype == kLogpF16) return __half2float(static_cast<const __half*>(p)[i]);
  return static_cast<const float*>(p)[i];
}

template <class IdT>
__global__ void segment_sums_kernel(SegInputs in, int64_t kmax, double* __restrict__ sums,
                                    int32_t* __restrict__ counts) {
  const int64_t b = blockIdx.x;   // rows on x: up to 2^31 - 1 of them
  const int64_t j = static_cast<int64_t>(blockIdx.y) * kBlock + threadIdx.x;
  int64_t id = -1;
  bool on = false;
  if (j < in.L) {
    id = static_cast<int64_t>(static_cast<const IdT*>(in.ids)[b * in.ids_stride + j]);
    on = id >= 0 && (in.mask == nullptr ||
                     static_cast<const uint8_t*>(in.mask)[b * in.mask_stride + j] != 0);
  }
  const bool teach = in.has_teacher == nullptr || in.has_teacher[b] != 0;
  double d = 0.0;
  if (on && teach) {
    d = static_cast<double>(load_logp(in.teacher, b * in.teacher_stride + j, in.logp_dtype) -
                            load_logp(in.student, b * in.student_stride + j, in.logp_dtype));
  }
  // Warp fast path: when all active lanes share one segment, lane 0 adds for the warp.
  const unsigned lanes = __ballot_sync(0xffffffffu, on);
  if (lanes == 0) return;
  const int64_t leader_id = __shfl_sync(0xffffffffu, id, __ffs(lanes) - 1);
  const bool same = __all_sync(0xffffffffu, !on || id == leader_id);
  if (same) {
    double s = d;
    for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
    if ((threadIdx.x & 31) == 0) {
      atomicAdd(&sums[b * kmax + leader_id], s);
      atomicAdd(&counts[b * kmax + leader_id], __popc(lanes));
    }
  } else if (on) {
    atomicAdd(&sums[b * kmax + id], d);
    atomicAdd(&counts[b * kmax + id], 1);
  }
}

template <class IdT>
__global__ void segment_apply_kernel(SegInputs in, int64_t kmax, const float* __restrict__ coef,
                                     float* __restrict__ out, int64_t out_stride) {
  const int64_t b = blockIdx.x;   // rows on x: up to 2^31 - 1 of them
  const int64_t j = static_cast<int64_t>(blockIdx.y) * kBlock + threadIdx.x;
  if (j >= in.L) return;
  const int64_t id = static_cast<int64_t>(static_cast<const IdT*>(in.ids)[b * in.ids_stride + j]);
  const float a = in.advantages[b];
  float v = id >= 0 ? a * coef[b * kmax + id] : a;
  if (in.mask != nullptr && static_cast<const uint8_t*>(in.mask)[b * in.mask_stride + j] == 0) v = 0.0f;
  out[b * out_stride + j] = v;
}

dim3 grid_for(const SegInputs& in) {
  return dim3(static_cast<unsigned>(in.B), static_cast<unsigned>((in.L + kBlock - 1) / kBlock));
}

}  // namespace

int segment_sums_cuda(const SegInputs& in, int64_t kmax, double* sums, int32_t* counts,
                      uintptr_t stream) {
  if (in.B == 0 || in.L == 0 || kmax == 0) return 0;
  auto st = reinterpret_cast<cudaStream_t>(stream);
  if (in.id_dtype == kIdI32)
    segment_sums_kernel<int32_t><<<grid_for(in), kBlock, 0, st>>>(in, kmax, sums, counts);
  else
    segment_sums_kernel<int64_t><<<grid_for(in), kBlock, 0, st>>>(in, kmax, sums, counts);
  return static_cast<int>(cudaGetLastError());
}

int segment_apply_cuda(const SegInputs& in, int64_t kmax, const float* coef, float* out,
                       int64_t out_stride, uintptr_t stream) {
  if (in.B == 0 || in.L == 0) return 0;
  auto st = reinterpret_cast<cudaStream_t>(stream);
  if (in.id_dtype == kIdI32)
    segment_apply_kernel<int32_t><<<grid_for(in), kBlock, 0, st>>>(in, kmax, coef, out, out_stride);
  else
    segment_apply_kernel<int64_t><<<grid_for(in), kBlock, 0, st>>>(in, kmax, coef, out, out_stride);
  return static_cast<int>(cudaGetLastError());
}

int cuda_kernel_image_status(int device) {
  int prev = 0;
  cudaError_t err = cudaGetDevice(&prev);
  if (err != cudaSuccess) return static_cast<int>(err);
  if (device != prev && (err = cudaSetDevice(device)) != cudaSuccess) return static_cast<int>(err);
  cudaFuncAttributes attr;
  const void* kernels[] = {reinterpret_cast<const void*>(&segment_sums_kernel<int32_t>),
                           reinterpret_cast<const void*>(&segment_sums_kernel<int64_t>),
                           reinterpret_cast<const void*>(&segment_apply_kernel<int32_t>),
                           reinterpret_cast<const void*>(&segment_apply_kernel<int64_t>)};
  for (const void* k : kernels) {
    err = cudaFuncGetAttributes(&attr, k);
    if (err != cudaSuccess) break;
  }
  cudaGetLastError();  // not sticky, but leave no error behind for the next launch check
  if (device != prev) cudaSetDevice(prev);
  return static_cast<int>(err);
}

}  // namespace sharpo
