#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "../scripted_model.h"
#include "decode_fixtures.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_shape.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "autograd/tape.h"
#include "models/decoding/decode.h"
#include "models/text/text.h"
#include "models/translators/seq2seq.h"

using namespace tg;
using namespace tg::models;
using namespace tg::models::testing;

namespace {

constexpr std::int64_t kA = 4, kB = 5, kV = 6;  // target vocabulary: 4 reserved tokens, A, B

/// A distribution over kV tokens: the given probabilities, the rest of the mass spread evenly over
/// the other tokens (at least 1e-6 each).
std::vector<double> dist(const std::map<std::int64_t, double>& p) {
  double given = 0.0;
  for (const auto& [v, q] : p) given += q;
  const double rest = std::max(1e-6, (1.0 - given) / static_cast<double>(kV - static_cast<std::int64_t>(p.size())));
  std::vector<double> out(kV, rest);
  for (const auto& [v, q] : p) out[v] = q;
  return out;
}

ModelConfig fake_config(std::int64_t num_steps = 6) {
  ModelConfig c;
  c.src_vocab = 10;
  c.tgt_vocab = kV;
  c.num_steps = num_steps;
  return c;
}

Tensor ids(const std::vector<std::int64_t>& v, const Shape& shape) { return Tensor::from_vector(v, shape); }

}  // namespace

TEST(Decode, GreedyStopsAtEosWithOneAttentionRowPerStep) {
  // A, then B, then <eos>.
  Script script = [](std::int64_t, const std::vector<std::int64_t>& prefix) {
    if (prefix.empty()) return dist({{kA, 0.9}});
    if (prefix.size() == 1) return dist({{kB, 0.8}});
    return dist({{Vocab::kEos, 0.7}});
  };
  ScriptedModel model(fake_config(), script);
  const Tensor src = ids({7, 8, Vocab::kEos, Vocab::kPad, Vocab::kPad, Vocab::kPad}, {1, 6});
  const auto out = greedy_decode(model, src, ids({3}, {1}), 6);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].ids, (std::vector<std::int64_t>{kA, kB}));
  EXPECT_TRUE(out[0].ended);
  EXPECT_EQ(out[0].steps(), 3);
  // Three decoding steps (A, B, <eos>), each over the 3 valid source positions.
  ASSERT_EQ(out[0].attention.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    ASSERT_EQ(out[0].attention[i].size(), 3u);
    for (std::size_t j = 0; j < 3; ++j) EXPECT_EQ(out[0].attention[i][j], i == j ? 1.0f : 0.0f) << i << "," << j;
  }
  // log P = log .9 + log .8 + log .7.
  EXPECT_NEAR(out[0].log_prob, std::log(0.9) + std::log(0.8) + std::log(0.7), 1e-5);
  EXPECT_EQ(model.step_calls, 3);  // stopped right after <eos>
  // Without keeping the weights: the same tokens and score, no attention rows.
  const auto bare = greedy_decode(model, src, ids({3}, {1}), 6, /*keep_attention=*/false);
  EXPECT_EQ(bare[0].ids, out[0].ids);
  EXPECT_EQ(bare[0].log_prob, out[0].log_prob);
  EXPECT_TRUE(bare[0].attention.empty());
}

TEST(Decode, GreedyStopsAfterMaxSteps) {
  Script script = [](std::int64_t, const std::vector<std::int64_t>&) { return dist({{kA, 0.9}}); };
  ScriptedModel model(fake_config(), script);
  const Tensor src = ids({7, Vocab::kEos, 1, 1, 1, 1}, {1, 6});
  const auto out = greedy_decode(model, src, ids({2}, {1}), 4);
  EXPECT_EQ(out[0].ids, (std::vector<std::int64_t>(4, kA)));
  EXPECT_FALSE(out[0].ended);
  EXPECT_EQ(out[0].attention.size(), 4u);
  EXPECT_EQ(out[0].attention[3], (std::vector<float>{0.0f, 1.0f}));  // step 3: position 3 mod 2
  EXPECT_EQ(model.step_calls, 4);
}

