// Workload CONV of bench/compare (issue 42): training steps of the convolution block of
// bench_conv's BM_ConvBlockTrainingStep, timed end to end with the JSON line bench/compare reads.
// Conv2d(3 -> 32, 3x3, padding 1) + BatchNorm2d(32) (training: batch statistics, running ones
// updated with momentum 0.1, eps 1e-5) + ReLU + MaxPool2d(2) on one 32x3x32x32 float32 batch
// (uniform in [-1, 1), the same batch every step), loss = mean of the output, backward, and an SGD
// update (lr 0.01, no momentum) of the four trainable tensors, their gradients dropped before
// each step. Written with the functional ops the modules call (tg::conv2d, tg::batch_norm,
// tg::relu, tg::max_pool2d; nn::Conv2d's initialisation U(±1/sqrt(fan_in)), BatchNorm's ones and
// zeros), so that it does not depend on the modules' spelling. bench/libtorch/conv.cpp and
// bench/conv_reference.py are the LibTorch and PyTorch references (torch.nn modules).
//
//   build/bin/bench_conv_step [--threads N] [--steps N] [--warmup N] [--seed S] [--profile] [--precision f32|bf16]
//
// --precision bf16 (issue 39) runs the steps inside a tg::autocast::Guard, as bench_seq2seq and
// bench_encoder do, so that bench/compare can run every framework in each precision. autocast
// converts matmul and linear only (docs/performance.md, "bf16 mixed precision"): tg::conv2d and
// the rest of this step stay float32, so a bf16 run computes what a float32 run computes. The
// record says so ("autocast_ops": "none in this step"); the references convert their convolution.
//
// Output: one JSON line with the keys bench/compare reads; tokens are images (32 per step),
// tokens_per_sec = images_per_sec, and the decoding fields read 0. --profile adds seconds per phase.
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/ops_conv.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_reduce.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "autograd/tape.h"
#include "autograd/tensor.h"
#include "bench/cpu_context.h"
#include "bench/process_stats.h"

