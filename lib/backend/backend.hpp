// The Backend interface: one implementation per device and precision, all running the same
// decoder graph (model/decoder_graph.hpp) over a flattened Batch and a paged KvCache.
//
// Thread-safety: a backend's weights are immutable after construction, but forward() uses
// per-backend scratch buffers: calls must not overlap (the engine serialises them).
#pragma once

#include "backend/batch.hpp"
#include "backend/kv_cache.hpp"
#include "backend/load_progress.hpp"
#include "model/gguf.hpp"
#include "model/model_config.hpp"

#include <ember/ember.hpp>

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ember::backend {

class Backend {
 public:
  virtual ~Backend() = default;

  // Runs the model over every row of `batch`: writes each row's K/V into its slot of `kv`, and
  // writes the logits of `batch.logit_rows` (in that order) into `logits` ([n, vocab] floats,
  // resized by the backend when too small).
  virtual void forward(const Batch& batch, KvCache& kv, std::vector<float>& logits) = 0;

  virtual const model::ModelConfig& config() const = 0;
  virtual std::string name() const = 0;

  // The KV pool this backend's forward() reads and writes: host memory by default, device
  // memory on a GPU. Throws Error(out_of_memory) when it cannot be allocated.
  virtual std::unique_ptr<KvCache> make_kv_cache(const KvGeometry& geometry) const {
    return std::make_unique<KvCache>(geometry);
  }
};

struct BackendOptions {
  Device device = Device::cpu();
  Precision precision = Precision::int8;
  int threads = 0;
  // The most rows a forward() is expected to get (the engine's token budget): a GPU backend
  // allocates its scratch for this many at open, so running out of memory fails there.
  int max_batch_rows = 512;
  // The model's tokenizer, lent for the load: the INT8 path tokenizes its own calibration text
  // (backend/cpu/calibration_text.hpp) with it and observes the activation ranges of that text
  // to smooth them (backend/cpu/smoothing.hpp). Null: no smoothing.
  std::function<std::vector<std::int32_t>(std::string_view text)> tokenize;
  // Load progress (phases and cancellation); null = not reported.
  LoadProgress* progress = nullptr;
  // INT8 only: the directory of the packed-weight cache (backend/cpu/weight_cache.hpp); "" = off.
  std::string weight_cache_dir;
  LogCallback log;  // where the cache reports a file it could not use or write
};

// The CPU backends: Precision::fp32 gives the readable reference (backend/cpu/reference.cpp),
// Precision::int8 the optimised INT8 path (backend/cpu/kernel_backend.cpp).
std::unique_ptr<Backend> make_cpu_backend(std::shared_ptr<const model::GgufFile> file,
                                          const model::ModelConfig& config,
                                          const BackendOptions& options);

// The backend of options.device: make_cpu_backend, or the CUDA backend (backend/cuda) when ember
// was built with it. Throws Error(unsupported) for a precision the device does not have (fp16 on
// the CPU, fp32 on CUDA) or for CUDA in a build without it.
std::unique_ptr<Backend> make_backend(std::shared_ptr<const model::GgufFile> file,
                                      const model::ModelConfig& config,
                                      const BackendOptions& options);

}  // namespace ember::backend