TEST(Decode, GreedyBatchRowsFinishIndependently) {
  // The source's first token n sets the output length: n - 6 tokens of A, then <eos>.
  Script script = [](std::int64_t src0, const std::vector<std::int64_t>& prefix) {
    return static_cast<std::int64_t>(prefix.size()) < src0 - 6 ? dist({{kA, 0.6}}) : dist({{Vocab::kEos, 0.6}});
  };
  ScriptedModel model(fake_config(5), script);
  const std::vector<std::int64_t> firsts{9, 6, 8, 7};
  std::vector<std::int64_t> src;
  for (auto f : firsts) src.insert(src.end(), {f, Vocab::kEos, 1, 1, 1});
  const auto batched = greedy_decode(model, ids(src, {4, 5}), ids({2, 2, 2, 2}, {4}), 5);
  EXPECT_EQ(model.step_calls, 4);  // the longest row needs 3 tokens + <eos>
  ASSERT_EQ(batched.size(), 4u);
  for (std::size_t i = 0; i < firsts.size(); ++i) {
    const auto n = static_cast<std::size_t>(firsts[i] - 6);
    EXPECT_EQ(batched[i].ids, std::vector<std::int64_t>(n, kA)) << i;
    EXPECT_TRUE(batched[i].ended);
    EXPECT_EQ(batched[i].attention.size(), n + 1);
    const auto single = greedy_decode(model, ids({firsts[i], Vocab::kEos, 1, 1, 1}, {1, 5}), ids({2}, {1}), 5);
    EXPECT_EQ(single[0].ids, batched[i].ids);
    EXPECT_EQ(single[0].attention, batched[i].attention);
    EXPECT_DOUBLE_EQ(single[0].log_prob, batched[i].log_prob);
  }
}

TEST(Decode, BeamFindsAMoreProbableSequenceThanGreedy) {
  // Greedy takes A (0.6) and then has at best 0.3: P(A <eos>) = 0.18.
  // Beam keeps B (0.4), after which <eos> has 0.99: P(B <eos>) = 0.396.
  Script script = [](std::int64_t, const std::vector<std::int64_t>& prefix) {
    if (prefix.empty()) return dist({{kA, 0.6}, {kB, 0.4}});
    if (prefix[0] == kA) return dist({{Vocab::kEos, 0.3}, {kA, 0.25}, {kB, 0.25}, {Vocab::kUnk, 0.2}});
    return dist({{Vocab::kEos, 0.99}});
  };
  ScriptedModel model(fake_config(), script);
  const Tensor src = ids({7, Vocab::kEos, 1, 1, 1, 1}, {1, 6});
  const Tensor len = ids({2}, {1});
  const auto greedy = greedy_decode(model, src, len, 6);
  const auto beam = beam_search(model, src, len, 2, 6);
  EXPECT_EQ(greedy[0].ids, (std::vector<std::int64_t>{kA}));
  EXPECT_NEAR(greedy[0].log_prob, std::log(0.6 * 0.3), 1e-5);
  EXPECT_EQ(beam[0].ids, (std::vector<std::int64_t>{kB}));
  EXPECT_TRUE(beam[0].ended);
  EXPECT_NEAR(beam[0].log_prob, std::log(0.4 * 0.99), 1e-5);
  EXPECT_GT(beam[0].log_prob, greedy[0].log_prob);
  // alpha = 1: the score is the mean log-probability over the 2 steps.
  EXPECT_NEAR(beam[0].score, beam[0].log_prob / 2.0, 1e-12);
  // The attention rows follow the chosen hypothesis: 2 steps over 2 source positions.
  EXPECT_EQ(beam[0].attention, (std::vector<std::vector<float>>{{1.0f, 0.0f}, {0.0f, 1.0f}}));
}

TEST(Decode, BeamLengthNormalisationChoosesBetweenShortAndLong) {
  // Short: <eos> at once, P = 0.3 (one step).  Long: A A A <eos>, P = 0.7 * 0.8^2 * 0.9 ≈ 0.403 (4 steps).
  Script script = [](std::int64_t, const std::vector<std::int64_t>& prefix) {
    if (prefix.empty()) return dist({{Vocab::kEos, 0.3}, {kA, 0.7}});
    if (prefix.size() < 3) return dist({{kA, 0.8}, {Vocab::kEos, 0.2}});
    return dist({{Vocab::kEos, 0.9}, {kA, 0.1}});
  };
  ScriptedModel model(fake_config(), script);
  const Tensor src = ids({7, Vocab::kEos, 1, 1, 1, 1}, {1, 6});
  const Tensor len = ids({2}, {1});
  // Raw log-probability (alpha = 0): the long one is more probable (0.40 > 0.3)... but beam 2
  // stops once two hypotheses finished: <eos> at step 1 and A <eos> (0.14) at step 2.
  const auto raw = beam_search(model, src, len, 2, 6, 0.0);
  EXPECT_TRUE(raw[0].ids.empty());
  EXPECT_NEAR(raw[0].log_prob, std::log(0.3), 1e-5);
  // With a wider beam the long hypothesis survives, and per-step normalisation prefers it.
  const auto norm = beam_search(model, src, len, 4, 6, 1.0);
  EXPECT_EQ(norm[0].ids, (std::vector<std::int64_t>{kA, kA, kA}));
  // Each of the 4 steps' distributions sums to 1 + (kV - 2) 1e-6 (dist's floor for the other tokens),
  // which the model's softmax divides out.
  EXPECT_NEAR(norm[0].log_prob, std::log(0.7 * 0.8 * 0.8 * 0.9) - 4.0 * std::log1p((kV - 2) * 1e-6), 1e-6);
  EXPECT_NEAR(norm[0].score, norm[0].log_prob / 4.0, 1e-12);
}

