// attnlab's CPU kernel for fp32 linear maps of a few rows: y = x Wᵀ + b, W fp32 (N, K) row-major as nn.Linear
// keeps it, x fp32 (..., K).
//
// Decoding multiplies each weight matrix by one row per sequence, so a step's speed is the speed at which W
// streams from memory. torch's product for such a row (its BLAS gemv/gemm) reads W at 8-14 GB/s on 2-core EPYC
// guests where a plain sum reads 19-30 GB/s. Where x is small (up to 12 KiB: one row of 3,072 inputs, four of
// 768), this loop walks W front to back, one row after the other, each row against every row of x: one stream,
// which the hardware prefetcher follows at the speed of a sum. Reading four rows of W side by side instead (four
// streams, a row apart) read 13-15 GB/s on one core of an AVX-512 EPYC where the row-by-row loop reads 21-23 and
// a sum 19-22 (benchmarks/results/linear.md). A bigger x (a batch of long rows) no longer stays in the first-level
// cache beside W, and there the four rows side by side, each against one row of x at a time, measured faster.
// No software prefetch: asking ahead measured slower.
// Each output is summed in one order (two 8-lane accumulators over inputs 16c..16c+7 and 16c+8..16c+15, chunk by
// chunk, added, then their lanes, then the inputs past the last whole chunk one by one), whatever the number of
// rows of x or of threads and whichever loop runs: the same bits for a row alone or in a batch, on one core or many.
// Rows of W are split over torch's own threads (at::parallel_for).
// Built with int8_linear.cpp into one library (attnlab/functional/kernels/__init__.py); registered as
// torch.ops.attnlab_cpu.fp32_linear.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>
#include <immintrin.h>

#include <optional>
#include <vector>

namespace attnlab_fp32 {

constexpr int64_t kChunk = 16;                       // inputs per step: two 8-lane multiply-adds
constexpr int64_t kStreamBytes = int64_t(12) << 10;  // x up to this size: W is read row after row
constexpr int64_t kRows = 4;                         // else rows of W read side by side

inline float lanes_sum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_hadd_ps(s, s);
  return _mm_cvtss_f32(_mm_hadd_ps(s, s));
}

// out[i·C + j] = Σ_k w[i·K + k] · x[j·K + k] for R rows of W and C rows of x: 2·R·C multiply-add chains in flight
template <int R, int C>
inline void tile(const float* w, const float* x, int64_t K, float* out) {
  __m256 lo[R][C], hi[R][C];
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) lo[i][j] = hi[i][j] = _mm256_setzero_ps();
  const int64_t whole = K - K % kChunk;
  for (int64_t k = 0; k < whole; k += kChunk)
    for (int j = 0; j < C; ++j) {
      const __m256 x0 = _mm256_loadu_ps(x + j * K + k), x1 = _mm256_loadu_ps(x + j * K + k + 8);
      for (int i = 0; i < R; ++i) {
        lo[i][j] = _mm256_fmadd_ps(_mm256_loadu_ps(w + i * K + k), x0, lo[i][j]);
        hi[i][j] = _mm256_fmadd_ps(_mm256_loadu_ps(w + i * K + k + 8), x1, hi[i][j]);
      }
    }
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) {
      float s = lanes_sum(_mm256_add_ps(lo[i][j], hi[i][j]));
      for (int64_t k = whole; k < K; ++k) s += w[i * K + k] * x[j * K + k];
      out[i * C + j] = s;
    }
}

// y[m, n] for rows [n0, n1) of W, rows [m0, m0 + C) of x, R rows of W at a time (1 for the last ones)
template <int R, int C>
void tiles(const float* w, const float* x, const float* bias, int64_t N, int64_t K, float* y, int64_t n0,
           int64_t n1, int64_t m0) {
  float out[R * C];
  for (int64_t n = n0; n < n1;) {
    const int64_t rows = n1 - n >= R ? R : 1;
    if (rows == R)
      tile<R, C>(w + n * K, x + m0 * K, K, out);
    else
      tile<1, C>(w + n * K, x + m0 * K, K, out);
    for (int64_t i = 0; i < rows; ++i)
      for (int j = 0; j < C; ++j) y[(m0 + j) * N + n + i] = bias ? out[i * C + j] + bias[n + i] : out[i * C + j];
    n += rows;
  }
}

