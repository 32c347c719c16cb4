// attnlab's CPU kernel for weight-only int8 linear maps: y = (x Wᵀ) · s, W int8 (N, K), s fp32 (N,), x fp32 (M, K).
//
// Decoding reads every weight once per token, so its speed is the speed at which W streams from memory. An int8
// weight is a quarter of an fp32 one; this kernel reads each int8 row once, widens it to fp32 in registers (AVX2:
// 8 lanes) and multiplies it by up to eight rows of x (one row of W, decoding a batch) or by four rows of W at
// once (decoding one sequence), so the fp32 copy of W never exists in memory.
// Rows of W are split over torch's own threads (at::parallel_for). Built on first use by
// torch.utils.cpp_extension (attnlab/layers/kernels/__init__.py); registered as torch.ops.attnlab_cpu.int8_linear.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>
#include <immintrin.h>

#include <cmath>

namespace {

inline float horizontal_sum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_hadd_ps(s, s);
  return _mm_cvtss_f32(_mm_hadd_ps(s, s));
}

// How far ahead of the multiply-adds the rows of W are requested from memory. One core waiting for one cache line
// at a time reads a few GB/s; asking for the lines 4 KiB ahead keeps enough reads in flight to approach the
// machine's bandwidth (measured: 4.5 -> 6.5-8 GB/s on one core of a 2-core EPYC guest).
constexpr int64_t kPrefetchBytes = 4096;

inline void prefetch(const int8_t* p) { _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0); }

// s + Σ row[j] · x[j] for the last K mod 8 inputs, written as explicit fmas so that every path (and every thread
// split, which decides the path of a row) rounds it alike
inline float tail(const int8_t* row, const float* x, int64_t k, int64_t K, float s) {
  for (; k < K; ++k) s = std::fma(float(row[k]), x[k], s);
  return s;
}

// 8 int8 weights at w, widened to 8 floats
inline __m256 load8(const int8_t* w) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w))));
}

// out[i] = Σ_k w[i·K + k] · x[k] for four consecutive rows of W: one load of x feeds four multiply-adds, and four
// rows stream from memory at once (a single stream leaves the memory system idle between loads)
inline void four_rows(const int8_t* w, const float* x, int64_t K, float* out) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    if ((k & 63) == 0)
      for (int i = 0; i < 4; ++i) prefetch(w + i * K + k + kPrefetchBytes);
    const __m256 xv = _mm256_loadu_ps(x + k);
    a0 = _mm256_fmadd_ps(load8(w + k), xv, a0);
    a1 = _mm256_fmadd_ps(load8(w + K + k), xv, a1);
    a2 = _mm256_fmadd_ps(load8(w + 2 * K + k), xv, a2);
    a3 = _mm256_fmadd_ps(load8(w + 3 * K + k), xv, a3);
  }
  const __m256 acc[4] = {a0, a1, a2, a3};
  for (int i = 0; i < 4; ++i) out[i] = tail(w + i * K, x, k, K, horizontal_sum(acc[i]));
}

// out[m · ldo] = Σ_k row[k] · x[m · K + k] for R rows of x (R ≤ 8): each 8 weights are widened once and used R times
template <int R>
inline void row_times(const int8_t* row, const float* x, int64_t K, int64_t ldo, float* out) {
  __m256 acc[R];
  for (int m = 0; m < R; ++m) acc[m] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {  // (prefetching here measured no faster: R rows of x give the core enough to do)
    const __m256 w = load8(row + k);
    for (int m = 0; m < R; ++m) acc[m] = _mm256_fmadd_ps(w, _mm256_loadu_ps(x + m * K + k), acc[m]);
  }
  for (int m = 0; m < R; ++m) out[m * ldo] = tail(row, x + m * K, k, K, horizontal_sum(acc[m]));
}

// y[m, n] for rows n0 ≤ n < n1 of W, every m (unscaled)
void rows_of_y(const int8_t* w, const float* x, int64_t M, int64_t N, int64_t K, float* y, int64_t n0, int64_t n1) {
  int64_t n = n0;
  if (M == 1)  // decoding one sequence: four rows of W at a time
    for (; n + 4 <= n1; n += 4) four_rows(w + n * K, x, K, y + n);
  for (; n < n1; ++n) {
    for (int64_t m = 0; m < M; m += 8) {  // the row stays in L1 for every group of eight x rows after the first
      const int8_t* row = w + n * K;
      const float* xm = x + m * K;
      float* o = y + m * N + n;
      switch (std::min<int64_t>(8, M - m)) {
        case 1: row_times<1>(row, xm, K, N, o); break;
        case 2: row_times<2>(row, xm, K, N, o); break;
        case 3: row_times<3>(row, xm, K, N, o); break;
        case 4: row_times<4>(row, xm, K, N, o); break;
        case 5: row_times<5>(row, xm, K, N, o); break;
        case 6: row_times<6>(row, xm, K, N, o); break;
        case 7: row_times<7>(row, xm, K, N, o); break;
        default: row_times<8>(row, xm, K, N, o); break;
      }
    }
  }
}

at::Tensor int8_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& scales) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == at::kFloat, "int8_linear: x must be (M, K) float32");
  TORCH_CHECK(weight.dim() == 2 && weight.scalar_type() == at::kChar && weight.is_contiguous(),
              "int8_linear: weight must be a contiguous (N, K) int8 tensor");
  TORCH_CHECK(x.size(1) == weight.size(1), "int8_linear: x has ", x.size(1), " features, weight ", weight.size(1));
  TORCH_CHECK(scales.dim() == 1 && scales.size(0) == weight.size(0) && scales.scalar_type() == at::kFloat,
              "int8_linear: scales must be (N,) float32");
  const at::Tensor xc = x.contiguous(), sc = scales.contiguous();
  const int64_t M = xc.size(0), K = xc.size(1), N = weight.size(0);
  at::Tensor y = at::empty({M, N}, xc.options());
  const float* xp = xc.data_ptr<float>();
  const int8_t* wp = weight.data_ptr<int8_t>();
  const float* sp = sc.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  // at least ~32 KiB of weights per thread: a small product is not worth waking the other threads
  const int64_t grain = std::max<int64_t>(16, (int64_t(1) << 15) / std::max<int64_t>(K, 1));
  at::parallel_for(0, N, grain, [&](int64_t n0, int64_t n1) {
    rows_of_y(wp, xp, M, N, K, yp, n0, n1);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = n0; n < n1; ++n) yp[m * N + n] *= sp[n];
  });
  return y;
}

}  // namespace

TORCH_LIBRARY(attnlab_cpu, m) { m.def("int8_linear(Tensor x, Tensor weight, Tensor scales) -> Tensor"); }
TORCH_LIBRARY_IMPL(attnlab_cpu, CPU, m) { m.impl("int8_linear", &int8_linear); }
