#pragma once
// Explicit, seeded random numbers: every random tensor, initialiser and dropout mask takes a
// Generator, so the same seed gives the same numbers on every platform (the mapping from 64-bit
// draws to floats is ours, not the standard library's). The one piece of global state is
// default_generator() (torch's default generator), which only the sampling ops' overloads without
// a generator argument and scaled_dot_product_attention's options form without a .generator (for
// its dropout) use; library code never draws from it on its own.
#include <cstdint>
#include <mutex>
#include <random>

namespace tg {

/// splitmix64 (Steele, Lea, Flood 2014): a tiny 64-bit stream, trivial to reproduce bit for bit in
/// other languages. Dropout runs one per call, seeded from a Generator; the benchmarks draw their
/// batches from it so that bench/pytorch_reference.py can draw the same ones.
struct SplitMix64 {
  /// The state's step, and the output function's two multipliers (also used by dropout's AVX2
  /// kernel, which runs this stream on four lanes).
  static constexpr std::uint64_t kIncrement = 0x9E3779B97F4A7C15ULL;
  static constexpr std::uint64_t kMix1 = 0xBF58476D1CE4E5B9ULL, kMix2 = 0x94D049BB133111EBULL;
  std::uint64_t state;
  /// The output function: a well-mixed 64-bit value from any 64-bit input.
  static std::uint64_t finalize(std::uint64_t z) {
    z = (z ^ (z >> 30)) * kMix1;
    z = (z ^ (z >> 27)) * kMix2;
    return z ^ (z >> 31);
  }
  std::uint64_t next() { return finalize(state += kIncrement); }
  /// Output k (from 0) of the stream that starts at `seed`, without drawing the k before it.
  static std::uint64_t at(std::uint64_t seed, std::uint64_t k) { return finalize(seed + (k + 1) * kIncrement); }
  /// Uniform-ish integer in [0, n) (modulo: the benchmarks' batches, not statistics).
  std::int64_t below(std::int64_t n) { return static_cast<std::int64_t>(next() % static_cast<std::uint64_t>(n)); }
};

/// A seeded stream of random numbers (mt19937_64; not torch's mt19937, so the same seed gives
/// other numbers than PyTorch's).
class Generator {
 public:
  /// PyTorch's default seed (c10::default_rng_seed_val), default_generator()'s at start.
  static constexpr std::uint64_t kDefaultSeed = 67280421310721ULL;

  explicit Generator(std::uint64_t seed = 0) : engine_(seed), initial_seed_(seed) {}
  /// Restarts the stream at `seed`: afterwards the generator draws as Generator(seed) would (the
  /// cached second normal is dropped too).
  void seed(std::uint64_t seed) {
    engine_.seed(seed);
    has_spare_ = false;
    initial_seed_ = seed;
  }
  /// torch.Generator.manual_seed: seed(), returning *this.
  Generator& manual_seed(std::uint64_t seed) {
    this->seed(seed);
    return *this;
  }
  /// The seed the stream was last started from (torch.Generator.initial_seed).
  std::uint64_t initial_seed() const { return initial_seed_; }

  std::uint64_t next_u64() { return engine_(); }
  /// Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  /// Standard normal (Box-Muller; the second value is cached).
  double normal();
  /// Uniform integer in [0, n) by modulo (slightly biased for large n; kept because existing
  /// streams depend on it). New code: uniform_below.
  std::uint64_t below(std::uint64_t n) { return n == 0 ? 0 : next_u64() % n; }
  /// Uniform integer in [0, n) without modulo bias: draws falling in the incomplete top block of
  /// 2^64 mod n values are rejected and redrawn. 0 for n = 0.
  std::uint64_t uniform_below(std::uint64_t n);
  /// Exponential with rate 1: -log(1 - uniform()), in [0, 53 log 2 = 36.7].
  double exponential();

 private:
  std::mt19937_64 engine_;
  std::uint64_t initial_seed_;
  bool has_spare_ = false;
  double spare_ = 0.0;
};

/// The generator that sampling ops (autograd/ops_sampling.h) draw from when called without one, as
/// torch's default CPU generator; seeded with Generator::kDefaultSeed at program start. Those ops
/// hold default_generator_mutex() while they draw; code that draws from it directly on several
/// threads must hold it too.
Generator& default_generator();
std::mutex& default_generator_mutex();
/// torch.manual_seed: reseeds default_generator() (under its mutex).
void manual_seed(std::uint64_t seed);

}  // namespace tg
