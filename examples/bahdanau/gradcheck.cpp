// bahdanau gradcheck: a float64 gradient check of a tiny instance of a registered model.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "autograd/random.h"
#include "models/translators/registry.h"
#include "models/translators/seq2seq.h"
#include "nn/gradcheck.h"

#include "common.h"

namespace tg::cli {

using namespace tg::models;

namespace {

struct GradcheckArgs {
  std::string model = "d2l";
  std::int64_t max_entries = 0;
  std::uint64_t seed = 0;
  double eps = 1e-6, atol = 1e-5, rtol = 1e-3;
};

/// Builds a tiny float64 instance of a registered model (dropout 0) and checks the gradient of its
/// training loss on a fixed random batch with respect to every parameter. Exit status 1 on failure.
int run_gradcheck(const GradcheckArgs& a) {
  ModelConfig config;
  config.model = a.model;
  config.src_vocab = 7;
  config.tgt_vocab = 6;
  config.embed_size = 4;
  config.num_hiddens = 6;
  config.num_layers = config.model.spec().default_num_layers;
  config.dropout = 0.0;
  config.num_steps = 4;
  Generator gen(a.seed);
  std::shared_ptr<Seq2Seq> model = make_model(config, gen);
  model->to(DType::f64);
  const std::int64_t B = 2, S = 4, T = 3;
  auto tokens = [&](std::int64_t rows, std::int64_t cols, std::int64_t vocab) {
    std::vector<std::int64_t> v(static_cast<std::size_t>(rows * cols));
    for (auto& t : v) t = static_cast<std::int64_t>(gen.below(static_cast<std::uint64_t>(vocab)));
    return Tensor::from_vector(v, {rows, cols});
  };
  const Tensor src = tokens(B, S, config.src_vocab);
  const Tensor dec_input = tokens(B, T, config.tgt_vocab);
  const Tensor tgt = tokens(B, T, config.tgt_vocab);
  const Tensor src_valid = Tensor::from_vector(std::vector<std::int64_t>{S, S - 1}, {B});
  const Tensor tgt_valid = Tensor::from_vector(std::vector<std::int64_t>{T, T - 1}, {B});

  nn::ModuleGradcheckOptions opt;
  opt.tolerances = {a.eps, a.atol, a.rtol};
  opt.max_entries = a.max_entries;
  opt.seed = a.seed;
  const nn::ModuleGradcheckReport report = nn::gradcheck(
      *model, [&](const std::vector<Tensor>& in) { return model->loss(in[0], in[1], in[2], in[3], in[4]); },
      {src, src_valid, dec_input, tgt, tgt_valid}, opt);
  std::printf("gradcheck of model '%s' (float64; embed_size %lld, num_hiddens %lld, num_layers %lld; batch %lld, "
              "source %lld, target %lld; seed %llu; eps %g, atol %g, rtol %g)\n",
              a.model.c_str(), static_cast<long long>(config.embed_size), static_cast<long long>(config.num_hiddens),
              static_cast<long long>(config.num_layers), static_cast<long long>(B), static_cast<long long>(S),
              static_cast<long long>(T), static_cast<unsigned long long>(a.seed), a.eps, a.atol, a.rtol);
  std::fputs(report.str().c_str(), stdout);
  return report.ok ? 0 : 1;
}

}  // namespace

Subcommand add_gradcheck(CLI::App& app) {
  auto args = std::make_shared<GradcheckArgs>();
  GradcheckArgs& ga = *args;
  CLI::App* grad_cmd = app.add_subcommand(
      "gradcheck", "Float64 gradient check of a tiny instance of a registered model: one line per parameter "
                   "(entries checked, worst absolute and relative error, pass or fail, time); exit status 1 on failure");
  grad_cmd->add_option("--model", ga.model, model_help())->check(CLI::IsMember(model_names()))->capture_default_str();
  grad_cmd->add_option("--max-entries", ga.max_entries, "Check at most N entries per parameter, picked with --seed (0 = all)")
      ->check(kNonNegative)->capture_default_str();
  grad_cmd->add_option("--seed", ga.seed, "Seed of the model, the batch and the picked entries")->capture_default_str();
  grad_cmd->add_option("--eps", ga.eps, "Finite-difference step")->check(kPositive)->capture_default_str();
  grad_cmd->add_option("--atol", ga.atol, "Absolute tolerance")->check(kNonNegative)->capture_default_str();
  grad_cmd->add_option("--rtol", ga.rtol, "Relative tolerance")->check(kNonNegative)->capture_default_str();
  return {grad_cmd, [args] { return run_gradcheck(*args); }};
}

}  // namespace tg::cli
