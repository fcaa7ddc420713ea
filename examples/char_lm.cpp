// A character-level language model: Embedding -> GRU -> Linear, trained with Adam and truncated
// backpropagation through time, then sampled with a temperature. Works on any UTF-8 text: the
// vocabulary is the set of Unicode code points in it. Without a file it learns a short poem
// embedded below. Copy it to start your own recurrent model.
//
//   build/bin/char_lm                                   # the built-in poem
//   build/bin/char_lm book.txt --steps 3000 --hidden 256 --temperature 0.7
//   build/bin/char_lm --help
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "autograd/tapegrad.h"
#include "nn/file_io.h"
#include "nn/nn.h"

using namespace tg;

namespace {

// William Blake, "The Tyger" (Songs of Experience, 1794; public domain).
constexpr const char* kBuiltinText =
    "Tyger Tyger, burning bright,\n"
    "In the forests of the night;\n"
    "What immortal hand or eye,\n"
    "Could frame thy fearful symmetry?\n"
    "\n"
    "In what distant deeps or skies,\n"
    "Burnt the fire of thine eyes?\n"
    "On what wings dare he aspire?\n"
    "What the hand, dare seize the fire?\n"
    "\n"
    "And what shoulder, & what art,\n"
    "Could twist the sinews of thy heart?\n"
    "And when thy heart began to beat,\n"
    "What dread hand? & what dread feet?\n"
    "\n"
    "What the hammer? what the chain,\n"
    "In what furnace was thy brain?\n"
    "What the anvil? what dread grasp,\n"
    "Dare its deadly terrors clasp!\n"
    "\n"
    "When the stars threw down their spears\n"
    "And water'd heaven with their tears:\n"
    "Did he smile his work to see?\n"
    "Did he who made the Lamb make thee?\n"
    "\n"
    "Tyger Tyger burning bright,\n"
    "In the forests of the night:\n"
    "What immortal hand or eye,\n"
    "Dare frame thy fearful symmetry?\n";

// ---- UTF-8 <-> code points ------------------------------------------------------------------

std::vector<char32_t> decode_utf8(const std::string& bytes, const std::string& source) {
  std::vector<char32_t> out;
  for (std::size_t i = 0; i < bytes.size();) {
    const auto b0 = static_cast<unsigned char>(bytes[i]);
    const int len = b0 < 0x80 ? 1 : (b0 >> 5) == 0x6 ? 2 : (b0 >> 4) == 0xE ? 3 : (b0 >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + len > bytes.size())
      throw std::runtime_error(source + ": invalid UTF-8 at byte " + std::to_string(i));
    char32_t cp = len == 1 ? b0 : b0 & (0x7F >> len);
    for (int k = 1; k < len; ++k) {
      const auto b = static_cast<unsigned char>(bytes[i + k]);
      if ((b >> 6) != 0x2) throw std::runtime_error(source + ": invalid UTF-8 at byte " + std::to_string(i));
      cp = (cp << 6) | (b & 0x3F);
    }
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      throw std::runtime_error(source + ": invalid UTF-8 at byte " + std::to_string(i));
    out.push_back(cp);
    i += len;
  }
  return out;
}

std::string encode_utf8(char32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// ---- the model ------------------------------------------------------------------------------

// A Module subclass (TG_MODULE(CharLM) below makes CharLM its holder): children registered by
// name, so the checkpoint keys are "embedding.weight",
// "rnn.weight_ih_l0", ..., "head.bias" (the keys of the same model written in PyTorch).
class CharLMImpl : public nn::Module {
 public:
  CharLMImpl(std::int64_t vocab, std::int64_t embed, std::int64_t hidden, std::int64_t layers, Generator& gen) {
    embedding = register_module("embedding", nn::Embedding(vocab, embed, gen));
    rnn = register_module("rnn", nn::GRU(nn::GRUOptions(embed, hidden).num_layers(layers), gen));
    head = register_module("head", nn::Linear(hidden, vocab, gen));
  }

  /// ids (T, B) i64 and state h (layers, B, hidden) or undefined (= zeros)
  /// -> logits (T, B, vocab) and the state after the last step.
  std::pair<Tensor, Tensor> forward(const Tensor& ids, const Tensor& h) {
    auto [outputs, h_n] = rnn(embedding(ids), h);
    return {head(outputs), h_n};
  }

  nn::Embedding embedding{nullptr};
  nn::GRU rnn{nullptr};
  nn::Linear head{nullptr};
};
TG_MODULE(CharLM);

// Draws an index from softmax(logits / temperature).
std::int64_t sample(const Tensor& logits, double temperature, Generator& gen) {
  const Tensor flat = logits.view({-1});
  const std::vector<double> p = (flat / temperature).softmax(-1).to_vector<double>();
  // A temperature so small that logits / temperature overflows: its limit, the likeliest character.
  if (std::any_of(p.begin(), p.end(), [](double v) { return std::isnan(v); }))
    return static_cast<std::int64_t>(flat.argmax(0).item());
  double u = gen.uniform(), acc = 0;
  for (std::size_t i = 0; i < p.size(); ++i)
    if ((acc += p[i]) > u) return static_cast<std::int64_t>(i);
  return static_cast<std::int64_t>(p.size()) - 1;  // rounding left u just above the total
}

/// The vocabulary: every code point of `text`, in code point order (so ids do not depend on the
/// order of the text); `to_id` maps a code point to its id, `to_char` an id to its code point.
void build_vocabulary(const std::vector<char32_t>& text, std::map<char32_t, std::int64_t>& to_id,
                      std::vector<char32_t>& to_char) {
  for (char32_t c : text) to_id.emplace(c, 0);
  for (auto& [c, id] : to_id) {
    id = static_cast<std::int64_t>(to_char.size());
    to_char.push_back(c);
  }
}

/// `start` and `n` code points sampled after it at `temperature`, drawn from Generator(seed).
std::string generate(CharLM& model, const std::vector<char32_t>& start, const std::map<char32_t, std::int64_t>& to_id,
                     const std::vector<char32_t>& to_char, int n, double temperature, std::uint64_t seed) {
  NoGradGuard no_grad;  // nothing is recorded: constant memory however long the sample
  model->eval();
  std::string out;
  Tensor state;
  Tensor logits;
  for (char32_t c : start) {  // run the prime through the model to set up the state
    std::tie(logits, state) = model(Tensor::from_vector(std::vector<std::int64_t>{to_id.at(c)}, {1, 1}), state);
    out += encode_utf8(c);
  }
  Generator sample_gen(seed);
  for (int i = 0; i < n; ++i) {
    const std::int64_t id = sample(logits, temperature, sample_gen);
    out += encode_utf8(to_char[id]);
    std::tie(logits, state) = model(Tensor::from_vector(std::vector<std::int64_t>{id}, {1, 1}), state);
  }
  return out;
}

/// Parses the command line: nullopt to go on, or the status to exit with (--help: 0, its text on
/// stdout; a bad flag: CLI11's status).
std::optional<int> parse(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    const int status = app.exit(e);
    if (status != 0) return status;
    try {
      nn::io::flush_stdout_or_throw();
    } catch (const std::exception& flush_error) {
      std::fprintf(stderr, "char_lm: %s\n", flush_error.what());
      return 1;
    }
    return 0;
  }
}

/// Reports an allocation failure on stderr (tapegrad's allocator names the bytes and the tensor).
void report_out_of_memory(const std::bad_alloc& e) {
  const std::string what = e.what();
  if (what.rfind("out of memory", 0) == 0) std::fprintf(stderr, "char_lm: %s\n", what.c_str());
  else if (what.empty() || what == "std::bad_alloc") std::fprintf(stderr, "char_lm: out of memory\n");
  else std::fprintf(stderr, "char_lm: out of memory: %s\n", what.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Character-level GRU language model (tapegrad example)"};
  std::string file;
  int steps = 1000, log_every = 100, threads = 0, sample_len = 300;
  std::int64_t embed = 32, hidden = 128, layers = 1, batch = 8, bptt = 32;
  double lr = 3e-3, clip = 1.0, temperature = 0.8;
  std::uint64_t seed = 1;
  std::string prime;
  app.add_option("file", file, "UTF-8 text to learn (default: a built-in poem)")->check(CLI::ExistingFile);
  app.add_option("--steps", steps, "training steps (one chunk of every stream each)")->check(CLI::PositiveNumber);
  app.add_option("--log-every", log_every, "print the mean loss every N steps")->check(CLI::PositiveNumber);
  app.add_option("--embed", embed, "embedding size")->check(CLI::PositiveNumber);
  app.add_option("--hidden", hidden, "GRU hidden size")->check(CLI::PositiveNumber);
  app.add_option("--layers", layers, "GRU layers")->check(CLI::PositiveNumber);
  app.add_option("--batch", batch, "parallel streams the text is cut into")->check(CLI::PositiveNumber);
  app.add_option("--bptt", bptt, "time steps per chunk (truncated BPTT)")->check(CLI::PositiveNumber);
  app.add_option("--lr", lr, "Adam learning rate")->check(CLI::PositiveNumber);
  app.add_option("--clip", clip, "max global gradient norm")->check(CLI::PositiveNumber);
  app.add_option("--temperature", temperature, "sampling temperature (lower = more conservative)")
      ->check(CLI::PositiveNumber);
  app.add_option("--sample-len", sample_len, "code points to sample after training")->check(CLI::NonNegativeNumber);
  app.add_option("--prime", prime, "text the sample starts from (default: the first character)");
  app.add_option("--seed", seed, "seed of the initialisation and of the sampling");
  app.add_option("--threads", threads, "kernel threads (0 = all)")->check(CLI::NonNegativeNumber);
  if (const std::optional<int> status = parse(app, argc, argv)) return *status;

  try {
    set_num_threads(threads);

    // ---- data: code points -> ids, cut into `batch` parallel streams ----------------------------
    std::string bytes = kBuiltinText;
    // A regular file only (a FIFO or /dev/zero is refused, not read until memory runs out), of at
    // most the size of a corpus; a read error is an error, never a shorter text.
    if (!file.empty()) bytes = nn::io::read_file(file, nn::io::limits::kTextData);
    const std::vector<char32_t> text = decode_utf8(bytes, file.empty() ? "built-in text" : file);
    std::map<char32_t, std::int64_t> to_id;
    std::vector<char32_t> to_char;
    build_vocabulary(text, to_id, to_char);
    const auto vocab = static_cast<std::int64_t>(to_char.size());
    // The sample's start, checked before training rather than after it.
    const std::vector<char32_t> start = prime.empty() ? std::vector<char32_t>{text[0]} : decode_utf8(prime, "--prime");
    for (char32_t c : start)
      if (!to_id.count(c)) throw std::runtime_error("--prime: '" + encode_utf8(c) + "' is not in the text");
    // Stream b is text[b * len, (b + 1) * len): each step trains on the next chunk of every stream,
    // and the state carried from one chunk to the next is the state at the end of the previous one.
    const auto len = static_cast<std::int64_t>(text.size()) / batch;
    if (len < 2)
      throw std::runtime_error("the text has " + std::to_string(text.size()) + " code points: too short for " +
                               std::to_string(batch) + " streams (lower --batch)");
    bptt = std::min(bptt, len - 1);
    std::printf("text: %zu code points, vocabulary %lld, %lld streams of %lld\n", text.size(),
                static_cast<long long>(vocab), static_cast<long long>(batch), static_cast<long long>(len));

    // ids of time steps [pos + shift, pos + shift + T) of every stream, as a (T, batch) tensor.
    auto chunk = [&](std::int64_t pos, std::int64_t T, std::int64_t shift) {
      std::vector<std::int64_t> ids(T * batch);
      for (std::int64_t t = 0; t < T; ++t)
        for (std::int64_t b = 0; b < batch; ++b) ids[t * batch + b] = to_id.at(text[b * len + pos + t + shift]);
      return Tensor::from_vector(ids, {T, batch});
    };

    // ---- model and optimizer ---------------------------------------------------------------------
    Generator gen(seed);
    CharLM model(vocab, embed, hidden, layers, gen);
    nn::Adam opt(model->named_parameters(), nn::AdamOptions(lr));
    std::printf("model: %lld parameters\n", static_cast<long long>(model->num_parameters()));

    // ---- training: truncated BPTT ----------------------------------------------------------------
    Tensor h;  // undefined = zeros
    std::int64_t pos = 0;
    double loss_sum = 0;
    int loss_count = 0;
    for (int step = 1; step <= steps; ++step) {
      if (pos + 1 >= len) {  // end of the streams: start over from a zero state
        pos = 0;
        h = Tensor();
      }
      const std::int64_t T = std::min(bptt, len - 1 - pos);
      const Tensor inputs = chunk(pos, T, 0), targets = chunk(pos, T, 1);  // predict the next character

      auto [logits, h_n] = model(inputs, h);
      Tensor loss = cross_entropy(logits.view({-1, vocab}), targets.view({-1}));
      loss.backward();                                // gradients into the parameters; frees the graph
      nn::clip_grad_norm_(model->parameters(), clip);  // tame exploding gradients of the recurrence
      opt.step();
      opt.zero_grad();
      // Keep the state's value for the next chunk but cut it from this chunk's (now freed) graph:
      // gradients flow back at most `bptt` steps.
      h = h_n.detach();
      pos += T;

      loss_sum += loss.item();
      ++loss_count;
      if (step % log_every == 0 || step == steps) {
        const double mean = loss_sum / loss_count;
        std::printf("step %6d  loss %.4f  perplexity %.2f\n", step, mean, std::exp(mean));
        std::fflush(stdout);
        loss_sum = 0;
        loss_count = 0;
      }
    }

    // ---- sampling --------------------------------------------------------------------------------
    if (sample_len > 0) {
      const std::string out = generate(model, start, to_id, to_char, sample_len, temperature, seed);
      std::printf("--- sample (temperature %.2f) ---\n%s\n", temperature, out.c_str());
    }
    nn::io::flush_stdout_or_throw();  // a sample lost on a full disk is an error, not status 0
  } catch (const std::bad_alloc& e) {
    report_out_of_memory(e);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "char_lm: %s\n", e.what());
    return 1;
  }
  return 0;
}
