// DecodeOptions::precision: decoding under bf16 autocast, on every thread the decoder uses.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/ops_reduce.h"
#include "autograd/tape.h"
#include "decode_fixtures.h"
#include "models/decoding/decode.h"

using namespace tg;
using namespace tg::models;
using namespace tg::models::testing;

namespace {

constexpr auto kBf16 = autocast::Precision::bf16;

void expect_same_bits(const std::vector<Translation>& a, const std::vector<Translation>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].ids, b[i].ids) << what << " row " << i;
    EXPECT_EQ(a[i].log_prob, b[i].log_prob) << what << " row " << i;
    EXPECT_EQ(a[i].attention, b[i].attention) << what << " row " << i;
  }
}

}  // namespace

// 64 sentences decode greedily as two slices on two threads (one on a worker thread) and beam
// search spreads its groups over both: the bf16 state must reach every task, so the results are the
// bits of one thread; the caller's own Guard gives the same as the option, and float32 differs.
TEST(DecodePrecision, Bf16ReachesEveryThreadAndEqualsACallersGuard) {
  ThreadRestore restore;
  const std::int64_t num_steps = 7, B = 64;  // one batch of decode(): the same rows as greedy_decode's
  auto model = small_model("rnnsearch", "additive", 23, 19, 12, 16, num_steps, 11);
  const Sources in = random_sources(B, num_steps, 7, 23, 5);
  for (const std::int64_t beam : {1, 3}) {
    const std::string what = beam == 1 ? "greedy" : "beam 3";
    const DecodeOptions bf16 = DecodeOptions().beam_size(beam).precision(kBf16);
    set_num_threads(1);
    const auto one = decode(*model, in.src, in.valid, bf16);
    const auto f32 = decode(*model, in.src, in.valid, DecodeOptions().beam_size(beam));
    set_num_threads(2);
    const auto two = decode(*model, in.src, in.valid, bf16);
    expect_same_bits(one, two, what + ", 1 vs 2 threads");
    std::vector<Translation> guarded;
    {
      autocast::Guard guard(kBf16);
      guarded = beam == 1 ? greedy_decode(*model, in.src, in.valid, num_steps)
                          : beam_search(*model, in.src, in.valid, 3, num_steps);
      // precision(f32) turns a caller's autocast off for the call.
      expect_same_bits(decode(*model, in.src, in.valid, DecodeOptions().beam_size(beam)), f32, what + ", fp32 in a Guard");
    }
    expect_same_bits(guarded, two, what + ", caller's Guard vs option");
    EXPECT_FALSE(autocast::is_enabled());
    std::size_t moved = 0;
    for (std::size_t i = 0; i < one.size(); ++i) moved += one[i].log_prob != f32[i].log_prob;
    EXPECT_GT(moved, 0u) << what << ": bf16 decoding gave float32's bits";
  }
}

// What bf16 decoding guarantees against float32 is closeness of the scores, not equal tokens (a
// near tie can flip). Scored on the same tokens (teacher-forced), each step's log-probability moves
// by at most 2 max |dz| over the logits; with the bf16 operand rounding (2^-9 relative each) on this
// untrained model's logits (|z| well below 1, rows of at most 48 products of entries below 1) that is
// below 0.01 per step. Here: where greedy bf16 and float32 chose the same tokens, the summed
// log-probabilities differ by at most 0.01 per step; and most sentences do choose the same tokens.
TEST(DecodePrecision, Bf16LogProbsStayWithinBf16RoundingOfFloat32) {
  const std::int64_t num_steps = 7, B = 64;
  auto model = small_model("rnnsearch", "additive", 23, 19, 12, 16, num_steps, 11);
  const Sources in = random_sources(B, num_steps, 7, 23, 9);
  const auto f32 = decode(*model, in.src, in.valid);
  const auto bf16 = decode(*model, in.src, in.valid, DecodeOptions().precision(kBf16));
  ASSERT_EQ(bf16.size(), f32.size());
  std::size_t same = 0;
  double worst = 0;
  for (std::size_t i = 0; i < f32.size(); ++i) {
    if (bf16[i].ids != f32[i].ids || bf16[i].ended != f32[i].ended) continue;
    ++same;
    const double per_step = std::abs(bf16[i].log_prob - f32[i].log_prob) / static_cast<double>(f32[i].steps());
    worst = std::max(worst, per_step);
    EXPECT_LE(per_step, 0.01) << "row " << i;
  }
  EXPECT_GE(same, f32.size() * 9 / 10) << "worst per-step difference " << worst;
  RecordProperty("worst_per_step_log_prob_difference", std::to_string(worst));
}

// A transformer's decoder keeps views of its attention in-projection rows for a decode, marked
// cacheable, so under bf16 they are read from the weight cache. Greedy decoding through the model's
// steps at 8 rows (over kDirectRows: without the cache such a product rounds and packs its operands
// at every call) gives the same logits and tokens, bit for bit, with the cache as without it; the
// cache serves the decoder's copies at every step, and the next decode packs nothing.
TEST(DecodePrecision, TransformerBf16CachedProjectionsEqualUncached) {
  const std::int64_t num_steps = 6, B = 8;
  auto model = small_model("transformer", "additive", 23, 19, 32, 48, num_steps, 13);
  model->eval();
  const Sources in = random_sources(B, num_steps, 6, 23, 7);
  std::int64_t step_hits = 0, step_packs = 0;  // of the last call's steps
  auto greedy = [&](bool cache) {
    NoGradGuard no_grad;
    autocast::Guard guard(kBf16, true, cache);
    DecoderState state = model->begin(in.src, in.valid);
    Tensor y = Tensor::full({B}, Vocab::kBos, DType::i64);
    std::vector<float> logits;
    std::vector<std::int64_t> ids;
    const auto before = autocast::cache_stats();
    for (std::int64_t t = 0; t < num_steps; ++t) {
      const Tensor out = model->step(y, state);
      const auto v = out.to_vector<float>();
      logits.insert(logits.end(), v.begin(), v.end());
      y = argmax(out, -1);
      const auto picked = y.to_vector<std::int64_t>();
      ids.insert(ids.end(), picked.begin(), picked.end());
    }
    const auto after = autocast::cache_stats();
    step_hits = after.hits - before.hits, step_packs = after.packs - before.packs;
    return std::make_pair(logits, ids);
  };
  autocast::clear_cache();
  const auto cached = greedy(true);
  EXPECT_EQ(cached, greedy(false));
  EXPECT_EQ(step_hits, 0);
  EXPECT_EQ(greedy(true), cached);
  // One layer: at each step the self-attention's q, k, v rows and the cross-attention's q rows
  // (views of in_proj_weight), both out_proj, linear1, linear2 and the readout: 9 cached products;
  // the cross-attention's k and v rows once, on the memory. All cached by the first decode.
  EXPECT_EQ(step_packs, 0);
  EXPECT_EQ(step_hits, 9 * num_steps + 2);
  autocast::clear_cache();
}
