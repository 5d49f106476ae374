// SHARPO segment advantage (docs/method.md §4, docs/api.md): declarations shared by the C++
// CPU kernel, the CUDA kernels and the pybind11 binding. No torch and no Python headers
// here: tensors cross the binding as raw pointers + sizes + row strides (in elements, last
// dim contiguous).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace sharpo {

// Element types of the [B, L] inputs.
enum LogpDtype : int { kLogpF32 = 0, kLogpBF16 = 1, kLogpF16 = 2 };
enum IdDtype : int { kIdI32 = 0, kIdI64 = 1 };
enum MaskDtype : int { kMaskNone = 0, kMaskU8 = 1, kMaskI64 = 2, kMaskF32 = 3 };

// Data errors; the numbers match sharpo_kernels/segment_advantage/checks.py (ERR_*), which
// formats the message naming the argument.
enum SegErr : int {
  kOk = 0,
  kIdBelowMinusOne = 1,     // segment_ids < -1
  kIdOrder = 2,             // a run does not start with the next id 0, 1, 2, ...
  kMaskValue = 3,           // response_mask not 0/1
  kTeacherNonFinite = 4,    // teacher_logp NaN/inf at a used position
  kStudentNonFinite = 5,    // student_logp NaN/inf at a used position
  kEmptySegment = 6,        // a segment with no position where response_mask == 1
  kAdvantageNonFinite = 7,  // advantages[i] NaN/inf
  kTeacherRange = 8,        // |teacher_logp| > logp_bound at a used position
  kStudentRange = 9,        // |student_logp| > logp_bound at a used position
  kAdvantageRange = 10,     // |advantages[i]| * coef_max > adv_half (expected: coef_max)
};

struct SegError {
  int code = kOk;
  int64_t row = 0, pos = 0;   // first offending row / position (row-major)
  double found = 0, expected = 0;
};

struct SegParams {
  float lam, alpha, tau, rho_min, rho_max;
  // Largest |log-prob| allowed where used (checks.py logp_bound: half the float32 range
  // over 2 L, so a segment's sum cannot overflow); larger finite values are an error.
  float logp_bound = INFINITY;
  // The advantages' range rule (checks.py check_advantage_range), checked before every other
  // rule when coef_max > 0: a finite A_i with |A_i| * coef_max > adv_half (in double) is an
  // error.
  double coef_max = 0, adv_half = 0;
};

// Inputs of one call. Pointers of [B, L] tensors index as p[row * stride + t].
struct SegInputs {
  const void* teacher;        // [B, L] logp_dtype
  const void* student;        // [B, L] logp_dtype
  int logp_dtype;
  int64_t teacher_stride, student_stride;
  const void* ids;            // [B, L] id_dtype
  int id_dtype;
  int64_t ids_stride;
  const void* mask;           // [B, L] mask_dtype, or nullptr (kMaskNone): all ones
  int mask_dtype;
  int64_t mask_stride;
  const float* advantages;    // [B]
  const uint8_t* has_teacher; // [B] 0/1, or nullptr: all rows have a teacher
  const int64_t* group;       // [B] trajectory of each row in 0..num_groups-1, or nullptr
  int64_t num_groups;
  int64_t B, L;
};

// Per-segment results, ragged: row i's segments are [offset[i], offset[i+1]).
struct SegTables {
  std::vector<int64_t> offset;                 // [B + 1]
  std::vector<float> gap, weight, length_factor;
};

// C++ CPU kernel: validates and computes in one pass over the tokens of each trajectory
// (per-segment sums, then the trajectory's mbar, then the token advantages while the rows
// are still in cache). Multithreaded over trajectories (rows without traj_index), with one
// thread per kTokensPerThread tokens at most (parallel_for.h: threads_for_work).
// out: [B, L] fp32 with row stride out_stride. Returns the first error (lowest row);
// on error `out` and `tables` hold no meaningful result.
SegError segment_advantage_cpu(const SegInputs& in, const SegParams& p, float* out,
                               int64_t out_stride, SegTables* tables, int num_threads);

// CUDA kernel (segment_advantage_cuda.cu), compiled when nvcc is found: the whole call in
// one validating pass per row (issue 44; the algorithm of the Triton kernel,
// sharpo_kernels/segment_advantage/triton_kernels.py), two launches with traj_index.
enum AdvDtype : int { kAdvF32 = 0, kAdvF64 = 1, kAdvBF16 = 2, kAdvF16 = 3 };
struct SegFusedArgs {
  SegInputs in;               // its `advantages` and `group` are not used
  const void* adv;            // [B] adv_dtype
  int adv_dtype;
  bool mask_check;            // check response_mask values are 0/1 (not for bool masks)
  int64_t cap;                // table columns (max_segments), >= 1
  float* tab;                 // [4, B, cap]: gap, weight, length_factor, coef
  float* out;                 // [B, L] with row stride out_stride
  int64_t out_stride;
  int64_t* num;               // [B]: K_i
  float* rowm;                // [B] scratch (traj only): the row's sum of m
  unsigned long long* word;   // [2] zeroed: KEY_NONE - smallest error key, Kmax
  const int64_t* traj;        // [B] trajectory labels, or nullptr
  double coef_max;            // checks.max_coefficient (advantages' range rule)
  float logp_bound;           // checks.logp_bound(L)
  float one_minus_lam, two_tau;
  SegParams p;
};
// Returns a cudaError_t as int (0 = success); enqueued on `stream`, nothing is read back.
int segment_advantage_cuda(const SegFusedArgs& a, uintptr_t stream);
// Whether the module holds code (SASS for the device, or PTX it can JIT) for CUDA device
// `device`: the cudaError_t of cudaFuncGetAttributes on the kernels, as int (0 = yes,
// 209 = cudaErrorNoKernelImageForDevice, 98 = cudaErrorInvalidDeviceFunction). The
// caller's current device is restored.
int cuda_kernel_image_status(int device);

}  // namespace sharpo
