// 16-byte vectors for the C++ CPU kernels: GCC / Clang vector extensions, so the same code
// compiles to SSE2 (the x86-64 baseline), AVX or NEON without intrinsics. Only lane-wise
// operations, splats and element access are used (no shuffles or conversions between
// vector types, which the SSE2 baseline does element by element). Comparisons give lane
// masks: -1 = true, 0 = false. Loads go through memcpy: no alignment is assumed.
#pragma once

#include <cstdint>
#include <cstring>

namespace sharpo {

typedef float F4 __attribute__((vector_size(16)));
typedef int32_t I4 __attribute__((vector_size(16)));
typedef int64_t L2 __attribute__((vector_size(16)));

template <class V, class T> inline V load_vec(const T* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline I4 splat4(int32_t x) { return I4{x, x, x, x}; }
inline F4 splat4f(float x) { return F4{x, x, x, x}; }
inline L2 splat2(int64_t x) { return L2{x, x}; }

inline float hsum(F4 v) { return (v[0] + v[1]) + (v[2] + v[3]); }
inline int32_t hsum(I4 v) { return (v[0] + v[1]) + (v[2] + v[3]); }
inline int32_t hor(I4 v) { return (v[0] | v[1]) | (v[2] | v[3]); }

// Lane-wise |x| <= bound as a lane mask (false for NaN).
inline I4 abs_le(F4 x, F4 bound) { return (F4)((I4)x & splat4(0x7fffffff)) <= bound; }

}  // namespace sharpo
