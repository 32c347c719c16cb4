// attnlab's CPU kernel for weight-only int8 linear maps: y = (x Wᵀ) · s + b, W int8 (N, K), s and b fp32 (N,),
// x fp32 (..., K).
//
// Decoding reads every weight once per token, so its speed is the speed at which W streams from memory. An int8
// weight is a quarter of an fp32 one; this kernel reads each int8 weight once, widens it to fp32 in registers
// (AVX2: 8 lanes) and multiplies it by the rows of x, so the fp32 copy of W never exists in memory.
//
// W is stored packed (attnlab/layers/quantized_linear.py, pack_int8): rows in blocks of four, and within a block
// the four rows' next 16 inputs side by side, one 64-byte cache line per step:
//     packed[b, c] = W[4b : 4b + 4, 16c : 16c + 16]          (blocks × chunks × 4 × 16 bytes, zero-padded)
// so a product walks W front to back as one stream. Measured on a 2-core EPYC guest: 6 -> 10-12 GB/s on one core,
// 9-11 -> 14-17 GB/s on two, against four row-major rows read side by side (four streams, 768 bytes apart).
// Each output is summed in one order (one 8-lane accumulator: inputs 16c..16c+7, then 16c+8..16c+15, chunk by
// chunk; then its lanes) whatever the batch size or the split over threads: the same bits on one core or many.
// Blocks are split over torch's own threads (at::parallel_for). Built on first use by torch.utils.cpp_extension
// (attnlab/functional/kernels/__init__.py); registered as torch.ops.attnlab_cpu.int8_linear.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>
#include <immintrin.h>

#include <optional>
#include <vector>

namespace {

constexpr int64_t kRows = 4;     // rows of W in a block
constexpr int64_t kChunk = 16;   // inputs of a row in one step of a block
constexpr int64_t kLine = kRows * kChunk;
constexpr int kGroup = 8;        // rows of x multiplied together by one row of a block (8 accumulators: registers)
// How far ahead of the multiply-adds W is requested from memory: one core waiting for one line at a time reads a
// few GB/s; asking 2 KiB ahead keeps enough reads in flight (1, 2 and 4 KiB measured: 2 and 4 alike, 1 slower).
constexpr int64_t kPrefetchBytes = 2048;

inline float horizontal_sum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_hadd_ps(s, s);
  return _mm_cvtss_f32(_mm_hadd_ps(s, s));
}

inline void prefetch(const int8_t* p) { _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0); }

// 8 int8 weights at w, widened to 8 floats
inline __m256 load8(const int8_t* w) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w))));
}

// out[i] = Σ_k W[i, k] · x[k] for the four rows of the block at p (one row of x: decoding one sequence)
inline void block_times_row(const int8_t* p, const float* x, int64_t chunks, float* out) {
  __m256 acc[kRows];
  for (int i = 0; i < kRows; ++i) acc[i] = _mm256_setzero_ps();
  for (int64_t c = 0; c < chunks; ++c, p += kLine, x += kChunk) {
    prefetch(p + kPrefetchBytes);
    const __m256 x0 = _mm256_loadu_ps(x), x1 = _mm256_loadu_ps(x + 8);
    for (int i = 0; i < kRows; ++i) acc[i] = _mm256_fmadd_ps(load8(p + i * kChunk), x0, acc[i]);
    for (int i = 0; i < kRows; ++i) acc[i] = _mm256_fmadd_ps(load8(p + i * kChunk + 8), x1, acc[i]);
  }
  for (int i = 0; i < kRows; ++i) out[i] = horizontal_sum(acc[i]);
}

// out[m · kRows] = Σ_k W[i, k] · x[m, k] for one row i of a block (p: the block + 16 i) and R rows of x (decoding
// a batch): each 16 weights are widened once and used R times; the block is in L1 after its first row
template <int R>
inline void row_times_rows(const int8_t* p, const float* x, int64_t ldx, int64_t chunks, float* out) {
  __m256 acc[R];
  for (int m = 0; m < R; ++m) acc[m] = _mm256_setzero_ps();
  for (int64_t c = 0; c < chunks; ++c, p += kLine) {
    prefetch(p + kPrefetchBytes);
    const __m256 w0 = load8(p), w1 = load8(p + 8);
    for (int m = 0; m < R; ++m) acc[m] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + m * ldx + c * kChunk), acc[m]);
    for (int m = 0; m < R; ++m) acc[m] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + m * ldx + c * kChunk + 8), acc[m]);
  }
  for (int m = 0; m < R; ++m) out[m * kRows] = horizontal_sum(acc[m]);
}

