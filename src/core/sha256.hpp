// SHA-256 (FIPS 180-4), for the journal's record of the binary that wrote it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace attnbench {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, std::size_t n);
  std::string hex();  // finishes; call once

 private:
  void block(const unsigned char* p);
  uint32_t h_[8];
  unsigned char buf_[64];
  std::size_t used_ = 0;
  uint64_t total_ = 0;
};

std::string sha256_hex(const std::string& data);
// The file's digest in hex; empty when it cannot be read.
std::string sha256_file(const std::string& path);
// This process's executable (/proc/self/exe), computed once.
const std::string& binary_sha256();

}  // namespace attnbench
