// CUDA kernel of SHARPO's segment advantage (docs/method.md §4, docs/api.md), compiled when
// nvcc is found: the whole call in one validating pass (issue 44), the same algorithm as
// the Triton kernel (sharpo_kernels/segment_advantage/triton_kernels.py).
//
// One block per row (kThreads threads, kItems consecutive tokens each, a chunk of kChunk
// tokens per step):
//   A. every data rule of checks.py; each segment's sum of teacher - student and count m by
//      a segmented scan (segments are contiguous runs: no atomics; cub::BlockScan chains the
//      chunks through a prefix callback); a segment's totals go to slot k of the row's
//      table when it ends.
//   B. mbar, then gap, w, rho and coef for k < cap (NaN tables past K_i), the empty-segment
//      rule.
//   C. out = A * coef[id] in segments, A elsewhere, 0 where the mask is 0.
// The smallest error key of the row (checks.py "error word": rank << 58 | row * L + pos)
// goes into word[0] as KEY_NONE - key by one atomicMax (relaxed: no fence), K_i into
// word[1]. With traj_index, mbar spans rows: launch 1 does A, launch 2 the trajectory's
// mbar (a loop over the B rows), B and C.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include <cstdint>

#include "segment_advantage.h"

namespace sharpo {
namespace {

constexpr int kThreads = 256;
constexpr int kItems = 4;
constexpr int64_t kChunk = kThreads * kItems;
constexpr long long kKeyNone = 1LL << 62;   // checks.py KEY_NONE
constexpr int kKeyShift = 58;              // checks.py KEY_SHIFT
constexpr double kFp32Half = 3.4028234663852886e38 / 2;

// Ranks of checks.py (RANK_*), in the order the host checks run.
enum Rank : long long {
  kRAdvRange = 0, kRTRange = 1, kRSRange = 2, kRIdBelow = 3, kRIdOrder = 4, kRMask = 5,
  kRAdv = 6, kRTNonFinite = 7, kRSNonFinite = 8, kREmpty = 9, kRTooMany = 10,
};
__device__ __forceinline__ long long key_of(Rank r, int64_t at) {
  return (static_cast<long long>(r) << kKeyShift) + at;
}

struct SegAcc {
  float s;   // sum of teacher - student
  int c;     // positions counted (mask 1)
  int f;     // 1: a new run starts here
};
struct SegOp {   // segmented sum: a flagged element starts a new segment (associative)
  __device__ __forceinline__ SegAcc operator()(const SegAcc& a, const SegAcc& b) const {
    return b.f ? b : SegAcc{a.s + b.s, a.c + b.c, a.f | b.f};
  }
};
struct MinOp {
  __device__ __forceinline__ long long operator()(long long a, long long b) const {
    return a < b ? a : b;
  }
};
struct SumOp {
  template <class T> __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};

// The open run carried from chunk to chunk: warp 0 calls it with the chunk's aggregate and
// every lane must return the same prefix.
struct ChunkCarry {
  SegAcc* running;   // shared
  __device__ SegAcc operator()(const SegAcc& chunk) {
    const SegAcc old = *running;
    __syncwarp();
    if (threadIdx.x == 0) *running = SegOp()(old, chunk);
    return old;
  }
};

__device__ __forceinline__ float load_logp(const void* p, int64_t i, int dtype) {
  if (dtype == kLogpBF16) return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  if (dtype == kLogpF16) return __half2float(static_cast<const __half*>(p)[i]);
  return static_cast<const float*>(p)[i];
}

__device__ __forceinline__ double load_adv(const void* p, int64_t i, int dtype) {
  if (dtype == kAdvF64) return static_cast<const double*>(p)[i];
  if (dtype == kAdvBF16) return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  if (dtype == kAdvF16) return __half2float(static_cast<const __half*>(p)[i]);
  return static_cast<const float*>(p)[i];
}

// response_mask at i: on = value != 0; bad = value not 0/1 (NaN included).
__device__ __forceinline__ bool mask_at(const SegInputs& in, int64_t i, bool& bad) {
  if (in.mask_dtype == kMaskI64) {
    const int64_t v = static_cast<const int64_t*>(in.mask)[i];
    bad = v != 0 && v != 1;
    return v != 0;
  }
  if (in.mask_dtype == kMaskF32) {
    const float v = static_cast<const float*>(in.mask)[i];
    bad = !(v == 0.0f || v == 1.0f);
    return v != 0.0f;
  }
  const uint8_t v = static_cast<const uint8_t*>(in.mask)[i];
  bad = v > 1;
  return v != 0;
}

template <class IdT>
__device__ __forceinline__ int64_t id_at(const SegInputs& in, int64_t b, int64_t j) {
  return static_cast<int64_t>(static_cast<const IdT*>(in.ids)[b * in.ids_stride + j]);
}

using ScanInt = cub::BlockScan<int, kThreads>;
using ScanSeg = cub::BlockScan<SegAcc, kThreads>;
using ReduceKey = cub::BlockReduce<long long, kThreads>;
using ReduceInt = cub::BlockReduce<int, kThreads>;
using ReduceFloat = cub::BlockReduce<float, kThreads>;
union Temp {
  typename ScanInt::TempStorage scan_int;
  typename ScanSeg::TempStorage scan_seg;
  typename ReduceKey::TempStorage key;
  typename ReduceInt::TempStorage i;
  typename ReduceFloat::TempStorage f;
};

// Phase A of row b. Returns this thread's smallest key; K and the row's sum of m in shared.
template <class IdT>
__device__ long long scan_row(const SegFusedArgs& a, int64_t b, float* sum_tab, float* cnt_tab,
                              Temp& tmp, SegAcc* carry, int* s_K, int* s_totm) {
  const SegInputs& in = a.in;
  const int64_t L = in.L, base = b * (L > 0 ? L : 1);
  long long key = kKeyNone;
  const double a64 = load_adv(a.adv, b, a.adv_dtype);
  if (!isfinite(a64)) key = key_of(kRAdv, base);
  else if (fabs(a64) * a.coef_max > kFp32Half) key = key_of(kRAdvRange, base);
  const bool teach = in.has_teacher == nullptr || in.has_teacher[b] != 0;
  if (threadIdx.x == 0) *carry = SegAcc{0.0f, 0, 0};
  int runs = 0, totm = 0;
  for (int64_t c0 = 0; c0 < L; c0 += kChunk) {
    __syncthreads();   // carry written; temp storage free
    int64_t id[kItems];
    SegAcc el[kItems];
    int starts = 0;
    const int64_t j0 = c0 + static_cast<int64_t>(threadIdx.x) * kItems;
#pragma unroll
    for (int q = 0; q < kItems; ++q) {
      const int64_t j = j0 + q;
      const bool inb = j < L;
      id[q] = inb ? id_at<IdT>(in, b, j) : -1;
      const int64_t prev = (inb && j > 0) ? id_at<IdT>(in, b, j - 1) : -1;
      bool on = inb;
      if (inb && in.mask != nullptr) {
        bool bad = false;
        on = mask_at(in, b * in.mask_stride + j, bad);
        if (bad && a.mask_check) key = min(key, key_of(kRMask, base + j));
      }
      if (inb && id[q] < -1) key = min(key, key_of(kRIdBelow, base + j));
      const bool start = id[q] >= 0 && id[q] != prev;
      starts += start;
      const bool in_seg = inb && id[q] >= 0 && on;
      const bool used = in_seg && teach;
      float d = 0.0f;
      if (used) {
        const float tv = load_logp(in.teacher, b * in.teacher_stride + j, in.logp_dtype);
        const float sv = load_logp(in.student, b * in.student_stride + j, in.logp_dtype);
        const bool tf = isfinite(tv), sf = isfinite(sv);
        if (!tf) key = min(key, key_of(kRTNonFinite, base + j));
        if (!sf) key = min(key, key_of(kRSNonFinite, base + j));
        if (tf && fabsf(tv) > a.logp_bound) key = min(key, key_of(kRTRange, base + j));
        if (sf && fabsf(sv) > a.logp_bound) key = min(key, key_of(kRSRange, base + j));
        d = tv - sv;
      }
      totm += in_seg;
      el[q] = SegAcc{d, in_seg ? 1 : 0, id[q] != prev ? 1 : 0};   // f && id >= 0: a start
    }
    // Run numbering: the runs begun before this thread's tokens.
    int before = 0, chunk_runs = 0;
    ScanInt(tmp.scan_int).ExclusiveSum(starts, before, chunk_runs);
    __syncthreads();
    int r = runs + before;
#pragma unroll
    for (int q = 0; q < kItems; ++q) {
      const int64_t j = j0 + q;
      if (j < L && el[q].f && id[q] >= 0) {   // a run starts at j
        ++r;
        if (id[q] != r - 1) key = min(key, key_of(kRIdOrder, base + j));
      }
    }
    runs += chunk_runs;
    // Segmented sums: thread aggregate, block scan chained across chunks, then the tokens.
    SegAcc agg{0.0f, 0, 0};
#pragma unroll
    for (int q = 0; q < kItems; ++q) agg = SegOp()(agg, el[q]);
    SegAcc run;
    ChunkCarry cb{carry};
    ScanSeg(tmp.scan_seg).ExclusiveScan(agg, run, SegOp(), cb);
#pragma unroll
    for (int q = 0; q < kItems; ++q) {
      const int64_t j = j0 + q;
      run = SegOp()(run, el[q]);
      if (j < L && id[q] >= 0 && id[q] < a.cap) {
        const int64_t next = j + 1 < L ? id_at<IdT>(in, b, j + 1) : -1;
        if (next != id[q]) {   // the segment ends at j
          sum_tab[id[q]] = run.s;
          cnt_tab[id[q]] = static_cast<float>(run.c);
        }
      }
    }
  }
  __syncthreads();
  const int total_m = ReduceInt(tmp.i).Sum(totm);
  if (threadIdx.x == 0) { *s_K = runs; *s_totm = total_m; }
  if (runs > a.cap) key = min(key, key_of(kRTooMany, base));
  __syncthreads();
  return key;
}

// Phases B and C of row b; returns this thread's smallest key (empty segments added).
template <class IdT>
__device__ long long finish_row(const SegFusedArgs& a, int64_t b, int64_t K, float mbar,
                                long long key) {
  const SegInputs& in = a.in;
  const int64_t L = in.L, base = b * (L > 0 ? L : 1), cap = a.cap, BC = in.B * cap;
  float* gap_tab = a.tab + b * cap;
  float* w_tab = gap_tab + BC;
  float* rho_tab = gap_tab + 2 * BC;
  float* coef_tab = gap_tab + 3 * BC;
  const float adv = static_cast<float>(load_adv(a.adv, b, a.adv_dtype));
  const float sgn = adv > 0.0f ? 1.0f : (adv < 0.0f ? -1.0f : 0.0f);
  const bool teach = in.has_teacher == nullptr || in.has_teacher[b] != 0;
  const int64_t Kc = K < cap ? K : cap;
  for (int64_t k = threadIdx.x; k < cap; k += kThreads) {
    const bool exists = k < Kc;
    const float s = exists ? gap_tab[k] : 0.0f;
    const float m = exists ? coef_tab[k] : 0.0f;
    if (exists && m <= 0.0f) key = min(key, key_of(kREmpty, base + k));
    const float m_safe = fmaxf(m, 1.0f);
    const float gap = s / m_safe;
    const float u = fminf(fmaxf(tanhf(gap / a.two_tau), -a.p.alpha), a.p.alpha);
    const float w = 1.0f + sgn * u;
    const float rho = fminf(fmaxf(mbar / m_safe, a.p.rho_min), a.p.rho_max);
    const float coef = a.one_minus_lam + a.p.lam * rho * w;
    gap_tab[k] = exists && teach ? gap : NAN;
    w_tab[k] = exists ? (teach ? w : 1.0f) : NAN;
    rho_tab[k] = exists ? (teach ? rho : 1.0f) : NAN;
    coef_tab[k] = exists && teach ? coef : 1.0f;
  }
  __syncthreads();   // every coefficient is visible to the block
  for (int64_t j = threadIdx.x; j < L; j += kThreads) {
    const int64_t id = id_at<IdT>(in, b, j);
    const float c = (id >= 0 && id < cap) ? coef_tab[id] : 1.0f;
    float v = adv * c;
    if (in.mask != nullptr) {
      bool bad = false;
      if (!mask_at(in, b * in.mask_stride + j, bad)) v = 0.0f;
    }
    a.out[b * a.out_stride + j] = v;
  }
  return key;
}

__device__ __forceinline__ void report(const SegFusedArgs& a, Temp& tmp, long long key,
                                       int64_t K, bool with_k) {
  __syncthreads();
  const long long row_key = ReduceKey(tmp.key).Reduce(key, MinOp());
  if (threadIdx.x == 0) {
    if (row_key < kKeyNone)
      atomicMax(a.word, static_cast<unsigned long long>(kKeyNone - row_key));
    if (with_k) atomicMax(a.word + 1, static_cast<unsigned long long>(K));
  }
}

// mode 0: phases A, B, C; mode 1: A only (traj_index launch 1); mode 2: B, C (launch 2).
template <class IdT, int kMode>
__global__ void __launch_bounds__(kThreads) segment_advantage_kernel(SegFusedArgs a) {
  __shared__ Temp tmp;
  __shared__ SegAcc carry;
  __shared__ int s_K, s_totm;
  __shared__ float s_mbar;
  const int64_t b = blockIdx.x;
  const int64_t cap = a.cap, BC = a.in.B * cap;
  long long key = kKeyNone;
  int64_t K = 0;
  float mbar = 0.0f;
  if (kMode != 2) {
    key = scan_row<IdT>(a, b, a.tab + b * cap, a.tab + 3 * BC + b * cap, tmp, &carry, &s_K,
                        &s_totm);
    K = s_K;
    if (threadIdx.x == 0) {
      a.num[b] = K;
      if (kMode == 1) a.rowm[b] = static_cast<float>(s_totm);
    }
    mbar = static_cast<float>(s_totm) / static_cast<float>(K > 0 ? K : 1);
  } else {
    // mbar over the rows of b's trajectory (api.py): their sum of m over their segments.
    const int64_t me = a.traj[b];
    float m = 0.0f, k = 0.0f;
    for (int64_t r = threadIdx.x; r < a.in.B; r += kThreads) {
      if (a.traj[r] == me) { m += a.rowm[r]; k += static_cast<float>(a.num[r]); }
    }
    const float tot_m = ReduceFloat(tmp.f).Sum(m);
    __syncthreads();
    const float tot_k = ReduceFloat(tmp.f).Sum(k);
    if (threadIdx.x == 0) s_mbar = tot_m / fmaxf(tot_k, 1.0f);
    __syncthreads();
    mbar = s_mbar;
    K = a.num[b];
  }
  if (kMode != 1) key = finish_row<IdT>(a, b, K, mbar, key);
  report(a, tmp, key, K, kMode != 2);
}

template <int kMode>
cudaError_t launch(const SegFusedArgs& a, cudaStream_t st) {
  const dim3 grid(static_cast<unsigned>(a.in.B));
  if (a.in.id_dtype == kIdI32)
    segment_advantage_kernel<int32_t, kMode><<<grid, kThreads, 0, st>>>(a);
  else
    segment_advantage_kernel<int64_t, kMode><<<grid, kThreads, 0, st>>>(a);
  return cudaGetLastError();
}

}  // namespace

int segment_advantage_cuda(const SegFusedArgs& a, uintptr_t stream) {
  if (a.in.B == 0) return 0;
  auto st = reinterpret_cast<cudaStream_t>(stream);
  cudaError_t err;
  if (a.traj == nullptr) return static_cast<int>(launch<0>(a, st));
  if ((err = launch<1>(a, st)) != cudaSuccess) return static_cast<int>(err);
  return static_cast<int>(launch<2>(a, st));
}

int cuda_kernel_image_status(int device) {
  int prev = 0;
  cudaError_t err = cudaGetDevice(&prev);
  if (err != cudaSuccess) return static_cast<int>(err);
  if (device != prev && (err = cudaSetDevice(device)) != cudaSuccess) return static_cast<int>(err);
  cudaFuncAttributes attr;
  const void* kernels[] = {reinterpret_cast<const void*>(&segment_advantage_kernel<int32_t, 0>),
                           reinterpret_cast<const void*>(&segment_advantage_kernel<int64_t, 0>),
                           reinterpret_cast<const void*>(&segment_advantage_kernel<int64_t, 1>),
                           reinterpret_cast<const void*>(&segment_advantage_kernel<int64_t, 2>)};
  for (const void* k : kernels) {
    err = cudaFuncGetAttributes(&attr, k);
    if (err != cudaSuccess) break;
  }
  cudaGetLastError();  // not sticky, but leave no error behind for the next launch check
  if (device != prev) cudaSetDevice(prev);
  return static_cast<int>(err);
}

}  // namespace sharpo
