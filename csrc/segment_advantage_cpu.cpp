// C++ CPU kernel of SHARPO's segment advantage (docs/method.md §4, docs/api.md).
//
// Work item = one trajectory (one row without traj_index). For each row of it, pass A reads
// the tokens once, run by run (a run = equal consecutive segment ids), each run in one
// fused loop over blocks of 16 tokens (scan_run: ids compared, mask and log-probs checked,
// teacher - student summed in fp32 lanes and m counted, all in 16-byte vectors, vec4.h),
// and records the runs. Then the trajectory's mbar and every
// segment's gap, w, rho and coefficient follow, and pass B writes the token advantages by
// replaying the recorded runs (only the mask, still in cache, is read again).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "float_convert.h"
#include "parallel_for.h"
#include "segment_advantage.h"
#include "vec4.h"

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

  size_t bytes() const {
    return sums.capacity() * sizeof(double) + counts.capacity() * sizeof(int64_t) +
           (gap.capacity() + weight.capacity() + rho.capacity() + coef.capacity()) * sizeof(float) +
           runs.capacity() * sizeof(runs[0]);
  }
};

// The rows' scratch, kept by the calling thread between calls: fresh vectors for every row
// (malloc, then first-touch page faults once free() has trimmed the heap) cost about a
// quarter of the call at B=256, L=4096. release_workspace drops it when it holds more than
// kKeepBytes (a batch of many tiny runs).
constexpr size_t kKeepBytes = size_t(64) << 20;
std::vector<RowWork>& row_workspace(int64_t B) {
  thread_local std::vector<RowWork> work;
  if (static_cast<int64_t>(work.size()) < B) work.resize(B);
  return work;
}
void release_workspace(std::vector<RowWork>& work) {
  size_t bytes = work.capacity() * sizeof(RowWork);
  for (const RowWork& w : work) bytes += w.bytes();
  if (bytes > kKeepBytes) std::vector<RowWork>().swap(work);
}

inline float clampf(float x, float lo, float hi) { return std::min(std::max(x, lo), hi); }

// The fused pass A (Kernel::scan_run) takes a run's tokens kBlock at a time, as 4 groups
// of 4 lanes (vec4.h). Which tokens a group holds depends on the log-prob type (Logp16):
// tokens 4g..4g+3, or for bf16 tokens 8(g/2) + g%2 + {0, 2, 4, 6} (the decode without
// shuffles). Masks are loaded in the same order (Mask16).
constexpr int kBlock = 16;
// How far ahead of the block scan_run reads it prefetches, in tokens (1 KB of fp32
// log-probs, 2 KB of int64 ids): 4% faster at B=256 L=4096, 13% at B=4096 L=8192 on the
// 2-core Xeon; 512 was no better, prefetching the next row was slower.
constexpr int64_t kPrefetch = 256;

// The 16 log-probs of a block as 4 float groups.
template <class LP> struct Logp16 {
  static constexpr bool kEvenOdd = false;
  static void load(const typename LP::T* p, F4 v[4]) {
    if constexpr (std::is_same_v<LP, F32Load>) {
      for (int g = 0; g < 4; ++g) v[g] = load_vec<F4>(p + 4 * g);
    } else {   // fp16: the portable scalar decoder (subnormals included)
      for (int g = 0; g < 4; ++g) v[g] = F4{LP::load(p[4 * g]), LP::load(p[4 * g + 1]),
                                            LP::load(p[4 * g + 2]), LP::load(p[4 * g + 3])};
    }
  }
};
template <> struct Logp16<BF16Load> {
  static constexpr bool kEvenOdd = true;
  static void load(const uint16_t* p, F4 v[4]) {
    for (int h = 0; h < 2; ++h) {   // bf16 = the top half of an f32: 8 tokens per I4
      const I4 x = load_vec<I4>(p + 8 * h);
      v[2 * h] = (F4)(x << 16);                      // tokens 8h + 0, 2, 4, 6
      v[2 * h + 1] = (F4)(x & splat4(int32_t(0xffff0000u)));   // tokens 8h + 1, 3, 5, 7
    }
  }
};

// Token index of each lane of group g (the order of Logp16).
template <bool EvenOdd> inline I4 group_tokens(int g) {
  if constexpr (EvenOdd) {
    const int32_t b = 8 * (g / 2) + g % 2;
    return I4{b, b + 2, b + 4, b + 6};
  } else {
    return I4{4 * g, 4 * g + 1, 4 * g + 2, 4 * g + 3};
  }
}

