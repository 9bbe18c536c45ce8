// Splits a fuzz input into fields at NUL bytes, so that one input can carry a
// file's text and several flag values, or a whole argument vector.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dlaunch::fuzz {

// At most `max_fields` fields (0: no limit); the last one keeps any further NULs.
inline std::vector<std::string> SplitAtNul(const std::uint8_t* data, std::size_t size, std::size_t max_fields = 0) {
  std::vector<std::string> fields(1);
  for (std::size_t i = 0; i < size; ++i) {
    if (data[i] == 0 && (max_fields == 0 || fields.size() < max_fields)) {
      fields.emplace_back();
    } else {
      fields.back() += static_cast<char>(data[i]);
    }
  }
  return fields;
}

}  // namespace dlaunch::fuzz
