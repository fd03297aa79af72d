// ember-inspect MODEL.gguf: metadata (long arrays summarised), the hyper-parameters ember reads
// and the tensor table; with --template, the chat template ember renders for the file (its own,
// or its architecture's default) as it is. Exits 1 with the error message on a file ember
// rejects (--help for usage).
#include "../common/cli.hpp"
#include "kernels/cpu/cpu_tier.hpp"
#include "model/gguf.hpp"
#include "model/model_config.hpp"
#include "tokenizer/chat_template.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <string>

using namespace ember::model;

namespace {

constexpr std::size_t kShownElements = 6;  // array elements printed before "..."
constexpr std::size_t kShownChars = 96;    // string characters printed before "..."

std::string quoted(std::string_view s) {
  std::string out = "\"";
  for (char c : s.substr(0, kShownChars)) {
    if (c == '\n')
      out += "\\n";
    else if (c == '"')
      out += "\\\"";
    else
      out += c;
  }
  out += s.size() > kShownChars ? fmt::format("\"... ({} bytes)", s.size()) : "\"";
  return out;
}

std::string scalar_text(const GgufValue& v) {
  switch (v.type) {
    case GgufType::u8:
    case GgufType::u16:
    case GgufType::u32:
    case GgufType::u64: return std::to_string(v.scalar.u);
    case GgufType::i8:
    case GgufType::i16:
    case GgufType::i32:
    case GgufType::i64: return std::to_string(v.scalar.i);
    case GgufType::f32: return fmt::format("{}", static_cast<float>(v.scalar.f));
    case GgufType::f64: return fmt::format("{}", v.scalar.f);
    case GgufType::boolean: return v.scalar.b ? "true" : "false";
    case GgufType::string: return quoted(v.str);
    case GgufType::array: break;
  }
  return "?";
}

std::string value_text(const GgufValue& v) {
  if (v.type != GgufType::array) return scalar_text(v);
  std::string out = fmt::format("[{} x {}]", v.elements.size(), to_string(v.element_type));
  const std::size_t shown = std::min(v.elements.size(), kShownElements);
  for (std::size_t k = 0; k < shown; ++k) out += (k == 0 ? " " : ", ") + value_text(v.elements[k]);
  if (v.elements.size() > shown) out += ", ...";
  return out;
}

void print_config(const GgufFile& file) {
  try {
    const ModelConfig c = read_model_config(file);
    fmt::print("\nhyper-parameters:\n");
    fmt::print("  {:<16}{}\n  {:<16}{}\n", "architecture", c.architecture, "name", c.name);
    fmt::print("  {:<16}{}\n  {:<16}{}\n  {:<16}{}\n", "layers", c.layers, "embedding", c.embedding, "ffn", c.ffn);
    fmt::print("  {:<16}{}\n  {:<16}{}\n  {:<16}{}\n", "heads", c.heads, "kv_heads", c.kv_heads, "head_dim",
               c.head_dim);
    fmt::print("  {:<16}{}\n  {:<16}{}\n  {:<16}{}\n", "rope_dims", c.rope_dims, "rope_base", c.rope_base,
               "rope_layout", c.rope_layout == RopeLayout::half ? "half (NeoX)" : "interleaved");
    fmt::print("  {:<16}{}\n  {:<16}{}\n  {:<16}{}\n", "rms_eps", c.rms_eps, "context_length", c.context_length,
               "vocab", c.vocab);
    fmt::print("  {:<16}{}\n  {:<16}{}\n", "tied_embeddings", c.tied_embeddings, "attention_bias", c.attention_bias);
    fmt::print("  {:<16}{}\n  {:<16}{}\n  {:<16}{}\n  {:<16}{}\n", "qk_norm", c.qk_norm, "post_norms", c.post_norms,
               "feed_forward", c.feed_forward == ember::model::FeedForward::geglu ? "geglu" : "swiglu",
               "embedding_scale", c.embedding_scale);
    if (c.sliding_window > 0)
      fmt::print("  {:<16}{} keys on the sliding layers (all but every {}th), RoPE base {} on them\n", "sliding_window",
                 c.sliding_window, c.sliding_window_pattern, c.rope_base_sliding);
    if (c.rope_scaling_factor != 1.0f || !c.rope_freq_factors.empty())
      fmt::print("  {:<16}{} x{}{}\n", "rope_scaling",
                 c.rope_scaling == ember::model::RopeScaling::linear ? "linear" : "none", c.rope_scaling_factor,
                 c.rope_freq_factors.empty() ? "" : fmt::format(", {} frequency factors", c.rope_freq_factors.size()));
  } catch (const ember::Error& e) {
    // A well-formed file of another architecture is still worth listing.
    fmt::print("\nhyper-parameters: not available ({}: {})\n", ember::to_string(e.code()), e.what());
  }
}

void print_tensors(const GgufFile& file) {
  std::size_t width = 4;
  for (const GgufTensor& t : file.tensors()) width = std::max(width, t.name.size());
  fmt::print("\ntensors ({}):\n  {:<{}}  {:<5}  {:<22}  {:>12}\n", file.tensors().size(), "name", width, "type",
             "shape", "bytes");
  std::uint64_t bytes = 0, params = 0;
  for (const GgufTensor& t : file.tensors()) {
    fmt::print("  {:<{}}  {:<5}  {:<22}  {:>12}\n", t.name, width, ggml_type_info(t.type).name,
               fmt::format("[{}]", fmt::join(t.shape, ", ")), t.nbytes);
    bytes += t.nbytes;
    params += static_cast<std::uint64_t>(t.numel());
  }
  fmt::print("  total: {} bytes, {} parameters\n", bytes, params);
}

// The tier ember's CPU kernels would run this file at on this machine (kernels/cpu/cpu_tier.hpp).
void print_cpu_tier() {
  namespace k = ember::kernels::cpu;
  fmt::print("\ncpu tier: {} (this CPU: {}", k::to_string(k::active_tier()), k::to_string(k::detected_tier()));
  if (!k::cpu_tier_cap_error().empty())
    fmt::print("; EMBER_CPU_ISA={} names no tier and was ignored", k::cpu_tier_cap_error());
  else if (k::active_tier() != k::detected_tier())
    fmt::print("; capped by EMBER_CPU_ISA");
  fmt::print(")\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::string path;
  ember_examples::CommandLine cli(
      "ember-inspect",
      "Prints a GGUF file's metadata (long arrays summarised), the hyper-parameters ember reads "
      "from it and its tensor table.",
      "[flags] MODEL.gguf");
  cli.positional("MODEL.gguf", path,
                 "the GGUF file to inspect, e.g. the default model that scripts/fetch-model.sh "
                 "caches");
  bool show_template = false;
  cli.flag("--template", show_template,
           "print only the chat template ember renders for the file (the file's "
           "tokenizer.chat_template, or its architecture's default), then its family and reasoning "
           "markers on stderr");
  cli.parse(argc, argv);
  std::string where = "then pass its path; the other programs open\n  ";
  where.append(ember_examples::default_model_path())
      .append("\n  when given no --model (EMBER_MODEL=PATH changes that)");
  ember_examples::require_model_file(cli.program(), path, where);
  try {
    const auto file = GgufFile::open(path);
    if (show_template) {
      const auto tmpl = ember::tokenizer::ChatTemplate::for_model(
          file->find_string("tokenizer.chat_template"), file->find_string("general.architecture").value_or(""));
      std::fwrite(tmpl.source().data(), 1, tmpl.source().size(), stdout);
      const auto& r = tmpl.reasoning();
      std::fprintf(stderr, "\n(%s template, %zu bytes; family %s; reasoning %s%s)\n",
                   file->find_string("tokenizer.chat_template") ? "the file's" : "the architecture's default",
                   tmpl.source().size(), ember::tokenizer::to_string(tmpl.format()),
                   r.enabled() ? (r.open + " ... " + r.close + r.answer).c_str() : "none",
                   r.toggle ? ", enable_thinking" : "");
      return 0;
    }
    fmt::print("{}: GGUF v{}, {} bytes, alignment {}, data at byte {}\n", file->path(), file->version(),
               file->file_size(), file->alignment(), file->data_offset());
    fmt::print("\nmetadata ({} keys):\n", file->metadata().size());
    for (const auto& [key, value] : file->metadata()) {
      fmt::print("  {:<40} {}\n", key, value_text(value));
    }
    print_config(*file);
    print_tensors(*file);
    print_cpu_tier();
  } catch (const ember::Error& e) {
    std::fprintf(stderr, "error (%s): %s\n", ember::to_string(e.code()), e.what());
    return 1;
  }
  return 0;
}
