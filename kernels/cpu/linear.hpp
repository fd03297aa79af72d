// Linear layers y[m, out] = x[m, in] · Wᵀ (+ y when accumulating, used for residual adds), in
// INT8 (the fast path) or FP32 (the reference and the speed baseline): oneDNN matmul primitives
// with the weights packed once in the layout oneDNN prefers (where ember is built with oneDNN),
// and ember's own INT8 kernel (gemv_int8.hpp) for decode rows, and for every row on tiers without
// a fast oneDNN INT8 kernel or builds without oneDNN.
//
// Thread-safety: a Linear's weights are immutable after construction. forward() may be called
// from several threads; calls on one Linear are serialised by an internal mutex (it guards the
// per-shape primitive cache and the activation scratch).
#pragma once

#include "kernels/cpu/context.hpp"
#include "kernels/cpu/gemm_grouped.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ember::kernels::cpu {

// What a forward_outputs() call's x is: new, or the x of the previous call on the same Linear
// (the next part of the same product, nothing having written x or called the Linear in
// between), whose quantized rows the kernel then uses again instead of quantizing x anew.
enum class LinearInput { fresh, as_before };

class Linear {
 public:
  virtual ~Linear() = default;
  Linear(const Linear&) = delete;
  Linear& operator=(const Linear&) = delete;

  // x: dense [m, in]; y: dense [m, out]. accumulate: y += x·Wᵀ instead of y = x·Wᵀ.
  virtual void forward(CpuContext& ctx, const float* x, std::int64_t m, float* y, bool accumulate = false) = 0;

  std::int64_t in_features() const { return in_; }
  std::int64_t out_features() const { return out_; }

  // The oneDNN implementation that runs for m rows (e.g. "brg:avx512_core_vnni"): lets tests
  // and benchmarks catch a silent fall-back to a reference kernel.
  virtual std::string implementation(CpuContext& ctx, std::int64_t m, bool accumulate = false) = 0;

  // The weight bytes one row's product reads (a decode step's stream): the layout the decode
  // path multiplies, scales included where they are per group.
  virtual std::int64_t decode_bytes() const = 0;

  // Whether a row's result is the same bits in any call, whatever m and the other rows: so for
  // the INT8 kernels (exact integer products, then each output's float epilogue on its own), not
  // for oneDNN's FP32 matmul, whose blocking, and so the order of its sums, depends on m.
  virtual bool rows_independent() const { return false; }

  // Columns [begin, end) of y = x·Wᵀ (y += x·Wᵀ when accumulating), y dense [m, out] with its
  // other columns left as they are: a long product in pieces, as a budgeted step runs it across
  // frames. begin is a multiple of output_granule(m), end one too or out_features(). The columns
  // equal forward()'s bit for bit. Throws ErrorCode::invalid_argument on a range that breaks these
  // rules, ErrorCode::internal when `input` says as_before but the previous call had other rows.
  void forward_outputs(CpuContext& ctx, const float* x, std::int64_t m, float* y, std::int64_t begin, std::int64_t end,
                       bool accumulate = false, LinearInput input = LinearInput::fresh);
  // The unit of forward_outputs()'s ranges at m rows: a tile of the kernel that runs m rows, or
  // out_features() where that kernel computes every output at once (oneDNN's matmul).
  virtual std::int64_t output_granule(std::int64_t /*m*/) const { return out_features(); }

 protected:
  Linear(std::int64_t out, std::int64_t in) : in_(in), out_(out) {}

  // forward_outputs() once its range is checked. The default, for a kernel that cannot split,
  // is handed the whole range and runs forward().
  virtual void forward_range(CpuContext& ctx, const float* x, std::int64_t m, float* y, std::int64_t begin,
                             std::int64_t end, bool accumulate, LinearInput input);

 private:
  std::int64_t in_;
  std::int64_t out_;
  std::atomic<std::int64_t> outputs_rows_{-1};  // the rows of the last forward_outputs() call
};

// How an INT8 linear quantizes its input rows.
enum class ActivationQuant {
  per_row,   // one INT8 term per row (scale = max|x| / 127): the fast default; per group of
             // 32 for grouped weights
  residual,  // two INT8 terms per row, the second quantizing the first's rounding error
             // (quantize_rows_s8_residual): 16-bit activations for twice the INT8 GEMM work.
             // Decode rows stream the weights once for both terms, so it costs little there.
};

// w: FP32 [out, in] (row = output channel), copied/packed, not kept. Throws
// ErrorCode::invalid_argument on a non-positive shape.
std::unique_ptr<Linear> make_int8_linear(CpuContext& ctx, const float* w, std::int64_t out, std::int64_t in,
                                         ActivationQuant activations = ActivationQuant::per_row);
