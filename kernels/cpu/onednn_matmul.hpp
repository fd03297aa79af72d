// oneDNN's matmul as one provider of the Linear layers' products (linear.cpp), where ember is
// built with oneDNN (EMBER_WITH_ONEDNN; without it, the functions below throw
// Error(unsupported) and CpuContext::onednn is null): the weights packed once in the layout
// oneDNN prefers, one primitive per shape and row count shared through the context, and the
// INT8 epilogue y = (acc * w_scale[n]) * x_scale[m] (+ y) fused into the GEMM. Why this form
// of the epilogue: docs/benchmarks.md#int8-linear.
//
// Thread-safety: an OnednnMatmul's packed weights are immutable; execute() is called under its
// Linear's mutex. OnednnContext's primitive cache is thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace ember::kernels::cpu {

struct CpuContext;

// What the context keeps for oneDNN: its engine, stream and primitive cache.
struct OnednnContext;
std::shared_ptr<OnednnContext> make_onednn_context();

enum class MatmulType { s8, f32 };

class OnednnMatmul {
 public:
  // w: [out, in] of `type` (int8 or float), packed now and not kept. Throws Error(internal)
  // naming oneDNN's reason.
  OnednnMatmul(CpuContext& ctx, MatmulType type, const void* w, std::int64_t out, std::int64_t in);
  ~OnednnMatmul();
  OnednnMatmul(const OnednnMatmul&) = delete;
  OnednnMatmul& operator=(const OnednnMatmul&) = delete;

  // y[m, out] (+)= src[m, in] · Wᵀ. For s8, weight_scales [out] and row_scales [m] are the
  // epilogue's; for f32 both are null.
  void execute(CpuContext& ctx, std::int64_t m, bool accumulate, const void* src, float* y, const float* row_scales,
               const float* weight_scales);

  // oneDNN's name of the kernel it runs for m rows (e.g. "brg:avx512_core_vnni").
  std::string implementation(CpuContext& ctx, std::int64_t m, bool accumulate);

 private:
  struct Packed;
  std::unique_ptr<Packed> packed_;
};

std::unique_ptr<OnednnMatmul> make_onednn_matmul(CpuContext& ctx, MatmulType type, const void* w, std::int64_t out,
                                                 std::int64_t in);

}  // namespace ember::kernels::cpu
