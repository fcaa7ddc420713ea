// Workload G of issue 20: training steps of a pre-LN Transformer encoder layer written with public
// ops only (no nn::TransformerEncoderLayer, no fused layer): the path an author of a new model takes.
// The model, data and step are described in bench/encoder_workload.h; bench/libtorch/encoder.cpp and
// bench/encoder_reference.py are the LibTorch and PyTorch references.
//
//   build/bin/bench_encoder [--threads N] [--steps N] [--warmup N] [--seed S] [--profile]
//                           [--spelling free|methods]
//
// --spelling methods runs the forward written with tensor methods (x.transpose(1, 2), as the
// PyTorch reference reads) instead of free functions: the same ops, to compare their speed.
//
// Output: one JSON line with the keys bench/compare reads (tokens_per_sec counts B*T positions per
// step; the decoding fields read 0: G has no decoder). --profile adds seconds per phase.
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <sstream>
#include <optional>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "autograd/tensor.h"
#include "bench/cpu_context.h"
#include "bench/process_stats.h"
#include "bench/encoder_workload.h"
#include "nn/optim.h"

namespace {

using namespace tg::bench::encoder;
using tg::bench::Clock, tg::bench::since, tg::bench::cpu_seconds, tg::bench::peak_rss_mib;
const auto num = tg::bench::json_number;

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tapegrad workload G: pre-LN Transformer encoder layer from public ops (issue 20)"};
  int threads = 0, steps = kDefaultSteps, warmup = kDefaultWarmup;
  std::uint64_t seed = 0;
  bool profile = false;
  std::string config = "G";
  app.add_option("--config", config, "workload (G only; accepted for bench/compare)")->check(CLI::IsMember({"G"}));
  app.add_option("--threads", threads, "kernel threads (0 = all hardware threads)");
  app.add_option("--steps", steps, "timed training steps");
  app.add_option("--warmup", warmup, "untimed steps before");
  app.add_option("--seed", seed, "seed of the weights and of the data");
  app.add_flag("--profile", profile, "also report seconds per phase of a step");
  std::string spelling_name = "free";
  app.add_option("--spelling", spelling_name, "the forward with free functions (free) or tensor methods (methods)")
      ->check(CLI::IsMember({"free", "methods"}));
  std::string precision = "f32";
  app.add_option("--precision", precision, "f32, or bf16: every step and decode under tg::autocast::Guard")
      ->check(CLI::IsMember({"f32", "bf16"}));
  CLI11_PARSE(app, argc, argv);
  try {
    // bf16: the whole run inside one autocast scope (the weight cache is renewed after each backward).
    std::optional<tg::autocast::Guard> autocast;
    if (precision == "bf16") autocast.emplace(tg::autocast::Precision::bf16);
    if (steps < 1) throw std::invalid_argument("bench_encoder: --steps must be >= 1");
    const Spelling spelling = spelling_name == "methods" ? Spelling::methods : Spelling::free_functions;
    tg::set_num_threads(threads);
    tg::Generator gen(seed);
    const Sizes sizes;
    const EncoderLayer layer(sizes, gen);
    const auto named = layer.named_parameters();
    std::int64_t parameter_count = 0;
    for (const auto& [name, p] : named) parameter_count += p.numel();
    tg::nn::Adam optimizer(named, tg::nn::AdamOptions(kLearningRate));

    tg::SplitMix64 rng{data_seed(seed)};
    std::vector<std::pair<tg::Tensor, tg::Tensor>> batches;
    std::vector<float> xs, ts;
    for (int i = 0; i < warmup + steps; ++i) {
      make_batch(rng, xs, ts, sizes);
      batches.emplace_back(tg::Tensor::from_vector(xs, {sizes.batch, sizes.seq, sizes.d_model}),
                           tg::Tensor::from_vector(ts, {sizes.batch, sizes.seq, sizes.d_model}));
    }

    StepTimes times;
    double first_loss = 0, last_loss = 0, cpu_start = 0;
    Clock::time_point start = Clock::now();
    for (int i = 0; i < warmup + steps; ++i) {
      if (i == warmup) start = Clock::now(), cpu_start = cpu_seconds();
      StepTimes* timed = i >= warmup ? &times : nullptr;
      const tg::Tensor loss = train_step(layer, optimizer, batches[i].first, batches[i].second, timed, spelling);
      last_loss = loss.item();
      if (i == 0) first_loss = last_loss;
      if (!std::isfinite(last_loss)) throw std::runtime_error("bench_encoder: loss is not finite");
    }
    const double train_s = since(start), train_cpu_s = cpu_seconds() - cpu_start;
    const double tokens = static_cast<double>(steps) * sizes.batch * sizes.seq;

    std::ostringstream js;
    js << "{\"framework\":\"tapegrad\",\"config\":\"G\",\"model\":\"pre-LN encoder layer (public ops)\",\"precision\":\""
       << precision << "\",\"spelling\":\"" << spelling_name << (precision == "bf16" ? "\",\"bf16_path\":\"" : "")
       << (precision == "bf16" ? tg::autocast::bf16_path() : "")
       << "\",\"threads\":"
       << tg::num_threads() << ",\"blas\":\"tapegrad kernels\",\"steps\":" << steps << ",\"warmup\":" << warmup
       << ",\"batch\":" << sizes.batch << ",\"num_steps\":" << sizes.seq << ",\"tokens\":" << num(tokens)
       << ",\"tokens_per_sec\":" << num(tokens / train_s) << ",\"sec_per_step\":" << num(train_s / steps)
       << ",\"cpu_sec_per_step\":" << num(train_cpu_s / steps) << ",\"loss_first\":" << num(first_loss) << ",\"loss_last\":" << num(last_loss)
       << ",\"decode_batch1_sents_per_sec\":0,\"decode_batch64_sents_per_sec\":0"
       << ",\"peak_rss_mib\":" << num(peak_rss_mib()) << ",\"parameters\":" << parameter_count
       << tg::bench::cpu_json_fields();
    if (profile)
      js << ",\"profile_s\":{\"forward_and_loss\":" << num(times.forward_and_loss)
         << ",\"backward\":" << num(times.backward) << ",\"adam\":" << num(times.adam) << "}";
    js << "}";
    std::cout << js.str() << std::endl;
  } catch (const std::exception& e) {
    std::cerr << "bench_encoder: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
