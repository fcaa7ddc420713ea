// LibTorch reference for bench_seq2seq (issue 20): workloads A, B, C and T of bench/workloads.h, the
// models of bench/pytorch_reference.py (d2l's Bahdanau classes, bench/d2l_torch.py, for A; RNNsearch
// for B and C; the nn.Transformer tutorial's Seq2SeqTransformer for T) translated to torch::nn
// modules, the same splitmix64 batches, training step, greedy decoding and JSON keys.
//
//   OMP_WAIT_POLICY=passive build/bin/libtorch_seq2seq --config A|B|C|T [--readout linear|maxout]
//       [--threads N] [--steps N] [--warmup N] [--seed S] [--profile] [--no-decode] [--precision f32|bf16]
//
// --precision bf16 (issue 39): as bench/pytorch_reference.py, each training step's forward and loss
// inside ltbench::Autocast (torch.autocast("cpu", dtype=torch.bfloat16) written with LibTorch's
// at::autocast API, common.h), backward, clipping and Adam outside it; each greedy decoding call
// inside its own. The record names the precision and the dtype of the first step's logits. T does
// not run in bf16: LibTorch 1.13's C++ MultiheadAttention (torch/nn/functional/activation.h) fills
// the key padding mask into the attention scores under AT_DISPATCH_FLOATING_TYPES, which has no
// BFloat16, so under autocast it throws "attn_output_weights.masked_fill" not implemented for
// 'BFloat16' (PyTorch's Python MultiheadAttention runs); bench/compare notes it and leaves the cell out.
//
// Differences from the Python classes, none of which changes the arithmetic: d2l's masked_softmax
// writes -1e6 with an in-place index assignment, here masked_fill; gradients are dropped by
// resetting them (zero_grad(set_to_none=True), which LibTorch 1.13's zero_grad does not offer).
// T: torch::nn::Transformer has no batch_first in LibTorch 1.13, so the model runs sequence first
// as the tutorial does; its attention masks are float (-inf above the diagonal), because LibTorch's
// C++ multi_head_attention_forward adds attn_mask and does not take a bool one. Greedy decoding
// goes through begin()/step() like A-C: step() appends the previous token to the prefix and reruns
// the decoder over the whole prefix, which is the tutorial's greedy_decode loop.
#include <cmath>
#include <iostream>
#include <optional>

#include "common.h"

