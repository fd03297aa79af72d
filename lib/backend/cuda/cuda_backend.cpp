#include "backend/cuda/cuda_backend.hpp"

#include "backend/cuda/decode_graph.hpp"
#include "backend/cuda/device_memory.hpp"

#include "kernels/cpu/quantize.hpp"
#include "kernels/cuda/check.hpp"
#include "kernels/cuda/gemm.hpp"
#include "kernels/cuda/ops.hpp"
#include "model/decoder_graph.hpp"
#include "util/check.hpp"
#include "util/fp16.hpp"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace ember::backend::cuda {
namespace {

namespace k = ember::kernels::cuda;
using k::check_cuda;

// Batches of at most this many rows replay CUDA graphs (decode steps and short prefill chunks);
// larger ones are long enough that launch overhead does not matter.
constexpr std::int64_t kMaxGraphRows = 64;

// One projection's weights on the device: INT8 [out, in] with per-output-channel scales, or
// FP16 [out, in].
struct Linear {
  std::int64_t out = 0, in = 0;
  DeviceBuffer weights, scales;
};

// One placed weight of the graph: a linear for the matrices, FP32 values for the vectors.
struct DeviceWeight {
  DeviceBuffer values;
  Linear linear;
};

// The per-step inputs, packed into one host buffer and copied with one transfer. Offsets (in
// int32s) depend only on (rows, logit rows), so a captured graph finds them where it expects.
struct MetaLayout {
  std::int64_t tokens, positions, slots, row_tables, logit_rows, block_tables;

  MetaLayout(std::int64_t rows, std::int64_t n_out)
      : tokens(0), positions(rows), slots(2 * rows), row_tables(3 * rows), logit_rows(4 * rows),
        block_tables(4 * rows + n_out) {}
};

// Places the weights on the device and runs the decoder graph (model/decoder_graph.hpp) with
// its ops on the backend's stream: the whole graph is what a CUDA graph records.
class CudaBackend final : public Backend, private model::DecoderOps {
 public:
  CudaBackend(std::shared_ptr<const model::GgufFile> file, const model::ModelConfig& config,
              const BackendOptions& options, bool use_graphs)
      : config_(config), device_(options.device.index), precision_(options.precision),
        use_graphs_(use_graphs), threads_(options.threads) {
    check_shapes();
    check_device(device_);
    DeviceGuard guard(device_);
    stream_ = std::make_unique<Stream>();
    blas_ = std::make_unique<k::Blas>(stream_->get());
    load_weights(*file, options);
    reserve(std::max(1, options.max_batch_rows), 1 << 16);
  }

  ~CudaBackend() override {
    try {
      DeviceGuard guard(device_);  // the handles below belong to device_
      graphs_.clear();
      blas_.reset();
      stream_.reset();
    } catch (...) {
      // The device is gone (driver reset): the buffers' destructors ignore errors too.
    }
  }

  const model::ModelConfig& config() const override { return config_; }
  std::string name() const override { return precision_ == Precision::int8 ? "cuda-int8" : "cuda-fp16"; }
  std::string weight_format() const override { return precision_ == Precision::int8 ? "w8a8" : "fp16"; }

  std::unique_ptr<KvCache> make_kv_cache(const KvGeometry& g) const override {
    check_kv_geometry(g);
    // Not yet: the CUDA store and attention kernels read f16 or f32 slices only.
    if (g.type == KvCacheType::int8)
      fail(ErrorCode::unsupported, "KvCacheType::int8 is not implemented on the CUDA backend yet; "
                                   "use f16 or f32 there (int8 KV runs on the CPU backend)");
    const std::size_t layer_bytes = g.bytes_per_block() * static_cast<std::size_t>(g.block_count) /
                                    (2 * static_cast<std::size_t>(g.layers));
    auto pool = std::make_shared<DeviceBuffer>(device_, layer_bytes * 2 * static_cast<std::size_t>(g.layers),
                                               "the KV cache");
    {
      DeviceGuard guard(device_);
      check_cuda(cudaMemset(pool->get(), 0, pool->bytes()), "clear the KV cache");
    }
    std::vector<void*> keys, values;
    for (int l = 0; l < g.layers; ++l) {
      keys.push_back(pool->as<char>() + (2 * static_cast<std::size_t>(l)) * layer_bytes);
      values.push_back(pool->as<char>() + (2 * static_cast<std::size_t>(l) + 1) * layer_bytes);
    }
    return std::make_unique<KvCache>(g, MemorySpace::cuda, std::move(keys), std::move(values), std::move(pool));
  }