namespace {

using tg::bench::Clock, tg::bench::since, tg::bench::cpu_seconds, tg::bench::peak_rss_mib;
const auto num = tg::bench::json_number;

constexpr std::int64_t N = 32, C = 3, H = 32, W = 32, O = 32, K = 3;
constexpr double kLearningRate = 0.01, kMomentum = 0.1, kEps = 1e-5;

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tapegrad workload CONV: Conv2d + BatchNorm2d + ReLU + MaxPool2d training step (issue 42)"};
  int threads = 0, steps = 200, warmup = 20;
  std::uint64_t seed = 0;
  bool profile = false;
  std::string config = "CONV";
  app.add_option("--config", config, "workload (CONV only; accepted for bench/compare)")->check(CLI::IsMember({"CONV"}));
  app.add_option("--threads", threads, "kernel threads (0 = all hardware threads)");
  app.add_option("--steps", steps, "timed training steps");
  app.add_option("--warmup", warmup, "untimed steps before");
  app.add_option("--seed", seed, "seed of the weights and of the batch");
  app.add_flag("--profile", profile, "also report seconds per phase of a step");
  std::string precision = "f32";
  app.add_option("--precision", precision, "f32 (or fp32), or bf16: the steps under tg::autocast::Guard (nothing converts)")
      ->check(CLI::IsMember({"f32", "fp32", "bf16"}));
  CLI11_PARSE(app, argc, argv);
  if (precision == "fp32") precision = "f32";
  try {
    std::optional<tg::autocast::Guard> autocast;
    if (precision == "bf16") autocast.emplace(tg::autocast::Precision::bf16);
    if (steps < 1) throw std::invalid_argument("--steps must be >= 1");
    if (warmup < 0) throw std::invalid_argument("--warmup must be >= 0");
    tg::set_num_threads(threads);
    tg::Generator gen(seed);
    const double bound = 1.0 / std::sqrt(static_cast<double>(C * K * K));  // nn::Conv2d's init
    const tg::Tensor weight = tg::Tensor::uniform({O, C, K, K}, -bound, bound, gen).requires_grad_();
    const tg::Tensor bias = tg::Tensor::uniform({O}, -bound, bound, gen).requires_grad_();
    const tg::Tensor gamma = tg::Tensor::ones({O}).requires_grad_(), beta = tg::Tensor::zeros({O}).requires_grad_();
    const tg::Tensor running_mean = tg::Tensor::zeros({O}), running_var = tg::Tensor::ones({O});
    const tg::Tensor x = tg::Tensor::uniform({N, C, H, W}, -1, 1, gen);
    const std::vector<tg::Tensor> params{weight, bias, gamma, beta};
    std::int64_t parameter_count = 0;
    for (const auto& p : params) parameter_count += p.numel();

    double t_fwd = 0, t_bwd = 0, t_sgd = 0, first_loss = 0, last_loss = 0, cpu_start = 0;
    Clock::time_point start = Clock::now();
    for (int i = 0; i < warmup + steps; ++i) {
      if (i == warmup) start = Clock::now(), cpu_start = cpu_seconds();
      auto t = Clock::now();
      for (tg::Tensor p : params) p.zero_grad();
      const tg::Tensor y = tg::conv2d(x, weight, bias, 1, 1);
      const tg::Tensor loss =
          tg::mean(tg::max_pool2d(tg::relu(tg::batch_norm(y, running_mean, running_var, gamma, beta, true, kMomentum, kEps)), 2));
      const double f = since(t);
      t = Clock::now();
      loss.backward();
      const double bw = since(t);
      t = Clock::now();
      {
        tg::NoGradGuard no_grad;
        for (tg::Tensor p : params) p.copy_(p - p.grad() * kLearningRate);
      }
      const double sg = since(t);
      last_loss = loss.item();
      if (i == 0) first_loss = last_loss;
      if (!std::isfinite(last_loss)) throw std::runtime_error("loss is not finite");
      if (i >= warmup) t_fwd += f, t_bwd += bw, t_sgd += sg;
    }
    const double train_s = since(start), train_cpu_s = cpu_seconds() - cpu_start;
    const double images = static_cast<double>(steps) * N;

    std::ostringstream js;
    js << "{\"framework\":\"tapegrad\",\"config\":\"CONV\",\"model\":\"Conv2d(3,32,3,pad 1)+BatchNorm2d+ReLU+MaxPool2d(2), "
          "SGD (functional ops)\",\"precision\":\""
       << precision << (precision == "bf16" ? "\",\"bf16_path\":\"" : "") << (precision == "bf16" ? tg::autocast::bf16_path() : "")
       << (precision == "bf16" ? "\",\"autocast_ops\":\"none in this step" : "") << "\",\"threads\":" << tg::num_threads() << ",\"blas\":\"tapegrad kernels\",\"steps\":" << steps << ",\"warmup\":" << warmup
       << ",\"batch\":" << N << ",\"input\":[" << N << "," << C << "," << H << "," << W << "]"
       << ",\"tokens\":" << num(images) << ",\"tokens_per_sec\":" << num(images / train_s)
       << ",\"images_per_sec\":" << num(images / train_s) << ",\"sec_per_step\":" << num(train_s / steps)
       << ",\"cpu_sec_per_step\":" << num(train_cpu_s / steps) << ",\"loss_first\":" << num(first_loss)
       << ",\"loss_last\":" << num(last_loss) << ",\"decode_batch1_sents_per_sec\":0,\"decode_batch64_sents_per_sec\":0"
       << ",\"peak_rss_mib\":" << num(peak_rss_mib()) << ",\"parameters\":" << parameter_count
       << tg::bench::cpu_json_fields();
    if (profile)
      js << ",\"profile_s\":{\"forward_and_loss\":" << num(t_fwd) << ",\"backward\":" << num(t_bwd)
         << ",\"sgd\":" << num(t_sgd) << "}";
    js << "}";
    std::cout << js.str() << std::endl;
  } catch (const std::exception& e) {
    std::cerr << "bench_conv_step: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
