// Choosing a device and a precision, on any machine: combinations a device does not have are
// Error(unsupported) at open, through the C++ API and the C ABI alike.
#include "test_support.hpp"

#include <ember/ember.h>
#include <ember/ember.hpp>

#include <doctest/doctest.h>

#include <cstddef>
#include <string>

namespace ember {
namespace {

ErrorCode open_error(const EngineOptions& options, std::string* message = nullptr) {
  try {
    Engine::open(test::synthetic_model_file(1), options);
  } catch (const Error& e) {
    if (message != nullptr) *message = e.what();
    return e.code();
  }
  FAIL("the engine opened");
  return ErrorCode::internal;
}

TEST_CASE("the default device is the CPU") {
  CHECK(EngineOptions{}.device.type == DeviceType::cpu);
  CHECK(Device::cuda(2).type == DeviceType::cuda);
  CHECK(Device::cuda(2).index == 2);
}

TEST_CASE("fp16 on the CPU, fp32 on CUDA and a missing GPU are unsupported") {
  EngineOptions o;
  std::string message;
  o.precision = Precision::fp16;
  CHECK(open_error(o, &message) == ErrorCode::unsupported);
  CHECK(message.find("CUDA only") != std::string::npos);

  o.device = Device::cuda(0);
  o.precision = Precision::fp32;
  CHECK(open_error(o) == ErrorCode::unsupported);  // CPU reference only (or no CUDA at all)

  o.precision = Precision::int8;
  o.device = Device::cuda(1000);  // no machine has that many GPUs
  CHECK(open_error(o, &message) == ErrorCode::unsupported);
#ifndef EMBER_TEST_HAVE_CUDA
  CHECK(message.find("built without CUDA") != std::string::npos);
#endif
}

TEST_CASE("C ABI: device fields, their defaults and the pre-device struct size") {
  ember_engine_options o = ember_engine_options_default();
  CHECK(o.device_type == EMBER_DEVICE_CPU);
  CHECK(o.device_index == 0);
  const std::string path = test::synthetic_model_file(1);
  ember_engine* engine = nullptr;
  o.device_type = static_cast<ember_device_type>(7);
  CHECK(ember_engine_open(path.c_str(), &o, &engine) == EMBER_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(ember_last_error()).find("device_type") != std::string::npos);
  o.device_type = EMBER_DEVICE_CPU;
  o.precision = EMBER_PRECISION_FP16;
  CHECK(ember_engine_open(path.c_str(), &o, &engine) == EMBER_ERROR_UNSUPPORTED);
  // A caller built against ember 0.1's header passes the struct without the device fields.
  o = ember_engine_options_default();
  o.struct_size = offsetof(ember_engine_options, device_type);
  o.device_type = EMBER_DEVICE_CUDA;  // beyond struct_size: must be ignored
  REQUIRE(ember_engine_open(path.c_str(), &o, &engine) == EMBER_OK);
  ember_engine_close(&engine);
}

}  // namespace
}  // namespace ember
