// INT8 and FP32 Linear layers: oneDNN matmul primitives, and ember's own INT8 GEMV/GEMM
// (gemv_int8.hpp) for decode rows and, on tiers where oneDNN 2.6 has no fast INT8 kernel, for
// every row. The choices below were measured (docs/benchmarks.md#int8-linear):
//  * Per-row activation scales. oneDNN 2.6 output scales are per-N only. A binary-mul post-op
//    with a 2-D [m,1] tensor falls back to ref_int8. Declaring the problem 3-D, src {1,m,k},
//    dst {1,m,n}, makes the [1,m,1] tensor a per-"oc" (dim 1) broadcast that the brgemm kernel
//    fuses ("brg:avx512_core_vnni"), so the whole epilogue acc * w_scale[n] * x_scale[m] (+ y)
//    runs inside the GEMM: no INT32 scratch, no second pass over y (which also needs an
//    m*n*4-byte scratch, 100 MB for lm_head at m=512).
//  * s8 activations vs u8: u8 with a zero point of 128 falls back to ref_int8; u8 without a
//    zero point (compensating ourselves) was within the noise of s8, so s8 stays.
//  * Tiers below avx512_vnni (cpu_tier.hpp): oneDNN 2.6's INT8 matmul there is ref_int8 for this
//    epilogue, or gemm:jit, no faster than FP32, and its vpmaddubsw saturates 16-bit pair sums of
//    full-range weights. Every INT8 row runs ember's own kernel instead (its AVX2 form keeps the
//    full range exactly with the sign trick), and no oneDNN INT8 primitive is created: weights
//    have the full [-127, 127] range on every tier, so every tier computes the same numbers.
//  * One primitive per shape and row count, shared by every Linear of that shape through the
//    context's MatmulCache: the weight scales are a second binary-mul post-op ([1,1,n], a
//    run-time argument) instead of output scales baked into each Linear's primitive, which made
//    every Linear build its own primitive for each new row count. The extra post-op costs a
//    little on repeated prefills; oneDNN 2.6 has no cheaper run-time form: run-time output
//    scales leave brgemm for gemm:jit, and weight argument scales are refused for matmul.
//  * Decode (m <= kGemvMaxRows) runs ember's own GEMV on a second copy of the INT8 weights:
//    brgemm streams the weights far below memory bandwidth at m = 1. The GEMV is bit-exact with
//    this oneDNN path (kernels_test compares them bitwise), so a row's output does not depend on
//    the batch it runs in.
#include "kernels/cpu/linear.hpp"

#include "kernels/cpu/cpu_tier.hpp"
#include "kernels/cpu/gemv_int8.hpp"
#include "kernels/cpu/quantize.hpp"
#include "util/check.hpp"

#include <fmt/format.h>

#include <mutex>
#include <utility>
#include <vector>

namespace ember::kernels::cpu {

namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;
using Md = dnnl::memory::desc;

// The weights layout is chosen for this many rows; other m reuse it (brgemm accepts the same
// blocked layout for every m, checked by kernels_test through implementation()).
constexpr std::int64_t kPackRows = 64;

// Matrices are described as {1, rows, cols} so that a [1, m, 1] per-row tensor is a dim-1
// ("per output channel") broadcast, which brgemm fuses (see the file comment).
Md md3(std::int64_t rows, std::int64_t cols, dt type, tag layout = tag::abc) {
  return Md({1, rows, cols}, type, layout);
}

class OnednnLinear : public Linear {
 public:
  void forward(CpuContext& ctx, const float* x, std::int64_t m, float* y,
               bool accumulate) override {
    if (m < 0) fail(ErrorCode::invalid_argument, "linear: m = {} rows is negative", m);
    locked_run(ctx, x, m, y, accumulate, 0, out_features(), LinearInput::fresh);
  }

  std::string implementation(CpuContext& ctx, std::int64_t m, bool accumulate) override {
    std::lock_guard lock(mutex_);
    return primitive(ctx, m, accumulate)->implementation;
  }

 protected:
  OnednnLinear(CpuContext& ctx, std::int64_t out, std::int64_t in, dt type)
      : Linear(out, in), type_(type) {
    if (out <= 0 || in <= 0)
      fail(ErrorCode::invalid_argument, "linear: bad weight shape out={} in={}", out, in);
  }

