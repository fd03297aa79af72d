// A Jinja2 template engine for chat templates: the subset of Jinja2 that Hugging Face chat
// templates use, rendered byte for byte as Python's jinja2 renders it in transformers'
// environment (trim_blocks, lstrip_blocks, loop controls, ImmutableSandboxedEnvironment,
// transformers' `tojson`, `raise_exception`). tests/tokenizer/template_corpus_test.cpp checks
// that against jinja2 over a corpus of published chat templates.
//
// Templates are input (a model file, a host, a user of the server), so rendering is bounded:
// Limits caps the steps, the size of every value and of the output, and the depth of nesting
// (macro recursion included); a template past a limit is an Error, never a hang or a crash.
//
// Thread-safety: a Template is immutable once parsed; render() may run on many threads at once.
#pragma once

#include "template/ast.hpp"
#include "template/value.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ember::jinja {

struct Limits {
  std::int64_t max_steps = 4'000'000;  // nodes evaluated, loop iterations, items serialised
  std::size_t max_bytes = 16u << 20;   // the output, and any one string or list built
  int max_depth = 200;                 // nested expressions, macro calls, loops, containers
};

class Template {
 public:
  // Throws Error(invalid_argument) "template line N: ..." for a syntax error.
  explicit Template(std::string_view source);

  // `variables` are the template's inputs (messages, tools, add_generation_prompt, bos_token,
  // ...); range, namespace, dict and raise_exception are provided. Throws Error(invalid_argument)
  // "template line N: ..." for an error the template raises or a limit it passes.
  std::string render(const std::vector<std::pair<std::string, Value>>& variables, const Limits& limits = {}) const;

  const std::string& source() const { return source_; }

 private:
  std::string source_;
  NodePtr root_;
};

}  // namespace ember::jinja
