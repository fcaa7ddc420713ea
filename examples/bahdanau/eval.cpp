// bahdanau eval: a checkpoint's scores (BLEU-4, d2l's BLEU-k, exact match, ...) on sentence pairs,
// a task, or the training run's own split.
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "models/decoding/metrics.h"
#include "models/decoding/sacrebleu.h"
#include "models/training/checkpoint.h"
#include "models/training/trainer.h"

#include "common.h"
#include "data_args.h"
#include "decode_args.h"

namespace tg::cli {

using namespace tg::models;

namespace {

struct EvalArgs {
  std::string model;
  DataArgs data;
  std::string split;
  DecodeArgs decode;
  int bleu_k = 2;
  int threads = 0;
  std::string output;
  std::map<std::string, CLI::Option*> opts;
};

int run_eval(EvalArgs& a) {
  require_distinct({{"--model", a.model}, {"--data", a.data.data}}, {{"--output", a.output}});
  set_threads(a.threads);
  Checkpoint ck = load_checkpoint(a.model);
  TokenizedPairs pairs;
  std::vector<std::string> raw_refs;  // subword checkpoints: the references as written, for sacreBLEU/chrF
  const SubwordModel* sp = ck.subword ? &*ck.subword : nullptr;
  const bool have_data = a.opts.at("data")->count() > 0 || a.opts.at("task")->count() > 0;
  if (!a.split.empty()) {
    // Reproduce the training run's data and split from the checkpoint's record.
    if (!ck.training) throw UsageError(a.model + ": no training.json, so --split cannot reproduce the training data");
    if (!have_data) {
      a.data.from_record(ck.training->run, a.model);
      // The training data recorded in the checkpoint is an input too.
      require_distinct({{a.model + "/training.json's data", a.data.data}}, {{"--output", a.output}});
    } else {
      const RunRecord& r = ck.training->run;
      if (r.min_freq) a.data.min_freq = *r.min_freq;
      if (r.holdout) a.data.holdout = *r.holdout;
    }
    TranslationData data = a.data.make(ck.config.num_steps, ck.training->seed, sp);
    pairs = a.split == "train" ? data.train_pairs : data.heldout_pairs;
    if (sp)
      for (const auto& p : a.data.raw_part(ck.training->seed, a.split == "heldout")) raw_refs.push_back(p.tgt);
    if (a.split == "heldout" && pairs.size() == 0)
      throw UsageError(a.model + ": the training run held nothing out (train with --holdout)");
  } else {
    if (!have_data) throw UsageError("eval: give --data FILE, --task NAME or --split train|heldout");
    const auto raw = a.data.pairs();
    if (sp) {
      pairs = encode_pairs(raw, *sp);
      for (const auto& p : raw) raw_refs.push_back(p.tgt);
    } else {
      pairs = tokenize_pairs(raw);
    }
  }
  EvalOptions eo;
  eo.decode = a.decode.options();
  eo.bleu_k = a.bleu_k;
  note_precision(eo.decode.precision());
  const EvalReport rep = evaluate(*ck.model, pairs, ck.src_vocab, ck.tgt_vocab, eo);
  std::vector<std::string> hyps;
  for (const auto& tr : rep.translations) hyps.push_back(sp ? sp->decode(tr.tokens) : tr.text());
  if (!a.output.empty()) {
    std::string text;
    for (const auto& h : hyps) text += h + "\n";
    io::write_file_atomic(a.output, text);
  }
  std::printf("pairs           %lld\n", static_cast<long long>(rep.count));
  std::printf("bleu4           %.4f\n", rep.bleu4);
  std::printf("bleu%d_d2l       %.4f\n", rep.k, rep.bleu_k);
  std::printf("exact_match     %.4f\n", rep.exact_match);
  std::printf("token_accuracy  %.4f\n", rep.token_accuracy);
  std::printf("psa             %.4f\n", rep.psa);
  std::printf("lcsr            %.4f\n", rep.lcsr);
  std::printf("loss            %.4f\n", rep.loss);
  if (sp && !raw_refs.empty()) {  // on plain sentences, as papers report; the lines above score pieces
    const SacreBleuScore b = sacre_bleu(hyps, raw_refs);
    const ChrfScore c = sacre_chrf(hyps, raw_refs);
    std::printf("sacrebleu       %.2f\n", b.score);
    std::printf("chrf2           %.2f\n", c.score);
    std::fprintf(stderr, "%s\n%s\n", b.format().c_str(), c.format().c_str());
  }
  return 0;
}

}  // namespace

Subcommand add_eval(CLI::App& app) {
  auto args = std::make_shared<EvalArgs>();
  EvalArgs& ea = *args;
  CLI::App* eval_cmd = app.add_subcommand("eval", "Score a checkpoint: BLEU-4, d2l's BLEU-k, exact match, token accuracy; subword checkpoints also "
                 "sacreBLEU-compatible BLEU and chrF2 on the decoded sentences");
  eval_cmd->add_option("--model", ea.model, "Checkpoint directory")->required();
  CLI::Option *edata = nullptr, *etask = nullptr;
  ea.data.add_options(eval_cmd, edata, etask, 1);
  ea.opts["data"] = edata;
  ea.opts["task"] = etask;
  eval_cmd->add_option("--split", ea.split,
                       "Score the training run's own 'train' or 'heldout' pairs (data and split from training.json)")
      ->check(CLI::IsMember({"train", "heldout"}));
  ea.decode.add_options(eval_cmd);
  eval_cmd->add_option("--bleu-k", ea.bleu_k, "k of d2l's BLEU")->check(kPositive)->capture_default_str();
  eval_cmd->add_option("--output", ea.output, "Also write the translations, one per line, to this file");
  eval_cmd->add_option("--threads", ea.threads, "Threads (0 = all cores)");
  return {eval_cmd, [args] { return run_eval(*args); }};
}

}  // namespace tg::cli