namespace {

constexpr int64_t kPad = 1, kBos = 2, kEos = 3, kFirstWord = 4;

struct Workload {
  std::string model;
  int64_t src_vocab, tgt_vocab, embed, hidden, layers;
  double dropout;
  int64_t batch, num_steps;
  std::string readout;
  int steps, warmup;
  double decode_min_time;
  bool zero_grad_before_forward;
  int64_t heads = 0, min_len = 3;  // T: attention heads; every workload: shortest valid row
  double lr = 0.005, beta2 = 0.999, adam_eps = 1e-8;
};

Workload workload(const std::string& name) {
  if (name == "A") return {"d2l", 184, 201, 32, 32, 2, 0.1, 64, 10, "linear", 100, 10, 1.0, false};
  if (name == "B") return {"rnnsearch", 8000, 8000, 256, 256, 1, 0.0, 64, 20, "linear", 10, 2, 1.0, false};
  if (name == "C") return {"rnnsearch", 30000, 30000, 620, 1000, 1, 0.0, 80, 30, "linear", 3, 1, 0.0, true};
  // T: hidden = the feed-forward width, layers = layers per stack.
  if (name == "T") return {"transformer", 8000, 8000, 256, 1024, 3, 0.1, 64, 40, "linear", 3, 1, 1.0, false, 4, 20,
                           1e-4, 0.98, 1e-9};
  throw std::invalid_argument("libtorch_seq2seq: unknown --config " + name + " (A, B, C or T)");
}

// ----------------------------------------------------------------------------- data (bench/workloads.h)
int64_t fill_row(ltbench::SplitMix64& rng, int64_t* row, int64_t n, int64_t vocab, int64_t min_len) {
  const int64_t len = min_len + rng.below(n - min_len + 1);
  for (int64_t j = 0; j < len - 1; ++j) row[j] = kFirstWord + rng.below(vocab - kFirstWord);
  row[len - 1] = kEos;
  for (int64_t j = len; j < n; ++j) row[j] = kPad;
  return len;
}

struct Batch {
  torch::Tensor src, src_len, tgt, tgt_len;
  int64_t tokens = 0;
};

Batch make_batch(ltbench::SplitMix64& rng, const Workload& w) {
  const int64_t B = w.batch, T = w.num_steps;
  Batch b{torch::empty({B, T}, torch::kLong), torch::empty({B}, torch::kLong), torch::empty({B, T}, torch::kLong),
          torch::empty({B}, torch::kLong)};
  for (int64_t i = 0; i < B; ++i) {
    b.src_len.data_ptr<int64_t>()[i] = fill_row(rng, b.src.data_ptr<int64_t>() + i * T, T, w.src_vocab, w.min_len);
    b.tgt_len.data_ptr<int64_t>()[i] = fill_row(rng, b.tgt.data_ptr<int64_t>() + i * T, T, w.tgt_vocab, w.min_len);
    b.tokens += b.tgt_len.data_ptr<int64_t>()[i];
  }
  return b;
}

/// Decoder state: A uses {enc_outputs (B,S,H), hidden (L,B,H), valid_lens}, B and C {memory, keys, mask, s},
/// T {memory (S,B,E), source padding mask (B,S), prefix (t,B)}.
using State = std::vector<torch::Tensor>;

torch::Tensor sequence_loss(const torch::Tensor& logits, const torch::Tensor& target, const torch::Tensor& valid_len);

struct Seq2Seq : torch::nn::Module {
  virtual torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& src_len, const torch::Tensor& dec_input) = 0;
  virtual State begin(const torch::Tensor& src, const torch::Tensor& src_len) = 0;
  virtual torch::Tensor step(const torch::Tensor& y_prev, State& state) = 0;  // logits (B, V)
  /// The training loss of forward()'s logits against the target (B, T): mean over valid tokens.
  virtual torch::Tensor loss(const torch::Tensor& logits, const torch::Tensor& tgt, const torch::Tensor& tgt_len) {
    return sequence_loss(logits, tgt, tgt_len);
  }
};

// ----------------------------------------------------------------------------- d2l (A)
torch::Tensor masked_softmax(const torch::Tensor& X, const torch::Tensor& valid_lens) {
  const auto shape = X.sizes().vec();
  const auto lens = torch::repeat_interleave(valid_lens, shape[1]);
  auto flat = X.reshape({-1, shape.back()});
  const auto mask = torch::arange(shape.back(), torch::kFloat32).unsqueeze(0) < lens.unsqueeze(1);
  flat = flat.masked_fill(mask.logical_not(), -1e6);
  return torch::softmax(flat.reshape(shape), -1);
}

struct D2l : Seq2Seq {
  torch::nn::Embedding enc_embedding{nullptr}, dec_embedding{nullptr};
  torch::nn::GRU enc_rnn{nullptr}, dec_rnn{nullptr};
  torch::nn::Linear W_k{nullptr}, W_q{nullptr}, w_v{nullptr}, dense{nullptr};
  torch::nn::Dropout attn_dropout{nullptr};

