#include "bench_args.hpp"

#include "../examples/common/cli.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace ember::bench {
namespace {

// --workload: one name or a comma-separated list (e.g. pp512,tg128,tg128x32); all = pp512,tg128;
// shared, chat and load only alone.
std::vector<std::string> parse_workloads(const std::string& list) {
  std::vector<std::string> workloads;
  for (std::size_t at = 0; at <= list.size();) {
    const std::size_t end = std::min(list.find(',', at), list.size());
    const std::string w = list.substr(at, end - at);
    if (w == "pp512" || w == "tg128" || w == "tg128x32" ||
        ((w == "shared" || w == "chat" || w == "load" || w == "frames" || w == "json" || w == "edit" ||
          w == "longctx" || w == "newlen" || w == "embed") &&
         list == w))
      workloads.push_back(w);
    else if (w == "all")
      workloads.insert(workloads.end(), {"pp512", "tg128"});
    else
      throw std::invalid_argument(
          "--workload must be pp512, tg128, tg128x32 (or a list of them), all, shared, chat, load, frames, json, edit, "
          "longctx, newlen or embed");
    at = end + 1;
  }
  return workloads;
}

}  // namespace

Args parse_args(int argc, char** argv) {
  Args a;
  ember_examples::EngineFlags engine_flags;
  engine_flags.options.threads = a.threads;
  bool no_bandwidth = false;
  ember_examples::CommandLine cli(
      "ember-bench",
      "End-to-end throughput of the public API on a model, as ratios you can trust: every "
      "configuration runs in the same process, interleaved, repeated, and reported as median, min "
      "and max. The workloads are described at the top of benchmarks/ember_bench.cpp.");
  engine_flags.declare(cli, ember_examples::EngineFlags::model | ember_examples::EngineFlags::threads);
  cli.option("--lora", "PATH", a.lora,
             "a LoRA adapter (llama.cpp's GGUF) that every pp512, tg128 and tg128x32 request runs with, at scale 1",
             "none");
  cli.option("--device", "cpu|cuda", "where the model runs; cuda: the first GPU", "cpu",
             [&a](const std::string& d) {
               if (d == "cuda")
                 a.device = ember::Device::cuda(0);
               else if (d == "cpu")
                 a.device = ember::Device::cpu();
               else
                 throw std::invalid_argument("--device must be cpu or cuda");
             })
      .option("--precision", "P[,...]",
              "numeric paths to compare, interleaved: int8 (its default weight format), w8a8 (int8 "
              "with every matrix INT8), fp32, fp16, or both: int8 and the device's baseline (fp32 "
              "on the CPU, fp16 on CUDA)",
              "both",
              [&a](const std::string& list) {
                a.both_precisions = list == "both";
                if (a.both_precisions) return;
                a.precisions.clear();
                for (std::size_t at = 0; at <= list.size();) {
                  const std::size_t end = std::min(list.find(',', at), list.size());
                  const std::string p = list.substr(at, end - at);
                  if (p != "int8" && p != "w8a8" && p != "fp32" && p != "fp16")
                    throw std::invalid_argument("--precision takes int8, w8a8, fp32, fp16 (or a list of them) or both");
                  a.precisions.push_back(p);
                  at = end + 1;
                }
              })
      .option("--workload", "W[,...]",
              "pp512, tg128, tg128x32 or a comma-separated list of them; all = pp512,tg128; or "
              "one of shared, chat, load, frames, json, edit, longctx, newlen, embed",
              "pp512,tg128", [&a](const std::string& list) { a.workloads = parse_workloads(list); })
      .option("--repeats", "R", a.repeats, "runs of each configuration (cold start: of each load)")
      .option("--requests", "N", a.requests, "requests arriving together in the shared workload")
      .option("--configs", "LETTERS",
              "configurations of the shared and chat workloads, among a (fp32 one at a time), b "
              "(int8 one at a time), c (int8, batching), d (int8, batching, prefix cache), e (d "
              "with --speculative-tokens)",
              a.configs,
              [&a](const std::string& letters) {
                if (letters.empty() || letters.find_first_not_of("abcde") != std::string::npos)
                  throw std::invalid_argument("--configs takes letters among a, b, c, d, e");
                a.configs = letters;
              })
      .option("--turns", "N", a.turns, "turns of the chat conversation")
      .option("--speculative-tokens", "K", a.speculative_tokens,
              "draft tokens per step when speculation is on (edit workload, shared config e)")
      .flag("--no-bandwidth", no_bandwidth,
            "skip the memory-bandwidth probe and its 1 GiB buffer (when peak memory is measured)")
      .option("--json", "FILE", a.json_path, "also write the results to FILE as JSON");
  cli.parse(argc, argv);
  a.model = engine_flags.model_path;
  ember_examples::require_model_file(cli.program(), a.model);
  a.threads = engine_flags.options.threads;
  if (a.repeats < 1 || a.requests < 1 || a.turns < 1) cli.fail("--repeats, --requests and --turns must be at least 1");
  // Refused now rather than after minutes of measuring whose results would then be lost.
  if (!a.json_path.empty()) {
    std::error_code ec;
    const bool existed = std::filesystem::exists(a.json_path, ec);
    if (!std::ofstream(a.json_path, std::ios::app)) cli.fail("--json: cannot write " + a.json_path);
    if (!existed) std::filesystem::remove(a.json_path, ec);  // the probe leaves nothing behind
  }
  a.bandwidth = !no_bandwidth;
  if (a.both_precisions && a.device.type == ember::DeviceType::cuda) a.precisions = {"int8", "fp16"};
  return a;
}

void write_json(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text << "\n";
  out.close();
  if (!out) throw ember::Error(ember::ErrorCode::io, "cannot write the results to " + path);
}

}  // namespace ember::bench
