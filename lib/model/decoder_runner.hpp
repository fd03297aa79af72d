// A forward pass of the decoder graph (decoder_graph.hpp) run in pieces that end by a deadline,
// for a host with a frame budget (Engine::step(budget)), on any device whose DecoderOps can stop
// inside a pass. The runner knows no device: it learns what each stage costs on the ops it drives
// and asks the ops only how finely they may split a stage (DecoderOps::output_granule,
// attention_row_granule). A device that cannot split runs each stage whole, and one that cannot
// stop at all (a pass recorded as one graph) does not use a runner.
//
// Thread-safety: one runner drives one pass at a time, on the thread that calls advance().
#pragma once

#include "model/decoder_graph.hpp"
#include "model/model_config.hpp"

#include <array>
#include <chrono>
#include <cstdint>
#include <span>

namespace ember::model {

class PassRunner {
 public:
  using Clock = std::chrono::steady_clock;

  explicit PassRunner(const ModelConfig& config) : config_(config) {}

  // Starts a pass over `ops`, which the device has set up for the step already: `positions` holds
  // each row's position (what a row of attention costs grows with it) and must stay valid until the
  // pass is done; `logit_rows` rows need logits, `hidden_rows` their hidden states (run_head).
  // Runs the step's start (model::begin_step).
  void begin(DecoderOps& ops, std::span<const std::int32_t> positions, std::int64_t logit_rows,
             std::int64_t hidden_rows = 0);

  // Runs the pass's stages in order, the splittable ones (StageWork) in parts sized to end by
  // `deadline`, from what a unit of the stage last cost in this pass (or the last of as many rows).
  // Stops before a stage or part that does not fit; every call runs at least one part, so the
  // pass progresses. True when the pass is done. Clock::time_point::max(): the rest of the pass,
  // each stage whole.
  bool advance(Clock::time_point deadline);

 private:
  struct Part {  // the next piece: a stage of a layer (-1: the head) and its first unit not run yet
    int layer = 0;
    Stage stage = Stage::attention_norm;
    std::int64_t rows = 0;
    StageWork work;
  };
  // What a stage's parts cost: seconds per unit of weight (units_weight), from the parts run so
  // far in this pass (or the last of as many rows), each counted by its weight and the older
  // ones less; the extra of a product's first part, which also quantizes the product's input
  // (of a routed stage's: routes the rows); and the extra of a routed stage's last part, which
  // sums each row's experts.
  struct StageCost {
    double seconds = 0, weight = 0;  // decayed sums over the parts measured
    double first_part = 0, last_part = 0;
    bool known() const { return weight > 0; }
    double unit() const { return seconds / weight; }
    void learn(const StageWork& work, bool first, bool last, double seconds, double weight);
  };

  bool next_part(Part& part);
  std::int64_t units_to_run(const Part& part, Clock::time_point deadline, bool ran) const;
  std::int64_t granule(const Part& part, std::int64_t left) const;
  double units_weight(const Part& part, std::int64_t begin, std::int64_t end) const;

  const ModelConfig& config_;
  DecoderOps* ops_ = nullptr;
  std::span<const std::int32_t> positions_;
  std::int64_t rows_ = -1, logit_rows_ = -1, hidden_rows_ = -1;
  int layer_ = 0;               // the next stage's layer; config_.layers: the head
  std::size_t stage_ = 0;       // the next stage, in kLayerStages or kHeadStages
  std::int64_t next_unit_ = 0;  // the next stage's first unit not run yet
  std::array<StageCost, static_cast<std::size_t>(Stage::lm_head) + 1> costs_{};
};

}  // namespace ember::model
