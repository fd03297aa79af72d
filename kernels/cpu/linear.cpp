// INT8 and FP32 Linear layers over their providers: ember's own INT8 GEMV/GEMM (gemv_int8.hpp)
// for decode rows and, on tiers where oneDNN 2.6 has no fast INT8 kernel or in a build without
// oneDNN, for every row; oneDNN's matmul (onednn_matmul.hpp) for the rest; ember's FP32 product
// (gemm_f32.hpp) where oneDNN is not built in. Why (docs/benchmarks.md#int8-linear):
//  * Tiers below avx512_vnni (cpu_tier.hpp): oneDNN 2.6's INT8 matmul there is ref_int8 for this
//    epilogue, or gemm:jit, no faster than FP32, and its vpmaddubsw saturates 16-bit pair sums of
//    full-range weights. Every INT8 row runs ember's own kernel instead (its AVX2 form keeps the
//    full range exactly with the sign trick), and no oneDNN INT8 primitive is created: weights
//    have the full [-127, 127] range on every tier, so every tier computes the same numbers.
//  * Decode (m <= kGemvMaxRows) runs ember's own GEMV on a second copy of the INT8 weights:
//    brgemm streams the weights far below memory bandwidth at m = 1. The GEMV is bit-exact with
//    the oneDNN path (kernels_test compares them bitwise), so a row's output does not depend on
//    the batch it runs in.
#include "kernels/cpu/linear.hpp"

#include "kernels/cpu/cpu_tier.hpp"
#include "kernels/cpu/gemm_f32.hpp"
#include "kernels/cpu/gemv_int8.hpp"
#include "kernels/cpu/onednn_matmul.hpp"
#include "kernels/cpu/quantize.hpp"
#include "util/check.hpp"

#include <fmt/format.h>

#include <mutex>
#include <utility>
#include <vector>

namespace ember::kernels::cpu {

namespace {

// A Linear whose calls are serialised (its scratch and its provider's state are per Linear).
class LockedLinear : public Linear {
 public:
  void forward(CpuContext& ctx, const float* x, std::int64_t m, float* y, bool accumulate) override {
    if (m < 0) fail(ErrorCode::invalid_argument, "linear: m = {} rows is negative", m);
    locked_run(ctx, x, m, y, accumulate, 0, out_features(), LinearInput::fresh);
  }

 protected:
  LockedLinear(std::int64_t out, std::int64_t in) : Linear(out, in) {
    if (out <= 0 || in <= 0) fail(ErrorCode::invalid_argument, "linear: bad weight shape out={} in={}", out, in);
  }

  void forward_range(CpuContext& ctx, const float* x, std::int64_t m, float* y, std::int64_t begin, std::int64_t end,
                     bool accumulate, LinearInput input) override {
    locked_run(ctx, x, m, y, accumulate, begin, end, input);
  }

  // y's columns [begin, end) (the whole of them unless output_granule() allows less).
  virtual void run(CpuContext& ctx, const float* x, std::int64_t m, float* y, bool accumulate, std::int64_t begin,
                   std::int64_t end, LinearInput input) = 0;

  std::mutex mutex_;

 private:
  void locked_run(CpuContext& ctx, const float* x, std::int64_t m, float* y, bool accumulate, std::int64_t begin,
                  std::int64_t end, LinearInput input) {
    if (m == 0) return;
    std::lock_guard lock(mutex_);
    run(ctx, x, m, y, accumulate, begin, end, input);
  }
};

// Whether oneDNN 2.6 has a fast INT8 kernel at the active tier (the file comment); below it,
// ember's own kernel runs every INT8 row.
bool onednn_int8_fast() { return onednn_available() && tier_available(CpuTier::avx512_vnni); }

class Int8Linear final : public LockedLinear {
 public:
  Int8Linear(CpuContext& ctx, const float* w, std::int64_t out, std::int64_t in, ActivationQuant activations,
             bool allow_gemv = true)
      : Int8Linear(ctx, quantize_int8_weights(ctx, w, out, in), activations, allow_gemv) {}

  Int8Linear(CpuContext& ctx, const QuantizedWeights& w, ActivationQuant activations, bool allow_gemv = true)
      : Int8Linear(ctx, w.q.data(), w.out, w.in, w.scales.data(), activations, allow_gemv) {}

  Int8Linear(CpuContext& ctx, const std::int8_t* q, std::int64_t out, std::int64_t in, const float* scales,
             ActivationQuant activations, bool allow_gemv = true)
      : LockedLinear(out, in),
        terms_(activations == ActivationQuant::residual ? 2 : 1),
        weight_scales_(scales, scales + out) {
    if (q == nullptr) fail(ErrorCode::invalid_argument, "linear: null weights");
    if (!allow_gemv && !onednn_available())
      fail(ErrorCode::unsupported,
           "linear: an INT8 linear without ember's kernel needs oneDNN, which this build lacks");
    own_gemm_ = allow_gemv && !onednn_int8_fast();
    if (!own_gemm_) onednn_ = make_onednn_matmul(ctx, MatmulType::s8, q, out, in);
    if (allow_gemv) gemv_ = std::make_unique<GemvWeightsS8>(q, weight_scales_.data(), out, in, ctx.decode_weights);
    // Scratch grows to the largest batch seen and stays: no allocation per call once warm, and
    // no memory for batch sizes a host never runs (lm_head's two-term GEMV output alone would
    // take 12 MB at kGemvMaxRows).
  }

