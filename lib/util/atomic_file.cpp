#include "util/atomic_file.hpp"

#include "util/check.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

#include <fcntl.h>
#include <unistd.h>

namespace ember::util {
namespace {

std::string folder_of(const std::string& path) {
  const std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? std::string(".") : parent;
}

// The folder's own entry is made durable too, or a crash after rename can lose the new name.
void sync_folder(const std::string& folder) noexcept {
  const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // best effort: the data itself is already synced
  (void)::fsync(fd);
  ::close(fd);
}

}  // namespace

AtomicFile::AtomicFile(std::string target) : target_(std::move(target)) {
  if (target_.empty()) fail(ErrorCode::invalid_argument, "cannot write a file with an empty path");
  const std::filesystem::path p(target_);
  const std::string name = p.filename().string();
  if (name.empty() || name == "." || name == "..")
    fail(ErrorCode::invalid_argument, "cannot write '{}': not a file name", target_);
  std::random_device random;
  // A few tries: a collision with a live writer's random name is already unlikely.
  for (int attempt = 0; attempt < 8; ++attempt) {
    const std::uint64_t suffix = (std::uint64_t{random()} << 32) ^ random();
    temp_ = (p.parent_path() / fmt::format(".{}.tmp-{:016x}", name, suffix)).string();
    fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd_ >= 0) return;
    if (errno != EEXIST) break;
  }
  const int error = errno;
  fail(ErrorCode::io, "cannot create '{}' to write '{}': {}", temp_, target_, std::strerror(error));
}

AtomicFile::~AtomicFile() { discard(); }

void AtomicFile::discard() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!temp_.empty()) ::unlink(temp_.c_str());
  temp_.clear();
}

void AtomicFile::fail_and_discard(const char* what, int error) {
  const std::string temp = temp_;
  discard();
  fail(ErrorCode::io, "cannot write '{}' ({} '{}'): {}", target_, what, temp, std::strerror(error));
}

void AtomicFile::write(const void* bytes, std::size_t n) {
  if (fd_ < 0) fail(ErrorCode::io, "cannot write '{}': the file was already discarded or committed", target_);
  const auto* p = static_cast<const std::uint8_t*>(bytes);
  while (n > 0) {
    const ssize_t done = ::write(fd_, p, n);
    if (done < 0 && errno == EINTR) continue;
    if (done <= 0) fail_and_discard("writing", done < 0 ? errno : ENOSPC);
    p += done;
    n -= static_cast<std::size_t>(done);
  }
}

void AtomicFile::write_at(std::uint64_t offset, const void* bytes, std::size_t n) {
  if (fd_ < 0) fail(ErrorCode::io, "cannot write '{}': the file was already discarded or committed", target_);
  const auto* p = static_cast<const std::uint8_t*>(bytes);
  while (n > 0) {
    const ssize_t done = ::pwrite(fd_, p, n, static_cast<off_t>(offset));
    if (done < 0 && errno == EINTR) continue;
    if (done <= 0) fail_and_discard("writing", done < 0 ? errno : ENOSPC);
    p += done;
    offset += static_cast<std::uint64_t>(done);
    n -= static_cast<std::size_t>(done);
  }
}

void AtomicFile::commit() {
  if (fd_ < 0) fail(ErrorCode::io, "cannot write '{}': the file was already discarded or committed", target_);
  if (::fsync(fd_) != 0) fail_and_discard("syncing", errno);
  const int closed = ::close(fd_);
  fd_ = -1;
  if (closed != 0) fail_and_discard("closing", errno);
  // rename replaces the target's directory entry; a symlink at the target is replaced, never
  // followed.
  if (::rename(temp_.c_str(), target_.c_str()) != 0) fail_and_discard("renaming", errno);
  temp_.clear();
  sync_folder(folder_of(target_));
}

void write_file_atomically(const std::string& path, std::span<const std::uint8_t> bytes) {
  AtomicFile file(path);
  file.write(bytes.data(), bytes.size());
  file.commit();
}

}  // namespace ember::util