// row n of W against rows [m, m + c) of x, c from 1 to 4
void row_against(const float* w, const float* x, const float* bias, int64_t N, int64_t K, float* y, int64_t n,
                 int64_t m, int64_t c) {
  switch (c) {
    case 1: tiles<1, 1>(w, x, bias, N, K, y, n, n + 1, m); break;
    case 2: tiles<1, 2>(w, x, bias, N, K, y, n, n + 1, m); break;
    case 3: tiles<1, 3>(w, x, bias, N, K, y, n, n + 1, m); break;
    default: tiles<1, 4>(w, x, bias, N, K, y, n, n + 1, m);
  }
}

// rows [n0, n1) of y (M, N) for every row of x (M, K)
void rows_of_y(const float* w, const float* x, const float* bias, int64_t M, int64_t N, int64_t K, float* y,
               int64_t n0, int64_t n1) {
  if (M * K * int64_t(sizeof(float)) <= kStreamBytes) {  // W row after row, each against all of x
    for (int64_t n = n0; n < n1; ++n)
      for (int64_t m = 0; m < M; m += 4) row_against(w, x, bias, N, K, y, n, m, std::min<int64_t>(4, M - m));
    return;
  }
  for (int64_t b = n0; b < n1; b += kRows)  // blocks of four rows of W, each against one row of x at a time
    for (int64_t m = 0; m < M; ++m) tiles<kRows, 1>(w, x, bias, N, K, y, b, std::min(n1, b + kRows), m);
}

// x (..., K) -> (..., N)
at::Tensor fp32_linear(const at::Tensor& x_in, const at::Tensor& weight, const std::optional<at::Tensor>& bias) {
  TORCH_CHECK(x_in.dim() >= 1 && x_in.scalar_type() == at::kFloat, "fp32_linear: x must be (..., K) float32");
  TORCH_CHECK(weight.dim() == 2 && weight.scalar_type() == at::kFloat && weight.is_contiguous(),
              "fp32_linear: weight must be a contiguous (N, K) float32 tensor");
  const int64_t K = x_in.size(-1), N = weight.size(0);
  TORCH_CHECK(weight.size(1) == K, "fp32_linear: x has ", K, " features, weight (", N, ", ", weight.size(1), ")");
  TORCH_CHECK(!bias || (bias->dim() == 1 && bias->size(0) == N && bias->scalar_type() == at::kFloat),
              "fp32_linear: bias must be None or (N,) float32");
  const at::Tensor x = x_in.reshape({-1, K}).contiguous();
  const at::Tensor bc = bias ? bias->contiguous() : at::Tensor();
  std::vector<int64_t> shape(x_in.sizes().begin(), x_in.sizes().end());
  shape.back() = N;
  at::Tensor y = at::empty(shape, x.options());
  const float* xp = x.data_ptr<float>();
  const float* wp = weight.data_ptr<float>();
  const float* bp = bias ? bc.data_ptr<float>() : nullptr;
  float* yp = y.data_ptr<float>();
  const int64_t M = x.size(0);
  // at least ~64 KiB of weights per thread: a small product is not worth waking the other threads
  const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 16) / (K * 4));
  at::parallel_for(0, N, grain, [&](int64_t n0, int64_t n1) { rows_of_y(wp, xp, bp, M, N, K, yp, n0, n1); });
  return y;
}

}  // namespace attnlab_fp32

TORCH_LIBRARY_FRAGMENT(attnlab_cpu, m) { m.def("fp32_linear(Tensor x, Tensor weight, Tensor? bias=None) -> Tensor"); }
TORCH_LIBRARY_IMPL(attnlab_cpu, CPU, m) { m.impl("fp32_linear", &attnlab_fp32::fp32_linear); }
