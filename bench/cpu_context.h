#pragma once
// The CPU and the kernel paths a benchmark ran with, for its JSON (issue 39): figures from
// different machines or paths must not be compared unawares.
#include <string>

#include "autograd/cpu.h"

namespace tg::bench {

/// ,"cpu":"<tg::cpu::summary()>","kernel_paths":"<tg::cpu::kernel_paths()>" to append to a JSON object.
inline std::string cpu_json_fields() {
  auto quoted = [](const std::string& s) {
    std::string q = "\"";
    for (char c : s) {
      if (c == '"' || c == '\\') q += '\\';
      if (static_cast<unsigned char>(c) >= 0x20) q += c;
    }
    return q + "\"";
  };
  return ",\"cpu\":" + quoted(tg::cpu::summary()) + ",\"kernel_paths\":" + quoted(tg::cpu::kernel_paths());
}

}  // namespace tg::bench
