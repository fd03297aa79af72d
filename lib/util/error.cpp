#include <ember/ember.hpp>

namespace ember {

Error::Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}

const char* to_string(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::invalid_argument: return "invalid_argument";
    case ErrorCode::io: return "io";
    case ErrorCode::invalid_model: return "invalid_model";
    case ErrorCode::unsupported: return "unsupported";
    case ErrorCode::out_of_memory: return "out_of_memory";
    case ErrorCode::context_overflow: return "context_overflow";
    case ErrorCode::cancelled: return "cancelled";
    case ErrorCode::internal: return "internal";
    case ErrorCode::busy: return "busy";
  }
  return "unknown";
}

const char* to_string(FinishReason reason) noexcept {
  switch (reason) {
    case FinishReason::stop: return "stop";
    case FinishReason::length: return "length";
    case FinishReason::context: return "context";
    case FinishReason::cancelled: return "cancelled";
    case FinishReason::error: return "error";
  }
  return "unknown";
}

const char* to_string(WeightFormat format) noexcept {
  switch (format) {
    case WeightFormat::automatic: return "automatic";
    case WeightFormat::w8a8: return "w8a8";
  }
  return "unknown";
}

const char* to_string(ContextPolicy policy) noexcept {
  switch (policy) {
    case ContextPolicy::error: return "error";
    case ContextPolicy::truncate: return "truncate";
    case ContextPolicy::shift: return "shift";
  }
  return "unknown";
}

const char* to_string(LoadPhase phase) noexcept {
  switch (phase) {
    case LoadPhase::reading: return "reading";
    case LoadPhase::tokenizer: return "tokenizer";
    case LoadPhase::weights: return "weights";
    case LoadPhase::calibration: return "calibration";
    case LoadPhase::quantization: return "quantization";
    case LoadPhase::cache: return "cache";
  }
  return "unknown";
}

const char* version() noexcept { return EMBER_VERSION_STRING; }

}  // namespace ember