  std::int64_t decode_bytes() const override { return out_features() * in_features(); }
  bool rows_independent() const override { return true; }  // the GEMV equals oneDNN's rows (kernels_test)

  std::string implementation(CpuContext& ctx, std::int64_t m, bool accumulate) override {
    if (uses_gemv(m)) return fmt::format("{}:{}", m <= kGemvMaxRows ? "gemv" : "ember_gemm", to_string(active_tier()));
    std::lock_guard lock(mutex_);
    return onednn_->implementation(ctx, m, accumulate);
  }

  // Both terms of a two-term row run the GEMV whenever a single term does (together, or one
  // after the other), so m alone decides.
  std::int64_t output_granule(std::int64_t m) const override {
    return uses_gemv(m) ? gemv_->tile_blocks() * 16 : out_features();
  }

 private:
  bool uses_gemv(std::int64_t m) const { return gemv_ != nullptr && (own_gemm_ || m <= kGemvMaxRows); }

  void run(CpuContext& ctx, const float* x, std::int64_t m, float* y, bool accumulate, std::int64_t begin,
           std::int64_t end, LinearInput input) override {
    const std::int64_t in = in_features();
    const bool quantize = input == LinearInput::fresh;
    grow(q_, terms_ * m * in);
    grow(row_scales_, terms_ * m);
    if (terms_ == 1) {
      if (quantize) quantize_rows_s8(x, m, in, in, q_.data(), row_scales_.data(), ctx.threads);
      multiply(ctx, q_.data(), row_scales_.data(), m, y, accumulate, begin, end);
      return;
    }
    // Term 2's rows follow term 1's: [q_hi; q_lo]. It is added in a second pass, y = (y + t1) +
    // t2, in this order for every m, so a row's result does not depend on its batch.
    if (quantize)
      quantize_rows_s8_residual(x, m, in, in, q_.data(), row_scales_.data(), q_.data() + m * in, row_scales_.data() + m,
                                ctx.threads);
    if (uses_gemv(2 * m)) {
      // Both terms in one GEMV call: the weights are streamed once, as for a single term.
      const std::int64_t out = out_features();
      grow(terms_y_, 2 * m * out);
      multiply(ctx, q_.data(), row_scales_.data(), 2 * m, terms_y_.data(), false, begin, end);
      for (std::int64_t r = 0; r < m; ++r) {
        const float* t1 = terms_y_.data() + r * out;
        const float* t2 = t1 + m * out;
        float* yr = y + r * out;
        for (std::int64_t i = begin; i < end; ++i) yr[i] = (accumulate ? yr[i] + t1[i] : t1[i]) + t2[i];
      }
      return;
    }
    multiply(ctx, q_.data(), row_scales_.data(), m, y, accumulate, begin, end);
    multiply(ctx, q_.data() + m * in, row_scales_.data() + m, m, y, true, begin, end);
  }

  // y's columns [begin, end) (+)= the product of m quantized rows; oneDNN computes them all.
  void multiply(CpuContext& ctx, std::int8_t* q, float* scales, std::int64_t m, float* y, bool accumulate,
                std::int64_t begin, std::int64_t end) {
    if (uses_gemv(m)) {
      grow(xu_, m * gemv_->padded_in());
      gemv_activations(q, m, in_features(), gemv_->padded_in(), xu_.data());
      const std::int64_t tile = gemv_->tile_blocks() * 16;
      gemv_int8(*gemv_, xu_.data(), scales, m, y, accumulate, ctx.threads, begin / tile, (end + tile - 1) / tile);
      return;
    }
    onednn_->execute(ctx, m, accumulate, q, y, scales, weight_scales_.data());
  }

  template <class T>
  static void grow(std::vector<T>& v, std::int64_t n) {
    if (v.size() < static_cast<std::size_t>(n)) v.resize(static_cast<std::size_t>(n));
  }

  const std::int64_t terms_;    // activation terms per row: 1, or 2 for ActivationQuant::residual
  std::vector<float> terms_y_;  // both terms' GEMV outputs, [2m, out], guarded by mutex_
  std::vector<float> weight_scales_;
  std::unique_ptr<const GemvWeightsS8> gemv_;  // null: oneDNN for every m
  std::unique_ptr<OnednnMatmul> onednn_;       // null: ember's kernel for every m
  bool own_gemm_ = false;                      // the GEMV's kernel runs every m, no oneDNN primitive (no fast one)
  std::vector<std::uint8_t> xu_;               // GEMV activations (q + 128), guarded by mutex_
  std::vector<std::int8_t> q_;                 // activation scratch, guarded by mutex_
  std::vector<float> row_scales_;              // activation scales, guarded by mutex_
};

// FP32 weights: oneDNN's matmul where it is built in, else ember's own product (gemm_f32.hpp).
class Fp32Linear final : public LockedLinear {
 public:
  Fp32Linear(CpuContext& ctx, const float* w, std::int64_t out, std::int64_t in) : LockedLinear(out, in) {
    if (onednn_available())
      onednn_ = make_onednn_matmul(ctx, MatmulType::f32, w, out, in);
    else
      weights_.assign(w, w + out * in);
  }

