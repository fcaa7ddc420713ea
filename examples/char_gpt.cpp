// A character-level GPT in the shape of nanoGPT's model.py: token and learned position embeddings,
// pre-LayerNorm blocks of causal self-attention (scaled_dot_product_attention with is_causal) and a
// GELU MLP, a final LayerNorm and a linear head; trained with AdamW on random windows of a text,
// then sampled with a temperature and top-k. Without --data it learns five of Shakespeare's sonnets
// embedded below (3 KB: past a few hundred steps the model learns them by heart, and the validation
// loss rises while the training loss falls; a larger --data file generalises). Characters are
// bytes: any text works, and a sample of non-ASCII text may cut a multi-byte character. Copy it
// to start your own Transformer.
//
//   build/bin/char_gpt                          # the built-in sonnets
//   build/bin/char_gpt --data book.txt --steps 5000 --prime "ROMEO:" --temperature 0.8 --top-k 10
#include <CLI/CLI.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "autograd/tapegrad.h"
#include "nn/file_io.h"
#include "nn/nn.h"

using namespace tg;
using namespace tg::indexing;  // Slice, None

namespace {

// William Shakespeare, Sonnets 18, 29, 73, 116 and 130 (1609; public domain).
constexpr const char* kSonnets =
    "Shall I compare thee to a summer's day?\nThou art more lovely and more temperate:\n"
    "Rough winds do shake the darling buds of May,\nAnd summer's lease hath all too short a date;\n"
    "Sometime too hot the eye of heaven shines,\nAnd often is his gold complexion dimm'd;\n"
    "And every fair from fair sometime declines,\nBy chance or nature's changing course untrimm'd;\n"
    "But thy eternal summer shall not fade,\nNor lose possession of that fair thou ow'st;\n"
    "Nor shall Death brag thou wander'st in his shade,\nWhen in eternal lines to time thou grow'st:\n"
    "So long as men can breathe or eyes can see,\nSo long lives this, and this gives life to thee.\n\n"
    "When, in disgrace with fortune and men's eyes,\nI all alone beweep my outcast state,\n"
    "And trouble deaf heaven with my bootless cries,\nAnd look upon myself and curse my fate,\n"
    "Wishing me like to one more rich in hope,\nFeatured like him, like him with friends possess'd,\n"
    "Desiring this man's art and that man's scope,\nWith what I most enjoy contented least;\n"
    "Yet in these thoughts myself almost despising,\nHaply I think on thee, and then my state,\n"
    "Like to the lark at break of day arising\nFrom sullen earth, sings hymns at heaven's gate;\n"
    "For thy sweet love remember'd such wealth brings\nThat then I scorn to change my state with kings.\n\n"
    "That time of year thou mayst in me behold\nWhen yellow leaves, or none, or few, do hang\n"
    "Upon those boughs which shake against the cold,\nBare ruin'd choirs, where late the sweet birds sang.\n"
    "In me thou see'st the twilight of such day\nAs after sunset fadeth in the west,\n"
    "Which by and by black night doth take away,\nDeath's second self, that seals up all in rest.\n"
    "In me thou see'st the glowing of such fire\nThat on the ashes of his youth doth lie,\n"
    "As the death-bed whereon it must expire,\nConsumed with that which it was nourish'd by.\n"
    "This thou perceivest, which makes thy love more strong,\nTo love that well which thou must leave ere long.\n\n"
    "Let me not to the marriage of true minds\nAdmit impediments. Love is not love\n"
    "Which alters when it alteration finds,\nOr bends with the remover to remove:\n"
    "O no! it is an ever-fixed mark\nThat looks on tempests and is never shaken;\n"
    "It is the star to every wandering bark,\nWhose worth's unknown, although his height be taken.\n"
    "Love's not Time's fool, though rosy lips and cheeks\nWithin his bending sickle's compass come;\n"
    "Love alters not with his brief hours and weeks,\nBut bears it out even to the edge of doom.\n"
    "If this be error and upon me proved,\nI never writ, nor no man ever loved.\n\n"
    "My mistress' eyes are nothing like the sun;\nCoral is far more red than her lips' red;\n"
    "If snow be white, why then her breasts are dun;\nIf hairs be wires, black wires grow on her head.\n"
    "I have seen roses damask'd, red and white,\nBut no such roses see I in her cheeks;\n"
    "And in some perfumes is there more delight\nThan in the breath that from my mistress reeks.\n"
    "I love to hear her speak, yet well I know\nThat music hath a far more pleasing sound;\n"
    "I grant I never saw a goddess go;\nMy mistress, when she walks, treads on the ground:\n"
    "And yet, by heaven, I think my love as rare\nAs any she belied with false compare.\n";

struct GptConfig {
  std::int64_t vocab_size = 0, block_size = 32, n_layer = 2, n_head = 4, n_embd = 64;
};

class CausalSelfAttentionImpl : public nn::Module {
 public:
  CausalSelfAttentionImpl(const GptConfig& c, Generator& gen) : n_head(c.n_head) {
    c_attn = register_module("c_attn", nn::Linear(c.n_embd, 3 * c.n_embd, gen));  // q, k, v
    c_proj = register_module("c_proj", nn::Linear(c.n_embd, c.n_embd, gen));
  }
  Tensor forward(const Tensor& x) {
    const std::int64_t B = x.size(0), T = x.size(1), C = x.size(2);
    const auto qkv = c_attn(x).split(C, 2);  // q, k, v
    auto heads = [&](const Tensor& t) { return t.view({B, T, n_head, C / n_head}).transpose(1, 2); };  // (B, nh, T, hs)
    const Tensor y = scaled_dot_product_attention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), {.is_causal = true});
    return c_proj(y.transpose(1, 2).contiguous().view({B, T, C}));  // the heads side by side again
  }
  nn::Linear c_attn{nullptr}, c_proj{nullptr};
  std::int64_t n_head;
};
TG_MODULE(CausalSelfAttention);