TEST(Decode, BeamOfOneEqualsGreedy) {
  // Pseudo-random distributions that depend on the whole prefix.
  Script script = [](std::int64_t src0, const std::vector<std::int64_t>& prefix) {
    std::uint64_t h = static_cast<std::uint64_t>(src0) * 1000003u;
    for (auto t : prefix) h = h * 31 + static_cast<std::uint64_t>(t) + 7;
    Generator g(h);
    std::vector<double> p(kV);
    for (auto& q : p) q = 0.05 + g.uniform();
    return p;
  };
  ScriptedModel model(fake_config(8), script);
  for (std::int64_t first = 4; first < 10; ++first) {
    const Tensor src = ids({first, 5, Vocab::kEos, 1, 1, 1, 1, 1}, {1, 8});
    const auto g = greedy_decode(model, src, ids({3}, {1}), 8);
    const auto b = beam_search(model, src, ids({3}, {1}), 1, 8, 1.0);
    EXPECT_EQ(g[0].ids, b[0].ids) << first;
    EXPECT_EQ(g[0].ended, b[0].ended);
    EXPECT_EQ(g[0].attention, b[0].attention);
    EXPECT_NEAR(g[0].log_prob, b[0].log_prob, 1e-9);
  }
}

TEST(Decode, TranslatePreprocessesTheSourceAndRestoresTrainingMode) {
  const Vocab src_vocab = Vocab::build({{"go", "."}, {"go", "."}, {"hi", "."}}, 1);
  Vocab tgt_vocab = Vocab::from_tokens({"<unk>", "<pad>", "<bos>", "<eos>", "va", "!"});
  Script script = [](std::int64_t, const std::vector<std::int64_t>& prefix) {
    if (prefix.empty()) return dist({{4, 0.9}});
    if (prefix.size() == 1) return dist({{5, 0.9}});
    return dist({{Vocab::kEos, 0.9}});
  };
  ScriptedModel model(fake_config(4), script);
  model.train();
  const auto out = translate(model, {"Go.", "Unknown words here today ."}, src_vocab, tgt_vocab);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].text(), "va !");
  EXPECT_EQ(out[0].source, (std::vector<std::string>{"go", ".", "<eos>"}));
  EXPECT_EQ(out[0].step_labels(), (std::vector<std::string>{"va", "!", "<eos>"}));
  EXPECT_EQ(out[0].attention.size(), 3u);
  EXPECT_EQ(out[0].attention[0].size(), 3u);
  // 5 tokens + <eos> truncated to num_steps = 4: no <eos>, unknown words as <unk>.
  EXPECT_EQ(out[1].source, (std::vector<std::string>{"<unk>", "<unk>", "<unk>", "<unk>"}));
  EXPECT_EQ(out[1].attention[0].size(), 4u);
  // What translate tells the CLI's warnings: unknown tokens over the whole input (the cut "." is
  // known), and the positions before the cut.
  EXPECT_EQ(out[0].unknown_tokens, 0);
  EXPECT_EQ(out[0].source_length, 3);
  EXPECT_EQ(out[1].unknown_tokens, 4);
  EXPECT_EQ(out[1].source_length, 6);
  EXPECT_TRUE(model.is_training());
  EXPECT_EQ(tape::size(), 0u);

  const SourceBatch enc = encode_sources({tokenize_source("Go.")}, src_vocab, 4);
  EXPECT_EQ(enc.src.to_vector<std::int64_t>(),
            (std::vector<std::int64_t>{src_vocab.id("go"), src_vocab.id("."), Vocab::kEos, Vocab::kPad}));
  EXPECT_EQ(enc.valid_len.to_vector<std::int64_t>(), (std::vector<std::int64_t>{3}));
}

