// pybind11 module `_sharpo_native`: raw-pointer entry points of the C++ / CUDA kernels.
// Tensors cross as data_ptr() integers plus dtype codes, sizes and row strides, so no torch
// headers are needed at build time (docs/toolchain.md). The GIL is released while kernels run.
// Callers (sharpo_kernels/segment_advantage/native.py) own validation of shapes, dtypes
// and devices.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "segment_advantage.h"

namespace py = pybind11;

namespace {

template <class T> const T* cptr(uintptr_t p) { return reinterpret_cast<const T*>(p); }

// inputs = (teacher, student, logp_dtype, teacher_stride, student_stride, ids, id_dtype,
//           ids_stride, mask, mask_dtype, mask_stride, advantages(f32), has_teacher(u8),
//           group(i64), num_groups, B, L); pointer 0 = absent.
sharpo::SegInputs make_inputs(const py::tuple& t) {
  if (t.size() != 17) throw py::value_error("_sharpo_native: inputs tuple must have 17 items");
  sharpo::SegInputs in;
  in.teacher = cptr<void>(t[0].cast<uintptr_t>());
  in.student = cptr<void>(t[1].cast<uintptr_t>());
  in.logp_dtype = t[2].cast<int>();
  in.teacher_stride = t[3].cast<int64_t>();
  in.student_stride = t[4].cast<int64_t>();
  in.ids = cptr<void>(t[5].cast<uintptr_t>());
  in.id_dtype = t[6].cast<int>();
  in.ids_stride = t[7].cast<int64_t>();
  in.mask = cptr<void>(t[8].cast<uintptr_t>());
  in.mask_dtype = in.mask ? t[9].cast<int>() : sharpo::kMaskNone;
  in.mask_stride = t[10].cast<int64_t>();
  in.advantages = cptr<float>(t[11].cast<uintptr_t>());
  in.has_teacher = cptr<uint8_t>(t[12].cast<uintptr_t>());
  in.group = cptr<int64_t>(t[13].cast<uintptr_t>());
  in.num_groups = t[14].cast<int64_t>();
  in.B = t[15].cast<int64_t>();
  in.L = t[16].cast<int64_t>();
  return in;
}

py::tuple segment_advantage_cpu(const py::tuple& inputs, uintptr_t out, int64_t out_stride,
                                float lam, float alpha, float tau, float rho_min, float rho_max,
                                int num_threads, float logp_bound, double coef_max,
                                double adv_half) {
  const sharpo::SegInputs in = make_inputs(inputs);
  const sharpo::SegParams p{lam, alpha, tau, rho_min, rho_max, logp_bound, coef_max, adv_half};
  sharpo::SegTables tables;
  sharpo::SegError err;
  {
    py::gil_scoped_release nogil;
    err = sharpo::segment_advantage_cpu(in, p, reinterpret_cast<float*>(out), out_stride,
                                        &tables, num_threads);
  }
  py::tuple error = py::make_tuple(err.code, err.row, err.pos, err.found, err.expected);
  if (err.code != sharpo::kOk) return py::make_tuple(error, py::none(), py::none(), py::none(), py::none());
  // Pad the ragged per-row tables to [B, Kmax] (NaN where k >= K_i).
  const int64_t B = in.B;
  int64_t kmax = 0;
  for (int64_t r = 0; r < B; ++r) kmax = std::max(kmax, tables.offset[r + 1] - tables.offset[r]);
  py::array_t<int64_t> num({B});
  py::array_t<float> gap({B, kmax}), weight({B, kmax}), rho({B, kmax});
  int64_t* n = num.mutable_data();
  float* dst[3] = {gap.mutable_data(), weight.mutable_data(), rho.mutable_data()};
  const float* src[3] = {tables.gap.data(), tables.weight.data(), tables.length_factor.data()};
  for (int64_t r = 0; r < B; ++r) {   // row r: its K_r values, then NaN up to Kmax
    const int64_t o = tables.offset[r], k_r = tables.offset[r + 1] - o;
    n[r] = k_r;
    for (int q = 0; q < 3; ++q) {
      float* row = dst[q] + r * kmax;
      std::copy(src[q] + o, src[q] + o + k_r, row);
      std::fill(row + k_r, row + kmax, NAN);
    }
  }
  return py::make_tuple(error, num, gap, weight, rho);
}

#ifdef SHARPO_WITH_CUDA
int segment_advantage_cuda(const py::tuple& inputs, uintptr_t adv, int adv_dtype,
                           bool mask_check, int64_t cap, uintptr_t tab, uintptr_t out,
                           int64_t out_stride, uintptr_t num, uintptr_t rowm, uintptr_t word,
                           uintptr_t traj, double coef_max, float logp_bound, float one_minus_lam,
                           float lam, float alpha, float two_tau, float rho_min, float rho_max,
                           uintptr_t stream) {
  sharpo::SegFusedArgs a;
  a.in = make_inputs(inputs);
  a.adv = cptr<void>(adv);
  a.adv_dtype = adv_dtype;
  a.mask_check = mask_check;
  a.cap = cap;
  a.tab = reinterpret_cast<float*>(tab);
  a.out = reinterpret_cast<float*>(out);
  a.out_stride = out_stride;
  a.num = reinterpret_cast<int64_t*>(num);
  a.rowm = reinterpret_cast<float*>(rowm);
  a.word = reinterpret_cast<unsigned long long*>(word);
  a.traj = cptr<int64_t>(traj);
  a.coef_max = coef_max;
  a.logp_bound = logp_bound;
  a.one_minus_lam = one_minus_lam;
  a.two_tau = two_tau;
  a.p = sharpo::SegParams{lam, alpha, two_tau / 2, rho_min, rho_max, logp_bound};
  py::gil_scoped_release nogil;
  return sharpo::segment_advantage_cuda(a, stream);
}
#endif

}  // namespace

