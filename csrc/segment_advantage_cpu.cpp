// C++ CPU kernel of SHARPO's segment advantage (docs/method.md §4, docs/api.md).
//
// Work item = one trajectory (one row without traj_index). For each row of it, pass A reads
// the tokens once, run by run (a run = equal consecutive segment ids): it validates ids /
// mask / log-probs, sums teacher - student over each segment (fp32, 8 lanes) and counts m
// (positions with mask 1), and records the runs. Then the trajectory's mbar and every
// segment's gap, w, rho and coefficient follow, and pass B writes the token advantages by
// replaying the recorded runs (only the mask, still in cache, is read again).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "float_convert.h"
#include "parallel_for.h"
#include "segment_advantage.h"

namespace sharpo {
namespace {

struct NoMask { using T = uint8_t; };
struct U8Mask { using T = uint8_t; };
struct I64Mask { using T = int64_t; };
struct F32Mask { using T = float; };

template <class M> inline bool mask_bad(typename M::T v) {
  if constexpr (std::is_same_v<M, U8Mask>) return v > 1;
  else return !(v == 0 || v == 1);  // NaN is bad too
}

struct RowWork {
  std::vector<double> sums;     // [K] sum of delta over the segment (0 without a teacher)
  std::vector<int64_t> counts;  // [K] m_k: positions with mask 1
  std::vector<float> gap, weight, rho, coef;  // [K]
  std::vector<std::pair<int64_t, int64_t>> runs;  // (end, id) of each run, for pass B
  SegError err;
};

inline float clampf(float x, float lo, float hi) { return std::min(std::max(x, lo), hi); }

template <class LP, class IdT, class M>
struct Kernel {
  const SegInputs& in;
  const SegParams& p;

  const typename LP::T* teacher_row(int64_t r) const {
    return static_cast<const typename LP::T*>(in.teacher) + r * in.teacher_stride;
  }
  const typename LP::T* student_row(int64_t r) const {
    return static_cast<const typename LP::T*>(in.student) + r * in.student_stride;
  }
  const IdT* ids_row(int64_t r) const { return static_cast<const IdT*>(in.ids) + r * in.ids_stride; }
  const typename M::T* mask_row(int64_t r) const {
    if constexpr (std::is_same_v<M, NoMask>) return nullptr;
    else return static_cast<const typename M::T*>(in.mask) + r * in.mask_stride;
  }

  // End of the run of equal ids starting at j: blocks of 16 compared at once, then tokens.
  static int64_t run_end(const IdT* ids, int64_t j, int64_t L) {
    const IdT id = ids[j];
    int64_t e = j + 1;
    for (; e + 16 <= L; e += 16) {       // xor-or reduction: vectorises, no branch per id
      uint64_t diff = 0;
      for (int q = 0; q < 16; ++q) diff |= static_cast<uint64_t>(ids[e + q] ^ id);
      if (diff) break;
    }
    while (e < L && ids[e] == id) ++e;
    return e;
  }

  // Number of positions of [j, e) with mask 1; `bad` turns true on a value other than 0/1.
  // Branch-free reductions so that the loop vectorises.
  static int64_t mask_count(const typename M::T* mk, int64_t j, int64_t e, bool& bad) {
    if constexpr (std::is_same_v<M, F32Mask>) {
      float sum = 0.0f;
      unsigned odd = 0;
      for (int64_t i = j; i < e; ++i) {
        sum += mk[i];
        odd |= static_cast<unsigned>(!(mk[i] == 0.0f || mk[i] == 1.0f));
      }
      bad = odd != 0;
      return static_cast<int64_t>(sum);   // exact: a run is far below 2^24 tokens
    } else {
      using U = std::conditional_t<std::is_same_v<M, U8Mask>, uint32_t, uint64_t>;
      U sum = 0, any = 0;
      for (int64_t i = j; i < e; ++i) {
        sum += static_cast<U>(mk[i]);
        any |= static_cast<U>(mk[i]);
      }
      bad = (any & ~U(1)) != 0;           // some value outside {0, 1} (negatives included)
      return static_cast<int64_t>(sum);
    }
  }

