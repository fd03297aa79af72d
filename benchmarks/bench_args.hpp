// ember-bench's command line: the configurations and workloads to run (ember_bench.cpp says
// what each workload measures).
#pragma once

#include <ember/ember.hpp>

#include <string>
#include <vector>

namespace ember::bench {

struct Args {
  std::string model;
  ember::Device device = ember::Device::cpu();
  int threads = 2;
  // Engine configurations: int8 (the default weight format), w8a8 (int8 with every matrix
  // INT8), fp32, fp16.
  std::vector<std::string> precisions{"int8", "fp32"};
  std::vector<std::string> workloads{"pp512", "tg128"};
  bool both_precisions = true;
  int repeats = 5;
  int requests = 32;
  int turns = 8;
  std::string configs = "abcd";
  int speculative_tokens = 8;
  bool bandwidth = true;
  std::string json_path;
  std::string lora;  // a LoRA adapter every pp512/tg128/tg128x32 request runs with; empty: none
};

// The flags (--help lists them); throws std::invalid_argument on a bad value, exits on --help.
Args parse_args(int argc, char** argv);

// Writes --json's results; Error(io) when the file cannot be written whole.
void write_json(const std::string& path, const std::string& text);

}  // namespace ember::bench
