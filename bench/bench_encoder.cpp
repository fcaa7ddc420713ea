// Workload G of issue 20: training steps of a pre-LN Transformer encoder layer written with public
// ops only (no nn::TransformerEncoderLayer, no fused layer): the path an author of a new model takes.
// The model, data and step are described in bench/encoder_workload.h; bench/libtorch/encoder.cpp and
// bench/encoder_reference.py are the LibTorch and PyTorch references.
//
//   build/bin/bench_encoder [--threads N] [--steps N] [--warmup N] [--seed S] [--profile]
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
#include <string>
#include <vector>

#include "autograd/ops_elementwise.h"
#include "autograd/ops_matmul.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_shape.h"
#include "autograd/ops_softmax.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "autograd/tensor.h"
#include "bench/encoder_workload.h"
#include "nn/optim.h"

namespace {

using namespace tg::bench::encoder;
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

struct Linear {
  tg::Tensor w, b;
  Linear(std::int64_t in, std::int64_t out, tg::Generator& gen) {
    const double k = 1.0 / std::sqrt(static_cast<double>(in));
    w = tg::Tensor::uniform({out, in}, -k, k, gen).requires_grad_();
    b = tg::Tensor::uniform({out}, -k, k, gen).requires_grad_();
  }
  tg::Tensor operator()(const tg::Tensor& x) const { return tg::linear(x, w, b); }
};

struct LayerNormParams {
  tg::Tensor w = tg::Tensor::ones({kDModel}).requires_grad_();
  tg::Tensor b = tg::Tensor::zeros({kDModel}).requires_grad_();
  // Composed from public ops, as a model author would write it (biased variance, as PyTorch).
  tg::Tensor operator()(const tg::Tensor& x) const {
    const tg::Tensor centred = x - tg::mean(x, {2}, true);
    const tg::Tensor var = tg::var(x, {2}, tg::Correction{0}, true);
    return centred * tg::rsqrt(var + kLayerNormEps) * w + b;
  }
};

struct EncoderLayer {
  LayerNormParams ln1, ln2;
  Linear q, k, v, o, ff1, ff2;
  explicit EncoderLayer(tg::Generator& gen)
      : q(kDModel, kDModel, gen), k(kDModel, kDModel, gen), v(kDModel, kDModel, gen), o(kDModel, kDModel, gen),
        ff1(kDModel, kFF, gen), ff2(kFF, kDModel, gen) {}

  tg::nn::NamedTensors named_parameters() const {
    return {{"ln1.weight", ln1.w}, {"ln1.bias", ln1.b}, {"q.weight", q.w},     {"q.bias", q.b},
            {"k.weight", k.w},     {"k.bias", k.b},     {"v.weight", v.w},     {"v.bias", v.b},
            {"o.weight", o.w},     {"o.bias", o.b},     {"ln2.weight", ln2.w}, {"ln2.bias", ln2.b},
            {"ff1.weight", ff1.w}, {"ff1.bias", ff1.b}, {"ff2.weight", ff2.w}, {"ff2.bias", ff2.b}};
  }

  tg::Tensor forward(const tg::Tensor& x) const {
    const std::int64_t B = x.size(0), T = x.size(1), dh = kDModel / kHeads;
    auto heads = [&](const tg::Tensor& t) { return tg::transpose(tg::reshape(t, {B, T, kHeads, dh}), 1, 2); };
    const tg::Tensor a = ln1(x);
    const tg::Tensor qh = heads(q(a)), kh = heads(k(a)), vh = heads(v(a));                 // (B, H, T, dh)
    const tg::Tensor scores = tg::matmul(qh, tg::transpose(kh, 2, 3)) * (1.0 / std::sqrt(static_cast<double>(dh)));
    const tg::Tensor ctx = tg::matmul(tg::softmax(scores, -1), vh);                          // (B, H, T, dh)
    const tg::Tensor y = x + o(tg::reshape(tg::transpose(ctx, 1, 2), {B, T, kDModel}));
    return y + ff2(tg::gelu(ff1(ln2(y))));
  }
};

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
  CLI11_PARSE(app, argc, argv);
  try {
    if (steps < 1) throw std::invalid_argument("bench_encoder: --steps must be >= 1");
    tg::set_num_threads(threads);
    tg::Generator gen(seed);
    const EncoderLayer layer(gen);
    const auto named = layer.named_parameters();
    std::int64_t parameter_count = 0;
    for (const auto& [name, p] : named) parameter_count += p.numel();
    tg::nn::Adam optimizer(named, tg::nn::AdamOptions(kLearningRate));

    tg::SplitMix64 rng{data_seed(seed)};
    std::vector<std::pair<tg::Tensor, tg::Tensor>> batches;
    std::vector<float> xs, ts;
    for (int i = 0; i < warmup + steps; ++i) {
      make_batch(rng, xs, ts);
      batches.emplace_back(tg::Tensor::from_vector(xs, {kBatch, kSeq, kDModel}),
                           tg::Tensor::from_vector(ts, {kBatch, kSeq, kDModel}));
    }

    double t_fwd = 0, t_bwd = 0, t_adam = 0, last_loss = 0, cpu_start = 0;
    Clock::time_point start = Clock::now();
    for (int i = 0; i < warmup + steps; ++i) {
      if (i == warmup) start = Clock::now(), cpu_start = cpu_seconds();
      auto t = Clock::now();
      const tg::Tensor loss = tg::mean(tg::square(layer.forward(batches[i].first) - batches[i].second));
      const double f = since(t);
      t = Clock::now();
      optimizer.zero_grad();
      loss.backward();
      const double bw = since(t);
      t = Clock::now();
      optimizer.step();
      const double ad = since(t);
      last_loss = loss.item();
      if (!std::isfinite(last_loss)) throw std::runtime_error("bench_encoder: loss is not finite");
      if (i >= warmup) t_fwd += f, t_bwd += bw, t_adam += ad;
    }
    const double train_s = since(start), train_cpu_s = cpu_seconds() - cpu_start;
    const double tokens = static_cast<double>(steps) * kBatch * kSeq;

    std::ostringstream js;
    js << "{\"framework\":\"tapegrad\",\"config\":\"G\",\"model\":\"pre-LN encoder layer (public ops)\",\"threads\":"
       << tg::num_threads() << ",\"blas\":\"tapegrad kernels\",\"steps\":" << steps << ",\"warmup\":" << warmup
       << ",\"batch\":" << kBatch << ",\"num_steps\":" << kSeq << ",\"tokens\":" << num(tokens)
       << ",\"tokens_per_sec\":" << num(tokens / train_s) << ",\"sec_per_step\":" << num(train_s / steps)
       << ",\"cpu_sec_per_step\":" << num(train_cpu_s / steps) << ",\"loss_last\":" << num(last_loss)
       << ",\"decode_batch1_sents_per_sec\":0,\"decode_batch64_sents_per_sec\":0"
       << ",\"peak_rss_mib\":" << num(peak_rss_mib()) << ",\"parameters\":" << parameter_count;
    if (profile)
      js << ",\"profile_s\":{\"forward_and_loss\":" << num(t_fwd) << ",\"backward\":" << num(t_bwd)
         << ",\"adam\":" << num(t_adam) << "}";
    js << "}";
    std::cout << js.str() << std::endl;
  } catch (const std::exception& e) {
    std::cerr << "bench_encoder: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