  void forward(const Batch& batch, KvCache& kv, std::vector<float>& logits) override {
    const KvGeometry& g = kv.geometry();
    validate_batch(batch, g.block_count, g.block_size, config_.vocab);
    if (kv.memory() != MemorySpace::cuda || g.layers != config_.layers || g.kv_heads != config_.kv_heads ||
        g.head_dim != config_.head_dim)
      fail(ErrorCode::internal, "the CUDA backend needs a KV cache made by its make_kv_cache()");
    DeviceGuard guard(device_);
    const std::int64_t rows = batch.rows();
    const std::int64_t n_out = static_cast<std::int64_t>(batch.logit_rows.size());
    logits.resize(static_cast<std::size_t>(n_out * config_.vocab));
    if (rows == 0) return;
    pack_meta(batch, g);
    reserve(rows, static_cast<std::int64_t>(meta_.size()));
    check_cuda(cudaMemcpyAsync(scratch_.meta.get(), meta_.data(), meta_.size() * sizeof(std::int32_t),
                               cudaMemcpyHostToDevice, stream_->get()),
               "upload the batch");
    const auto record = [&] { run(rows, n_out, kv); };
    if (use_graphs_ && rows <= kMaxGraphRows) {
      if (!same_cache(kv)) {  // the graphs captured another cache's pointers and layout
        graphs_.clear();
        graph_kv_ = kv.keys(0);
        graph_kv_geometry_ = g;
      }
      graphs_.run(static_cast<std::uint64_t>(rows) << 32 | static_cast<std::uint64_t>(n_out), stream_->get(), record);
    } else {
      record();
    }
    check_cuda(cudaGetLastError(), "launch the forward pass");
    if (n_out > 0)
      check_cuda(cudaMemcpyAsync(logits.data(), scratch_.logits.get(), logits.size() * sizeof(float),
                                 cudaMemcpyDeviceToHost, stream_->get()),
                 "download the logits");
    stream_->synchronize();
  }

 private:
  // Scratch sized for `rows` rows, reused by every step: no allocation per step.
  struct Scratch {
    std::int64_t rows = 0, meta_ints = 0;
    DeviceBuffer meta, x, h, qkv, attn, gate_up, act, xq, xs, acc, xh, logits;
    DeviceBuffer cos[2], sin[2];  // per model::RopeAngleSet
  };

  bool same_cache(const KvCache& kv) const {
    const KvGeometry& a = kv.geometry();
    const KvGeometry& b = graph_kv_geometry_;
    return graph_kv_ == kv.keys(0) && a.block_size == b.block_size && a.block_count == b.block_count &&
           a.type == b.type;
  }

  void check_shapes() const {
    const auto& c = config_;
    if (precision_ == Precision::fp32)
      fail(ErrorCode::unsupported, "precision fp32 is the CPU reference path; on CUDA use int8 or fp16");
    // The graph's every op runs here but a second set of RoPE frequency factors (Phi-3's
    // LongRoPE switches sets by context): refuse, never approximate.
    if (!c.rope_freq_factors_long.empty())
      fail(ErrorCode::unsupported, "CUDA backend: architecture '{}' needs LongRoPE's second factor set, which the "
           "CUDA backend does not run yet; use the CPU", c.architecture);
    if (c.head_dim > k::kMaxHeadDim || c.heads % c.kv_heads != 0 || c.rope_dims % 2 != 0)
      fail(ErrorCode::unsupported, "CUDA backend: head_dim {} (at most {}), heads {} / kv_heads {}, rope_dims {}",
           c.head_dim, k::kMaxHeadDim, c.heads, c.kv_heads, c.rope_dims);
    if (precision_ == Precision::int8) {
      const std::int64_t q = c.heads * c.head_dim, kv = c.kv_heads * c.head_dim;
      const std::int64_t outs[] = {q + 2 * kv, c.embedding, 2 * c.ffn, c.vocab};
      const std::int64_t ins[] = {c.embedding, q, c.ffn};
      for (std::int64_t n : outs)
        for (std::int64_t in : ins)
          if (!k::gemm_s8_supported(n, in))
            fail(ErrorCode::unsupported,
                 "CUDA INT8 GEMMs need widths that are multiples of 4 (got {} x {}); use fp16", n, in);
    }
  }

