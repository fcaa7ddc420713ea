#pragma once
// Explicit, seeded random numbers: every random tensor, initialiser and dropout mask takes a
// Generator, so there is no hidden global state and the same seed gives the same numbers on
// every platform (the mapping from 64-bit draws to floats is ours, not the standard library's).
#include <cstdint>
#include <random>

namespace tg {

class Generator {
 public:
  explicit Generator(std::uint64_t seed = 0) : engine_(seed) {}
  void seed(std::uint64_t seed) { engine_.seed(seed); }

  std::uint64_t next_u64() { return engine_(); }
  /// Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  /// Standard normal (Box-Muller; the second value is cached).
  double normal();
  /// Uniform integer in [0, n).
  std::uint64_t below(std::uint64_t n) { return n == 0 ? 0 : next_u64() % n; }

 private:
  std::mt19937_64 engine_;
  bool has_spare_ = false;
  double spare_ = 0.0;
};

}  // namespace tg