// The 16 mask values of a block: on[g] = value != 0 per lane (the order of Logp16), and
// `bad` != 0 when one of the first n values is not 0 or 1. Lanes of tokens >= n are off.
template <class M, bool EvenOdd> struct Mask16;
template <bool EvenOdd> struct Mask16<NoMask, EvenOdd> {
  static uint64_t load(const uint8_t*, int n, I4 on[4]) {
    for (int g = 0; g < 4; ++g) on[g] = group_tokens<EvenOdd>(g) < splat4(n);
    return 0;
  }
};
template <bool EvenOdd> struct Mask16<U8Mask, EvenOdd> {
  static uint64_t load(const uint8_t* p, int n, I4 on[4]) {
    uint64_t w[2];
    std::memcpy(w, p, 16);
    uint64_t bad = 0;
    for (int h = 0; h < 2; ++h) {
      const int m = n - 8 * h;   // values of this half to keep
      const uint64_t keep = m >= 8 ? ~uint64_t(0) : m <= 0 ? 0 : (uint64_t(1) << (8 * m)) - 1;
      w[h] &= keep;
      bad |= w[h] & 0xfefefefefefefefeull;
      // each lane picks its byte out of a 32-bit word: no byte-to-lane conversion needed
      const int32_t lo = static_cast<int32_t>(w[h]), hi = static_cast<int32_t>(w[h] >> 32);
      if constexpr (EvenOdd) {
        const I4 x = I4{lo, lo, hi, hi};
        on[2 * h] = (x & I4{0xff, 0xff0000, 0xff, 0xff0000}) != 0;
        on[2 * h + 1] = (x & I4{0xff00, int32_t(0xff000000u), 0xff00, int32_t(0xff000000u)}) != 0;
      } else {
        const I4 byte = I4{0xff, 0xff00, 0xff0000, int32_t(0xff000000u)};
        on[2 * h] = (splat4(lo) & byte) != 0;
        on[2 * h + 1] = (splat4(hi) & byte) != 0;
      }
    }
    return bad;
  }
};
template <bool EvenOdd> struct Mask16<F32Mask, EvenOdd> {
  static uint64_t load(const float* p, int n, I4 on[4]) {
    I4 bad = splat4(0);
    for (int g = 0; g < 4; ++g) {
      const I4 tok = group_tokens<EvenOdd>(g), in = tok < splat4(n);
      const F4 v = EvenOdd ? F4{p[tok[0]], p[tok[1]], p[tok[2]], p[tok[3]]}
                           : load_vec<F4>(p + 4 * g);
      on[g] = (v != 0.0f) & in;
      bad |= ~((v == 0.0f) | (v == 1.0f)) & in;   // NaN is bad too
    }
    return static_cast<uint32_t>(hor(bad));
  }
};
template <bool EvenOdd> struct Mask16<I64Mask, EvenOdd> {   // element by element
  static uint64_t load(const int64_t* p, int n, I4 on[4]) {
    uint64_t bad = 0;
    for (int g = 0; g < 4; ++g) {
      const I4 tok = group_tokens<EvenOdd>(g);
      for (int q = 0; q < 4; ++q) {
        const int64_t v = tok[q] < n ? p[tok[q]] : 0;
        on[g][q] = v != 0 ? -1 : 0;
        bad |= static_cast<uint64_t>(v) & ~uint64_t(1);   // negatives too
      }
    }
    return bad;
  }
};

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

  // Partial results of one run (a lane per token position of a group, vec4.h).
  struct RunLanes {
    F4 sum[4] = {};   // teacher - student where the mask is on (used runs), per group
    I4 cnt = {};      // minus the number of positions with mask != 0
    I4 viol = {};     // a used log-prob NaN/inf or beyond logp_bound
    uint64_t bad = 0; // != 0: a mask value not 0 or 1
  };

  // Adds the first n tokens of the block at e to the lanes (Full: n == kBlock, so the
  // lane masks fold away). Used: the run is a segment of a row with a teacher, so its
  // log-probs are summed and checked; otherwise only the mask is (NaN padding is legal).
  // Branch-free: lane masks select, so a NaN outside the mask never reaches a sum.
  template <bool Used, bool Full>
  void add_block(const typename LP::T* t, const typename LP::T* s, const typename M::T* mk,
                 int64_t e, int n, F4 bound, RunLanes& a) const {
    constexpr bool eo = Logp16<LP>::kEvenOdd;
    I4 on[4];
    if constexpr (std::is_same_v<M, NoMask>) a.bad |= Mask16<M, eo>::load(nullptr, n, on);
    else a.bad |= Mask16<M, eo>::load(mk + e, Full ? kBlock : n, on);
    for (int g = 0; g < 4; ++g) a.cnt += on[g];
    if constexpr (Used) {
      F4 tv[4], sv[4];
      Logp16<LP>::load(t + e, tv);
      Logp16<LP>::load(s + e, sv);
      for (int g = 0; g < 4; ++g) {
        a.sum[g] += (F4)((I4)(tv[g] - sv[g]) & on[g]);
        // !(|x| <= bound) holds for NaN, inf (bound <= FLT_MAX) and out-of-range values
        a.viol |= on[g] & ~(abs_le(tv[g], bound) & abs_le(sv[g], bound));
      }
    }
  }

  // The row's last n < kBlock tokens [e, e + n): copied to a zero-padded block first, so
  // that add_block reads nothing past the row.
  template <bool Used>
  void add_tail(const typename LP::T* t, const typename LP::T* s, const typename M::T* mk,
                int64_t e, int n, F4 bound, RunLanes& a) const {
    typename LP::T tb[kBlock] = {}, sb[kBlock] = {};
    typename M::T mb[kBlock] = {};
    std::copy(t + e, t + e + n, tb);
    std::copy(s + e, s + e + n, sb);
    if constexpr (!std::is_same_v<M, NoMask>) std::copy(mk + e, mk + e + n, mb);
    add_block<Used, false>(tb, sb, mb, 0, n, bound, a);
  }

  // Software prefetch of the block at token e of every input stream (a hint: it never
  // faults, so e may lie past the row).
  static void prefetch_ahead(const typename LP::T* t, const typename LP::T* s, const IdT* ids,
                             const typename M::T* mk, int64_t e) {
    __builtin_prefetch(t + e);
    __builtin_prefetch(s + e);
    __builtin_prefetch(ids + e);
    if constexpr (sizeof(IdT) == 8) __builtin_prefetch(ids + e + 8);   // 128 bytes of ids
    if constexpr (!std::is_same_v<M, NoMask>) __builtin_prefetch(mk + e);
  }

  // Whether the kBlock ids at `ids` all equal `id` (an xor-or reduction, one branch).
  static bool same_block(const IdT* ids, IdT id) {
    if constexpr (sizeof(IdT) == 8) {
      const L2 v = splat2(id);
      L2 x = load_vec<L2>(ids) ^ v;
      for (int k = 2; k < kBlock; k += 2) x |= load_vec<L2>(ids + k) ^ v;
      return (x[0] | x[1]) == 0;
    } else {
      const I4 v = splat4(id);
      I4 x = load_vec<I4>(ids) ^ v;
      for (int k = 4; k < kBlock; k += 4) x |= load_vec<I4>(ids + k) ^ v;
      return hor(x) == 0;
    }
  }

  // One fused loop over the run of `id` that starts at j (the sums of docs/method.md §4
  // and the checks of docs/api.md together): while the next kBlock ids all equal `id`
  // (the common case, so the branch predicts well) the block goes to the lanes whole; the
  // block holding the run's end is scanned id by id for the end, then added under a lane
  // mask. Returns the run's end e (the run is [j, e)).
  template <bool Used>
  int64_t scan_run(const typename LP::T* t, const typename LP::T* s, const IdT* ids,
                   const typename M::T* mk, int64_t j, IdT id, F4 bound, RunLanes& a) const {
    const int64_t L = in.L;
    int64_t e = j;
    for (; e + kBlock <= L && same_block(ids + e, id); e += kBlock) {
      prefetch_ahead(t, s, ids, mk, e + kPrefetch);
      add_block<Used, true>(t, s, mk, e, kBlock, bound, a);
    }
    const int lim = static_cast<int>(std::min<int64_t>(kBlock, L - e));
    int n = 0;
    while (n < lim && ids[e + n] == id) ++n;
    if (n > 0) {
      if (e + kBlock <= L) add_block<Used, false>(t, s, mk, e, n, bound, a);
      else add_tail<Used>(t, s, mk, e, n, bound, a);
    }
    return e + n;
  }

  // Pass A over row r: validate, accumulate segment sums and counts. Returns false on error.
  // Walks the row run by run (a run = equal consecutive ids), each run in one fused loop
  // (scan_run); the checks of a run, in the order ids, mask, log-probs, stop at its first
  // error, so a row reports the first error of its first bad run.
  bool scan_row(int64_t r, RowWork& w) const {
    w.err = SegError{};
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
    const F4 bound = splat4f(std::min(p.logp_bound, std::numeric_limits<float>::max()));
    int64_t expected = 0;
    for (int64_t j = 0; j < in.L;) {
      const IdT id = ids[j];
      if (id < -1) { w.err = {kIdBelowMinusOne, r, j, double(id), 0}; return false; }
      if (id >= 0 && id != expected) {
        w.err = {kIdOrder, r, j, double(id), double(expected)};
        return false;
      }
      const bool used = teach && id >= 0;
      RunLanes lanes;
      const int64_t e = used ? scan_run<true>(t, s, ids, mk, j, id, bound, lanes)
                             : scan_run<false>(t, s, ids, mk, j, id, bound, lanes);  // [j, e)
      if (lanes.bad != 0 || hor(lanes.viol) != 0) return locate_error(r, t, s, mk, j, e, used, w);
      if (id >= 0) {
        ++expected;
        const F4 sum = (lanes.sum[0] + lanes.sum[1]) + (lanes.sum[2] + lanes.sum[3]);
        w.sums.push_back(used ? static_cast<double>(hsum(sum)) : 0.0);
        w.counts.push_back(-static_cast<int64_t>(hsum(lanes.cnt)));
      }
      w.runs.emplace_back(e, static_cast<int64_t>(id));
      j = e;
    }
    for (size_t k = 0; k < w.counts.size(); ++k) {
      if (w.counts[k] == 0) { w.err = {kEmptySegment, r, 0, double(k), 0}; return false; }
    }
    return true;
  }

  // Slow path: the first bad value of the run [j, e) that scan_run flagged: a mask value
  // not 0/1, else (used runs) the first NaN/inf or out-of-range log-prob where the mask is
  // on. Records the error; returns false.
  bool locate_error(int64_t r, const typename LP::T* t, const typename LP::T* s,
                    const typename M::T* mk, int64_t j, int64_t e, bool used, RowWork& w) const {
    if constexpr (!std::is_same_v<M, NoMask>) {
      for (int64_t i = j; i < e; ++i)
        if (mask_bad<M>(mk[i])) { w.err = {kMaskValue, r, i, double(mk[i]), 0}; return false; }
    }
    for (int64_t i = j; used && i < e; ++i) {
      if constexpr (!std::is_same_v<M, NoMask>) { if (mk[i] == 0) continue; }
      const float tv = LP::load(t[i]), sv = LP::load(s[i]);
      if (!std::isfinite(tv)) { w.err = {kTeacherNonFinite, r, i, tv, 0}; return false; }
      if (!std::isfinite(sv)) { w.err = {kStudentNonFinite, r, i, sv, 0}; return false; }
      const double L = static_cast<double>(in.L);
      if (std::fabs(tv) > p.logp_bound) { w.err = {kTeacherRange, r, i, tv, L}; return false; }
      if (std::fabs(sv) > p.logp_bound) { w.err = {kStudentRange, r, i, sv, L}; return false; }
    }
    w.err = {kTeacherNonFinite, r, j, NAN, 0};   // not reached: scan_run saw a bad value
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
  // not read again): one value per run, then the mask, kBlock tokens per step. A run's last
  // block may write past its end: the next run starts there and writes those tokens again
  // (runs are written in order), so no step needs a lane mask or a scalar tail but the
  // row's last tokens.
  void write_row(int64_t r, const RowWork& w, float* out, int64_t out_stride) const {
    const auto* mk = mask_row(r);
    const float a = in.advantages[r];
    float* o = out + r * out_stride;
    const float* coef = w.coef.data();
    const int64_t L = in.L;
    int64_t j = 0;
    for (const auto& [e, id] : w.runs) {
      const float v = id >= 0 ? a * coef[id] : a;
      const F4 vv = splat4f(v);
      int64_t i = j;
      for (; i < e && i + kBlock <= L; i += kBlock) {
        I4 on[4];
        if constexpr (std::is_same_v<M, NoMask>) Mask16<M, false>::load(nullptr, kBlock, on);
        else Mask16<M, false>::load(mk + i, kBlock, on);
        for (int g = 0; g < 4; ++g) {
          const F4 x = (F4)((I4)vv & on[g]);
          std::memcpy(o + i + 4 * g, &x, sizeof x);
        }
      }
      for (; i < e; ++i) {   // the row's last tokens
        if constexpr (std::is_same_v<M, NoMask>) o[i] = v;
        else o[i] = mk[i] != 0 ? v : 0.0f;
      }
      j = e;
    }
  }

  SegError run(float* out, int64_t out_stride, SegTables* tables, int num_threads) const {
    const int64_t B = in.B;
    for (int64_t r = 0; p.coef_max > 0 && r < B; ++r) {   // ranked before every other rule
      const double a = in.advantages[r];
      if (std::isfinite(a) && std::fabs(a) * p.coef_max > p.adv_half)
        return SegError{kAdvantageRange, r, 0, a, p.coef_max};
    }
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
    std::vector<RowWork>& work = row_workspace(B);
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

    for (int64_t r = 0; r < B; ++r) {
      if (work[r].err.code != kOk) {   // lowest row first
        const SegError err = work[r].err;
        release_workspace(work);
        return err;
      }
    }
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
    release_workspace(work);
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