  // Sum of (t - s) over [j, e) where the mask is on, in fp32 with 8 independent lanes (so
  // the compiler can vectorise; the segment total is then added in double). `bad` turns true
  // on a NaN/inf value (x - x != 0), `cnt` counts the mask-on positions.
  float span_sum(const typename LP::T* t, const typename LP::T* s, const typename M::T* mk,
                 int64_t j, int64_t e, bool& bad) const {
    float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    float chk[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    float big[8] = {0, 0, 0, 0, 0, 0, 0, 0};   // largest |log-prob| used (range rule)
    int64_t i = j;
    for (; i + 8 <= e; i += 8) {
      for (int q = 0; q < 8; ++q) {
        const float tv = LP::load(t[i + q]), sv = LP::load(s[i + q]);
        float on = 1.0f;
        if constexpr (!std::is_same_v<M, NoMask>) on = mk[i + q] != 0 ? 1.0f : 0.0f;
        const float d = on != 0.0f ? tv - sv : 0.0f;
        lane[q] += d;
        chk[q] += on != 0.0f ? (tv - tv) + (sv - sv) : 0.0f;   // NaN iff a used value is NaN/inf
        const float mag = on != 0.0f ? std::max(std::fabs(tv), std::fabs(sv)) : 0.0f;
        big[q] = big[q] > mag ? big[q] : mag;                    // NaN never wins
      }
    }
    for (; i < e; ++i) {
      const float tv = LP::load(t[i]), sv = LP::load(s[i]);
      bool on = true;
      if constexpr (!std::is_same_v<M, NoMask>) on = mk[i] != 0;
      if (on) {
        lane[0] += tv - sv;
        chk[0] += (tv - tv) + (sv - sv);
        const float mag = std::max(std::fabs(tv), std::fabs(sv));
        big[0] = big[0] > mag ? big[0] : mag;
      }
    }
    float c = 0.0f, sum = 0.0f, mx = 0.0f;
    for (int q = 0; q < 8; ++q) { c += chk[q]; sum += lane[q]; mx = std::max(mx, big[q]); }
    bad = !(c == 0.0f) || mx > p.logp_bound;
    return sum;
  }

  // Pass A over row r: validate, accumulate segment sums and counts. Returns false on error.
  // Walks the row run by run (a run = equal consecutive ids), each run in a tight loop.
  bool scan_row(int64_t r, RowWork& w) const {
    w.sums.clear();
    w.counts.clear();
    w.runs.clear();
    const float a = in.advantages[r];
    if (!std::isfinite(a)) {
      w.err = {kAdvantageNonFinite, r, 0, a, 0};
      return false;
    }
    const bool teach = in.has_teacher == nullptr || in.has_teacher[r] != 0;
    const auto* t = teacher_row(r);
    const auto* s = student_row(r);
    const IdT* ids = ids_row(r);
    const auto* mk = mask_row(r);
    int64_t expected = 0;
    for (int64_t j = 0; j < in.L;) {
      const IdT id = ids[j];
      const int64_t e = run_end(ids, j, in.L);               // run [j, e)
      if (id < -1) { w.err = {kIdBelowMinusOne, r, j, double(id), 0}; return false; }
      if (id >= 0 && id != expected) {
        w.err = {kIdOrder, r, j, double(id), double(expected)};
        return false;
      }
      int64_t cnt = e - j;
      if constexpr (!std::is_same_v<M, NoMask>) {
        bool badv = false;
        cnt = mask_count(mk, j, e, badv);
        if (badv) {
          for (int64_t i = j; i < e; ++i)
            if (mask_bad<M>(mk[i])) { w.err = {kMaskValue, r, i, double(mk[i]), 0}; return false; }
        }
      }
      if (id >= 0) {
        ++expected;
        double sum = 0.0;
        if (teach && cnt > 0) {
          bool bad = false;
          sum = static_cast<double>(span_sum(t, s, mk, j, e, bad));
          if (bad) return locate_nonfinite(r, t, s, mk, j, e, w);
        }
        w.sums.push_back(sum);
        w.counts.push_back(cnt);
      }
      w.runs.emplace_back(e, static_cast<int64_t>(id));
      j = e;
    }
    for (size_t k = 0; k < w.counts.size(); ++k) {
      if (w.counts[k] == 0) { w.err = {kEmptySegment, r, 0, double(k), 0}; return false; }
    }
    return true;
  }

  // Slow path: the first NaN/inf or out-of-range used value in [j, e); records the error.
  bool locate_nonfinite(int64_t r, const typename LP::T* t, const typename LP::T* s,
                        const typename M::T* mk, int64_t j, int64_t e, RowWork& w) const {
    for (int64_t i = j; i < e; ++i) {
      if constexpr (!std::is_same_v<M, NoMask>) { if (mk[i] == 0) continue; }
      const float tv = LP::load(t[i]), sv = LP::load(s[i]);
      if (!std::isfinite(tv)) { w.err = {kTeacherNonFinite, r, i, tv, 0}; return false; }
      if (!std::isfinite(sv)) { w.err = {kStudentNonFinite, r, i, sv, 0}; return false; }
      const double L = static_cast<double>(in.L);
      if (std::fabs(tv) > p.logp_bound) { w.err = {kTeacherRange, r, i, tv, L}; return false; }
      if (std::fabs(sv) > p.logp_bound) { w.err = {kStudentRange, r, i, sv, L}; return false; }
    }
    w.err = {kTeacherNonFinite, r, j, NAN, 0};   // not reached: span_sum saw a bad value
    return false;
  }

  // docs/method.md §4 for every segment of row r, given the trajectory's mbar.
  void coefficients(int64_t r, float mbar, RowWork& w) const {
    const size_t K = w.counts.size();
    w.gap.resize(K); w.weight.resize(K); w.rho.resize(K); w.coef.resize(K);
    const bool teach = in.has_teacher == nullptr || in.has_teacher[r] != 0;
    const float a = in.advantages[r];
    const float sgn = a > 0 ? 1.0f : (a < 0 ? -1.0f : 0.0f);
    for (size_t k = 0; k < K; ++k) {
      if (!teach) {  // keeps plain A_i
        w.gap[k] = NAN; w.weight[k] = 1.0f; w.rho[k] = 1.0f; w.coef[k] = 1.0f;
        continue;
      }
      const float m = static_cast<float>(w.counts[k]);
      const float gap = static_cast<float>(w.sums[k] / static_cast<double>(w.counts[k]));
      const float u = clampf(std::tanh(gap / (2.0f * p.tau)), -p.alpha, p.alpha);
      const float wt = 1.0f + sgn * u;
      const float rho = clampf(mbar / m, p.rho_min, p.rho_max);
      w.gap[k] = gap; w.weight[k] = wt; w.rho[k] = rho;
      w.coef[k] = (1.0f - p.lam) + p.lam * rho * wt;
    }
  }

  // Pass B over row r: token advantages, run by run from the runs pass A recorded (ids are
  // not read again): one value per run, then the mask.
  void write_row(int64_t r, const RowWork& w, float* out, int64_t out_stride) const {
    const auto* mk = mask_row(r);
    const float a = in.advantages[r];
    float* o = out + r * out_stride;
    const float* coef = w.coef.data();
    int64_t j = 0;
    for (const auto& [e, id] : w.runs) {
      const float v = id >= 0 ? a * coef[id] : a;
      if constexpr (std::is_same_v<M, NoMask>) {
        for (int64_t i = j; i < e; ++i) o[i] = v;
      } else {
        for (int64_t i = j; i < e; ++i) o[i] = mk[i] != 0 ? v : 0.0f;
      }
      j = e;
    }
  }

  SegError run(float* out, int64_t out_stride, SegTables* tables, int num_threads) const {
    const int64_t B = in.B;
    // Rows of each trajectory (counting sort by group); without groups, row r is group r.
    const int64_t G = in.group ? in.num_groups : B;
    std::vector<int64_t> start(G + 1, 0), order(B);
    if (in.group) {
      for (int64_t r = 0; r < B; ++r) ++start[in.group[r] + 1];
      for (int64_t g = 0; g < G; ++g) start[g + 1] += start[g];
      std::vector<int64_t> fill(start.begin(), start.end() - 1);
      for (int64_t r = 0; r < B; ++r) order[fill[in.group[r]]++] = r;
    } else {
      for (int64_t r = 0; r <= B; ++r) start[r] = r;
      for (int64_t r = 0; r < B; ++r) order[r] = r;
    }
    std::vector<RowWork> work(B);
    auto do_group = [&](int64_t g) {
      bool ok = true;
      int64_t tot_m = 0, tot_k = 0;
      for (int64_t q = start[g]; q < start[g + 1]; ++q) {
        RowWork& w = work[order[q]];
        if (!scan_row(order[q], w)) { ok = false; continue; }  // check the other rows too
        for (int64_t c : w.counts) tot_m += c;
        tot_k += static_cast<int64_t>(w.counts.size());
      }
      if (!ok) return;
      const float mbar = tot_k > 0 ? static_cast<float>(tot_m) / static_cast<float>(tot_k) : 0.0f;
      for (int64_t q = start[g]; q < start[g + 1]; ++q) {
        coefficients(order[q], mbar, work[order[q]]);
        write_row(order[q], work[order[q]], out, out_stride);
      }
    };
    const int64_t tokens = B * std::max<int64_t>(in.L, 1);
    const int threads = threads_for_work(num_threads, G, tokens);
    parallel_for(G, threads, 1, do_group);

    for (int64_t r = 0; r < B; ++r)
      if (work[r].err.code != kOk) return work[r].err;   // lowest row first
    tables->offset.assign(B + 1, 0);
    for (int64_t r = 0; r < B; ++r)
      tables->offset[r + 1] = tables->offset[r] + static_cast<int64_t>(work[r].counts.size());
    const int64_t total = tables->offset[B];
    tables->gap.resize(total); tables->weight.resize(total); tables->length_factor.resize(total);
    for (int64_t r = 0; r < B; ++r) {
      std::copy(work[r].gap.begin(), work[r].gap.end(), tables->gap.begin() + tables->offset[r]);
      std::copy(work[r].weight.begin(), work[r].weight.end(), tables->weight.begin() + tables->offset[r]);
      std::copy(work[r].rho.begin(), work[r].rho.end(), tables->length_factor.begin() + tables->offset[r]);
    }
    return SegError{};
  }
};

template <class LP, class IdT>
SegError dispatch_mask(const SegInputs& in, const SegParams& p, float* out, int64_t os,
                       SegTables* t, int nt) {
  switch (in.mask_dtype) {
    case kMaskNone: return Kernel<LP, IdT, NoMask>{in, p}.run(out, os, t, nt);
    case kMaskU8: return Kernel<LP, IdT, U8Mask>{in, p}.run(out, os, t, nt);
    case kMaskI64: return Kernel<LP, IdT, I64Mask>{in, p}.run(out, os, t, nt);
    default: return Kernel<LP, IdT, F32Mask>{in, p}.run(out, os, t, nt);
  }
}

template <class LP>
SegError dispatch_ids(const SegInputs& in, const SegParams& p, float* out, int64_t os,
                      SegTables* t, int nt) {
  if (in.id_dtype == kIdI32) return dispatch_mask<LP, int32_t>(in, p, out, os, t, nt);
  return dispatch_mask<LP, int64_t>(in, p, out, os, t, nt);
}

}  // namespace

SegError segment_advantage_cpu(const SegInputs& in, const SegParams& p, float* out,
                               int64_t out_stride, SegTables* tables, int num_threads) {
  switch (in.logp_dtype) {
    case kLogpBF16: return dispatch_ids<BF16Load>(in, p, out, out_stride, tables, num_threads);
    case kLogpF16: return dispatch_ids<F16Load>(in, p, out, out_stride, tables, num_threads);
    default: return dispatch_ids<F32Load>(in, p, out, out_stride, tables, num_threads);
  }
}

}  // namespace sharpo