  Linear make_linear(const std::vector<float>& w, std::int64_t out, std::int64_t in, const char* what) const {
    Linear l;
    l.out = out;
    l.in = in;
    if (precision_ == Precision::int8) {
      std::vector<std::int8_t> q(w.size());
      std::vector<float> scales(static_cast<std::size_t>(out));
      kernels::cpu::quantize_weights_s8(w.data(), out, in, q.data(), scales.data(), std::max(1, threads_));
      l.weights = upload(device_, q, what);
      l.scales = upload(device_, scales, what);
    } else {
      std::vector<std::uint16_t> half(w.size());
#pragma omp parallel for num_threads(std::max(1, threads_))
      for (std::int64_t i = 0; i < static_cast<std::int64_t>(w.size()); ++i)
        half[static_cast<std::size_t>(i)] = float_to_fp16(w[static_cast<std::size_t>(i)]);
      l.weights = upload(device_, half, what);
    }
    return l;
  }

  void load_weights(const model::GgufFile& file, const BackendOptions& options) {
    const model::DecoderTensors tensors = model::map_decoder_tensors(file, config_);
    q_dim_ = config_.heads * config_.head_dim;
    kv_dim_ = config_.kv_heads * config_.head_dim;
    token_embd_ = upload(device_, model::dequantize_tensor(*tensors.token_embd), "token_embd");
    if (!config_.rope_freq_factors.empty()) rope_freq_factors_ = upload(device_, config_.rope_freq_factors, "rope_freqs");
    weights_ = model::WeightTable<DeviceWeight>(config_.layers);
    const auto place = [&](const model::GraphWeight& w) {
      std::vector<float> values;
      values.reserve(static_cast<std::size_t>(w.rows * w.cols));
      for (const model::GgufTensor* t : w.sources) {
        const std::vector<float> part = model::dequantize_tensor(*t);
        values.insert(values.end(), part.begin(), part.end());
      }
      const std::string what = fmt::format("weight {} of layer {}", static_cast<int>(w.ref.id), w.ref.layer);
      if (w.is_matrix())
        weights_[w.ref].linear = make_linear(values, w.rows, w.cols, what.c_str());
      else
        weights_[w.ref].values = upload(device_, values, what.c_str());
    };
    const float total = static_cast<float>(config_.layers + 1);
    for (int l = 0; l < config_.layers; ++l) {
      for (const model::GraphWeight& w : model::layer_weights(tensors, config_, l)) place(w);
      if (options.progress) options.progress->report(LoadPhase::weights, static_cast<float>(l + 1) / total);
    }
    for (const model::GraphWeight& w : model::head_weights(tensors, config_)) place(w);
    if (options.progress) options.progress->report(LoadPhase::weights, 1.0f);
  }

