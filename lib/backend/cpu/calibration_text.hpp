// The text the INT8 path calibrates its activation smoothing on at load (backend/cpu/
// smoothing.hpp): a few hundred tokens of varied, ordinary writing — prose, dialogue, numbers,
// code and a list — so that the channels that carry large activations on real inputs show up.
// It is not the evaluation text of the golden tests.
#pragma once

namespace ember::backend::cpu {

inline constexpr const char* kCalibrationText =
    "The morning train left the valley at six, carrying milk, letters and three students who "
    "had missed the bus. \"Do you think it will snow?\" asked the youngest. The conductor "
    "shrugged: the forecast said 40% chance, which in his experience meant nothing at all.\n\n"
    "To compute the average of a list in Python, write:\n"
    "def mean(values):\n    return sum(values) / len(values)\n\n"
    "Shopping list: 2 kg of flour, 12 eggs, 1 litre of olive oil, and a jar of honey.\n"
    "In 1969, 600 million people watched the first Moon landing on television. The Apollo 11 "
    "crew spent 21 hours on the lunar surface and brought back 21.5 kilograms of samples.\n"
    "<|im_start|>user\nCan you explain photosynthesis in one sentence?<|im_end|>\n"
    "<|im_start|>assistant\nPlants use sunlight, water and carbon dioxide to make sugar and "
    "release oxygen.<|im_end|>\n"
    "Dear committee, I am writing to support the proposal for a new library in the east "
    "district. Our children deserve a quiet place to read, learn and meet one another.";

}  // namespace ember::backend::cpu
