#include "backend/cuda/cuda_backend.hpp"

#include "backend/cuda/cuda_ops.hpp"
#include "backend/cuda/decode_graph.hpp"
#include "backend/cuda/device_memory.hpp"

#include "kernels/cpu/quantize.hpp"
#include "kernels/cuda/check.hpp"
#include "kernels/cuda/gemm.hpp"
#include "kernels/cuda/ops.hpp"
#include "model/decoder_graph.hpp"
#include "util/check.hpp"
#include "util/fp16.hpp"

#include <algorithm>
#include <cstring>

namespace ember::backend::cuda {
namespace {

namespace k = ember::kernels::cuda;
using k::check_cuda;

// Batches of at most this many rows replay CUDA graphs (decode steps and short prefill chunks);
// larger ones are long enough that launch overhead does not matter.
constexpr std::int64_t kMaxGraphRows = 64;

// Places the weights on the device and runs the decoder graph (model/decoder_graph.hpp) over
// CudaOps on the backend's stream: the whole pass is what a CUDA graph records, so it cannot
// stop inside a pass and keeps Backend's default begin_forward/advance_forward.
class CudaBackend final : public Backend {
 public:
  CudaBackend(std::shared_ptr<const model::GgufFile> file, const model::ModelConfig& config,
              const BackendOptions& options, bool use_graphs)
      : config_(config),
        device_(options.device.index),
        precision_(options.precision),
        use_graphs_(use_graphs),
        threads_(options.threads) {
    check_shapes();
    check_device(device_);
    DeviceGuard guard(device_);
    stream_ = std::make_unique<Stream>();
    blas_ = std::make_unique<k::Blas>(stream_->get());
    load_weights(*file, options);
    ops_ = std::make_unique<CudaOps>(CudaModel{&config_, &weights_, &token_embd_, &rope_freq_factors_}, device_,
                                     precision_, stream_->get(), *blas_);
    ops_->reserve(std::max(1, options.max_batch_rows), 1 << 16);
  }

  ~CudaBackend() override {
    try {
      DeviceGuard guard(device_);  // the handles below belong to device_
      graphs_.clear();
      ops_.reset();
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
    if (g.dtype == KvCacheType::int8)
      fail(ErrorCode::unsupported,
           "KvCacheType::int8 is not implemented on the CUDA backend yet; "
           "use f16 or f32 there (int8 KV runs on the CPU backend)");
    const std::size_t layer_bytes =
        g.bytes_per_block() * static_cast<std::size_t>(g.block_count) / (2 * static_cast<std::size_t>(g.layers));
    auto pool =
        std::make_shared<DeviceBuffer>(device_, layer_bytes * 2 * static_cast<std::size_t>(g.layers), "the KV cache");
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
    if (ops_->reserve(rows, static_cast<std::int64_t>(meta_.size()))) graphs_.clear();  // they hold the old buffers
    check_cuda(cudaMemcpyAsync(ops_->meta(), meta_.data(), meta_.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice,
                               stream_->get()),
               "upload the batch");
    // The whole pass on the stream, reading the batch from ops_->meta(): what a graph records.
    const auto record = [&] {
      ops_->begin(rows, n_out, kv);
      model::run_decoder(config_, *ops_, rows, n_out);
    };
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
      check_cuda(cudaMemcpyAsync(logits.data(), ops_->logits(), logits.size() * sizeof(float), cudaMemcpyDeviceToHost,
                                 stream_->get()),
                 "download the logits");
    stream_->synchronize();
  }

 private:
  bool same_cache(const KvCache& kv) const {
    const KvGeometry& a = kv.geometry();
    const KvGeometry& b = graph_kv_geometry_;
    return graph_kv_ == kv.keys(0) && a.block_size == b.block_size && a.block_count == b.block_count &&
           a.dtype == b.dtype;
  }

  void check_shapes() const {
    const auto& c = config_;
    if (precision_ == Precision::fp32)
      fail(ErrorCode::unsupported, "precision fp32 runs on the CPU only; on CUDA use int8 or fp16");
    if (c.norm_after_residual || !c.has_lm_head)
      fail(ErrorCode::unsupported, "CUDA backend: encoder models ('{}') run on the CPU only", c.architecture);
    // The graph's every op runs here but a second set of RoPE frequency factors (Phi-3's
    // LongRoPE switches sets by context): refuse, never approximate.
    if (!c.rope_freq_factors_long.empty())
      fail(ErrorCode::unsupported,
           "CUDA backend: architecture '{}' needs LongRoPE's second factor set, which the "
           "CUDA backend does not run yet; use the CPU",
           c.architecture);
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
            fail(ErrorCode::unsupported, "CUDA INT8 GEMMs need widths that are multiples of 4 (got {} x {}); use fp16",
                 n, in);
    }
  }

  DeviceLinear make_linear(const std::vector<float>& w, std::int64_t out, std::int64_t in, const char* what) const {
    DeviceLinear l;
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
    token_embd_ = upload(device_, model::dequantize_tensor(*tensors.token_embd), "token_embd");
    if (!config_.rope_freq_factors.empty())
      rope_freq_factors_ = upload(device_, config_.rope_freq_factors, "rope_freqs");
    weights_ = DeviceWeights(config_.layers);
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

  model::ModelConfig config_;
  int device_;
  Precision precision_;
  bool use_graphs_;
  int threads_;
  std::unique_ptr<Stream> stream_;
  std::unique_ptr<k::Blas> blas_;
  DeviceBuffer token_embd_;
  DeviceBuffer rope_freq_factors_;  // null (all factors 1) unless the model has rope_freqs.weight
  DeviceWeights weights_;
  std::unique_ptr<CudaOps> ops_;
  std::vector<std::int32_t> meta_;
  GraphCache graphs_;
  const void* graph_kv_ = nullptr;  // the KV cache the graphs were captured with
  KvGeometry graph_kv_geometry_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(std::shared_ptr<const model::GgufFile> file,
                                           const model::ModelConfig& config, const BackendOptions& options,
                                           bool use_graphs) {
  return std::make_unique<CudaBackend>(std::move(file), config, options, use_graphs);
}

}  // namespace ember::backend::cuda