  explicit D2l(const Workload& w) {
    const int64_t E = w.embed, H = w.hidden;
    // Registration order = Python's parameter order (encoder, then decoder's attention, embedding, rnn, dense).
    enc_embedding = register_module("encoder_embedding", torch::nn::Embedding(w.src_vocab, E));
    enc_rnn = register_module("encoder_rnn", torch::nn::GRU(torch::nn::GRUOptions(E, H).num_layers(w.layers).dropout(w.dropout)));
    W_k = register_module("W_k", torch::nn::Linear(torch::nn::LinearOptions(H, H).bias(false)));
    W_q = register_module("W_q", torch::nn::Linear(torch::nn::LinearOptions(H, H).bias(false)));
    w_v = register_module("w_v", torch::nn::Linear(torch::nn::LinearOptions(H, 1).bias(false)));
    attn_dropout = register_module("attn_dropout", torch::nn::Dropout(w.dropout));
    dec_embedding = register_module("decoder_embedding", torch::nn::Embedding(w.tgt_vocab, E));
    dec_rnn = register_module("decoder_rnn", torch::nn::GRU(torch::nn::GRUOptions(E + H, H).num_layers(w.layers).dropout(w.dropout)));
    dense = register_module("dense", torch::nn::Linear(H, w.tgt_vocab));
  }

  torch::Tensor attention(const torch::Tensor& queries_in, const torch::Tensor& keys_in, const torch::Tensor& values,
                          const torch::Tensor& valid_lens) {
    const auto queries = W_q(queries_in), keys = W_k(keys_in);
    const auto features = torch::tanh(queries.unsqueeze(2) + keys.unsqueeze(1));
    const auto scores = w_v(features).squeeze(-1);
    return torch::bmm(attn_dropout(masked_softmax(scores, valid_lens)), values);
  }

  State begin(const torch::Tensor& src, const torch::Tensor& src_len) override {
    const auto X = enc_embedding(src).permute({1, 0, 2});
    auto [outputs, hidden] = enc_rnn(X);
    return {outputs.permute({1, 0, 2}), hidden, src_len};
  }

  // Seq2SeqAttentionDecoder.forward: (B, T, V) logits; updates state's hidden.
  torch::Tensor decode(const torch::Tensor& X_in, State& state) {
    const auto& enc_outputs = state[0];
    auto hidden = state[1];
    const auto X = dec_embedding(X_in).permute({1, 0, 2});
    std::vector<torch::Tensor> outputs;
    for (int64_t t = 0; t < X.size(0); ++t) {
      const auto query = hidden[-1].unsqueeze(1);
      const auto context = attention(query, enc_outputs, enc_outputs, state[2]);
      const auto x = torch::cat({context, X[t].unsqueeze(1)}, -1);
      auto [out, h] = dec_rnn(x.permute({1, 0, 2}), hidden);
      hidden = h;
      outputs.push_back(out);
    }
    state[1] = hidden;
    return dense(torch::cat(outputs, 0)).permute({1, 0, 2});
  }

  torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& src_len, const torch::Tensor& dec_input) override {
    State s = begin(src, src_len);
    return decode(dec_input, s);
  }

  torch::Tensor step(const torch::Tensor& y_prev, State& state) override {
    return decode(y_prev.unsqueeze(1), state).squeeze(1);
  }
};

// ----------------------------------------------------------------------------- RNNsearch (B, C)
struct RnnSearch : Seq2Seq {
  torch::nn::Embedding src_embedding{nullptr}, tgt_embedding{nullptr};
  torch::nn::GRU encoder_rnn{nullptr};
  torch::nn::Linear init{nullptr}, W_k{nullptr}, W_q{nullptr}, w_v{nullptr}, maxout{nullptr}, dense{nullptr};
  torch::nn::GRUCell rnn{nullptr};

