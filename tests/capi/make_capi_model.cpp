// Writes the synthetic models that the C ABI tests and the c_api example run on (a ctest
// fixture): the C tests cannot call the C++ GGUF writer themselves. The second, when asked for,
// is a thinking model: <think> and </think> in its vocabulary and its chat template. Beside the
// first, MODEL.gguf.lora.gguf: a LoRA adapter for it.
#include "model_writer/gguf_writer.hpp"
#include "model_writer/synthetic_adapter.hpp"

#include <cstdio>
#include <exception>
#include <string>

namespace {

// ChatML whose generation prompt opens the reasoning (as DeepSeek-R1's does) unless
// enable_thinking is false, which gives an empty block (as Qwen3's does).
constexpr const char* kThinkingTemplate =
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{%- endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n"
    "{%- if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n"
    "{%- else %}<think>\n{%- endif %}{%- endif %}";

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::fprintf(stderr, "usage: make_capi_model OUT.gguf [THINKING_OUT.gguf]\n");
    return 2;
  }
  try {
    ember::model::SyntheticModelSpec spec;
    spec.config = ember::model::SyntheticModelSpec::tiny_config();
    spec.config.context_length = 256;
    spec.seed = 42;
    ember::model::write_synthetic_model(spec, argv[1]);
    // A LoRA adapter for it, beside it (test_capi_lora.c).
    ember::model::write_synthetic_adapter(*ember::model::GgufFile::open(argv[1]), {},
                                          std::string(argv[1]) + ".lora.gguf");
    if (argc == 3) {
      spec.reasoning_tokens = true;
      spec.chat_template = kThinkingTemplate;
      ember::model::write_synthetic_model(spec, argv[2]);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_capi_model: %s\n", e.what());
    return 1;
  }
  return 0;
}
