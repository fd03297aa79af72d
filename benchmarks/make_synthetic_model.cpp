// ember-make-synthetic: writes a synthetic model (random weights, ember's own GGUF writer)
// of a named shape, and its configuration as JSON for benchmarks/torch_generate.py, so the GPU
// check runs from the source tree alone (no download, no model file).
//
//   ember-make-synthetic SHAPE OUT.gguf OUT.json  (--help lists the shapes)
//
// default: the default model's shape (SmolLM2-135M: 30 layers, width 576, ffn 1536, 9 heads,
// 3 KV heads, vocab 49152). 1b: Llama-3.2-1B-like (16 layers, width 2048, ffn 8192, 32 heads,
// 8 KV heads, vocab 32000). 3b: Llama-3.2-3B (28 layers, width 3072, ffn 8192, 24 heads of 128,
// 8 KV heads, vocab 128256, tied). 8b: Llama-3.1-8B (32 layers, width 4096, ffn 14336, 32
// heads, 8 KV heads, vocab 128256, untied). Matrices are Q4_1, as in the default model file, or
// what --type asks (q4_0: the type llama.cpp repacks for its AVX-512 kernels, the fair file to
// compare the two engines' 4-bit decode on; q8_0).
// llama3, qwen2, qwen3, gemma3, phi3, phi3_long, and the mixture-of-experts qwen3moe, olmoe and
// mixtral: the small models of each architecture that tests/reference/make_arch_goldens.py runs
// through llama.cpp (SyntheticModelSpec::architecture_config), in F32 so that both engines
// compute from the very same weights; the mixture-of-experts ones also in --type.
// olmoe-1b-7b: OLMoE-1B-7B's shape (16 layers, width 2048, 16 heads of 128, 64 experts of 1024,
// top-8, vocab 50304), Q4_0, about 3.9 GB; qwen3-30b-a3b: Qwen3-30B-A3B's (48 layers, width
// 2048, 32 heads of 128, 4 KV heads, 128 experts of 768, top-8, vocab 151936), Q4_0, about
// 17 GB, written a tensor at a time. Write them outside the tree (~/.cache/ember).
// bert-rerank: a small F32 BERT cross-encoder with a classification head (pooling_type rank),
// for the rerank golden (tests/reference/make_embed_goldens.py --rerank); bert: the same
// encoder without the head.
// --tensor-per-expert writes a mixture of experts' matrices one tensor per expert, the layout of
// older llama.cpp Mixtral conversions (blk.N.ffn_gate.E.weight), with the same weights.
// --adapter FILE also writes a LoRA adapter for the model (llama.cpp's adapter GGUF: random
// lora_a/lora_b pairs at --adapter-rank, --adapter-alpha, on --adapter-tensors), as the LoRA
// goldens (tests/reference/make_lora_goldens.py) and the server's --lora take.
#include "../examples/common/cli.hpp"
#include "model_writer/gguf_writer.hpp"
#include "model_writer/synthetic_adapter.hpp"
#include "model_writer/synthetic_bert.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <exception>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>