  // Grows the scratch to `rows` rows and `meta_ints` metadata values (dropping the graphs that
  // captured the old buffers). Throws Error(out_of_memory) when the device is full.
  void reserve(std::int64_t rows, std::int64_t meta_ints) {
    if (rows <= scratch_.rows && meta_ints <= scratch_.meta_ints) return;
    graphs_.clear();
    rows = std::max(rows, scratch_.rows);
    meta_ints = std::max(meta_ints, scratch_.meta_ints);
    const std::int64_t d = config_.embedding, ffn = config_.ffn;
    const std::int64_t widest_in = std::max({d, q_dim_, ffn});
    const std::int64_t widest_out = std::max({q_dim_ + 2 * kv_dim_, 2 * ffn, static_cast<std::int64_t>(config_.vocab)});
    auto f32 = [&](std::int64_t n, const char* what) {
      return DeviceBuffer(device_, static_cast<std::size_t>(rows * n) * sizeof(float), what);
    };
    scratch_ = {};  // free the old buffers before allocating the new ones
    Scratch s;
    s.rows = rows;
    s.meta_ints = meta_ints;
    s.meta = DeviceBuffer(device_, static_cast<std::size_t>(meta_ints) * sizeof(std::int32_t), "batch metadata");
    s.x = f32(d, "activations");
    s.h = f32(d, "activations");
    s.qkv = f32(q_dim_ + 2 * kv_dim_, "activations");
    s.attn = f32(std::max(q_dim_, d), "activations");
    s.gate_up = f32(2 * ffn, "activations");
    s.act = f32(ffn, "activations");
    for (int set = 0; set < (config_.uniform_rope() ? 1 : 2); ++set) {
      s.cos[set] = f32(config_.rope_dims / 2, "rope angles");
      s.sin[set] = f32(config_.rope_dims / 2, "rope angles");
    }
    s.logits = f32(config_.vocab, "logits");
    if (precision_ == Precision::int8) {
      s.xq = DeviceBuffer(device_, static_cast<std::size_t>(rows * widest_in), "quantized activations");
      s.xs = f32(1, "activation scales");
      s.acc = DeviceBuffer(device_, static_cast<std::size_t>(rows * widest_out) * sizeof(std::int32_t), "GEMM output");
    } else {
      s.xh = DeviceBuffer(device_, static_cast<std::size_t>(rows * widest_in) * sizeof(std::uint16_t), "FP16 activations");
    }
    scratch_ = std::move(s);
  }

  // Flattens the batch into meta_ (see MetaLayout), checking every block id the attention kernel
  // will read: the GPU must never be handed an index outside the pool.
  void pack_meta(const Batch& batch, const KvGeometry& g) {
    const std::int64_t rows = batch.rows();
    const MetaLayout at(rows, static_cast<std::int64_t>(batch.logit_rows.size()));
    meta_.assign(static_cast<std::size_t>(at.block_tables), -1);
    std::copy(batch.tokens.begin(), batch.tokens.end(), meta_.begin() + at.tokens);
    std::copy(batch.positions.begin(), batch.positions.end(), meta_.begin() + at.positions);
    std::copy(batch.slots.begin(), batch.slots.end(), meta_.begin() + at.slots);
    std::copy(batch.logit_rows.begin(), batch.logit_rows.end(), meta_.begin() + at.logit_rows);
    for (const SequenceSlice& s : batch.sequences) {
      const std::int32_t table = static_cast<std::int32_t>(meta_.size() - static_cast<std::size_t>(at.block_tables));
      const std::int32_t last = batch.positions[static_cast<std::size_t>(s.row_begin + s.row_count - 1)];
      for (std::int32_t b = 0; b <= last / g.block_size; ++b) {
        const std::int32_t block = s.block_table[static_cast<std::size_t>(b)];
        if (block < 0 || block >= g.block_count)
          fail(ErrorCode::internal, "batch: block table entry {} = {} outside the pool of {}", b, block, g.block_count);
        meta_.push_back(block);
      }
      std::fill_n(meta_.begin() + at.row_tables + s.row_begin, s.row_count, table);
    }
  }

