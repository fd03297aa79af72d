// The cold-start workload of ember-bench: how long Engine::open() takes without and with the
// packed-weight cache, where that time goes, and the time from open() to the first token.
#pragma once

#include <ember/ember.hpp>

#include <map>
#include <string>
#include <vector>

namespace ember::bench {

struct LoadRun {
  double open_ms = 0;                      // Engine::open()
  double first_token_ms = 0;               // open() start to the first token of a chat prompt
  std::map<std::string, double> phase_ms;  // time in each LoadPhase, from the progress callback
  double peak_rss_mb = 0;                  // the process's peak resident memory during open()
  double resident_mb = 0;                  // resident memory right after open()
};

struct LoadResult {
  std::vector<LoadRun> cold;  // no cache file: the weights are prepared and the cache written
  std::vector<LoadRun> warm;  // the cache file from the cold run before
};

// Peak and resident memory come from /proc/self/status (VmHWM, VmRSS); the peak is reset
// before each open (/proc/self/clear_refs), so each run's peak is its own. 0 where the kernel
// does not say.
// `repeats` cold and warm opens, interleaved (cold, warm, cold, warm...), each cold one with a
// fresh cache directory in the system's temporary directory, removed afterwards.
// `base`: the engine options of every open (threads, precision, weight format).
LoadResult run_load(const std::string& model, const EngineOptions& base, int repeats);

// A "Vm...: 123 kB" line of /proc/self/status (e.g. "VmHWM", the peak resident memory), in MiB;
// 0 where the kernel does not say.
double status_mb(const std::string& key);

}  // namespace ember::bench
