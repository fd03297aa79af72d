#include "util/atomic_file.hpp"

#include "util/check.hpp"
#include "util/platform.hpp"

#include <filesystem>
#include <random>

namespace ember::util {
namespace {

std::string folder_of(const std::string& path) {
  const std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? std::string(".") : parent;
}

}  // namespace

AtomicFile::AtomicFile(std::string target) : target_(std::move(target)) {
  if (target_.empty()) fail(ErrorCode::invalid_argument, "cannot write a file with an empty path");
  const std::filesystem::path p(target_);
  const std::string name = p.filename().string();
  if (name.empty() || name == "." || name == "..")
    fail(ErrorCode::invalid_argument, "cannot write '{}': not a file name", target_);
  std::random_device random;
  platform::OsError error = 0;
  // A few tries: a collision with a live writer's random name is already unlikely.
  for (int attempt = 0; attempt < 8; ++attempt) {
    const std::uint64_t suffix = (std::uint64_t{random()} << 32) ^ random();
    temp_ = (p.parent_path() / fmt::format(".{}.tmp-{:016x}", name, suffix)).string();
    file_ = platform::create_new_file(temp_, &error);
    if (file_ != platform::kNoFile) return;
    if (!platform::is_already_exists(error)) break;
  }
  fail(ErrorCode::io, "cannot create '{}' to write '{}': {}", temp_, target_, platform::os_error_text(error));
}

AtomicFile::~AtomicFile() { discard(); }

void AtomicFile::discard() noexcept {
  if (file_ != platform::kNoFile) platform::close_file(file_);
  file_ = platform::kNoFile;
  if (!temp_.empty()) platform::remove_file(temp_);
  temp_.clear();
}

void AtomicFile::fail_and_discard(const char* what, int error) {
  const std::string temp = temp_;
  discard();
  fail(ErrorCode::io, "cannot write '{}' ({} '{}'): {}", target_, what, temp, platform::os_error_text(error));
}

void AtomicFile::write(const void* bytes, std::size_t n) {
  if (file_ == platform::kNoFile)
    fail(ErrorCode::io, "cannot write '{}': the file was already discarded or committed", target_);
  if (const platform::OsError error = platform::write_all(file_, bytes, n)) fail_and_discard("writing", error);
}

void AtomicFile::write_at(std::uint64_t offset, const void* bytes, std::size_t n) {
  if (file_ == platform::kNoFile)
    fail(ErrorCode::io, "cannot write '{}': the file was already discarded or committed", target_);
  if (const platform::OsError error = platform::write_all_at(file_, offset, bytes, n))
    fail_and_discard("writing", error);
}

void AtomicFile::commit() {
  if (file_ == platform::kNoFile)
    fail(ErrorCode::io, "cannot write '{}': the file was already discarded or committed", target_);
  if (const platform::OsError error = platform::sync_file(file_)) fail_and_discard("syncing", error);
  const platform::OsError closed = platform::close_file(file_);
  file_ = platform::kNoFile;
  if (closed != 0) fail_and_discard("closing", closed);
  if (const platform::OsError error = platform::replace_file(temp_, target_)) fail_and_discard("renaming", error);
  temp_.clear();
  // The folder's own entry is made durable too, or a crash after the rename can lose the name.
  platform::sync_folder(folder_of(target_));
}

void write_file_atomically(const std::string& path, std::span<const std::uint8_t> bytes) {
  AtomicFile file(path);
  file.write(bytes.data(), bytes.size());
  file.commit();
}

}  // namespace ember::util