class MlpImpl : public nn::Module {
 public:
  MlpImpl(const GptConfig& c, Generator& gen) {
    c_fc = register_module("c_fc", nn::Linear(c.n_embd, 4 * c.n_embd, gen));
    c_proj = register_module("c_proj", nn::Linear(4 * c.n_embd, c.n_embd, gen));
  }
  Tensor forward(const Tensor& x) { return c_proj(gelu(c_fc(x))); }
  nn::Linear c_fc{nullptr}, c_proj{nullptr};
};
TG_MODULE(Mlp);

class BlockImpl : public nn::Module {
 public:
  BlockImpl(const GptConfig& c, Generator& gen) {
    ln_1 = register_module("ln_1", nn::LayerNorm(c.n_embd));
    attn = register_module("attn", CausalSelfAttention(c, gen));
    ln_2 = register_module("ln_2", nn::LayerNorm(c.n_embd));
    mlp = register_module("mlp", Mlp(c, gen));
  }
  Tensor forward(Tensor x) {
    x = x + attn(ln_1(x));
    return x + mlp(ln_2(x));
  }
  nn::LayerNorm ln_1{nullptr}, ln_2{nullptr};
  CausalSelfAttention attn{nullptr};
  Mlp mlp{nullptr};
};
TG_MODULE(Block);

class GptImpl : public nn::Module {
 public:
  GptImpl(const GptConfig& c, Generator& gen) : config(c) {
    wte = register_module("wte", nn::Embedding(c.vocab_size, c.n_embd, gen));
    wpe = register_module("wpe", nn::Embedding(c.block_size, c.n_embd, gen));
    h = register_module("h", nn::ModuleList());
    for (std::int64_t i = 0; i < c.n_layer; ++i) h->push_back(Block(c, gen));
    ln_f = register_module("ln_f", nn::LayerNorm(c.n_embd));
    lm_head = register_module("lm_head", nn::Linear(c.n_embd, c.vocab_size, gen, /*bias=*/false));
    apply([&gen](nn::Module& m) {  // nanoGPT's self.apply(self._init_weights)
      if (auto* linear = dynamic_cast<nn::LinearImpl*>(&m)) {
        nn::init::normal_(linear->weight, 0.0, 0.02, gen);
        if (linear->bias.defined()) nn::init::zeros_(linear->bias);
      } else if (auto* embedding = dynamic_cast<nn::EmbeddingImpl*>(&m)) {
        nn::init::normal_(embedding->weight, 0.0, 0.02, gen);
      }
    });
  }

  /// idx (B, T) i64, T <= block_size -> logits (B, T, vocab_size).
  Tensor forward(const Tensor& idx) {
    Tensor x = wte(idx) + wpe(arange(idx.size(1)));  // (B, T, C) + (T, C)
    for (std::int64_t i = 0; i < config.n_layer; ++i) x = h->get<Block>(i)(x);
    return lm_head(ln_f(x));
  }

