// Writes the seed corpora of the fuzz targets into corpus/<target>/seed-*:
//   gguf           small valid synthetic models of every type the writer makes (llama and
//                  qwen2), a truncated one, and broken images from the bad-input generator
//   tokenizer      the tokenizer golden corpus under varying flag bytes, plus id sequences
//   chat_template  every template of tests/data/tokenizer/templates with a conversation
//   template       the template corpus and snippets with their variables (template_corpus.json)
//   capi           a slice of the tokenizer corpus, plus id sequences
//   kv_snapshot    a valid small KV snapshot and corrupted variants of it (truncated, bad magic,
//                  other version, other model, wrong KV type, huge count, bad checksum, bad id);
//                  rerun when ember's version changes (snapshots are tied to it)
//   server         request bodies, good and bad (those of tests/examples/test_server.sh)
// Usage: fuzz_make_seeds CORPUS_DIR TEST_DATA_DIR. Regression inputs (crash-*) are not touched.
#include "bad_gguf.hpp"
#include "kv_snapshot_seed.hpp"
#include "model_writer/gguf_writer.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

namespace {

void write_seed(const fs::path& dir, int index, const Bytes& bytes) {
  char name[32];
  std::snprintf(name, sizeof name, "seed-%03d", index);
  std::ofstream(dir / name, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

Bytes text_bytes(std::uint8_t prefix_a, int prefix_b, const std::string& text) {
  Bytes out{prefix_a};
  if (prefix_b >= 0) out.push_back(static_cast<std::uint8_t>(prefix_b));
  // Byte by byte: insert() of the range drew GCC 12's false -Wstringop-overread.
  for (const char c : text) out.push_back(static_cast<std::uint8_t>(c));
  return out;
}

Bytes id_bytes(std::uint8_t prefix_a, int prefix_b, const std::vector<std::int32_t>& ids) {
  Bytes out{prefix_a};
  if (prefix_b >= 0) out.push_back(static_cast<std::uint8_t>(prefix_b));
  for (const std::int32_t id : ids) {
    for (int k = 0; k < 4; ++k) out.push_back(static_cast<std::uint8_t>(static_cast<std::uint32_t>(id) >> (8 * k)));
  }
  return out;
}

std::vector<std::string> corpus_strings(const fs::path& data_dir) {
  std::ifstream in(data_dir / "tokenizer" / "corpus.json");
  const auto json = nlohmann::json::parse(in);
  std::vector<std::string> out;
  for (const auto& entry : json.at("strings")) {
    if (entry.contains("text")) {
      out.push_back(entry.at("text").get<std::string>());
    } else {
      const std::string hex = entry.at("hex").get<std::string>();
      std::string bytes;
      for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
        bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
      }
      out.push_back(bytes);
    }
  }
  return out;
}

// Sequences of in-range ids (specials, byte tokens, merges) and a few out-of-range ones.
std::vector<std::vector<std::int32_t>> id_sequences() {
  return {{0, 1, 2, 3, 4, 5},
          {1, 40, 41, 42, 2, 0},
          {229, 131, 3},
          {230, 260, 300, 511},
          {511, 512},
          {-1},
          {7, 8, 9, 0x7fffffff},
          {100, 101, 102, 103, 104, 105, 106, 107}};
}

void gguf_seeds(const fs::path& dir) {
  using namespace ember::model;
  int n = 0;
  SyntheticModelSpec spec;
  spec.config.layers = 1;
  spec.config.embedding = 32;
  spec.config.ffn = 32;
  spec.config.heads = 2;
  spec.config.kv_heads = 1;
  spec.config.head_dim = spec.config.rope_dims = 16;
  spec.config.vocab = 300;
  spec.config.context_length = 64;
  for (const GgmlType type :
       {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::F16, GgmlType::BF16, GgmlType::F32}) {
    spec.weight_type = type;
    write_seed(dir, n++, make_synthetic_model(spec));
  }
  SyntheticModelSpec qwen = spec;
  qwen.config.architecture = "qwen2";
  qwen.config.tied_embeddings = false;
  qwen.config.attention_bias = true;
  qwen.weight_type = GgmlType::Q8_0;
  write_seed(dir, n++, make_synthetic_model(qwen));
  Bytes truncated = make_synthetic_model(spec);
  truncated.resize(truncated.size() / 2);
  write_seed(dir, n++, truncated);

  using namespace ember::test;
  write_seed(dir, n++, valid_raw_gguf().build());
  std::vector<RawGguf> broken(6, valid_raw_gguf());
  broken[0].magic = "GGUG";
  broken[1].tensor_count = 1ull << 40;
  broken[2].kvs[1].value = gguf_string_with_length(~0ull, "x");
  broken[3].kvs.push_back({"deep", gguf_nested_arrays(4), {}});
  broken[4].tensors[1].type = 99;
  broken[5].tensors[1].offset = 36;
  for (const RawGguf& g : broken) write_seed(dir, n++, g.build());
}

void tokenizer_seeds(const fs::path& dir, const std::vector<std::string>& corpus) {
  int n = 0;
  for (std::size_t i = 0; i < corpus.size(); ++i) {
    // Cycle through the 5 tokenizers and the flag bits (0x08 parse_special, 0x10 add_bos, 0x20
    // render_special).
    const auto flags = static_cast<std::uint8_t>((i % 5) | ((i / 5) % 8) << 3);
    write_seed(dir, n++, text_bytes(flags, -1, corpus[i]));
  }
  for (const auto& ids : id_sequences()) {
    for (const std::uint8_t flags : {0x00, 0x20, 0x04}) write_seed(dir, n++, id_bytes(flags, -1, ids));
  }
}

void chat_template_seeds(const fs::path& dir, const fs::path& data_dir) {
  int n = 0;
  const std::string conversation =
      std::string("system\0You are a cat.\0user\0Hello\0assistant\0", 43) + std::string("Meow\0user\0  Again? \0", 20);
  const std::string alternate = std::string("user\0Hi\0assistant\0Hello!\0user\0Bye", 33);
  for (const auto& entry : fs::directory_iterator(data_dir / "tokenizer" / "templates")) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream source;
    source << in.rdbuf();
    for (const std::string* messages : {&conversation, &alternate}) {
      const std::string seed = source.str() + std::string("\0<s>\0</s>\0", 10) + *messages;
      write_seed(dir, n++, Bytes(seed.begin(), seed.end()));
    }
  }
  const std::string unknown = std::string("{{ messages }}\0\0\0", 17) + conversation;
  write_seed(dir, n++, Bytes(unknown.begin(), unknown.end()));
}

// Every template of the corpus with the variables of one of its conversations (tool calls and
// results), and every snippet with the snippets' variables (tests/data/tokenizer/template_corpus.json).
void template_seeds(const fs::path& dir, const fs::path& data_dir) {
  std::ifstream in(data_dir / "tokenizer" / "template_corpus.json", std::ios::binary);
  const auto corpus = nlohmann::ordered_json::parse(in);
  int n = 0;
  auto seed = [&](const std::string& source, const nlohmann::ordered_json& variables) {
    const std::string bytes = source + std::string(1, '\0') + variables.dump();
    write_seed(dir, n++, Bytes(bytes.begin(), bytes.end()));
  };
  for (const auto& t : corpus.at("templates")) {
    std::ifstream file(data_dir / "tokenizer" / "templates" / t.at("file").get<std::string>(), std::ios::binary);
    std::stringstream source;
    source << file.rdbuf();
    for (const auto& c : t.at("cases")) {
      if (c.at("conversation") == "tool-exchange" || c.at("conversation") == "multi-part")
        seed(source.str(), c.at("variables"));
    }
  }
  for (const auto& s : corpus.at("snippets")) seed(s.at("source"), corpus.at("snippet_variables"));
}

void capi_seeds(const fs::path& dir, const std::vector<std::string>& corpus) {
  int n = 0;
  for (std::size_t i = 0; i < corpus.size(); i += 6) {
    write_seed(dir, n++, text_bytes(static_cast<std::uint8_t>(i % 4), static_cast<int>((i * 7) % 256), corpus[i]));
  }
  for (const auto& ids : id_sequences()) write_seed(dir, n++, id_bytes(0, 64, ids));
}

void put_le(Bytes& bytes, std::size_t at, std::uint64_t v, int width) {
  for (int i = 0; i < width; ++i) bytes[at + static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(v >> (8 * i));
}

// A corrupted copy of the valid snapshot; resealed ones get a correct checksum, so only the
// edited field is wrong and the reader gets past the checksum to the field's own check.
void kv_snapshot_seeds(const fs::path& dir) {
  using ember::runtime::kv_snapshot_checksum;
  const Bytes valid = ember::fuzz::valid_snapshot();
  const auto reseal = [](Bytes b) {
    put_le(b, b.size() - 8, kv_snapshot_checksum(std::span(b).first(b.size() - 8)), 8);
    return b;
  };
  const auto edited = [&](std::size_t at, std::uint64_t v, int width) {
    Bytes b = valid;
    put_le(b, at, v, width);
    return reseal(b);
  };
  int n = 0;
  write_seed(dir, n++, valid);
  write_seed(dir, n++, Bytes(valid.begin(), valid.begin() + static_cast<std::ptrdiff_t>(valid.size() / 2)));
  write_seed(dir, n++, edited(0, 0x46554747, 4));                                      // bad magic ("GGUF")
  write_seed(dir, n++, edited(8, 2, 4));                                               // format version 2
  write_seed(dir, n++, edited(12, 0x302e302e39, 5));                                   // written by ember "9.0.0"
  write_seed(dir, n++, edited(28, 42, 8));                                             // another model
  write_seed(dir, n++, edited(40, 1, 4));                                              // KV type f32
  write_seed(dir, n++, edited(60, 1ull << 62, 8));                                     // a huge block count
  write_seed(dir, n++, edited(ember::runtime::kKvSnapshotHeaderBytes + 16, 1000, 4));  // id past the vocabulary
  Bytes flipped = valid;
  flipped[flipped.size() / 2] ^= 0x01;  // bad checksum
  write_seed(dir, n++, flipped);
}

// First byte: the endpoint (0 completions, 1 chat); the rest: the body.
void server_seeds(const fs::path& dir) {
  const std::vector<std::pair<int, std::string>> bodies = {
      {0, R"({"prompt": "Once upon a time", "max_tokens": 6, "temperature": 0})"},
      {0, R"({"prompt": "hi", "max_tokens": 2, "stream": true, "stream_options": {"include_usage": true},
             "stop": ["a", "b"], "seed": 18446744073709551615, "top_p": 0.5, "top_k": 4, "min_p": 0.1,
             "presence_penalty": -2, "frequency_penalty": 2, "ignore_eos": true, "n": 1})"},
      {1, R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi!"}],
             "max_tokens": 8, "temperature": 0, "ignore_eos": true})"},
      {1, R"({"messages": [{"role": "developer", "content": [{"type": "text", "text": "a"}]},
             {"role": "assistant", "content": null}], "max_completion_tokens": 3})"},
      {0, R"({"prompt": "hi",)"},
      {0, "[1, 2]"},
      {0, R"({"prompt": "hi", "max_tokens": "ten"})"},
      {0, R"({"prompt": "hi", "temperature": -1})"},
      {0, R"({"prompt": "hi", "stream": "yes"})"},
      {0, R"({"prompt": "hi", "stop": ["a", 3]})"},
      {0, R"({"prompt": ["a", "b"]})"},
      {0, R"({"max_tokens": 3})"},
      {1, R"({"messages": "hello"})"},
      {1, R"({"messages": [{"role": "wizard", "content": "x"}]})"},
      {1, R"({"messages": [{"role": "user", "content": "x"}], "n": 2})"},
      {0, R"({"prompt": "hi", "max_tokens": 2, "logit_bias": {}, "user": "x", "foo": [1]})"},
      {0, "{\"prompt\": \"\xff\xfe \\ud800 \xc0\x80\"}"},
  };
  int n = 0;
  for (const auto& [endpoint, body] : bodies)
    write_seed(dir, n++, text_bytes(static_cast<std::uint8_t>(endpoint), -1, body));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: fuzz_make_seeds CORPUS_DIR TEST_DATA_DIR\n");
    return 2;
  }
  try {
    const fs::path root = argv[1], data = argv[2];
    for (const char* t : {"gguf", "tokenizer", "chat_template", "template", "capi", "kv_snapshot", "server"}) {
      fs::create_directories(root / t);
      for (const auto& entry : fs::directory_iterator(root / t)) {
        if (entry.path().filename().string().rfind("seed-", 0) == 0) fs::remove(entry.path());
      }
    }
    const auto corpus = corpus_strings(data);
    gguf_seeds(root / "gguf");
    tokenizer_seeds(root / "tokenizer", corpus);
    chat_template_seeds(root / "chat_template", data);
    template_seeds(root / "template", data);
    capi_seeds(root / "capi", corpus);
    kv_snapshot_seeds(root / "kv_snapshot");
    server_seeds(root / "server");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_make_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