  // Packs w_user ([out, in] of type_, i.e. the {k, n} matrix in "acb" order) once.
  void pack(CpuContext& ctx, const void* w_user) {
    const auto pd = make_pd(ctx, kPackRows, false, Md({1, in_features(), out_features()}, type_, tag::any));
    dnnl::memory user(md3(in_features(), out_features(), type_, tag::acb), ctx.engine,
                      const_cast<void*>(w_user));
    packed_ = dnnl::memory(pd.weights_desc(), ctx.engine);
    dnnl::reorder(user, packed_).execute(ctx.stream, user, packed_);
    ctx.stream.wait();
  }

  void forward_range(CpuContext& ctx, const float* x, std::int64_t m, float* y, std::int64_t begin,
                     std::int64_t end, bool accumulate, LinearInput input) override {
    locked_run(ctx, x, m, y, accumulate, begin, end, input);
  }

  // Depends on the shape, m and accumulate only: per-Linear values (the weight scales) are
  // run-time arguments, so the context's MatmulCache shares one primitive among Linears.
  virtual dnnl::primitive_attr make_attr(std::int64_t m, bool accumulate) const = 0;
  // y's columns [begin, end) (the whole of them unless output_granule() allows less).
  virtual void run(CpuContext& ctx, const float* x, std::int64_t m, float* y, bool accumulate,
                   std::int64_t begin, std::int64_t end, LinearInput input) = 0;

  std::shared_ptr<const CachedMatmul> primitive(CpuContext& ctx, std::int64_t m, bool accumulate) {
    const MatmulKey key{static_cast<int>(type_), in_features(), out_features(), m, accumulate};
    return ctx.matmuls->get(key, [&] {
      const auto pd = make_pd(ctx, m, accumulate, packed_.get_desc());
      return CachedMatmul{dnnl::matmul(pd), pd.impl_info_str()};
    });
  }

  // Int8 passes both scales, the post-ops' run-time arguments: weight_scales per output channel,
  // row_scales per activation row. FP32 passes neither.
  void execute(CpuContext& ctx, std::int64_t m, bool accumulate, void* src, float* y,
               float* row_scales, const float* weight_scales = nullptr) {
    const std::shared_ptr<const CachedMatmul> c = primitive(ctx, m, accumulate);
    dnnl::memory src_mem(md3(m, in_features(), type_), ctx.engine, src);
    dnnl::memory dst_mem(md3(m, out_features(), dt::f32), ctx.engine, y);
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, src_mem}, {DNNL_ARG_WEIGHTS, packed_}, {DNNL_ARG_DST, dst_mem}};
    if (weight_scales != nullptr) {
      args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1,
                   dnnl::memory(md3(1, out_features(), dt::f32), ctx.engine, const_cast<float*>(weight_scales)));
      args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(1) | DNNL_ARG_SRC_1,
                   dnnl::memory(md3(m, 1, dt::f32), ctx.engine, row_scales));
    }
    bind_threads(ctx);
    c->matmul.execute(ctx.stream, args);
    ctx.stream.wait();
  }

  std::mutex mutex_;

 private:
  void locked_run(CpuContext& ctx, const float* x, std::int64_t m, float* y, bool accumulate,
                  std::int64_t begin, std::int64_t end, LinearInput input) {
    if (m == 0) return;
    std::lock_guard lock(mutex_);
    try {
      run(ctx, x, m, y, accumulate, begin, end, input);
    } catch (const dnnl::error& e) {
      fail(ErrorCode::internal, "linear {}x{} at m={}: oneDNN: {}", out_features(), in_features(),
           m, e.what());
    }
  }

  dnnl::matmul::primitive_desc make_pd(CpuContext& ctx, std::int64_t m, bool accumulate,
                                       const Md& weights) const {
    const dnnl::matmul::desc desc(md3(m, in_features(), type_), weights,
                                  md3(m, out_features(), dt::f32));
    return dnnl::matmul::primitive_desc(desc, make_attr(m, accumulate), ctx.engine);
  }

  dt type_;
  dnnl::memory packed_;
};