  explicit RnnSearch(const Workload& w) {
    const int64_t E = w.embed, H = w.hidden, D = 2 * w.hidden;
    src_embedding = register_module("src_embedding", torch::nn::Embedding(w.src_vocab, E));
    encoder_rnn = register_module("encoder_rnn", torch::nn::GRU(torch::nn::GRUOptions(E, H).bidirectional(true)));
    init = register_module("init", torch::nn::Linear(torch::nn::LinearOptions(H, H).bias(false)));
    W_k = register_module("W_k", torch::nn::Linear(torch::nn::LinearOptions(D, H).bias(false)));
    W_q = register_module("W_q", torch::nn::Linear(torch::nn::LinearOptions(H, H).bias(false)));
    w_v = register_module("w_v", torch::nn::Linear(torch::nn::LinearOptions(H, 1).bias(false)));
    tgt_embedding = register_module("tgt_embedding", torch::nn::Embedding(w.tgt_vocab, E));
    rnn = register_module("rnn", torch::nn::GRUCell(E + D, H));
    const int64_t out_in = H + E + D;
    if (w.readout == "maxout") {
      const int64_t units = std::max<int64_t>(1, H / 2);
      maxout = register_module("maxout", torch::nn::Linear(out_in, 2 * units));
      dense = register_module("dense", torch::nn::Linear(units, w.tgt_vocab));
    } else {
      dense = register_module("dense", torch::nn::Linear(out_in, w.tgt_vocab));
    }
  }

  State begin(const torch::Tensor& src, const torch::Tensor& src_len) override {
    namespace rnn_utils = torch::nn::utils::rnn;
    const int64_t S = src.size(1);
    const auto x = src_embedding(src).permute({1, 0, 2});                        // (S, B, E)
    const auto packed = rnn_utils::pack_padded_sequence(x, src_len, false, false);
    auto [out_packed, h_n] = encoder_rnn->forward_with_packed_input(packed);
    const auto out = std::get<0>(rnn_utils::pad_packed_sequence(out_packed, false, 0.0, S));  // (S, B, 2H)
    const auto memory = out.permute({1, 0, 2});                                  // (B, S, 2H)
    const auto keys = W_k(memory);
    const auto s = torch::tanh(init(h_n[1]));
    const auto mask = torch::arange(S).unsqueeze(0) < src_len.unsqueeze(1);      // (B, S)
    return {memory, keys, mask, s};
  }

  torch::Tensor context(const torch::Tensor& s, const State& state) {
    const auto q = W_q(s).unsqueeze(1);
    const auto scores = w_v(torch::tanh(q + state[1])).squeeze(-1);
    const auto alpha = torch::softmax(scores.masked_fill(state[2].logical_not(), -1e6), -1);
    return torch::bmm(alpha.unsqueeze(1), state[0]).squeeze(1);
  }

  torch::Tensor readout(const torch::Tensor& feats) {
    if (maxout.is_empty()) return dense(feats);
    auto t = maxout(feats);
    auto sizes = t.sizes().vec();
    sizes.back() /= 2;
    sizes.push_back(2);
    return dense(std::get<0>(t.reshape(sizes).max(-1)));
  }

  torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& src_len, const torch::Tensor& dec_input) override {
    State state = begin(src, src_len);
    auto s = state[3];
    const auto emb = tgt_embedding(dec_input);                                   // (B, T, E)
    std::vector<torch::Tensor> states, contexts;
    for (int64_t t = 0; t < dec_input.size(1); ++t) {
      const auto e = emb.select(1, t);
      const auto c = context(s, state);
      s = rnn(torch::cat({e, c}, -1), s);
      states.push_back(s);
      contexts.push_back(c);
    }
    return readout(torch::cat({torch::stack(states, 1), emb, torch::stack(contexts, 1)}, -1));
  }

  torch::Tensor step(const torch::Tensor& y_prev, State& state) override {
    const auto e = tgt_embedding(y_prev);
    const auto c = context(state[3], state);
    state[3] = rnn(torch::cat({e, c}, -1), state[3]);
    return readout(torch::cat({state[3], e, c}, -1));
  }
};

