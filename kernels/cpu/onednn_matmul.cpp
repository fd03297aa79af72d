// oneDNN matmul primitives for the Linear layers (onednn_matmul.hpp). The choices below were
// measured (docs/benchmarks.md#int8-linear):
//  * Per-row activation scales. oneDNN 2.6 output scales are per-N only. A binary-mul post-op
//    with a 2-D [m,1] tensor falls back to ref_int8. Declaring the problem 3-D, src {1,m,k},
//    dst {1,m,n}, makes the [1,m,1] tensor a per-"oc" (dim 1) broadcast that the brgemm kernel
//    fuses, so the whole epilogue runs inside the GEMM: no INT32 scratch, no second pass over y.
//  * s8 activations: u8 with a zero point of 128 falls back to ref_int8.
//  * One primitive per shape and row count, shared by every Linear of that shape: the weight
//    scales are a second binary-mul post-op ([1,1,n], a run-time argument) instead of output
//    scales baked into each Linear's primitive.
#include "kernels/cpu/onednn_matmul.hpp"

#include "kernels/cpu/context.hpp"
#include "kernels/cpu/cpu_tier.hpp"
#include "util/check.hpp"

#if defined(EMBER_WITH_ONEDNN)

#include <oneapi/dnnl/dnnl.hpp>

#include <compare>
#include <map>
#include <mutex>
#include <unordered_map>

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

}  // namespace

// Its cache's key and value are its own types, not the file's anonymous namespace's: a class
// with members of internal linkage draws GCC's -Wsubobject-linkage in a unity build, where this
// file is included into another.
struct OnednnContext {
  // What a primitive depends on. Weight scales are run-time arguments, not part of it, so every
  // Linear of one shape and row count shares one primitive.
  struct MatmulKey {
    int type;
    std::int64_t in, out, rows;
    bool accumulate;
    auto operator<=>(const MatmulKey&) const = default;
  };

  struct CachedMatmul {
    dnnl::matmul matmul;
    std::string implementation;  // oneDNN's name of the kernel it chose
  };

  dnnl::engine engine;
  dnnl::stream stream;

  OnednnContext() : engine(make_engine()), stream(engine) {}

  // Creating a primitive takes a millisecond or more, and a model has a handful of Linear shapes
  // but several Linears of each per layer. Bounded: cleared (not evicted) when a caller sweeps
  // row counts; a primitive in use is kept alive by its caller.
  template <class Make>
  std::shared_ptr<const CachedMatmul> get(const MatmulKey& key, Make&& make) {
    std::lock_guard lock(mutex_);
    if (const auto it = cache_.find(key); it != cache_.end()) return it->second;
    if (cache_.size() >= kMaxEntries) cache_.clear();
    return cache_.emplace(key, std::make_shared<const CachedMatmul>(make())).first->second;
  }

 private:
  static dnnl::engine make_engine() {
    active_tier();  // decides the tier, and with it oneDNN's maximum ISA, before any primitive
    try {
      return dnnl::engine(dnnl::engine::kind::cpu, 0);
    } catch (const dnnl::error& e) {
      fail(ErrorCode::internal, "cannot create the oneDNN CPU engine: {}", e.what());
    }
  }

  static constexpr std::size_t kMaxEntries = 4096;
  std::mutex mutex_;
  std::map<MatmulKey, std::shared_ptr<const CachedMatmul>> cache_;
};

std::shared_ptr<OnednnContext> make_onednn_context() { return std::make_shared<OnednnContext>(); }

struct OnednnMatmul::Packed {
  dt type;
  std::int64_t out, in;
  dnnl::memory weights;

  dnnl::primitive_attr attr(std::int64_t m, bool accumulate) const {
    dnnl::primitive_attr attr;
    dnnl::post_ops ops;
    if (type == dt::s8) {
      // y = (acc * w_scale[n]) * x_scale[m] (+ y): oneDNN applies post-ops in order, so the
      // residual is added after both scales.
      ops.append_binary(dnnl::algorithm::binary_mul, md3(1, out, dt::f32));
      ops.append_binary(dnnl::algorithm::binary_mul, md3(m, 1, dt::f32));
    }
    if (accumulate) ops.append_sum(1.0f);
    attr.set_post_ops(ops);
    return attr;
  }

  dnnl::matmul::primitive_desc pd(OnednnContext& c, std::int64_t m, bool accumulate, const Md& w) const {
    const dnnl::matmul::desc desc(md3(m, in, type), w, md3(m, out, dt::f32));
    return dnnl::matmul::primitive_desc(desc, attr(m, accumulate), c.engine);
  }

  std::shared_ptr<const OnednnContext::CachedMatmul> primitive(OnednnContext& c, std::int64_t m,
                                                               bool accumulate) const {
    return c.get(OnednnContext::MatmulKey{static_cast<int>(type), in, out, m, accumulate}, [&] {
      const auto p = pd(c, m, accumulate, weights.get_desc());
      return OnednnContext::CachedMatmul{dnnl::matmul(p), p.impl_info_str()};
    });
  }
};