// Test-only: the same INT8 linear, but every m runs through oneDNN, also the rows that ember's
// GEMV (gemv_int8.hpp) takes otherwise; the reference of its bit-exactness test. Below the
// avx512_vnni tier oneDNN's INT8 matmul is its reference kernel: slow, but exact.
std::unique_ptr<Linear> make_int8_linear_onednn_only(CpuContext& ctx, const float* w, std::int64_t out, std::int64_t in,
                                                     ActivationQuant activations = ActivationQuant::per_row);
// The largest |q| of INT8 weights: 127 on every tier (see linear.cpp).
int int8_weight_range();
// Whether this build has oneDNN (EMBER_WITH_ONEDNN): without it ember's own kernels run every
// product, and make_int8_linear_onednn_only throws Error(unsupported).
bool onednn_available();

// Weights quantized per output channel, as the INT8 linear uses them: q [out, in] with
// |q| <= int8_weight_range(), w ~= q * scales[row]. The form the weight cache stores.
struct QuantizedWeights {
  std::int64_t out = 0, in = 0;
  std::vector<std::int8_t> q;
  std::vector<float> scales;
};
QuantizedWeights quantize_int8_weights(CpuContext& ctx, const float* w, std::int64_t out, std::int64_t in);
// The INT8 linear of weights already quantized (quantize_int8_weights, or read back from a
// cache): make_int8_linear(w) is this of quantize_int8_weights(w). q and scales are not kept.
std::unique_ptr<Linear> make_int8_linear(CpuContext& ctx, const std::int8_t* q, const float* scales, std::int64_t out,
                                         std::int64_t in, ActivationQuant activations = ActivationQuant::per_row);

// Weights in a file's own groups of 32 (4- or 8-bit, gemm_grouped.hpp) with INT8 activations
// per group (ActivationQuant::residual: two terms a group), read row by row through `source` and
// packed into ctx.decode_weights: one kernel for every row count, so prefill and decode read the
// same copy, on every CPU (grouped_gemm_tier()). Throws ErrorCode::invalid_argument unless in is
// a multiple of kWeightGroup.
// pack_threads: the threads that pack the rows (0: ctx.threads); 1 where the caller packs
// several linears in parallel itself.
std::unique_ptr<Linear> make_grouped_linear(CpuContext& ctx, std::int64_t out, std::int64_t in, GroupFormat format,
                                            const GroupedRowSource& source,
                                            ActivationQuant activations = ActivationQuant::per_row,
                                            int pack_threads = 0);

// What forward_stacked() and forward_gathered() keep from call to call: quantized rows, the
// list of products, and forward_gathered()'s distinct rows.
struct StackedScratch {
  GroupedActivations activations;
  std::vector<GroupedProduct> products;
  GroupedActivations distinct;         // forward_gathered(): each distinct row of x quantized once
  std::vector<std::int32_t> position;  // [x_rows]: a row's place among the distinct ones, or -1
  std::vector<std::int32_t> distinct_rows;
  std::vector<float> rows;  // the distinct rows of x (or, not grouped, the gathered ones)
};

// The products of `count` linears of one shape, each over its own rows of one stacked input: linear
// i takes rows[i] rows of x ([sum of rows, in], linear i's after linear i-1's) into the same rows
// of y ([sum of rows, out]), each row equal bit for bit to what linear i's forward() makes of it.
// Where every linear is a grouped one (make_grouped_linear) with the same activation terms, the
// rows are quantized in one call and all the products run in one parallel region
// (gemm_grouped_batch): the experts of a mixture-of-experts layer, each too small to be worth a
// region (and a quantization) of its own. Otherwise one forward() after another. Throws
// ErrorCode::invalid_argument when the linears' shapes differ or a row count is negative.
void forward_stacked(CpuContext& ctx, Linear* const* linears, const std::int64_t* rows, std::int64_t count,
                     const float* x, float* y, StackedScratch& scratch);
// forward_stacked() of gathered rows: the stack's row i is row gather[i] of x ([x_rows, in]).
// Each distinct row of x is quantized once, however many of the linears take it (a token's row
// goes to every one of its experts), with the same bits as on its own.
void forward_gathered(CpuContext& ctx, Linear* const* linears, const std::int64_t* rows, std::int64_t count,
                      const float* x, std::int64_t x_rows, const std::int32_t* gather, float* y,
                      StackedScratch& scratch);

std::unique_ptr<Linear> make_fp32_linear(CpuContext& ctx, const float* w, std::int64_t out, std::int64_t in);

}  // namespace ember::kernels::cpu