// ----------------------------------------------------------------------------- Transformer (T)
// The tutorial's PositionalEncoding, TokenEmbedding and Seq2SeqTransformer, sequence first.
struct PositionalEncoding : torch::nn::Module {
  torch::Tensor pos_embedding;  // (maxlen, 1, E)
  torch::nn::Dropout dropout{nullptr};
  PositionalEncoding(int64_t emb_size, double p, int64_t maxlen = 5000) {
    const auto den = torch::exp(-torch::arange(0, emb_size, 2) * std::log(10000.0) / static_cast<double>(emb_size));
    const auto pos = torch::arange(0, maxlen).reshape({maxlen, 1});
    auto table = torch::zeros({maxlen, emb_size});
    table.index_put_({torch::indexing::Slice(), torch::indexing::Slice(0, torch::indexing::None, 2)}, torch::sin(pos * den));
    table.index_put_({torch::indexing::Slice(), torch::indexing::Slice(1, torch::indexing::None, 2)}, torch::cos(pos * den));
    dropout = register_module("dropout", torch::nn::Dropout(p));
    pos_embedding = register_buffer("pos_embedding", table.unsqueeze(-2));
  }
  torch::Tensor forward(const torch::Tensor& token_embedding) {
    return dropout(token_embedding + pos_embedding.slice(0, 0, token_embedding.size(0)));
  }
};

struct Seq2SeqTransformer : Seq2Seq {
  torch::nn::Transformer transformer{nullptr};
  torch::nn::Linear generator{nullptr};
  torch::nn::Embedding src_tok_emb{nullptr}, tgt_tok_emb{nullptr};
  std::shared_ptr<PositionalEncoding> positional_encoding;
  double emb_scale;

  explicit Seq2SeqTransformer(const Workload& w) : emb_scale(std::sqrt(static_cast<double>(w.embed))) {
    transformer = register_module(
        "transformer", torch::nn::Transformer(torch::nn::TransformerOptions(w.embed, w.heads)
                                                  .num_encoder_layers(w.layers)
                                                  .num_decoder_layers(w.layers)
                                                  .dim_feedforward(w.hidden)
                                                  .dropout(w.dropout)));
    generator = register_module("generator", torch::nn::Linear(w.embed, w.tgt_vocab));
    src_tok_emb = register_module("src_tok_emb", torch::nn::Embedding(w.src_vocab, w.embed));
    tgt_tok_emb = register_module("tgt_tok_emb", torch::nn::Embedding(w.tgt_vocab, w.embed));
    positional_encoding = register_module("positional_encoding", std::make_shared<PositionalEncoding>(w.embed, w.dropout));
    for (auto& p : parameters())  // the tutorial's initialisation
      if (p.dim() > 1) torch::nn::init::xavier_uniform_(p);
    // tapegrad's scheme for the embeddings and the generator, as bench/pytorch_reference.py.
    for (auto& e : {src_tok_emb, tgt_tok_emb}) torch::nn::init::normal_(e->weight, 0.0, 1.0 / emb_scale);
    generator->reset_parameters();
  }

  torch::Tensor embed_src(const torch::Tensor& src_sb) { return positional_encoding->forward(src_tok_emb(src_sb) * emb_scale); }
  torch::Tensor embed_tgt(const torch::Tensor& tgt_tb) { return positional_encoding->forward(tgt_tok_emb(tgt_tb) * emb_scale); }

  // src, dec_input (B, T) -> logits (T, B, V), with the tutorial's create_mask.
  torch::Tensor forward(const torch::Tensor& src, const torch::Tensor&, const torch::Tensor& dec_input) override {
    const auto src_t = src.t(), tgt_t = dec_input.t();  // (S, B), (T, B)
    const auto tgt_mask = torch::nn::TransformerImpl::generate_square_subsequent_mask(tgt_t.size(0));
    const auto src_mask = torch::zeros({src_t.size(0), src_t.size(0)});
    const auto src_padding_mask = src == kPad, tgt_padding_mask = dec_input == kPad;
    const auto outs = transformer->forward(embed_src(src_t), embed_tgt(tgt_t), src_mask, tgt_mask, torch::Tensor(), src_padding_mask,
                                  tgt_padding_mask, src_padding_mask);
    return generator(outs);
  }

