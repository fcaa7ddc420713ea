// bahdanau translate: sentences from the arguments or stdin through a checkpoint, one translation
// per line on stdout; the first sentence's attention as an SVG heatmap, bar charts or .npy.
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "autograd/random.h"
#include "models/decoding/decode.h"
#include "models/plots/attention_bars.h"
#include "models/plots/heatmap.h"
#include "models/text/tasks.h"
#include "models/training/checkpoint.h"
#include "models/translators/registry.h"
#include "nn/serialize.h"

#include "common.h"
#include "decode_args.h"

namespace tg::cli {

using namespace tg::models;

namespace {

struct TranslateArgs {
  std::string model;
  DecodeArgs decode;
  std::string heatmap, attention_out, bars;
  bool show_attention = false, quiet = false;
  std::int64_t attention_layer = -1, attention_head = -1;  // transformer
  CLI::Option *attention_layer_opt = nullptr, *attention_head_opt = nullptr;
  int threads = 0;
  std::vector<std::string> sentences;
  std::istream* in = &std::cin;  // the sentences when none is given
};

int run_translate(TranslateArgs& a) {
  require_distinct({{"--model", a.model}},
                   {{"--heatmap", a.heatmap}, {"--attention-out", a.attention_out}, {"--bars", a.bars}});
  set_threads(a.threads);
  Checkpoint ck = load_checkpoint(a.model);
  if (a.attention_layer_opt->count() || a.attention_head_opt->count()) {
    // Which weights step() reports is part of the config: rebuild with the same weights.
    ModelConfig config = ck.config;
    if (a.attention_layer_opt->count()) config.attention_layer = a.attention_layer;
    if (a.attention_head_opt->count()) config.attention_head = a.attention_head;
    try {
      config.validate("--attention-layer/--attention-head");
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
    Generator gen(0);
    auto model = make_model(config, gen);
    model->load_state_dict(ck.model->state_dict(), a.model);
    ck.model = model;
  }
  const bool wants_attention = !a.heatmap.empty() || !a.attention_out.empty() || !a.bars.empty() || a.show_attention;
  if (wants_attention && !ck.model->has_attention())
    throw UsageError(a.model + ": model '" + std::string(ck.config.model.name()) + "' has no attention weights to show");
  std::vector<std::string> sentences = a.sentences;
  if (sentences.empty()) {  // a line longer than kLineBytes or a read error is an error, not the end
    io::LineReader reader(*a.in, "stdin");
    for (std::string line; reader.next(line);) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      sentences.push_back(line);
    }
  }
  if (sentences.empty()) return 0;
  // A model trained on a built-in task reads that task's tokenisation ("3rd" -> "3 rd").
  if (ck.training && !ck.training->run.task.empty())
    for (auto& s : sentences) s = task_input(ck.training->run.task, s);
  const DecodeOptions decode_options = a.decode.options();
  note_precision(decode_options.precision());
  std::vector<Translation> out;
  if (ck.subword) {  // plain sentences in and out: the pieces stay inside
    std::vector<std::vector<std::string>> pieces;
    for (const auto& s : sentences) pieces.push_back(ck.subword->encode(s));
    out = translate_tokens(*ck.model, pieces, ck.src_vocab, ck.tgt_vocab, decode_options);
  } else {
    out = translate(*ck.model, sentences, ck.src_vocab, ck.tgt_vocab, decode_options);
  }
  for (const auto& tr : out)
    std::fprintf(stdout, "%s\n", (ck.subword ? ck.subword->decode(tr.tokens) : tr.text()).c_str());
  std::fflush(stdout);
  if (!a.quiet)  // what the model could not see of an input: one line per input, on stderr
    for (std::size_t i = 0; i < out.size(); ++i) {
      std::string warning;
      if (const std::int64_t n = out[i].unknown_tokens; n > 0)
        warning = std::to_string(n) + (n == 1 ? " unknown token" : " unknown tokens") + " (<unk>)";
      if (const auto seen = static_cast<std::int64_t>(out[i].source.size()); out[i].source_length > seen)
        warning += (warning.empty() ? "" : ", ") + std::string("truncated from ") +
                   std::to_string(out[i].source_length) + " to " + std::to_string(seen) + " tokens (<eos> included)";
      if (!warning.empty()) std::fprintf(stderr, "bahdanau translate: input %zu: %s\n", i + 1, warning.c_str());
    }

  const Translation& first = out.front();
  if (!a.attention_out.empty()) {
    std::vector<float> flat;
    for (const auto& row : first.attention) flat.insert(flat.end(), row.begin(), row.end());
    const Tensor t = Tensor::from_vector(flat, {static_cast<std::int64_t>(first.attention.size()),
                                                static_cast<std::int64_t>(first.source.size())});
    io::write_file_atomic(a.attention_out, nn::npy_encode(t));
  }
  if (!a.heatmap.empty())
    io::write_file_atomic(a.heatmap, attention_heatmap_svg({first.source, first.step_labels(), first.attention}, sentences.front()));
  if (!a.bars.empty())
    io::write_file_atomic(a.bars, attention_bars_svg({first.source, first.step_labels(), first.attention}, sentences.front()));
  if (a.show_attention)
    for (std::size_t i = 0; i < out.size(); ++i)
      std::fprintf(stderr, "%s\n%s\n", sentences[i].c_str(),
                   attention_terminal({out[i].source, out[i].step_labels(), out[i].attention}).c_str());
  return 0;
}

}  // namespace

Subcommand add_translate(CLI::App& app, std::istream* in) {
  auto args = std::make_shared<TranslateArgs>();
  TranslateArgs& tr = *args;
  CLI::App* translate_cmd = app.add_subcommand(
      "translate",
      "Translate sentences (arguments, or one per line on stdin); prints one translation per line and nothing else "
      "on stdout");
  translate_cmd->add_option("--model", tr.model, "Checkpoint directory")->required();
  tr.decode.add_options(translate_cmd);
  translate_cmd->add_option("--heatmap", tr.heatmap, "Write the first sentence's attention as an SVG heatmap");
  translate_cmd->add_option("--attention-out", tr.attention_out,
                            "Write the first sentence's attention as float32 .npy (decoding steps, source positions)");
  translate_cmd->add_option("--bars", tr.bars, "Write the first sentence's attention as per-step bar charts (SVG)");
  translate_cmd->add_flag("--show-attention", tr.show_attention, "Draw each sentence's attention on stderr");
  tr.attention_layer_opt = translate_cmd->add_option("--attention-layer", tr.attention_layer,
                            "transformer: decoder layer whose cross-attention is shown (-1 = the last)");
  tr.attention_head_opt = translate_cmd->add_option("--attention-head", tr.attention_head,
                            "transformer: head shown (-1 = the mean over heads)");
  translate_cmd->add_flag("--quiet", tr.quiet,
                          "No warnings on stderr about unknown tokens (read as <unk>) or inputs cut to the model's "
                          "num_steps");
  translate_cmd->add_option("--threads", tr.threads, "Threads (0 = all cores)");
  translate_cmd->add_option("sentences", tr.sentences, "Sentences to translate (default: read stdin)");
  if (in) tr.in = in;
  return {translate_cmd, [args] { return run_translate(*args); }};
}

}  // namespace tg::cli