// Whether oneDNN 2.6 has a fast INT8 kernel at the active tier (the file comment); below it,
// ember's own kernel runs every INT8 row.
bool onednn_int8_fast() { return tier_available(CpuTier::avx512_vnni); }

class Int8Linear final : public OnednnLinear {
 public:
  Int8Linear(CpuContext& ctx, const float* w, std::int64_t out, std::int64_t in,
             ActivationQuant activations, bool allow_gemv = true)
      : Int8Linear(ctx, quantize_int8_weights(ctx, w, out, in), activations, allow_gemv) {}

  Int8Linear(CpuContext& ctx, const QuantizedWeights& w, ActivationQuant activations,
             bool allow_gemv = true)
      : Int8Linear(ctx, w.q.data(), w.out, w.in, w.scales.data(), activations, allow_gemv) {}

  Int8Linear(CpuContext& ctx, const std::int8_t* q, std::int64_t out, std::int64_t in,
             const float* scales, ActivationQuant activations, bool allow_gemv = true)
      : OnednnLinear(ctx, out, in, dt::s8),
        terms_(activations == ActivationQuant::residual ? 2 : 1),
        weight_scales_(scales, scales + out) {
    own_gemm_ = allow_gemv && !onednn_int8_fast();
    if (!own_gemm_) pack(ctx, q);
    if (allow_gemv) gemv_ = std::make_unique<GemvWeightsS8>(q, weight_scales_.data(), out, in, ctx.decode_weights);
    // Scratch grows to the largest batch seen and stays: no allocation per call once warm, and
    // no memory for batch sizes a host never runs (lm_head's two-term GEMV output alone would
    // take 12 MB at kGemvMaxRows).
  }

  std::int64_t decode_bytes() const override { return out_features() * in_features(); }

  std::string implementation(CpuContext& ctx, std::int64_t m, bool accumulate) override {
    if (uses_gemv(m))
      return fmt::format("{}:{}", m <= kGemvMaxRows ? "gemv" : "ember_gemm", to_string(active_tier()));
    return OnednnLinear::implementation(ctx, m, accumulate);
  }

  // Both terms of a two-term row run the GEMV whenever a single term does (together, or one
  // after the other), so m alone decides.
  std::int64_t output_granule(std::int64_t m) const override {
    return uses_gemv(m) ? gemv_->tile_blocks() * 16 : out_features();
  }

 private:
  bool uses_gemv(std::int64_t m) const { return gemv_ != nullptr && (own_gemm_ || m <= kGemvMaxRows); }

  // y = (acc * w_scale[n]) * x_scale[m] (+ y): output scales, then a per-row binary mul, then
  // sum; oneDNN applies post-ops in order, so the residual is added after both scales.
  dnnl::primitive_attr make_attr(std::int64_t m, bool accumulate) const override {
    dnnl::primitive_attr attr;
    dnnl::post_ops ops;
    ops.append_binary(dnnl::algorithm::binary_mul, md3(1, out_features(), dt::f32));  // weight_scales_
    ops.append_binary(dnnl::algorithm::binary_mul, md3(m, 1, dt::f32));
    if (accumulate) ops.append_sum(1.0f);
    attr.set_post_ops(ops);
    return attr;
  }

  void run(CpuContext& ctx, const float* x, std::int64_t m, float* y, bool accumulate,
           std::int64_t begin, std::int64_t end, LinearInput input) override {
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
      quantize_rows_s8_residual(x, m, in, in, q_.data(), row_scales_.data(), q_.data() + m * in,
                                row_scales_.data() + m, ctx.threads);
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
    execute(ctx, m, accumulate, q, y, scales, weight_scales_.data());
  }

  template <class T>
  static void grow(std::vector<T>& v, std::int64_t n) {
    if (v.size() < static_cast<std::size_t>(n)) v.resize(static_cast<std::size_t>(n));
  }

  const std::int64_t terms_;          // activation terms per row: 1, or 2 for ActivationQuant::residual
  std::vector<float> terms_y_;        // both terms' GEMV outputs, [2m, out], guarded by mutex_
  std::vector<float> weight_scales_;
  std::unique_ptr<const GemvWeightsS8> gemv_;  // null: oneDNN for every m
  bool own_gemm_ = false;  // the GEMV's kernel runs every m, no oneDNN primitive (no fast one)
  std::vector<std::uint8_t> xu_;     // GEMV activations (q + 128), guarded by mutex_
  std::vector<std::int8_t> q_;       // activation scratch, guarded by mutex_
  std::vector<float> row_scales_;    // activation scales, guarded by mutex_
};