  // The tutorial's CrossEntropyLoss(ignore_index=PAD_IDX) on the (T, B) layout.
  torch::Tensor loss(const torch::Tensor& logits, const torch::Tensor& tgt, const torch::Tensor&) override {
    namespace F = torch::nn::functional;
    return F::cross_entropy(logits.reshape({-1, logits.size(-1)}), tgt.t().reshape({-1}),
                            F::CrossEntropyFuncOptions().ignore_index(kPad));
  }

  State begin(const torch::Tensor& src, const torch::Tensor&) override {
    const auto src_t = src.t();
    const auto src_mask = torch::zeros({src_t.size(0), src_t.size(0)});
    const auto src_padding_mask = src == kPad;
    auto memory = transformer->encoder.forward<torch::Tensor>(embed_src(src_t), src_mask, src_padding_mask);
    return {memory, src_padding_mask, torch::empty({0, src.size(0)}, torch::kLong)};
  }

  torch::Tensor step(const torch::Tensor& y_prev, State& state) override {
    state[2] = torch::cat({state[2], y_prev.unsqueeze(0)}, 0);  // the prefix ys (t, B)
    const auto tgt_mask = torch::nn::TransformerImpl::generate_square_subsequent_mask(state[2].size(0));
    const auto out = transformer->decoder.forward<torch::Tensor>(embed_tgt(state[2]), state[0], tgt_mask, torch::Tensor(),
                                                                 torch::Tensor(), state[1]);
    return generator(out[-1]);
  }
};

// ----------------------------------------------------------------------------- step, decode
torch::Tensor sequence_loss(const torch::Tensor& logits, const torch::Tensor& target, const torch::Tensor& valid_len) {
  const int64_t B = logits.size(0), T = logits.size(1), V = logits.size(2);
  namespace F = torch::nn::functional;
  const auto ce = F::cross_entropy(logits.reshape({B * T, V}), target.reshape({B * T}),
                                   F::CrossEntropyFuncOptions().reduction(torch::kNone));
  const auto mask = (torch::arange(T).unsqueeze(0) < valid_len.unsqueeze(1)).reshape({-1}).to(ce.dtype());
  return (ce * mask).sum() / mask.sum();
}

torch::Tensor teacher_forcing_input(const torch::Tensor& tgt) {
  return torch::cat({torch::full({tgt.size(0), 1}, kBos, torch::kLong), tgt.slice(1, 0, tgt.size(1) - 1)}, 1);
}

/// Greedy decoding as pytorch_reference.py's: (B, steps) tokens; stops when every row has produced <eos>.
/// bf16: the call runs inside its own autocast scope, as the PyTorch reference's.
torch::Tensor greedy_decode(Seq2Seq& model, const torch::Tensor& src, const torch::Tensor& src_len, int64_t max_steps,
                            bool bf16) {
  torch::NoGradGuard no_grad;
  ltbench::Autocast autocast(bf16);
  const bool was_training = model.is_training();
  model.eval();
  State state = model.begin(src, src_len);
  const int64_t B = src.size(0);
  auto y = torch::full({B}, kBos, torch::kLong);
  auto ended = torch::zeros({B}, torch::kBool);
  auto log_prob = torch::zeros({B});
  std::vector<torch::Tensor> out;
  for (int64_t i = 0; i < max_steps; ++i) {
    const auto lp = torch::log_softmax(model.step(y, state), -1);
    y = lp.argmax(-1);
    log_prob += torch::where(ended, torch::zeros({B}), lp.gather(1, y.unsqueeze(1)).squeeze(1));
    out.push_back(y);
    ended |= y == kEos;
    if (ended.all().item<bool>()) break;
  }
  model.train(was_training);
  return torch::stack(out, 1);
}