TEST(Decode, DecodeBatchesAndValidatesOptions) {
  Script script = [](std::int64_t src0, const std::vector<std::int64_t>& prefix) {
    return static_cast<std::int64_t>(prefix.size()) < src0 - 6 ? dist({{kB, 0.6}}) : dist({{Vocab::kEos, 0.6}});
  };
  ScriptedModel model(fake_config(3), script);
  std::vector<std::int64_t> src;
  for (std::int64_t f : {6, 7, 8, 9, 7}) src.insert(src.end(), {f, Vocab::kEos, 1});
  const auto out = decode(model, ids(src, {5, 3}), ids({2, 2, 2, 2, 2}, {5}), DecodeOptions().batch_size(2));
  EXPECT_EQ(model.begin_calls, 3);  // 2 + 2 + 1
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(out[3].ids, (std::vector<std::int64_t>{kB, kB, kB}));  // capped by num_steps = 3
  EXPECT_FALSE(out[3].ended);
  EXPECT_EQ(out[4].ids, (std::vector<std::int64_t>{kB}));
  EXPECT_THROW(DecodeOptions().beam_size(0).validate(), std::invalid_argument);
  EXPECT_THROW(DecodeOptions().length_alpha(-1).validate(), std::invalid_argument);
  EXPECT_THROW(decode(model, ids({1, 2}, {2}), ids({1}, {1})), std::invalid_argument);
}

TEST(Decode, RealModelGreedyBatchedEqualsOneByOne) {
  ModelConfig c;
  c.src_vocab = 12;
  c.tgt_vocab = 11;
  c.embed_size = 8;
  c.num_hiddens = 8;
  c.num_layers = 2;
  c.num_steps = 6;
  Generator gen(3);
  auto model = make_model(c, gen);
  const std::vector<std::vector<std::int64_t>> rows{{4, 5, 6, 3, 1, 1}, {7, 3, 1, 1, 1, 1}, {8, 9, 10, 11, 4, 3}};
  std::vector<std::int64_t> flat;
  std::vector<std::int64_t> lens{4, 2, 6};
  for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  const auto batched = greedy_decode(*model, ids(flat, {3, 6}), ids(lens, {3}), 6);
  const auto beams = beam_search(*model, ids(flat, {3, 6}), ids(lens, {3}), 3, 6);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto one = greedy_decode(*model, ids(rows[i], {1, 6}), ids({lens[i]}, {1}), 6);
    EXPECT_EQ(one[0].ids, batched[i].ids) << i;
    ASSERT_EQ(one[0].attention.size(), batched[i].attention.size());
    for (std::size_t t = 0; t < one[0].attention.size(); ++t) {
      ASSERT_EQ(batched[i].attention[t].size(), static_cast<std::size_t>(lens[i]));
      double sum = 0;
      for (std::size_t j = 0; j < batched[i].attention[t].size(); ++j) {
        EXPECT_NEAR(one[0].attention[t][j], batched[i].attention[t][j], 1e-6);
        sum += batched[i].attention[t][j];
      }
      EXPECT_NEAR(sum, 1.0, 1e-5);  // the masked padding carries no weight
    }
    // Beam hypotheses carry one attention row per decoding step and their normalised score.
    EXPECT_EQ(static_cast<std::int64_t>(beams[i].attention.size()), beams[i].steps()) << i;
    EXPECT_NEAR(beams[i].score, beams[i].log_prob / static_cast<double>(beams[i].steps()), 1e-12) << i;
  }
}

namespace {

/// decode() run with 1 thread, then with 2; the thread count is restored even if decode throws.
template <class Decode>
std::pair<std::vector<Translation>, std::vector<Translation>> on_one_and_two_threads(const Decode& decode) {
  ThreadRestore restore;
  set_num_threads(1);
  auto one = decode();
  set_num_threads(2);
  auto two = decode();
  return {std::move(one), std::move(two)};
}

}  // namespace

