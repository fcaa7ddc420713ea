#include "autograd/random.h"

#include <cmath>

namespace tg {

double Generator::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  // Box-Muller on (0, 1]: 1 - uniform() never hits log(0).
  const double u1 = 1.0 - uniform(), u2 = uniform();
  const double r = std::sqrt(-2.0 * std::log(u1)), theta = 2.0 * M_PI * u2;
  spare_ = r * std::sin(theta);
  has_spare_ = true;
  return r * std::cos(theta);
}

std::uint64_t Generator::uniform_below(std::uint64_t n) {
  if (n == 0) return 0;
  // 2^64 mod n, computed as (2^64 - n) mod n in unsigned arithmetic: draws below it would make
  // the low residues more likely than the others.
  const std::uint64_t threshold = (0 - n) % n;
  for (;;) {
    const std::uint64_t r = next_u64();
    if (r >= threshold) return r % n;
  }
}

double Generator::exponential() { return -std::log(1.0 - uniform()); }

Generator& default_generator() {
  static Generator gen(Generator::kDefaultSeed);
  return gen;
}

std::mutex& default_generator_mutex() {
  static std::mutex m;
  return m;
}

void manual_seed(std::uint64_t seed) {
  std::lock_guard<std::mutex> lock(default_generator_mutex());
  default_generator().seed(seed);
}

}  // namespace tg
