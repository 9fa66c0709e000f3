// SHA-256 (FIPS 180-4) of a file, for the record of which plugin build a job
// ran against: the daemon keeps the path and this digest per job attempt.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace standin::swarmd {

// Streaming SHA-256.
class Sha256 {
  public:
    Sha256();
    void        update(const void * data, std::size_t n);
    std::string hex();  // finishes; the object is spent afterwards

  private:
    void          block(const std::uint8_t * p);
    std::uint32_t h_[8];
    std::uint8_t  buf_[64];
    std::size_t   fill_ = 0;
    std::uint64_t bytes_ = 0;
};

// The lowercase hex digest of the file at `path`, or "" (with `why`) when it cannot be read.
std::string sha256_file(const std::string & path, std::string & why);

} // namespace standin::swarmd
