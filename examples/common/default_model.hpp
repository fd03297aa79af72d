// Where the examples look for a model when --model is not given: $EMBER_MODEL, else the file
// scripts/fetch-model.sh caches in ${EMBER_MODEL_DIR:-$HOME/.cache/ember}.
#pragma once

#include <cstdlib>
#include <string>

namespace ember_examples {

inline std::string default_model_path() {
  if (const char* env = std::getenv("EMBER_MODEL")) return env;
  std::string dir = ".";
  if (const char* d = std::getenv("EMBER_MODEL_DIR"))
    dir = d;
  else if (const char* home = std::getenv("HOME"))
    dir = std::string(home) + "/.cache/ember";
  return dir + "/SmolLM2-135M-Instruct.Q4_1.gguf";
}

}  // namespace ember_examples
