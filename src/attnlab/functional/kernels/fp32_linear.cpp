// attnlab's CPU kernel for fp32 linear maps of a few rows: y = x Wᵀ + b, W fp32 (N, K) row-major as nn.Linear
// keeps it, x fp32 (..., K).
//
// Decoding multiplies each weight matrix by one row per sequence, so a step's speed is the speed at which W
// streams from memory. torch's product for such a row (its BLAS gemv/gemm) read W at 8-12 GB/s on the 2-core EPYC
// guest this was written on, where a plain sum reads 19-24 GB/s; this loop reads four rows of W side by side (four
// streams the hardware prefetcher follows, no software prefetch: asking ahead measured slower) at 16-21 GB/s.
// Each output is summed in one order (two 8-lane accumulators over inputs 16c..16c+7 and 16c+8..16c+15, chunk by
// chunk, added, then their lanes, then the inputs past the last whole chunk one by one), whatever the number of
// rows of x or of threads: the same bits for a row alone or in a batch, on one core or many.
// Row blocks are split over torch's own threads (at::parallel_for). Built with int8_linear.cpp into one library
// (attnlab/functional/kernels/__init__.py); registered as torch.ops.attnlab_cpu.fp32_linear.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>
#include <immintrin.h>

#include <optional>
#include <vector>

namespace attnlab_fp32 {

constexpr int64_t kRows = 4;    // rows of W read side by side
constexpr int64_t kChunk = 16;  // inputs per step: two 8-lane multiply-adds per row

inline float lanes_sum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_hadd_ps(s, s);
  return _mm_cvtss_f32(_mm_hadd_ps(s, s));
}

// out[i] = Σ_k w[i·K + k] · x[k] for R rows of W starting at w (R = kRows, or 1 for the last rows)
template <int R>
inline void rows_times_x(const float* w, const float* x, int64_t K, float* out) {
  __m256 lo[R], hi[R];
  for (int i = 0; i < R; ++i) lo[i] = hi[i] = _mm256_setzero_ps();
  const int64_t whole = K - K % kChunk;
  for (int64_t k = 0; k < whole; k += kChunk) {
    const __m256 x0 = _mm256_loadu_ps(x + k), x1 = _mm256_loadu_ps(x + k + 8);
    for (int i = 0; i < R; ++i) {
      lo[i] = _mm256_fmadd_ps(_mm256_loadu_ps(w + i * K + k), x0, lo[i]);
      hi[i] = _mm256_fmadd_ps(_mm256_loadu_ps(w + i * K + k + 8), x1, hi[i]);
    }
  }
  for (int i = 0; i < R; ++i) {
    float s = lanes_sum(_mm256_add_ps(lo[i], hi[i]));
    for (int64_t k = whole; k < K; ++k) s += w[i * K + k] * x[k];
    out[i] = s;
  }
}

// rows [n0, n1) of y (M, N) for every row of x (M, K); a block of W stays in cache while the rows of x pass
void rows_of_y(const float* w, const float* x, const float* bias, int64_t M, int64_t N, int64_t K, float* y,
               int64_t n0, int64_t n1) {
  float out[kRows];
  for (int64_t n = n0; n < n1; n += kRows) {
    const int64_t rows = std::min<int64_t>(kRows, n1 - n);
    for (int64_t m = 0; m < M; ++m) {
      if (rows == kRows)
        rows_times_x<kRows>(w + n * K, x + m * K, K, out);
      else
        for (int64_t i = 0; i < rows; ++i) rows_times_x<1>(w + (n + i) * K, x + m * K, K, out + i);
      for (int64_t i = 0; i < rows; ++i) y[m * N + n + i] = bias ? out[i] + bias[n + i] : out[i];
    }
  }
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
  const int64_t M = x.size(0), blocks = (N + kRows - 1) / kRows;
  // at least ~64 KiB of weights per thread: a small product is not worth waking the other threads
  const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 16) / (kRows * K * 4));
  at::parallel_for(0, blocks, grain, [&](int64_t b0, int64_t b1) {
    rows_of_y(wp, xp, bp, M, N, K, yp, b0 * kRows, std::min(N, b1 * kRows));
  });
  return y;
}

}  // namespace attnlab_fp32

TORCH_LIBRARY_FRAGMENT(attnlab_cpu, m) { m.def("fp32_linear(Tensor x, Tensor weight, Tensor? bias=None) -> Tensor"); }
TORCH_LIBRARY_IMPL(attnlab_cpu, CPU, m) { m.impl("fp32_linear", &attnlab_fp32::fp32_linear); }