namespace {

// A Llama shape with Q4_1 matrices, or for any other name the architecture test model of that
// name in F32 (SyntheticModelSpec::architecture_config throws invalid_argument naming them).
ember::model::SyntheticModelSpec shape(const std::string& name) {
  ember::model::SyntheticModelSpec spec;
  spec.weight_type = ember::model::GgmlType::Q4_1;
  ember::model::ModelConfig& c = spec.config;
  c = ember::model::SyntheticModelSpec::default_model_config();
  if (name == "1b") {
    c.layers = 16, c.embedding = 2048, c.ffn = 8192, c.heads = 32, c.kv_heads = 8, c.vocab = 32000;
    c.head_dim = c.embedding / c.heads;
    c.rope_dims = c.head_dim;
    c.rope_base = 500000.0f;
  } else if (name == "3b" || name == "8b") {
    const bool big = name == "8b";
    c.layers = big ? 32 : 28, c.embedding = big ? 4096 : 3072, c.ffn = big ? 14336 : 8192;
    c.heads = big ? 32 : 24, c.kv_heads = 8, c.vocab = 128256;
    c.head_dim = 128;
    c.rope_dims = c.head_dim;
    c.rope_base = 500000.0f;
    c.context_length = 8192;
    c.tied_embeddings = !big;
  } else if (name == "olmoe-1b-7b") {  // OLMoE-1B-7B's shape: 64 experts of 1024, top-8
    c = ember::model::SyntheticModelSpec::architecture_config("olmoe");
    c.layers = 16, c.embedding = 2048, c.ffn = 1024, c.heads = 16, c.kv_heads = 16, c.vocab = 50304;
    c.head_dim = 128, c.rope_dims = 128, c.context_length = 4096;
    c.experts = 64, c.experts_used = 8, c.expert_ffn = 1024;
    spec.weight_type = ember::model::GgmlType::Q4_0;
  } else if (name == "qwen3-30b-a3b") {  // Qwen3-30B-A3B's shape: 128 experts of 768, top-8
    c = ember::model::SyntheticModelSpec::architecture_config("qwen3moe");
    c.layers = 48, c.embedding = 2048, c.ffn = 6144, c.heads = 32, c.kv_heads = 4, c.vocab = 151936;
    c.head_dim = 128, c.rope_dims = 128, c.context_length = 4096, c.tied_embeddings = false;
    c.experts = 128, c.experts_used = 8, c.expert_ffn = 768;
    spec.weight_type = ember::model::GgmlType::Q4_0;
  } else if (name != "default") {
    c = ember::model::SyntheticModelSpec::architecture_config(name);
    spec.weight_type = ember::model::GgmlType::F32;
    return spec;
  }
  c.name = "ember-synthetic-" + name;
  return spec;
}

// The BERT shapes (model_writer/synthetic_bert.hpp): "bert-rerank" with a classification head
// (pooling_type rank), "bert" without (mean pooling). The JSON says the shape.
int write_bert(const std::string& name, const std::string& gguf_path, const std::string& json_path) {
  ember::model::SyntheticBertSpec spec;
  spec.classifier = name == "bert-rerank";
  spec.name = "ember-synthetic-" + name;
  try {
    ember::model::write_synthetic_bert(spec, gguf_path);
    const nlohmann::json config = {{"architecture", "bert"},
                                   {"num_hidden_layers", spec.layers},
                                   {"hidden_size", spec.embedding},
                                   {"intermediate_size", spec.ffn},
                                   {"num_attention_heads", spec.heads},
                                   {"max_position_embeddings", spec.context},
                                   {"vocab_size", ember::model::synthetic_bert_vocab_size()},
                                   {"num_labels", spec.classifier ? spec.classifier_outputs : 0}};
    std::ofstream(json_path) << config.dump(2) << "\n";
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string shape_name, gguf_path, json_path;
  ember_examples::CommandLine cli(
      "ember-make-synthetic",
      "Writes a synthetic model (random weights, ember's GGUF writer) of a named shape: Llama "
      "shapes with Q4_1 matrices (or --type), or a small F32 model of one architecture; and its "
      "configuration as JSON (Hugging Face LlamaConfig field names) for "
      "benchmarks/torch_generate.py.",
      "SHAPE OUT.gguf OUT.json");
  cli.positional("SHAPE", shape_name,
                 "default: the default model's shape (SmolLM2-135M); 1b: Llama-3.2-1B-like; "
                 "3b: Llama-3.2-3B; 8b: Llama-3.1-8B; olmoe-1b-7b, qwen3-30b-a3b: OLMoE-1B-7B's and Qwen3-30B-A3B's "
                 "shapes (Q4_0); llama3, qwen2, qwen3, gemma3, phi3, phi3_long, qwen3moe, olmoe, "
                 "mixtral: small F32 models of each architecture, for goldens; bert-rerank, bert: small F32 "
                 "BERT encoders with and without a reranker's classification head")
      .positional("OUT.gguf", gguf_path, "the model file to write")
      .positional("OUT.json", json_path, "the configuration file to write");
  std::optional<ember::model::GgmlType> type;
  cli.option("--type", "q4_0|q4_1|q8_0", "the matrices' type in a Llama or mixture-of-experts shape", "q4_1",
             [&type](const std::string& t) {
               if (t == "q4_0")
                 type = ember::model::GgmlType::Q4_0;
               else if (t == "q4_1")
                 type = ember::model::GgmlType::Q4_1;
               else if (t == "q8_0")
                 type = ember::model::GgmlType::Q8_0;
               else
                 throw std::invalid_argument("--type must be q4_0, q4_1 or q8_0, not '" + t + "'");
             });
  std::string template_path;
  bool reasoning_tokens = false;
  cli.option("--chat-template", "FILE", template_path,
             "the file's tokenizer.chat_template (a Jinja file, e.g. tests/data/tokenizer/templates/qwen3.jinja)",
             "SmolLM2's");
  cli.flag("--reasoning-tokens", reasoning_tokens,
           "end the vocabulary with <think> and </think>, as a thinking model's (Qwen3-shaped with qwen3 "
           "and --chat-template qwen3.jinja)");
  bool tensor_per_expert = false;
  cli.flag("--tensor-per-expert", tensor_per_expert,
           "write each expert's matrices as tensors of their own (blk.N.ffn_gate.E.weight: older llama.cpp's "
           "Mixtral layout) instead of the stacked ffn_gate_exps; the same weights");
  std::string adapter_path, adapter_tensors;
  ember::model::SyntheticAdapterSpec adapter;
  cli.option("--adapter", "FILE", adapter_path, "also write a LoRA adapter for the model to FILE", "none");
  cli.option("--adapter-rank", "N", adapter.rank, "the adapter's rank");
  cli.option("--adapter-alpha", "A", adapter.alpha, "the adapter's adapter.lora.alpha (scale = alpha / rank)");
  cli.option("--adapter-seed", "N", adapter.seed, "the seed of the adapter's random values");
  cli.option("--adapter-tensors", "LIST", adapter_tensors,
             "comma-separated tensor kinds that get a pair (attn_q, attn_k, attn_v, attn_qkv, attn_output, "
             "ffn_gate, ffn_up, ffn_down, output)",
             "every attention and feed-forward matrix and an untied output");
  cli.parse(argc, argv);
  if (shape_name == "bert" || shape_name == "bert-rerank") return write_bert(shape_name, gguf_path, json_path);
  std::stringstream kinds(adapter_tensors);
  for (std::string kind; std::getline(kinds, kind, ',');)
    if (!kind.empty()) adapter.tensors.push_back(kind);
  ember::model::SyntheticModelSpec spec;
  try {
    spec = shape(shape_name);
  } catch (const ember::Error& e) {
    cli.fail("unknown shape: " + std::string(e.what()) + "; or a Llama shape: default, 1b, 3b, 8b");
  }
  if (type && spec.weight_type == ember::model::GgmlType::F32 && !spec.config.routed())
    cli.fail("--type applies to the Llama and mixture-of-experts shapes, not to " + shape_name);
  if (type) spec.weight_type = *type;
  spec.reasoning_tokens = reasoning_tokens;
  if (tensor_per_expert && !spec.config.routed()) cli.fail("--tensor-per-expert applies to mixture-of-experts shapes");
  spec.tensor_per_expert = tensor_per_expert;
  if (!template_path.empty()) {
    std::ifstream in(template_path, std::ios::binary);
    if (!in) cli.fail("cannot read --chat-template " + template_path);
    spec.chat_template.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  try {
    ember::model::write_synthetic_model(spec, gguf_path);
    const auto& c = spec.config;
    // Hugging Face LlamaConfig field names, for a randomly initialised twin in PyTorch.
    const nlohmann::json config = {{"num_hidden_layers", c.layers},
                                   {"hidden_size", c.embedding},
                                   {"intermediate_size", c.ffn},
                                   {"num_attention_heads", c.heads},
                                   {"num_key_value_heads", c.kv_heads},
                                   {"head_dim", c.head_dim},
                                   {"vocab_size", c.vocab},
                                   {"rope_theta", c.rope_base},
                                   {"rms_norm_eps", c.rms_eps},
                                   {"max_position_embeddings", c.context_length},
                                   {"tie_word_embeddings", c.tied_embeddings}};
    std::ofstream(json_path) << config.dump(2) << "\n";
    if (!adapter_path.empty())
      ember::model::write_synthetic_adapter(*ember::model::GgufFile::open(gguf_path), adapter, adapter_path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