// A batch of at least 64 sentences decodes as slices on two threads (models/decoding/decode.cpp); every
// sentence must come out the same bits as with one thread, for each model family.
TEST(Decode, GreedyOnTwoThreadsEqualsOneThreadBitForBit) {
  struct Variant {
    std::string model, attention;
  };
  for (const Variant& v : {Variant{"d2l", "additive"}, Variant{"rnnsearch", "additive"}, Variant{"rnnsearch", "dot"},
                           Variant{"rnnencdec", "additive"}}) {
    const std::int64_t num_steps = 7;
    auto model = small_model(v.model, v.attention, 23, 19, 12, 16, num_steps, 11);
    for (const std::int64_t B : {64, 101}) {  // slices of 32 + 32 and 50 + 51 rows
      const Sources in = random_sources(B, num_steps, 7, 23, static_cast<std::uint64_t>(B));
      const auto [one, two] =
          on_one_and_two_threads([&] { return greedy_decode(*model, in.src, in.valid, num_steps); });
      ASSERT_EQ(one.size(), static_cast<std::size_t>(B));
      ASSERT_EQ(two.size(), one.size());
      std::size_t distinct = 0;
      for (std::size_t i = 0; i < one.size(); ++i) {
        const std::string at = v.model + "/" + v.attention + " B=" + std::to_string(B) + " row " + std::to_string(i);
        EXPECT_EQ(one[i].ids, two[i].ids) << at;
        EXPECT_EQ(one[i].log_prob, two[i].log_prob) << at;  // bitwise
        EXPECT_EQ(one[i].attention, two[i].attention) << at;
        if (i > 0 && one[i].log_prob != one[0].log_prob) ++distinct;
      }
      EXPECT_GT(distinct, 0u) << "the rows should not all score alike";
    }
  }
}

// Beam search gives each thread a share of the sentences; every sentence's result must be the
// same bits as with one thread.
TEST(Decode, BeamOnTwoThreadsEqualsOneThreadBitForBit) {
  for (const std::string model_name : {"d2l", "rnnsearch"}) {
    const std::int64_t num_steps = 6, B = 7;
    auto model = small_model(model_name, "additive", 17, 13, 8, 12, num_steps, 5);
    const Sources in = random_sources(B, num_steps, 6, 17, 77);
    const auto [one, two] = on_one_and_two_threads([&] { return beam_search(*model, in.src, in.valid, 3, num_steps); });
    ASSERT_EQ(one.size(), static_cast<std::size_t>(B));
    ASSERT_EQ(two.size(), one.size());
    for (std::size_t i = 0; i < one.size(); ++i) {
      EXPECT_EQ(one[i].ids, two[i].ids) << model_name << " sentence " << i;
      EXPECT_EQ(one[i].log_prob, two[i].log_prob) << model_name << " sentence " << i;  // bitwise
      EXPECT_EQ(one[i].score, two[i].score) << model_name << " sentence " << i;
      EXPECT_EQ(one[i].attention, two[i].attention) << model_name << " sentence " << i;
    }
    EXPECT_TRUE(beam_search(*model, ids({}, {0, num_steps}), ids({}, {0}), 3, num_steps).empty());
  }
}

TEST(Decode, GnmtLengthPenaltyPicksAnotherHypothesisThanPerStepNormalisation) {
  // Beam 4 finishes, in order: <eos> (P 0.3, 1 step), A <eos> (0.35, 2), A A <eos> (0.175, 3),
  // A A A <eos> (0.1575, 4).
  //   steps, alpha 1:  log P / steps           -> -1.204, -0.525, -0.581, -0.462: A A A wins
  //   gnmt, alpha 1:   log P / ((5 + steps)/6) -> -1.204, -0.900, -1.307, -1.232: A wins
  Script script = [](std::int64_t, const std::vector<std::int64_t>& prefix) {
    if (prefix.empty()) return dist({{Vocab::kEos, 0.3}, {kA, 0.7}});
    if (prefix.size() < 3) return dist({{kA, 0.5}, {Vocab::kEos, 0.5}});
    return dist({{Vocab::kEos, 0.9}, {kA, 0.1}});
  };
  ScriptedModel model(fake_config(), script);
  const Tensor src = ids({7, Vocab::kEos, 1, 1, 1, 1}, {1, 6});
  const Tensor len = ids({2}, {1});
  const auto steps = beam_search(model, src, len, {6}, DecodeOptions().beam_size(4).length_alpha(1.0));
  EXPECT_EQ(steps[0].ids, (std::vector<std::int64_t>{kA, kA, kA}));
  EXPECT_NEAR(steps[0].score, std::log(0.7 * 0.5 * 0.5 * 0.9) / 4.0, 1e-5);
  const auto gnmt = beam_search(model, src, len, {6},
                                DecodeOptions().beam_size(4).length_alpha(1.0).length_penalty(LengthPenalty::kGnmt));
  EXPECT_EQ(gnmt[0].ids, (std::vector<std::int64_t>{kA}));
  EXPECT_TRUE(gnmt[0].ended);
  EXPECT_NEAR(gnmt[0].log_prob, std::log(0.35), 1e-5);
  EXPECT_NEAR(gnmt[0].score, gnmt[0].log_prob / (7.0 / 6.0), 1e-12);
  // alpha 0.6 (GNMT's value): lp = (7/6)^0.6 for A <eos>.
  const auto gnmt06 = decode(model, src, len,
                             DecodeOptions().beam_size(4).length_alpha(0.6).length_penalty(LengthPenalty::kGnmt));
  EXPECT_NEAR(gnmt06[0].score, gnmt06[0].log_prob / std::pow((5.0 + gnmt06[0].steps()) / 6.0, 0.6), 1e-12);
  EXPECT_EQ(parse_length_penalty("gnmt"), LengthPenalty::kGnmt);
  EXPECT_STREQ(to_string(LengthPenalty::kSteps), "steps");
  EXPECT_THROW(parse_length_penalty("wu"), std::invalid_argument);
}

