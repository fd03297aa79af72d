// The C ABI's handles and the helpers that keep exceptions from crossing it. Internal to
// lib/capi: the public surface is include/ember/ember.h.
#pragma once

#include "util/check.hpp"

#include <ember/ember.h>
#include <ember/ember.hpp>

#include <cstdint>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

// The opaque handles of ember.h, defined in the global namespace where the C header declares
// them. Each starts with a magic number that is overwritten when the handle is freed, so a
// stale or mistyped pointer whose memory has not been reused is reported instead of used.
struct ember_engine {
  explicit ember_engine(ember::Engine e) : engine(std::move(e)) {}
  std::uint32_t magic = 0;  // set to kEngineMagic once fully constructed
  ember::Engine engine;
  std::string model_name, model_architecture, weight_format;  // the strings ember_model_info points at
  mutable std::mutex error_mutex;                             // the engine is used from many threads
  std::string last_error;
};

struct ember_request {
  std::uint32_t magic = 0;
  ember::RequestHandle handle;
};

namespace ember::capi {

// Distinct values per handle kind, so passing one kind where another is expected is caught.
inline constexpr std::uint32_t kEngineMagic = 0x454e4731;      // "ENG1"
inline constexpr std::uint32_t kRequestMagic = 0x52455131;     // "REQ1"
inline constexpr std::uint32_t kCompletionMagic = 0x434d5031;  // "CMP1": owned by the caller
inline constexpr std::uint32_t kBorrowedMagic = 0x43484b31;    // "CHK1": a chunk's, not freeable
inline constexpr std::uint32_t kDeadMagic = 0xdeadbeef;

// An ember_completion and the C++ Completion its pointers refer to. `pub` comes first and the
// struct is standard-layout, so the ember_completion* handed out converts back to the box.
struct CompletionBox {
  ember_completion pub;
  ember_timings timings;
  std::uint32_t magic;
  ember::Completion* owned;                       // deleted with the box; null for a chunk's borrowed view
  std::vector<ember_token_logprob> top_logprobs;  // Completion::top_logprobs, padded rows
  std::vector<const char*> schema_relaxed;        // into Completion::schema_relaxed
};
static_assert(std::is_standard_layout_v<CompletionBox>);

// Points `box` at `completion`, which must outlive the box's use.
void point_at(CompletionBox& box, const ember::Completion& completion, std::uint32_t magic);
ember_completion* new_completion(ember::Completion&& completion);

// The integer in a C enum field or argument. A C caller may pass any int there, and loading
// an out-of-range value as the enum type is undefined behaviour in C++, so read its bytes.
template <class Enum>
long long raw_enum(const Enum& value) noexcept {
  std::underlying_type_t<Enum> raw;
  std::memcpy(&raw, &value, sizeof raw);
  return static_cast<long long>(raw);
}

// Validated handles: throw Error(invalid_argument) for NULL or a handle that is not live.
ember_engine& live(ember_engine* engine);
const ember_engine& live(const ember_engine* engine);
ember_request& live(ember_request* request);
const ember_request& live(const ember_request* request);

// A required pointer argument: Error(invalid_argument) naming it when NULL.
template <class T>
void require(const T* pointer, const char* name) {
  if (pointer == nullptr) fail(ErrorCode::invalid_argument, "{} is NULL", name);
}

// Conversions of the growable C structs (struct_size checked) into the C++ ones.
EngineOptions to_cpp(const ember_engine_options& options);
SamplingParams to_cpp(const ember_sampling* sampling);  // NULL = the defaults
Request to_cpp(const ember_request_params& params);
std::vector<Message> to_cpp(const ember_message* messages, std::size_t count);
StreamCallback to_cpp(ember_stream_fn on_chunk, void* user_data);  // empty for NULL
ember_status to_status(ErrorCode code) noexcept;

// Fill the caller's output structs, writing only the first struct_size bytes.
void write_stats(ember_stats* out, const EngineStats& stats);
// Error(invalid_argument) when `out`'s struct_size is one the library does not know: checked
// before the step runs, so a bad struct never follows a step whose result it cannot hold.
void check_step_result(const ember_step_result& out);
void write_step(ember_step_result* out, const StepResult& result);
void write_info(ember_model_info* out, const ember_engine& engine, const ModelInfo& info);

// The C enums are cast from the C++ ones: their values must agree.
static_assert(EMBER_FINISH_STOP == static_cast<int>(FinishReason::stop) &&
              EMBER_FINISH_LENGTH == static_cast<int>(FinishReason::length) &&
              EMBER_FINISH_CONTEXT == static_cast<int>(FinishReason::context) &&
              EMBER_FINISH_CANCELLED == static_cast<int>(FinishReason::cancelled) &&
              EMBER_FINISH_ERROR == static_cast<int>(FinishReason::error));
static_assert(EMBER_CONTEXT_ERROR == static_cast<int>(ContextPolicy::error) &&
              EMBER_CONTEXT_TRUNCATE == static_cast<int>(ContextPolicy::truncate) &&
              EMBER_CONTEXT_SHIFT == static_cast<int>(ContextPolicy::shift));
static_assert(EMBER_LOG_DEBUG == static_cast<int>(LogLevel::debug) &&
              EMBER_LOG_INFO == static_cast<int>(LogLevel::info) &&
              EMBER_LOG_WARNING == static_cast<int>(LogLevel::warning) &&
              EMBER_LOG_ERROR == static_cast<int>(LogLevel::error));
static_assert(EMBER_LOAD_READING == static_cast<int>(LoadPhase::reading) &&
              EMBER_LOAD_TOKENIZER == static_cast<int>(LoadPhase::tokenizer) &&
              EMBER_LOAD_WEIGHTS == static_cast<int>(LoadPhase::weights) &&
              EMBER_LOAD_CALIBRATION == static_cast<int>(LoadPhase::calibration) &&
              EMBER_LOAD_QUANTIZATION == static_cast<int>(LoadPhase::quantization) &&
              EMBER_LOAD_CACHE == static_cast<int>(LoadPhase::cache));
static_assert(EMBER_STREAM_ANSWER == static_cast<int>(ChunkStream::answer) &&
              EMBER_STREAM_REASONING == static_cast<int>(ChunkStream::reasoning));
static_assert(EMBER_REQUEST_QUEUED == static_cast<int>(RequestStatus::queued) &&
              EMBER_REQUEST_RUNNING == static_cast<int>(RequestStatus::running) &&
              EMBER_REQUEST_FINISHED == static_cast<int>(RequestStatus::finished));

// Records a failure's message for ember_last_error() and, when `engine` is live, for
// ember_engine_last_error(). Never throws. Returns `status`.
ember_status record(const ember_engine* engine, ember_status status, const char* message) noexcept;
std::string& thread_error() noexcept;

// Runs `body` and turns every exception into a status: the one place where the C ABI catches.
template <class Body>
ember_status guarded(const ember_engine* engine, Body&& body) noexcept {
  try {
    body();
    return EMBER_OK;
  } catch (const Error& e) {
    return record(engine, to_status(e.code()), e.what());
  } catch (const std::bad_alloc&) {
    return record(engine, EMBER_ERROR_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return record(engine, EMBER_ERROR_INTERNAL, e.what());
  } catch (...) {
    return record(engine, EMBER_ERROR_INTERNAL, "unknown exception inside ember");
  }
}

// The engine a failing call should report to: only a live one (never dereferences past the
// magic check of a stale pointer).
inline const ember_engine* engine_for_errors(const ember_engine* engine) noexcept {
  return engine != nullptr && engine->magic == kEngineMagic ? engine : nullptr;
}

}  // namespace ember::capi