  /// Appends max_new_tokens tokens to idx (B, T), each drawn from softmax(logits / temperature)
  /// over the top_k likeliest (all when top_k is 0).
  Tensor generate(Tensor idx, std::int64_t max_new_tokens, double temperature, std::int64_t top_k, Generator& gen) {
    NoGradGuard no_grad;
    for (std::int64_t i = 0; i < max_new_tokens; ++i) {
      // The last block_size tokens (all of them while idx is shorter: slices clamp, as Python's).
      const Tensor idx_cond = idx.index({Slice(), Slice(-config.block_size, None)});
      Tensor logits = forward(idx_cond).index({Slice(), -1, Slice()});
      // Max at 0 first, and float32 logits: a tiny temperature gives 0 and -inf (greedy), not NaN.
      logits = (logits - logits.amax(-1, true)) / std::max(temperature, 1e-30);
      if (top_k > 0) {
        const auto [v, _] = logits.topk(std::min(top_k, logits.size(-1)));  // (B, k), largest first
        logits.index_put_({logits < v.index({Slice(), Slice(-1, None)})}, -kInf);
      }
      const Tensor probs = logits.softmax(-1);
      idx = concat({idx, probs.multinomial(1, false, gen)}, 1);
    }
    return idx;
  }

  GptConfig config;
  nn::Embedding wte{nullptr}, wpe{nullptr};
  nn::ModuleList h{nullptr};
  nn::LayerNorm ln_f{nullptr};
  nn::Linear lm_head{nullptr};
};
TG_MODULE(Gpt);

// The text as ids (nanoGPT's shakespeare_char/prepare.py): the vocabulary is the sorted set of its
// bytes; the first 90 % is trained on, the rest validates.
class CharData {
 public:
  CharData(const std::string& text, std::int64_t block_size) : block_size_(block_size) {
    stoi_.fill(-1);
    for (unsigned char ch : text) stoi_[ch] = 0;
    for (int ch = 0; ch < 256; ++ch)
      if (stoi_[ch] >= 0) stoi_[ch] = static_cast<std::int64_t>(itos_.size()), itos_ += static_cast<char>(ch);
    const auto n = static_cast<std::int64_t>(text.size()), n_train = n * 9 / 10;
    if (n - n_train <= block_size)
      throw std::runtime_error("the text has " + std::to_string(n) + " bytes: too short for windows of " +
                               std::to_string(block_size) + " in its last 10 %");
    const Tensor ids = encode(text, "the text");
    train = ids.index({Slice(None, n_train)});
    val = ids.index({Slice(n_train, None)});
  }
  std::int64_t vocab_size() const { return static_cast<std::int64_t>(itos_.size()); }
  /// `s` as ids (len) i64; throws naming `what` for a byte that is not in the text.
  Tensor encode(const std::string& s, const std::string& what) const {
    std::vector<std::int64_t> ids;
    for (unsigned char ch : s) {
      if (stoi_[ch] < 0) throw std::runtime_error(what + ": '" + std::string(1, static_cast<char>(ch)) + "' is not in the text");
      ids.push_back(stoi_[ch]);
    }
    return Tensor::from_vector(ids, {static_cast<std::int64_t>(ids.size())});
  }
  std::string decode(const Tensor& ids) const {
    std::string s;
    for (std::int64_t id : ids.to_vector<std::int64_t>()) s += itos_[static_cast<std::size_t>(id)];
    return s;
  }
  /// batch_size random windows of `split` (B, block_size) and the bytes that follow each position.
  std::pair<Tensor, Tensor> get_batch(const Tensor& split, std::int64_t batch_size, Generator& gen) const {
    std::vector<Tensor> xs, ys;
    for (std::int64_t i : randint(split.size(0) - block_size_, {batch_size}, gen).to_vector<std::int64_t>()) {
      xs.push_back(split.index({Slice(i, i + block_size_)}));
      ys.push_back(split.index({Slice(i + 1, i + 1 + block_size_)}));
    }
    return {stack(xs), stack(ys)};
  }

  Tensor train, val;

 private:
  std::int64_t block_size_;
  std::array<std::int64_t, 256> stoi_{};
  std::string itos_;
};

// Checks CLI11 does not make: a finite temperature (its PositiveNumber lets nan through), a seed
// without a sign (an unsigned option reads -1 as 2^64 - 1), a text that is not empty.
const CLI::Validator kFinitePositive(
    [](std::string& text) {
      const double v = std::strtod(text.c_str(), nullptr);
      return v > 0 && std::isfinite(v) ? std::string() : "expected a finite number > 0, got '" + text + "'";
    },
    "FINITE > 0");
const CLI::Validator kUnsigned(
    [](std::string& text) {
      return text.starts_with('-') ? "expected a number >= 0, got '" + text + "'" : std::string();
    },
    "");