// out[m · kRows + i] for the block at p, rows m0 ≤ m < m0 + r of x (r ≤ kGroup)
void block_times_rows(const int8_t* p, const float* x, int64_t ldx, int64_t r, int64_t chunks, float* out) {
  for (int i = 0; i < kRows; ++i) {
    const int8_t* row = p + i * kChunk;
    switch (r) {
      case 1: row_times_rows<1>(row, x, ldx, chunks, out + i); break;
      case 2: row_times_rows<2>(row, x, ldx, chunks, out + i); break;
      case 3: row_times_rows<3>(row, x, ldx, chunks, out + i); break;
      case 4: row_times_rows<4>(row, x, ldx, chunks, out + i); break;
      case 5: row_times_rows<5>(row, x, ldx, chunks, out + i); break;
      case 6: row_times_rows<6>(row, x, ldx, chunks, out + i); break;
      case 7: row_times_rows<7>(row, x, ldx, chunks, out + i); break;
      default: row_times_rows<8>(row, x, ldx, chunks, out + i); break;
    }
  }
}

// y[m, n] for the blocks b0 ≤ b < b1, every m: the sum times the row's scale, plus its bias (b: null for none)
void blocks_of_y(const int8_t* w, const float* x, int64_t ldx, const float* s, const float* bias, int64_t M,
                 int64_t N, int64_t chunks, float* y, int64_t b0, int64_t b1) {
  float out[kGroup * kRows];
  for (int64_t b = b0; b < b1; ++b) {
    const int8_t* p = w + b * chunks * kLine;
    const int64_t n0 = b * kRows, rows = std::min<int64_t>(kRows, N - n0);  // the last block may be padding
    for (int64_t m0 = 0; m0 < M; m0 += kGroup) {
      const int64_t r = std::min<int64_t>(kGroup, M - m0);
      if (M == 1)
        block_times_row(p, x, chunks, out);  // the same sums as row_times_rows<1>, four rows streamed at once
      else
        block_times_rows(p, x + m0 * ldx, ldx, r, chunks, out);
      for (int64_t m = 0; m < r; ++m)
        for (int64_t i = 0; i < rows; ++i) {
          const float scaled = out[m * kRows + i] * s[n0 + i];  // rounded, then the bias added: as torch would
          y[(m0 + m) * N + n0 + i] = bias ? scaled + bias[n0 + i] : scaled;
        }
    }
  }
}

// x (..., K) -> (..., N)
at::Tensor int8_linear(const at::Tensor& x_in, const at::Tensor& weight, const at::Tensor& scales,
                       const std::optional<at::Tensor>& bias) {
  TORCH_CHECK(x_in.dim() >= 1 && x_in.scalar_type() == at::kFloat, "int8_linear: x must be (..., K) float32");
  TORCH_CHECK(scales.dim() == 1 && scales.scalar_type() == at::kFloat, "int8_linear: scales must be (N,) float32");
  const int64_t K = x_in.size(-1), N = scales.size(0);
  const at::Tensor x = x_in.reshape({-1, K});
  const int64_t M = x.size(0);
  const int64_t blocks = (N + kRows - 1) / kRows, chunks = (K + kChunk - 1) / kChunk;
  TORCH_CHECK(weight.dim() == 2 && weight.scalar_type() == at::kChar && weight.is_contiguous(),
              "int8_linear: weight must be a contiguous int8 tensor packed by pack_int8");
  TORCH_CHECK(weight.size(0) == blocks * kRows && weight.size(1) == chunks * kChunk, "int8_linear: x has ", K,
              " features and scales ", N, " rows, so the packed weight must be (", blocks * kRows, ", ",
              chunks * kChunk, "), got (", weight.size(0), ", ", weight.size(1), ")");
  TORCH_CHECK(!bias || (bias->dim() == 1 && bias->size(0) == N && bias->scalar_type() == at::kFloat),
              "int8_linear: bias must be None or (N,) float32");
  // K not a multiple of 16: x padded with zeros, as the packed rows are (0 · 0 adds nothing, inf or nan included)
  const at::Tensor xc = K % kChunk ? at::constant_pad_nd(x, {0, chunks * kChunk - K}) : x.contiguous();
  const at::Tensor sc = scales.contiguous();
  const at::Tensor bc = bias ? bias->contiguous() : at::Tensor();
  std::vector<int64_t> shape(x_in.sizes().begin(), x_in.sizes().end());
  shape.back() = N;
  at::Tensor y = at::empty(shape, x.options());
  const float* xp = xc.data_ptr<float>();
  const float* sp = sc.data_ptr<float>();
  const float* bp = bias ? bc.data_ptr<float>() : nullptr;
  const int8_t* wp = weight.data_ptr<int8_t>();
  float* yp = y.data_ptr<float>();
  // at least ~32 KiB of weights per thread: a small product is not worth waking the other threads
  const int64_t grain = std::max<int64_t>(4, (int64_t(1) << 15) / (chunks * kLine));
  at::parallel_for(0, blocks, grain, [&](int64_t b0, int64_t b1) {
    blocks_of_y(wp, xp, chunks * kChunk, sp, bp, M, N, chunks, yp, b0, b1);
  });
  return y;
}

}  // namespace

TORCH_LIBRARY(attnlab_cpu, m) {
  m.def("int8_linear(Tensor x, Tensor weight, Tensor scales, Tensor? bias=None) -> Tensor");
}
TORCH_LIBRARY_IMPL(attnlab_cpu, CPU, m) { m.impl("int8_linear", &int8_linear); }
