// Load progress for EngineOptions::on_load_progress: turns "phase P is x done" into one overall
// fraction that only grows, and turns a callback's `false` into Error(cancelled) so that the
// loader unwinds (and frees) through its ordinary RAII.
//
// The overall fraction splits [0, 1] between the phases in proportion to their expected share
// of the load time (measured on the default model, see load_progress.cpp). A loader that learns
// its path late (a warm weight cache skips three phases) calls plan() to split what is left.
//
// Thread-safety: none; it lives on the thread that runs open().
#pragma once

#include <ember/ember.hpp>

#include <initializer_list>
#include <utility>
#include <vector>

namespace ember::backend {

class LoadProgress {
 public:
  explicit LoadProgress(LoadProgressCallback callback = {});

  // Shares the rest of the load, [the fraction reported so far, 1], between `phases` in
  // proportion to their weights. Phases left out of the plan no longer advance the fraction.
  void plan(std::initializer_list<std::pair<LoadPhase, float>> phases);
  // plan() of the phases that prepare weights from the model (weights to cache), as after the
  // tokenizer of a cold load: for a loader that started another path and fell back.
  void plan_preparation();

  // `fraction` (clamped to [0, 1]) of `phase` is done. Throws Error(cancelled) when the
  // callback returns false.
  void report(LoadPhase phase, float fraction);

  // The load is complete: reports 1 in the last phase reported.
  void finish();

 private:
  struct Span {
    LoadPhase phase;
    float begin, end;
  };
  LoadProgressCallback callback_;
  std::vector<Span> spans_;
  float reported_ = 0;
  LoadPhase last_phase_ = LoadPhase::reading;
};

}  // namespace ember::backend