  // y = x * W^T (+ y when accumulate), x [m, in] on the device.
  void linear(const Linear& l, const float* x, std::int64_t m, float* y, bool accumulate) {
    cudaStream_t s = stream_->get();
    if (precision_ == Precision::int8) {
      k::quantize_rows_s8(x, m, l.in, scratch_.xq.as<std::int8_t>(), scratch_.xs.as<float>(), s);
      if (m <= k::kMaxGemvRows) {  // decode: the fused GEMV, bit-identical to the GEMM below
        k::gemv_s8(scratch_.xq.as<std::int8_t>(), scratch_.xs.as<float>(), l.weights.as<std::int8_t>(),
                   l.scales.as<float>(), m, l.out, l.in, y, accumulate, s);
        return;
      }
      k::gemm_s8(*blas_, scratch_.xq.as<std::int8_t>(), l.weights.as<std::int8_t>(), m, l.out, l.in,
                 scratch_.acc.as<std::int32_t>());
      k::dequantize_s32(scratch_.acc.as<std::int32_t>(), scratch_.xs.as<float>(), l.scales.as<float>(), m,
                        l.out, y, accumulate, s);
    } else {
      k::to_f16(x, m * l.in, scratch_.xh.as<std::uint16_t>(), s);
      k::gemm_f16(*blas_, scratch_.xh.as<std::uint16_t>(), l.weights.as<std::uint16_t>(), m, l.out, l.in, y,
                  accumulate);
    }
  }

  // The whole forward pass on the stream, reading the batch from scratch_.meta (the part a
  // graph records).
  void run(std::int64_t rows, std::int64_t n_out, const KvCache& kv) {
    const KvGeometry& g = kv.geometry();
    step_ = {rows, n_out, &kv, MetaLayout(rows, n_out),
             {g.block_size, config_.kv_heads, config_.head_dim, g.type}};
    model::run_decoder(config_, *this, rows, n_out);
  }

  // ---- the graph's ops (model::DecoderOps) on the stream ----

  const std::int32_t* meta(std::int64_t offset) const { return scratch_.meta.as<std::int32_t>() + offset; }

  float* at(model::Activation a) {
    switch (a) {
      case model::Activation::x: return scratch_.x.as<float>();
      case model::Activation::h: return scratch_.h.as<float>();
      case model::Activation::qkv: return scratch_.qkv.as<float>();
      case model::Activation::attn:
      case model::Activation::logit_input: return scratch_.attn.as<float>();  // free after the layers
      case model::Activation::gate_up: return scratch_.gate_up.as<float>();
      case model::Activation::act: return scratch_.act.as<float>();
      case model::Activation::logits: return scratch_.logits.as<float>();
    }
    return nullptr;
  }

  float* part(model::QkvPart p) { return at(model::Activation::qkv) + (p == model::QkvPart::q ? 0 : q_dim_); }

  [[noreturn]] void missing(const char* op) const {
    fail(ErrorCode::unsupported, "CUDA backend: {} is not implemented for architecture '{}'", op, config_.architecture);
  }

  void embed(float scale) override {
    float* x = at(model::Activation::x);
    k::gather_rows(token_embd_.as<float>(), meta(step_.at.tokens), step_.rows, config_.embedding, x, stream_->get());
    if (scale != 1.0f) k::scale(x, step_.rows * config_.embedding, scale, stream_->get());
  }

  void rope_angles(model::RopeAngleSet set, float base, float position_scale) override {
    const auto i = static_cast<std::size_t>(set);
    k::rope_angles(meta(step_.at.positions), step_.rows, config_.rope_dims, base, rope_freq_factors_.as<float>(),
                   position_scale, scratch_.cos[i].as<float>(), scratch_.sin[i].as<float>(), stream_->get());
  }

  void rmsnorm(model::WeightRef weight, model::Activation in, model::Activation out, std::int64_t rows) override {
    k::rmsnorm(at(in), weights_[weight].values.as<float>(), rows, config_.embedding, config_.rms_eps, at(out),
               stream_->get());
  }

  void rmsnorm_heads(model::WeightRef weight, model::QkvPart p) override {
    const int heads = p == model::QkvPart::q ? config_.heads : config_.kv_heads;
    k::rmsnorm_heads(part(p), step_.rows, q_dim_ + 2 * kv_dim_, heads, config_.head_dim,
                     weights_[weight].values.as<float>(), config_.rms_eps, stream_->get());
  }

  void linear(model::WeightRef weight, model::Activation in, model::Activation out, std::int64_t rows,
              bool accumulate) override {
    linear(weights_[weight].linear, at(in), rows, at(out), accumulate);
  }