PYBIND11_MODULE(_sharpo_native, m) {
  m.doc() = "SHARPO native kernels (C++ CPU always; CUDA when built with nvcc). Raw-pointer API.";
#ifdef SHARPO_WITH_CUDA
  m.def("has_cuda", []() { return true; }, "True: the CUDA kernels were compiled in.");
  m.def("segment_advantage_cuda", &segment_advantage_cuda, py::arg("inputs"), py::arg("adv"),
        py::arg("adv_dtype"), py::arg("mask_check"), py::arg("cap"), py::arg("tab"),
        py::arg("out"), py::arg("out_stride"), py::arg("num"), py::arg("rowm"),
        py::arg("word"), py::arg("traj"), py::arg("coef_max"), py::arg("logp_bound"),
        py::arg("one_minus_lam"), py::arg("lam"), py::arg("alpha"), py::arg("two_tau"),
        py::arg("rho_min"), py::arg("rho_max"), py::arg("stream"),
        "The single validating pass (one launch, two with traj != 0) on `stream`; writes the "
        "[4, B, cap] tables, out, num and the error word; returns cudaError.");
  m.def("cuda_archs", []() { return std::string(SHARPO_CUDA_ARCHS); },
        "CMAKE_CUDA_ARCHITECTURES the CUDA kernels were built for, comma-separated "
        "(e.g. '80-real,86-real,89-real,90': NN-real = SASS only, NN = SASS + PTX).");
  m.def("cuda_kernel_image_status", &sharpo::cuda_kernel_image_status, py::arg("device"),
        "0 when the module holds code for CUDA device `device` (SASS or JIT-able PTX), else "
        "the cudaError (209: no kernel image for the device).");
#else
  m.def("has_cuda", []() { return false; }, "False: built without nvcc, CUDA kernels skipped.");
  m.def("cuda_archs", []() { return std::string(); }, "Empty: built without CUDA.");
#endif
  m.def("segment_advantage_cpu", &segment_advantage_cpu, py::arg("inputs"), py::arg("out"),
        py::arg("out_stride"), py::arg("lam"), py::arg("alpha"), py::arg("tau"),
        py::arg("rho_min"), py::arg("rho_max"), py::arg("num_threads") = 0,
        py::arg("logp_bound") = INFINITY, py::arg("coef_max") = 0.0, py::arg("adv_half") = 0.0,
        "C++ CPU segment advantage (coef_max > 0: also the advantages' range rule, "
        "|A_i| * coef_max <= adv_half, first). Returns ((code, row, pos, found, expected), num_segments "
        "int64 [B], gap, weight, length_factor float32 [B, Kmax]); code != 0: bad input.");
}