const CLI::Validator kNonEmpty([](std::string& text) { return text.empty() ? "expected a value, got ''" : ""; }, "");

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Character-level GPT in the shape of nanoGPT (tapegrad example)", "char_gpt"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // a repeated flag: the last wins
  int steps = 1000, threads = 0;
  std::int64_t length = 500, top_k = 10;
  double temperature = 0.8;
  std::uint64_t seed = 0;
  std::string data, prime;
  app.add_option("--steps", steps, "training steps")->check(CLI::Range(1, 10'000'000));
  app.add_option("--seed", seed, "seed of the initialisation, the batches and the sampling")->check(kUnsigned);
  app.add_option("--data", data, "text to learn (default: five of Shakespeare's sonnets)")->check(kNonEmpty);
  app.add_option("--prime", prime, "text the sample starts from (default: the text's first byte)")->check(kNonEmpty);
  app.add_option("--temperature", temperature, "sampling temperature (lower = more conservative)")
      ->check(kFinitePositive);
  app.add_option("--top-k", top_k, "sample from the K likeliest bytes (0 = all)")
      ->check(CLI::Range(std::int64_t{0}, std::numeric_limits<std::int64_t>::max()));
  app.add_option("--length", length, "bytes to sample after training")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{10'000'000}));
  app.add_option("--threads", threads, "kernel threads (0 = all)")->check(CLI::Range(0, 4096));
  try {
    try {
      app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
      app.exit(e);  // the help on stdout
      nn::io::flush_stdout_or_throw();
      return 0;
    } catch (const CLI::ParseError& e) {
      std::fprintf(stderr, "char_gpt: %s\nusage: char_gpt [OPTIONS]; --help lists them\n", e.what());
      return 2;
    }
    set_num_threads(threads);

    // ---- data ---------------------------------------------------------------------------------------
    const std::string text = data.empty() ? kSonnets : nn::io::read_file(data, nn::io::limits::kTextData);
    GptConfig config;
    const CharData chars(text, config.block_size);
    config.vocab_size = chars.vocab_size();
    const Tensor start = chars.encode(prime.empty() ? text.substr(0, 1) : prime, "--prime");  // checked before training
    const std::int64_t batch_size = 16;

    // ---- model, optimizer (weight decay on matrices and embeddings only) ---------------------------
    Generator gen(seed);
    Gpt model(config, gen);
    nn::NamedTensors decay, no_decay;
    for (const auto& [name, p] : model->named_parameters()) (p.dim() >= 2 ? decay : no_decay).emplace_back(name, p);
    nn::AdamW optimizer({nn::ParamGroup(decay), nn::ParamGroup(no_decay).weight_decay(0.0)},
                        nn::AdamWOptions(3e-3).weight_decay(0.1));
    std::printf("text: %zu bytes, vocabulary %lld; model: %lld parameters\n", text.size(),
                static_cast<long long>(config.vocab_size), static_cast<long long>(model->num_parameters()));

    // The mean loss over 10 fixed batches of each split (the same batches at every evaluation).
    auto estimate_loss = [&](const Tensor& split) {
      NoGradGuard no_grad;
      nn::EvalModeGuard eval(model);
      Generator g(seed + 1);
      double total = 0;
      for (int k = 0; k < 10; ++k) {
        const auto [x, y] = chars.get_batch(split, batch_size, g);
        total += cross_entropy(model(x), y).item();  // logits (B, T, V) against targets (B, T)
      }
      return total / 10;
    };

    // ---- training ---------------------------------------------------------------------------------
    const int eval_interval = std::max(1, steps / 10);
    for (int step = 0; step <= steps; ++step) {
      if (step % eval_interval == 0 || step == steps) {
        std::printf("step %d: train loss %.4f, val loss %.4f\n", step, estimate_loss(chars.train), estimate_loss(chars.val));
        std::fflush(stdout);
      }
      if (step == steps) break;
      const auto [x, y] = chars.get_batch(chars.train, batch_size, gen);
      optimizer.zero_grad();
      Tensor loss = cross_entropy(model(x), y);
      loss.backward();
      nn::clip_grad_norm_(model->parameters(), 1.0);
      optimizer.step();
    }

    // ---- sampling ---------------------------------------------------------------------------------
    Generator sample_gen(seed);
    model->eval();
    const Tensor out = model->generate(start.unsqueeze(0), length, temperature, top_k, sample_gen);  // (1, T + length)
    std::printf("--- sample (temperature %g, top-k %lld) ---\n%s\n", temperature, static_cast<long long>(top_k),
                chars.decode(out).c_str());
    nn::io::flush_stdout_or_throw();  // a sample lost on a full disk is an error, not status 0
  } catch (const std::exception& e) {
    std::fprintf(stderr, "char_gpt: %s\n", e.what());
    return 1;
  }
  return 0;
}