class Fp32Linear final : public OnednnLinear {
 public:
  Fp32Linear(CpuContext& ctx, const float* w, std::int64_t out, std::int64_t in)
      : OnednnLinear(ctx, out, in, dt::f32) {
    pack(ctx, w);
  }

  std::int64_t decode_bytes() const override { return 4 * out_features() * in_features(); }

 private:
  dnnl::primitive_attr make_attr(std::int64_t, bool accumulate) const override {
    dnnl::primitive_attr attr;
    if (accumulate) {
      dnnl::post_ops ops;
      ops.append_sum(1.0f);
      attr.set_post_ops(ops);
    }
    return attr;
  }

  void run(CpuContext& ctx, const float* x, std::int64_t m, float* y, bool accumulate, std::int64_t, std::int64_t,
           LinearInput) override {
    execute(ctx, m, accumulate, const_cast<float*>(x), y, nullptr);
  }
};

template <class T, class W, class... Extra>
std::unique_ptr<Linear> make_linear(CpuContext& ctx, const W* w, std::int64_t out,
                                    std::int64_t in, Extra... extra) {
  if (w == nullptr) fail(ErrorCode::invalid_argument, "linear: null weights");
  try {
    return std::make_unique<T>(ctx, w, out, in, extra...);
  } catch (const dnnl::error& e) {
    fail(ErrorCode::internal, "linear {}x{}: oneDNN: {}", out, in, e.what());
  }
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
    fail(ErrorCode::internal, "linear: {} rows said to be as before, but the previous part had {}", m, outputs_rows_.load());
  outputs_rows_.store(m);
  forward_range(ctx, x, m, y, begin, end, accumulate, input);
}

void Linear::forward_range(CpuContext& ctx, const float* x, std::int64_t m, float* y, std::int64_t, std::int64_t,
                           bool accumulate, LinearInput) {
  forward(ctx, x, m, y, accumulate);
}

int int8_weight_range() { return 127; }

QuantizedWeights quantize_int8_weights(CpuContext& ctx, const float* w, std::int64_t out,
                                       std::int64_t in) {
  if (w == nullptr) fail(ErrorCode::invalid_argument, "linear: null weights");
  if (out <= 0 || in <= 0)
    fail(ErrorCode::invalid_argument, "linear: bad weight shape out={} in={}", out, in);
  QuantizedWeights q{out, in, std::vector<std::int8_t>(static_cast<std::size_t>(out * in)),
                     std::vector<float>(static_cast<std::size_t>(out))};
  quantize_weights_s8(w, out, in, q.q.data(), q.scales.data(), ctx.threads, int8_weight_range());
  return q;
}

std::unique_ptr<Linear> make_int8_linear(CpuContext& ctx, const std::int8_t* q, const float* scales,
                                         std::int64_t out, std::int64_t in,
                                         ActivationQuant activations) {
  if (scales == nullptr) fail(ErrorCode::invalid_argument, "linear: null weight scales");
  return make_linear<Int8Linear>(ctx, q, out, in, scales, activations);
}

std::unique_ptr<Linear> make_int8_linear(CpuContext& ctx, const float* w, std::int64_t out,
                                         std::int64_t in, ActivationQuant activations) {
  return make_linear<Int8Linear>(ctx, w, out, in, activations);
}

std::unique_ptr<Linear> make_int8_linear_onednn_only(CpuContext& ctx, const float* w,
                                                     std::int64_t out, std::int64_t in,
                                                     ActivationQuant activations) {
  return make_linear<Int8Linear>(ctx, w, out, in, activations, /*allow_gemv=*/false);
}

std::unique_ptr<Linear> make_fp32_linear(CpuContext& ctx, const float* w, std::int64_t out,
                                         std::int64_t in) {
  return make_linear<Fp32Linear>(ctx, w, out, in);
}

}  // namespace ember::kernels::cpu
