#include "model/mapped_file.hpp"

#include "util/check.hpp"
#include "util/platform.hpp"

#include <cstring>

namespace ember::model {

MappedFile copy_bytes(const void* bytes, std::uint64_t size) {
  void* p = platform::aligned_alloc(64, static_cast<std::size_t>(size));
  if (p == nullptr) fail(ErrorCode::out_of_memory, "cannot allocate {} bytes for a GGUF image", size);
  if (size != 0) std::memcpy(p, bytes, static_cast<std::size_t>(size));
  MappedFile m;
  m.data = static_cast<const std::uint8_t*>(p);
  m.size = size;
  m.owner = std::shared_ptr<void>(p, platform::aligned_free);
  return m;
}

MappedFile map_file(const std::string& path) {
  platform::FileView view = platform::map_file_readonly(path);
  MappedFile m;
  m.data = view.data;
  m.size = view.size;
  m.owner = std::move(view.owner);
  m.mapped = view.mapped;
  return m;
}

void release_pages(const void* data, std::uint64_t size) { platform::release_pages(data, size); }

}  // namespace ember::model
