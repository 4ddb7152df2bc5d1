// gpu::DeviceBuffer over the runtime shim's own calls: one definition for every runtime's implementation (compiled
// into each GPU backend, beside its runtime.cpp).
#include <stdexcept>
#include <utility>

#include "attnbench/gpu_runtime.hpp"

namespace attnbench::gpu {

DeviceBuffer::DeviceBuffer(std::size_t bytes) : ptr_(bytes ? device_malloc(bytes) : nullptr), bytes_(bytes) {}
DeviceBuffer::~DeviceBuffer() {
  if (ptr_) device_free(ptr_);
}
DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) device_free(ptr_);
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}
void DeviceBuffer::upload(const void* src, std::size_t n, std::size_t offset) {
  if (n > bytes_ || offset > bytes_ - n) throw std::length_error("DeviceBuffer::upload past the end");
  copy_to_device(static_cast<char*>(ptr_) + offset, src, n);
}
void DeviceBuffer::download(void* dst, std::size_t n) const {
  if (n > bytes_) throw std::length_error("DeviceBuffer::download past the end");
  copy_to_host(dst, ptr_, n);
}
// Done when it returns, so that work the caller then enqueues on any stream sees the bytes.
void DeviceBuffer::fill_byte(unsigned char v) {
  if (!bytes_) return;
  const Stream s;
  memset_async(ptr_, v, bytes_, s.get());
  s.synchronize();
}

}  // namespace attnbench::gpu
