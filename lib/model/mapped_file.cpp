#include "model/mapped_file.hpp"

#include "util/check.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <system_error>

#if defined(__unix__) || defined(__APPLE__)
#define EMBER_HAVE_MMAP 1
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#else
#include <filesystem>
#include <fstream>
#endif

namespace ember::model {
namespace {

std::string os_reason(int err) { return std::generic_category().message(err); }

}  // namespace

MappedFile copy_bytes(const void* bytes, std::uint64_t size) {
  const std::uint64_t padded = (size + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, padded == 0 ? 64 : static_cast<std::size_t>(padded));
  if (p == nullptr) fail(ErrorCode::out_of_memory, "cannot allocate {} bytes for a GGUF image", size);
  if (size != 0) std::memcpy(p, bytes, static_cast<std::size_t>(size));
  MappedFile m;
  m.data = static_cast<const std::uint8_t*>(p);
  m.size = size;
  m.owner = std::shared_ptr<void>(p, std::free);
  return m;
}

#if defined(EMBER_HAVE_MMAP)

MappedFile map_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(ErrorCode::io, "cannot open '{}': {}", path, os_reason(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail(ErrorCode::io, "cannot stat '{}': {}", path, os_reason(err));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    fail(ErrorCode::io, "cannot read '{}': {}", path, os_reason(EISDIR));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(ErrorCode::io, "cannot map '{}': not a regular file", path);
  }
  if (st.st_size == 0) {
    ::close(fd);
    fail(ErrorCode::io, "cannot map '{}': the file is empty", path);
  }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  void* p = ::mmap(nullptr, static_cast<std::size_t>(size), PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);  // the mapping keeps the file alive
  if (p == MAP_FAILED) fail(ErrorCode::io, "cannot map '{}': {}", path, os_reason(err));
  MappedFile m;
  m.data = static_cast<const std::uint8_t*>(p);
  m.size = size;
  m.owner = std::shared_ptr<void>(p, [size](void* q) { ::munmap(q, static_cast<std::size_t>(size)); });
  m.mapped = true;
  return m;
}

void release_pages(const void* data, std::uint64_t size) {
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<std::uintptr_t>(data) + page - 1) / page * page;
  const auto end = (reinterpret_cast<std::uintptr_t>(data) + size) / page * page;
  // Advice only: a failure leaves the pages resident, which is what not calling it would do.
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

#else

MappedFile map_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail(ErrorCode::io, "cannot read '{}': is a directory", path);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorCode::io, "cannot open '{}': {}", path, os_reason(errno));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.empty()) fail(ErrorCode::io, "cannot map '{}': the file is empty", path);
  return copy_bytes(bytes.data(), bytes.size());
}

void release_pages(const void*, std::uint64_t) {}

#endif

}  // namespace ember::model