  void linear_outputs(model::WeightRef weight, model::Activation in, model::Activation out, std::int64_t rows,
                      std::int64_t begin, std::int64_t end, bool accumulate) override {
    const Linear& l = weights_[weight].linear;
    if (begin != 0 || end != l.out) missing("a linear in pieces");
    linear(l, at(in), rows, at(out), accumulate);
  }

  void add_bias(model::WeightRef bias, model::Activation a) override {
    EMBER_ASSERT(a == model::Activation::qkv);
    k::add_bias(at(a), step_.rows, q_dim_ + 2 * kv_dim_, weights_[bias].values.as<float>(), stream_->get());
  }

  // Post-norms add a normed product into the residual stream x, [rows, embedding] both.
  void add(model::Activation from, model::Activation into) override {
    EMBER_ASSERT(into == model::Activation::x);
    k::add(at(from), at(into), step_.rows * config_.embedding, stream_->get());
  }

  void rope(model::QkvPart p, model::RopeAngleSet set) override {
    const int heads = p == model::QkvPart::q ? config_.heads : config_.kv_heads;
    const auto i = static_cast<std::size_t>(set);
    k::rope(part(p), step_.rows, q_dim_ + 2 * kv_dim_, heads, config_.head_dim, config_.rope_dims,
            scratch_.cos[i].as<float>(), scratch_.sin[i].as<float>(), config_.rope_layout, stream_->get());
  }

  void store_kv(int layer) override {
    k::store_kv(part(model::QkvPart::k), part(model::QkvPart::k) + kv_dim_, q_dim_ + 2 * kv_dim_, step_.rows,
                meta(step_.at.slots), step_.layout, step_.kv->keys(layer), step_.kv->values(layer), stream_->get());
  }

  void attention(int layer, int window, float scale, std::int64_t row_begin, std::int64_t row_end) override {
    if (row_begin != 0 || row_end != step_.rows) missing("attention in pieces");
    k::paged_attention(part(model::QkvPart::q), q_dim_ + 2 * kv_dim_, meta(step_.at.positions),
                       meta(step_.at.row_tables), meta(step_.at.block_tables), step_.rows, config_.heads,
                       step_.layout, step_.kv->keys(layer), step_.kv->values(layer), window, scale,
                       at(model::Activation::attn), q_dim_, stream_->get());
  }

  void gated_activation(model::FeedForward kind) override {
    if (kind == model::FeedForward::geglu)
      k::gelu_mul(at(model::Activation::gate_up), step_.rows, config_.ffn, at(model::Activation::act), stream_->get());
    else
      k::silu_mul(at(model::Activation::gate_up), step_.rows, config_.ffn, at(model::Activation::act), stream_->get());
  }

  void gather_logit_rows() override {
    k::gather_rows(at(model::Activation::x), meta(step_.at.logit_rows), step_.n_out, config_.embedding,
                   at(model::Activation::logit_input), stream_->get());
  }

  // What the ops of one step read.
  struct Step {
    std::int64_t rows = 0, n_out = 0;
    const KvCache* kv = nullptr;
    MetaLayout at{0, 0};
    k::KvLayout layout{};
  };

  model::ModelConfig config_;
  int device_;
  Precision precision_;
  bool use_graphs_;
  int threads_;
  std::int64_t q_dim_ = 0, kv_dim_ = 0;
  std::unique_ptr<Stream> stream_;
  std::unique_ptr<k::Blas> blas_;
  DeviceBuffer token_embd_;
  DeviceBuffer rope_freq_factors_;  // null (all factors 1) unless the model has rope_freqs.weight
  model::WeightTable<DeviceWeight> weights_;
  Step step_;
  Scratch scratch_;
  std::vector<std::int32_t> meta_;
  GraphCache graphs_;
  const void* graph_kv_ = nullptr;  // the KV cache the graphs were captured with
  KvGeometry graph_kv_geometry_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(std::shared_ptr<const model::GgufFile> file,
                                           const model::ModelConfig& config,
                                           const BackendOptions& options, bool use_graphs) {
  return std::make_unique<CudaBackend>(std::move(file), config, options, use_graphs);
}

}  // namespace ember::backend::cuda