int64_t decode_steps(const torch::Tensor& tokens) {
  int64_t total = 0;
  const auto c = tokens.contiguous();
  const auto t = c.accessor<int64_t, 2>();
  for (int64_t r = 0; r < t.size(0); ++r) {
    int64_t n = t.size(1);
    for (int64_t j = 0; j < t.size(1); ++j)
      if (t[r][j] == kEos) {
        n = j + 1;
        break;
      }
    total += n;
  }
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const ltbench::Args args(argc, argv, {"--config", "--readout", "--threads", "--steps", "--warmup", "--seed", "--precision"},
                             {"--profile", "--no-decode"});
    const std::string config = args.str("--config", "A");
    const std::string precision = ltbench::precision_arg(args.str("--precision", "f32"));
    const bool bf16 = precision == "bf16";
    Workload w = workload(config);
    if (args.flag("--readout")) {
      if (w.model != "rnnsearch") throw std::invalid_argument("libtorch_seq2seq: --readout applies to B and C only");
      w.readout = args.str("--readout", "linear");
      if (w.readout != "linear" && w.readout != "maxout")
        throw std::invalid_argument("libtorch_seq2seq: --readout must be linear or maxout");
    }
    const int steps = static_cast<int>(args.integer("--steps", w.steps));
    const int warmup = static_cast<int>(args.integer("--warmup", w.warmup));
    if (steps < 1) throw std::invalid_argument("libtorch_seq2seq: --steps must be >= 1");
    const auto seed = static_cast<std::uint64_t>(args.integer("--seed", 0));
    ltbench::set_threads(static_cast<int>(args.integer("--threads", 0)));
    torch::manual_seed(seed);
    std::shared_ptr<Seq2Seq> model;
    if (w.model == "d2l") model = std::make_shared<D2l>(w);
    else if (w.model == "transformer") model = std::make_shared<Seq2SeqTransformer>(w);
    else model = std::make_shared<RnnSearch>(w);
    const auto params = model->parameters();
    int64_t parameter_count = 0;
    for (const auto& p : params) parameter_count += p.numel();
    torch::optim::Adam opt(params, torch::optim::AdamOptions(w.lr).betas({0.9, w.beta2}).eps(w.adam_eps));
    ltbench::SplitMix64 rng{seed * 0x632BE59BD9B4E019ULL + 12345};
    std::vector<Batch> batches;
    for (int i = 0; i < warmup + steps; ++i) batches.push_back(make_batch(rng, w));

    // Decoding first, on the freshly initialised model (as bench_seq2seq and pytorch_reference.py).
    double dec1 = 0, dec64 = 0, dec1_len = 0, dec64_len = 0;
    if (!args.flag("--no-decode")) {
      const auto& src = batches.back().src;
      const auto& src_len = batches.back().src_len;
      const int64_t B = src.size(0), T = w.num_steps;
      greedy_decode(*model, src.slice(0, 0, 1), src_len.slice(0, 0, 1), T, bf16);  // warm-up
      int64_t n = 0, steps_run = 0;
      auto t0 = ltbench::Clock::now();
      while (true) {
        const int64_t r = n % B;
        steps_run += decode_steps(greedy_decode(*model, src.slice(0, r, r + 1), src_len.slice(0, r, r + 1), T, bf16));
        ++n;
        if (ltbench::since(t0) >= w.decode_min_time && n >= 4) break;
      }
      dec1 = static_cast<double>(n) / ltbench::since(t0);
      dec1_len = static_cast<double>(steps_run) / static_cast<double>(n);
      const auto full = src.slice(0, 0, 64), full_len = src_len.slice(0, 0, 64);
      greedy_decode(*model, full, full_len, T, bf16);  // warm-up
      n = 0, steps_run = 0;
      t0 = ltbench::Clock::now();
      while (true) {
        steps_run += decode_steps(greedy_decode(*model, full, full_len, T, bf16));
        n += full.size(0);
        if (ltbench::since(t0) >= w.decode_min_time) break;
      }
      dec64 = static_cast<double>(n) / ltbench::since(t0);
      dec64_len = static_cast<double>(steps_run) / static_cast<double>(n);
    }

    model->train();
    double prof[5] = {0, 0, 0, 0, 0};
    int64_t tokens = 0;
    double first_loss = 0, last_loss = 0, cpu_start = 0;
    std::string logits_dtype, loss_dtype;
    auto start = ltbench::Clock::now();
    for (int i = 0; i < warmup + steps; ++i) {
      if (i == warmup) start = ltbench::Clock::now(), cpu_start = ltbench::cpu_seconds();
      const Batch& b = batches[i];
      const auto t0 = ltbench::Clock::now();
      if (w.zero_grad_before_forward) ltbench::drop_grads(params);
      torch::Tensor logits, loss;
      ltbench::Clock::time_point t1, t2;
      {
        ltbench::Autocast autocast(bf16);
        logits = model->forward(b.src, b.src_len, teacher_forcing_input(b.tgt));
        t1 = ltbench::Clock::now();
        loss = model->loss(logits, b.tgt, b.tgt_len);
        t2 = ltbench::Clock::now();
      }
      if (i == 0) logits_dtype = std::string(c10::toString(logits.scalar_type())), loss_dtype = c10::toString(loss.scalar_type());
      if (!w.zero_grad_before_forward) ltbench::drop_grads(params);
      loss.backward();
      const auto t3 = ltbench::Clock::now();
      torch::nn::utils::clip_grad_norm_(params, 1.0);
      const auto t4 = ltbench::Clock::now();
      opt.step();
      const auto t5 = ltbench::Clock::now();
      last_loss = loss.item<double>();
      if (i == 0) first_loss = last_loss;
      if (!std::isfinite(last_loss)) throw std::runtime_error("libtorch_seq2seq: loss is not finite");
      if (i >= warmup) {
        tokens += b.tokens;
        const ltbench::Clock::time_point ts[6] = {t0, t1, t2, t3, t4, t5};
        for (int k = 0; k < 5; ++k) prof[k] += std::chrono::duration<double>(ts[k + 1] - ts[k]).count();
      }
    }
    const double train_s = ltbench::since(start), train_cpu_s = ltbench::cpu_seconds() - cpu_start;
    std::ostringstream js;
    js << "{" << ltbench::json_head(precision) << ",\"config\":\"" << config << "\",\"model\":\"" << w.model
       << "\",\"readout\":\"" << w.readout << "\",\"steps\":" << steps << ",\"warmup\":" << warmup
       << ",\"batch\":" << w.batch << ",\"num_steps\":" << w.num_steps << ",\"tokens\":" << tokens
       << ",\"tokens_per_sec\":" << ltbench::num(static_cast<double>(tokens) / train_s)
       << ",\"sec_per_step\":" << ltbench::num(train_s / steps) << ",\"cpu_sec_per_step\":" << ltbench::num(train_cpu_s / steps)
       << ",\"loss_first\":" << ltbench::num(first_loss) << ",\"loss_last\":" << ltbench::num(last_loss)
       << ",\"decode_batch1_sents_per_sec\":" << ltbench::num(dec1) << ",\"decode_batch64_sents_per_sec\":" << ltbench::num(dec64)
       << ",\"decode_batch1_avg_steps\":" << ltbench::num(dec1_len) << ",\"decode_batch64_avg_steps\":" << ltbench::num(dec64_len)
       << ",\"peak_rss_mib\":" << ltbench::num(ltbench::peak_rss_mib()) << ",\"parameters\":" << parameter_count
       << ",\"zero_grad_before_forward\":" << (w.zero_grad_before_forward ? "true" : "false")
       << ",\"logits_dtype\":\"" << logits_dtype << "\",\"loss_dtype\":\"" << loss_dtype << "\"";
    if (args.flag("--profile"))
      js << ",\"profile_s\":{\"forward\":" << ltbench::num(prof[0]) << ",\"loss\":" << ltbench::num(prof[1])
         << ",\"backward\":" << ltbench::num(prof[2]) << ",\"clip\":" << ltbench::num(prof[3])
         << ",\"adam\":" << ltbench::num(prof[4]) << "}";
    js << "}";
    std::cout << js.str() << std::endl;
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
