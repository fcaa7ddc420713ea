// LibTorch reference for workload CONV (bench_conv_step, issue 42): the training step of bench_conv's
// BM_ConvBlockTrainingStep as a LibTorch user writes it, with the JSON keys of bench_conv_step and
// bench/conv_reference.py. torch::nn::Conv2d(3 -> 32, 3x3, padding 1) + BatchNorm2d(32) (training
// mode: batch statistics, running ones updated) + ReLU + MaxPool2d(2) on one 32x3x32x32 float32 batch
// (uniform in [-1, 1), the same every step), loss = mean of the output, backward, SGD update
// p -= 0.01 grad of the four trainable tensors under NoGradGuard, gradients dropped before each step
// (PyTorch's set_to_none).
//
//   OMP_WAIT_POLICY=passive OPENBLAS_NUM_THREADS=N build/bin/libtorch_conv [--threads N] [--steps N]
//       [--warmup N] [--seed S] [--profile] [--precision f32|bf16]
//
// --precision bf16 (issue 39): each step's forward and loss inside ltbench::Autocast (common.h:
// torch.autocast("cpu", dtype=torch.bfloat16) in C++; the convolution runs in bf16 on oneDNN),
// backward and the SGD update outside, as bench/conv_reference.py; the record names the dtype of
// the first step's convolution output ("out_dtype").
#include <cmath>
#include <iostream>

#include "common.h"

namespace {

constexpr int64_t N = 32, C = 3, H = 32, W = 32, O = 32;
constexpr double kLearningRate = 0.01;

}  // namespace

int main(int argc, char** argv) {
  try {
    const ltbench::Args args(argc, argv, {"--config", "--threads", "--steps", "--warmup", "--seed", "--precision"},
                             {"--profile"});
    const std::string precision = ltbench::precision_arg(args.str("--precision", "f32"));
    if (args.str("--config", "CONV") != "CONV") throw std::invalid_argument("libtorch_conv: --config must be CONV");
    const int steps = static_cast<int>(args.integer("--steps", 200)), warmup = static_cast<int>(args.integer("--warmup", 20));
    const auto seed = static_cast<std::uint64_t>(args.integer("--seed", 0));
    if (steps < 1) throw std::invalid_argument("libtorch_conv: --steps must be >= 1");
    if (warmup < 0) throw std::invalid_argument("libtorch_conv: --warmup must be >= 0");
    ltbench::set_threads(static_cast<int>(args.integer("--threads", 0)));
    torch::manual_seed(seed);
    torch::nn::Conv2d conv(torch::nn::Conv2dOptions(C, O, 3).padding(1));
    torch::nn::BatchNorm2d bn(O);
    torch::nn::MaxPool2d pool(torch::nn::MaxPool2dOptions(2));
    const auto x = torch::rand({N, C, H, W}) * 2 - 1;
    const std::vector<torch::Tensor> params{conv->weight, conv->bias, bn->weight, bn->bias};
    int64_t parameter_count = 0;
    for (const auto& p : params) parameter_count += p.numel();

    double t_fwd = 0, t_bwd = 0, t_sgd = 0, first_loss = 0, last_loss = 0, cpu_start = 0;
    std::string out_dtype;
    auto start = ltbench::Clock::now();
    for (int i = 0; i < warmup + steps; ++i) {
      if (i == warmup) start = ltbench::Clock::now(), cpu_start = ltbench::cpu_seconds();
      auto t = ltbench::Clock::now();
      ltbench::drop_grads(params);
      torch::Tensor y, loss;
      {
        ltbench::Autocast autocast(precision == "bf16");
        y = conv(x);
        loss = pool(torch::relu(bn(y))).mean();
      }
      const double f = ltbench::since(t);
      t = ltbench::Clock::now();
      loss.backward();
      const double bw = ltbench::since(t);
      t = ltbench::Clock::now();
      {
        torch::NoGradGuard no_grad;
        for (auto p : params) p.sub_(p.grad() * kLearningRate);
      }
      const double sg = ltbench::since(t);
      last_loss = loss.item<double>();
      if (i == 0) first_loss = last_loss, out_dtype = c10::toString(y.scalar_type());
      if (!std::isfinite(last_loss)) throw std::runtime_error("libtorch_conv: loss is not finite");
      if (i >= warmup) t_fwd += f, t_bwd += bw, t_sgd += sg;
    }
    const double train_s = ltbench::since(start), train_cpu_s = ltbench::cpu_seconds() - cpu_start;
    const double images = static_cast<double>(steps) * N;
    std::ostringstream js;
    js << "{" << ltbench::json_head(precision)
       << ",\"config\":\"CONV\",\"model\":\"Conv2d(3,32,3,pad 1)+BatchNorm2d+ReLU+MaxPool2d(2), SGD (torch::nn modules)\""
       << ",\"steps\":" << steps << ",\"warmup\":" << warmup << ",\"batch\":" << N << ",\"input\":[" << N << "," << C
       << "," << H << "," << W << "]"
       << ",\"tokens\":" << ltbench::num(images) << ",\"tokens_per_sec\":" << ltbench::num(images / train_s)
       << ",\"images_per_sec\":" << ltbench::num(images / train_s) << ",\"sec_per_step\":" << ltbench::num(train_s / steps)
       << ",\"cpu_sec_per_step\":" << ltbench::num(train_cpu_s / steps) << ",\"loss_first\":" << ltbench::num(first_loss)
       << ",\"loss_last\":" << ltbench::num(last_loss) << ",\"decode_batch1_sents_per_sec\":0,\"decode_batch64_sents_per_sec\":0"
       << ",\"peak_rss_mib\":" << ltbench::num(ltbench::peak_rss_mib()) << ",\"parameters\":" << parameter_count
       << ",\"out_dtype\":\"" << out_dtype << "\"";
    if (args.flag("--profile"))
      js << ",\"profile_s\":{\"forward_and_loss\":" << ltbench::num(t_fwd) << ",\"backward\":" << ltbench::num(t_bwd)
         << ",\"sgd\":" << ltbench::num(t_sgd) << "}";
    js << "}";
    std::cout << js.str() << std::endl;
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