TEST(Decode, StepLimitsRelativeToTheSource) {
  // floor(a * len + b), capped by max_steps (default: limits::kMaxSteps once a or b is set).
  const DecodeOptions rel = DecodeOptions().max_len_a(1.5).max_len_b(2);
  EXPECT_EQ(rel.step_limits({3, 10}, 6), (std::vector<std::int64_t>{6, 17}));
  EXPECT_EQ(DecodeOptions(rel).max_steps(10).step_limits({3, 10}, 6), (std::vector<std::int64_t>{6, 10}));
  EXPECT_EQ(DecodeOptions().step_limits({3, 10}, 6), (std::vector<std::int64_t>{6, 6}));  // the model's num_steps
  EXPECT_EQ(DecodeOptions().max_len_b(1).step_limits({3, 10}, 6), (std::vector<std::int64_t>{1, 1}));
  EXPECT_EQ(DecodeOptions().max_len_a(0.1).step_limits({3}, 6), (std::vector<std::int64_t>{1}));  // at least 1
  EXPECT_THROW(DecodeOptions().max_len_a(-1).validate(), std::invalid_argument);
  EXPECT_THROW(DecodeOptions().max_len_b(-1).validate(), std::invalid_argument);

  // A model that never ends: each sentence stops at its own limit, greedy and beam alike.
  Script script = [](std::int64_t, const std::vector<std::int64_t>&) { return dist({{kA, 0.9}}); };
  ScriptedModel model(fake_config(), script);
  const Tensor src = ids({7, Vocab::kEos, 1, 1, 1, 1, 7, 8, 9, 7, Vocab::kEos, 1}, {2, 6});
  const Tensor len = ids({2, 5}, {2});
  for (std::int64_t beam : {1, 3}) {
    const auto out = decode(model, src, len, DecodeOptions().beam_size(beam).max_len_a(2).max_len_b(1));
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0].ids.size(), 5u) << beam;   // 2 * 2 + 1
    EXPECT_EQ(out[1].ids.size(), 11u) << beam;  // 2 * 5 + 1, beyond the model's num_steps (6)
    EXPECT_FALSE(out[0].ended);
    EXPECT_FALSE(out[1].ended);
  }
}

TEST(Decode, BatchedBeamMatchesEachSentenceAlone) {
  // Groups of 64 / k sentences share a batch; a sentence's search must not depend on its neighbours
  // (beyond float rounding of different batch sizes).
  for (const std::string model_name : {"d2l", "rnnsearch", "rnnencdec"}) {
    const std::int64_t num_steps = 7, B = 9;
    auto model = small_model(model_name, "additive", 17, 13, 8, 12, num_steps, 21);
    const Sources in = random_sources(B, num_steps, 7, 17, 5);
    const auto all = beam_search(*model, in.src, in.valid, 3, num_steps);
    ASSERT_EQ(all.size(), static_cast<std::size_t>(B));
    for (std::int64_t i = 0; i < B; ++i) {
      const auto one = beam_search(*model, narrow(in.src, 0, i, 1), narrow(in.valid, 0, i, 1), 3, num_steps);
      EXPECT_EQ(one[0].ids, all[i].ids) << model_name << " sentence " << i;
      EXPECT_EQ(one[0].ended, all[i].ended) << model_name << " sentence " << i;
      EXPECT_NEAR(one[0].log_prob, all[i].log_prob, 1e-5) << model_name << " sentence " << i;
      EXPECT_EQ(one[0].attention.size(), all[i].attention.size());
    }
  }
}
