#pragma once
// The allowed range of every numeric ModelConfig field, written down once. ModelConfig::validate
// (config.json, the command line, the experiments) and the command line's own option checks read
// them. They sit far above what this project trains (the paper: vocabularies of 30,000, embeddings
// of 620, states of 1000, maxout of 500, sentences of at most 50 words) and low enough that
//   - a crafted config.json is refused with a message naming the field instead of allocating
//     terabytes or decoding for hours, and
//   - every size derived from them (a weight matrix's element count, 2 * maxout_units, a parameter
//     count) fits in std::int64_t with a wide margin: the largest product of two bounds is 2^38.
#include <cstdint>

namespace tg::models::limits {

/// Vocabulary sizes: at least the four reserved tokens; 2^22 = 4,194,304 is above any word or
/// subword vocabulary in common use.
inline constexpr std::int64_t kMinVocab = 4;
inline constexpr std::int64_t kMaxVocab = std::int64_t{1} << 22;
/// embed_size, num_hiddens, maxout_units, num_heads: 65,536 (maxout_units may also be 0, meaning
/// num_hiddens / 2).
inline constexpr std::int64_t kMaxWidth = std::int64_t{1} << 16;
/// Stacked recurrent layers (d2l; the paper's models have one) and transformer layers per stack;
/// attention_layer lies in [-kMaxLayers, kMaxLayers] (the model checks it against num_layers).
inline constexpr std::int64_t kMaxLayers = 64;
/// num_steps (source/target length the model is trained and decodes with) and the decoders'
/// max_steps: each decoding step is a full pass of the decoder, so this bounds a translation's time.
inline constexpr std::int64_t kMaxSteps = 4096;
/// Beam width of beam search: each hypothesis scores the whole target vocabulary every step.
inline constexpr std::int64_t kMaxBeam = 1024;
/// Sentence pairs in one minibatch (the command line, TrainOptions and training.json).
inline constexpr std::int64_t kMaxBatchSize = std::int64_t{1} << 20;
/// Counts a checkpoint's training.json records (step, epoch, batch within the epoch): 2^53, the
/// largest integer every JSON reader keeps exactly.
inline constexpr std::int64_t kMaxCount = std::int64_t{1} << 53;
/// The parameters the sizes together may give: 2^31 (8 GiB of float32 weights, before gradients
/// and optimizer state), checked on the exact count before anything is allocated.
inline constexpr std::int64_t kMaxParameters = std::int64_t{1} << 31;

}  // namespace tg::models::limits