  std::int64_t decode_bytes() const override { return 4 * out_features() * in_features(); }

  std::string implementation(CpuContext& ctx, std::int64_t m, bool accumulate) override {
    if (onednn_ == nullptr) return fmt::format("ember_f32:{}", to_string(active_tier()));
    std::lock_guard lock(mutex_);
    return onednn_->implementation(ctx, m, accumulate);
  }

 private:
  void run(CpuContext& ctx, const float* x, std::int64_t m, float* y, bool accumulate, std::int64_t, std::int64_t,
           LinearInput) override {
    if (onednn_ != nullptr)
      onednn_->execute(ctx, m, accumulate, x, y, nullptr, nullptr);
    else
      gemm_f32(x, weights_.data(), m, out_features(), in_features(), y, accumulate, ctx.threads);
  }

  std::unique_ptr<OnednnMatmul> onednn_;  // null: ember's product over weights_
  std::vector<float> weights_;            // [out, in], without oneDNN only
};

template <class T, class W, class... Extra>
std::unique_ptr<Linear> make_linear(CpuContext& ctx, const W* w, std::int64_t out, std::int64_t in, Extra... extra) {
  if (w == nullptr) fail(ErrorCode::invalid_argument, "linear: null weights");
  return std::make_unique<T>(ctx, w, out, in, extra...);
}

}  // namespace

void Linear::forward_outputs(CpuContext& ctx, const float* x, std::int64_t m, float* y, std::int64_t begin,
                             std::int64_t end, bool accumulate, LinearInput input) {
  if (m < 0) fail(ErrorCode::invalid_argument, "linear: m = {} rows is negative", m);
  const std::int64_t granule = output_granule(m);
  if (begin < 0 || begin >= end || end > out_features() || begin % granule != 0 ||
      (end % granule != 0 && end != out_features()))
    fail(ErrorCode::invalid_argument, "linear: outputs [{}, {}) of {} at m = {} are not in units of {}", begin, end,
         out_features(), m, granule);
  if (input == LinearInput::as_before && outputs_rows_.load() != m)
    fail(ErrorCode::internal, "linear: {} rows said to be as before, but the previous part had {}", m,
         outputs_rows_.load());
  outputs_rows_.store(m);
  forward_range(ctx, x, m, y, begin, end, accumulate, input);
}

void Linear::forward_range(CpuContext& ctx, const float* x, std::int64_t m, float* y, std::int64_t, std::int64_t,
                           bool accumulate, LinearInput) {
  forward(ctx, x, m, y, accumulate);
}

int int8_weight_range() { return 127; }

bool onednn_available() {
#if defined(EMBER_WITH_ONEDNN)
  return true;
#else
  return false;
#endif
}

QuantizedWeights quantize_int8_weights(CpuContext& ctx, const float* w, std::int64_t out, std::int64_t in) {
  if (w == nullptr) fail(ErrorCode::invalid_argument, "linear: null weights");
  if (out <= 0 || in <= 0) fail(ErrorCode::invalid_argument, "linear: bad weight shape out={} in={}", out, in);
  QuantizedWeights q{out, in, std::vector<std::int8_t>(static_cast<std::size_t>(out * in)),
                     std::vector<float>(static_cast<std::size_t>(out))};
  quantize_weights_s8(w, out, in, q.q.data(), q.scales.data(), ctx.threads, int8_weight_range());
  return q;
}

std::unique_ptr<Linear> make_int8_linear(CpuContext& ctx, const std::int8_t* q, const float* scales, std::int64_t out,
                                         std::int64_t in, ActivationQuant activations) {
  if (scales == nullptr) fail(ErrorCode::invalid_argument, "linear: null weight scales");
  return make_linear<Int8Linear>(ctx, q, out, in, scales, activations);
}

std::unique_ptr<Linear> make_int8_linear(CpuContext& ctx, const float* w, std::int64_t out, std::int64_t in,
                                         ActivationQuant activations) {
  return make_linear<Int8Linear>(ctx, w, out, in, activations);
}

std::unique_ptr<Linear> make_int8_linear_onednn_only(CpuContext& ctx, const float* w, std::int64_t out, std::int64_t in,
                                                     ActivationQuant activations) {
  return make_linear<Int8Linear>(ctx, w, out, in, activations, /*allow_gemv=*/false);
}

std::unique_ptr<Linear> make_fp32_linear(CpuContext& ctx, const float* w, std::int64_t out, std::int64_t in) {
  return make_linear<Fp32Linear>(ctx, w, out, in);
}

}  // namespace ember::kernels::cpu
