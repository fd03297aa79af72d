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
#include "model/lora_adapter.hpp"
#include "model/model_config.hpp"
#include "util/check.hpp"

#include <ember/ember.hpp>

#include <chrono>
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

  // The same forward pass in pieces, for a host with a frame budget: begin_forward() sets it
  // up, each advance_forward() runs pieces of it (a stage of a layer, or a part of a matrix
  // product or of attention: model::Stage) until the pass is done (true: the logits are written)
  // or the next piece would end past `deadline` (false: call again). Every call runs at least one
  // piece, so the pass always progresses, and the result is bit-identical to forward(). batch,
  // kv, logits and hidden must stay untouched until the pass is done, and no other forward may
  // start in between. A device whose ops can stop inside a pass hands both to a
  // model::PassRunner (model/decoder_runner.hpp); the default runs the whole pass in the first
  // call (a device that records the pass as one graph cannot stop inside it).
  // `hidden`: where the hidden states of batch.hidden_rows go (embedding sequences, in that
  // order; after the final norm where the model has one; [hidden rows, embedding] floats,
  // resized), from the same pass that computes the logit rows' logits; null when the batch has
  // none. Hidden rows on a device without them (computes_hidden() false): Error(unsupported).
  virtual void begin_forward(const Batch& batch, KvCache& kv, std::vector<float>& logits, std::vector<float>* hidden) {
    check_hidden(batch, hidden);
    staged_ = {&batch, &kv, &logits};
  }
  virtual bool advance_forward(std::chrono::steady_clock::time_point deadline) {
    (void)deadline;
    forward(*staged_.batch, *staged_.kv, *staged_.logits);
    return true;
  }
  // Whether begin_forward() returns hidden states (embedding sequences run on this device).
  virtual bool computes_hidden() const { return false; }

  // A LoRA adapter in the form this backend's forward() applies (SequenceSlice::adapters):
  // what the backend changed in its weights at load (the CPU's INT8 smoothing) applied to the
  // adapter's matrices too. Throws Error(unsupported) on a device without adapters.
  virtual std::shared_ptr<const model::LoraAdapter> prepare_adapter(const model::LoraAdapter& adapter) const {
    (void)adapter;
    fail(ErrorCode::unsupported, "backend '{}' does not run LoRA adapters; use the CPU", name());
  }

  virtual const model::ModelConfig& config() const = 0;
  virtual std::string name() const = 0;
  // How the matrices are held (ModelInfo::weight_format), and the bytes of them a decode step
  // reads (ModelInfo::decode_weight_bytes; 0: not known).
  virtual std::string weight_format() const = 0;
  virtual std::uint64_t decode_weight_bytes() const { return 0; }
  // ModelInfo::cpu_tier: the CPU kernels' tier (kernels/cpu/cpu_tier.hpp); empty off the CPU.
  virtual std::string cpu_tier() const { return {}; }
  // A mixture-of-experts model's routing since the backend was made (EngineStats::routed_layers
  // and experts_run): zeros for a dense model. May be read while a forward() runs.
  struct RoutingTotals {
    std::uint64_t layers = 0;   // routed layers run, once per layer and step
    std::uint64_t experts = 0;  // the distinct experts each of them ran, summed
  };
  virtual RoutingTotals routing_totals() const { return {}; }

  // The KV pool this backend's forward() reads and writes: host memory by default, device
  // memory on a GPU. Throws Error(out_of_memory) when it cannot be allocated.
  virtual std::unique_ptr<KvCache> make_kv_cache(const KvGeometry& geometry) const {
    return std::make_unique<KvCache>(geometry);
  }

 protected:
  void check_hidden(const Batch& batch, const std::vector<float>* hidden) const {
    if (batch.hidden_rows.empty()) return;
    if (!computes_hidden())
      fail(ErrorCode::unsupported, "backend '{}' does not compute embeddings; use the CPU", name());
    if (hidden == nullptr) fail(ErrorCode::internal, "a batch with hidden rows but nowhere to write them");
  }

 private:
  struct Staged {
    const Batch* batch = nullptr;
    KvCache* kv = nullptr;
    std::vector<float>* logits = nullptr;
  };
  Staged staged_;
};

struct BackendOptions {
  Device device = Device::cpu();
  Precision precision = Precision::int8;
  WeightFormat weight_format = WeightFormat::automatic;  // the CPU's INT8 path only
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

}  // namespace ember::backend