OnednnMatmul::OnednnMatmul(CpuContext& ctx, MatmulType type, const void* w, std::int64_t out, std::int64_t in)
    : packed_(std::make_unique<Packed>()) {
  OnednnContext& c = *ctx.onednn;
  packed_->type = type == MatmulType::s8 ? dt::s8 : dt::f32;
  packed_->out = out;
  packed_->in = in;
  try {
    // oneDNN reads the team's size when it creates a primitive (its work split) as well as when it
    // runs one: both under the context's count.
    const ScopedOmpThreads team(ctx.threads);
    // w is the {k, n} matrix in "acb" order; packed once into the layout oneDNN picks for m rows.
    const auto p = packed_->pd(c, kPackRows, false, Md({1, in, out}, packed_->type, tag::any));
    dnnl::memory user(md3(in, out, packed_->type, tag::acb), c.engine, const_cast<void*>(w));
    packed_->weights = dnnl::memory(p.weights_desc(), c.engine);
    dnnl::reorder(user, packed_->weights).execute(c.stream, user, packed_->weights);
    c.stream.wait();
  } catch (const dnnl::error& e) {
    fail(ErrorCode::internal, "linear {}x{}: oneDNN: {}", out, in, e.what());
  }
}

OnednnMatmul::~OnednnMatmul() = default;

void OnednnMatmul::execute(CpuContext& ctx, std::int64_t m, bool accumulate, const void* src, float* y,
                           const float* row_scales, const float* weight_scales) {
  OnednnContext& c = *ctx.onednn;
  const Packed& p = *packed_;
  try {
    const ScopedOmpThreads team(ctx.threads);  // creating the primitive (once) and running it
    const std::shared_ptr<const OnednnContext::CachedMatmul> prim = p.primitive(c, m, accumulate);
    dnnl::memory src_mem(md3(m, p.in, p.type), c.engine, const_cast<void*>(src));
    dnnl::memory dst_mem(md3(m, p.out, dt::f32), c.engine, y);
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, src_mem}, {DNNL_ARG_WEIGHTS, p.weights}, {DNNL_ARG_DST, dst_mem}};
    if (weight_scales != nullptr) {
      args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1,
                   dnnl::memory(md3(1, p.out, dt::f32), c.engine, const_cast<float*>(weight_scales)));
      args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(1) | DNNL_ARG_SRC_1,
                   dnnl::memory(md3(m, 1, dt::f32), c.engine, const_cast<float*>(row_scales)));
    }
    prim->matmul.execute(c.stream, args);
    c.stream.wait();
  } catch (const dnnl::error& e) {
    fail(ErrorCode::internal, "linear {}x{} at m={}: oneDNN: {}", p.out, p.in, m, e.what());
  }
}

std::string OnednnMatmul::implementation(CpuContext& ctx, std::int64_t m, bool accumulate) {
  try {
    const ScopedOmpThreads team(ctx.threads);  // the primitive execute() would create
    return packed_->primitive(*ctx.onednn, m, accumulate)->implementation;
  } catch (const dnnl::error& e) {
    fail(ErrorCode::internal, "linear {}x{} at m={}: oneDNN: {}", packed_->out, packed_->in, m, e.what());
  }
}

std::unique_ptr<OnednnMatmul> make_onednn_matmul(CpuContext& ctx, MatmulType type, const void* w, std::int64_t out,
                                                 std::int64_t in) {
  return std::make_unique<OnednnMatmul>(ctx, type, w, out, in);
}

}  // namespace ember::kernels::cpu

#else  // a build without oneDNN: nothing to create (the Linears never ask; tests may)

namespace ember::kernels::cpu {

struct OnednnMatmul::Packed {};

std::shared_ptr<OnednnContext> make_onednn_context() { return nullptr; }

OnednnMatmul::OnednnMatmul(CpuContext&, MatmulType, const void*, std::int64_t out, std::int64_t in) {
  fail(ErrorCode::unsupported, "linear {}x{}: this build of ember has no oneDNN", out, in);
}

OnednnMatmul::~OnednnMatmul() = default;

void OnednnMatmul::execute(CpuContext&, std::int64_t, bool, const void*, float*, const float*, const float*) {}

std::string OnednnMatmul::implementation(CpuContext&, std::int64_t, bool) { return "none"; }

std::unique_ptr<OnednnMatmul> make_onednn_matmul(CpuContext&, MatmulType, const void*, std::int64_t out,
                                                 std::int64_t in) {
  fail(ErrorCode::unsupported, "linear {}x{}: this build of ember has no oneDNN", out, in);
}

}  // namespace ember::kernels::cpu

#endif
