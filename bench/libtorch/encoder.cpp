// LibTorch reference for workload G (bench_encoder, issue 20): the pre-LN Transformer encoder
// layer, data, step and JSON keys of bench/encoder_workload.h and bench/encoder_reference.py.
//
//   OMP_WAIT_POLICY=passive build/bin/libtorch_encoder [--threads N] [--steps N] [--warmup N] [--seed S] [--profile]
//       [--precision f32|bf16]
//
// --precision bf16 (issue 39): each step's forward and loss inside ltbench::Autocast (common.h:
// torch.autocast("cpu", dtype=torch.bfloat16) in C++), backward and Adam outside, as
// bench/encoder_reference.py; the record names the dtype of the first step's last product (ff2's
// output, "product_dtype") and the first step's loss.
#include <cmath>
#include <iostream>

#include "common.h"

namespace {

constexpr int64_t D = 256, HEADS = 4, FF = 1024, B = 32, T = 64;

struct EncoderLayerImpl : torch::nn::Module {
  torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
  torch::nn::Linear q{nullptr}, k{nullptr}, v{nullptr}, o{nullptr}, ff1{nullptr}, ff2{nullptr};
  torch::ScalarType product_dtype = torch::kFloat;  // of the last forward's ff2 output
  EncoderLayerImpl() {
    ln1 = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({D})));
    ln2 = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({D})));
    q = register_module("q", torch::nn::Linear(D, D));
    k = register_module("k", torch::nn::Linear(D, D));
    v = register_module("v", torch::nn::Linear(D, D));
    o = register_module("o", torch::nn::Linear(D, D));
    ff1 = register_module("ff1", torch::nn::Linear(D, FF));
    ff2 = register_module("ff2", torch::nn::Linear(FF, D));
    torch::NoGradGuard no_grad;
    for (auto* lin : {&q, &k, &v, &o, &ff1, &ff2}) {  // U(-1/sqrt(in), 1/sqrt(in))
      const double bound = 1.0 / std::sqrt(static_cast<double>((*lin)->options.in_features()));
      (*lin)->weight.uniform_(-bound, bound);
      (*lin)->bias.uniform_(-bound, bound);
    }
  }
  torch::Tensor forward(const torch::Tensor& x) {
    const int64_t dh = D / HEADS;
    auto heads = [&](const torch::Tensor& t) { return t.reshape({B, T, HEADS, dh}).transpose(1, 2); };
    const auto a = ln1(x);
    const auto qh = heads(q(a)), kh = heads(k(a)), vh = heads(v(a));
    const auto w = torch::softmax(torch::matmul(qh, kh.transpose(2, 3)) * (1.0 / std::sqrt(static_cast<double>(dh))), -1);
    const auto y = x + o(torch::matmul(w, vh).transpose(1, 2).reshape({B, T, D}));
    const auto f = ff2(torch::gelu(ff1(ln2(y))));
    product_dtype = f.scalar_type();
    return y + f;
  }
};
TORCH_MODULE(EncoderLayer);

}  // namespace

int main(int argc, char** argv) {
  try {
    const ltbench::Args args(argc, argv, {"--config", "--threads", "--steps", "--warmup", "--seed", "--precision"},
                             {"--profile"});
    const std::string precision = ltbench::precision_arg(args.str("--precision", "f32"));
    if (args.str("--config", "G") != "G") throw std::invalid_argument("libtorch_encoder: --config must be G");
    const int steps = static_cast<int>(args.integer("--steps", 20)), warmup = static_cast<int>(args.integer("--warmup", 3));
    const auto seed = static_cast<std::uint64_t>(args.integer("--seed", 0));
    if (steps < 1) throw std::invalid_argument("libtorch_encoder: --steps must be >= 1");
    ltbench::set_threads(static_cast<int>(args.integer("--threads", 0)));
    torch::manual_seed(seed);
    EncoderLayer model;
    torch::optim::Adam opt(model->parameters(), torch::optim::AdamOptions(1e-3));
    const auto params = model->parameters();
    int64_t parameter_count = 0;
    for (const auto& p : params) parameter_count += p.numel();

    // bench/encoder_workload.h's batches.
    ltbench::SplitMix64 rng{seed * 0x632BE59BD9B4E019ULL + 12345};
    std::vector<std::pair<torch::Tensor, torch::Tensor>> data;
    for (int i = 0; i < warmup + steps; ++i) {
      auto x = torch::empty({B, T, D});
      float* p = x.data_ptr<float>();
      for (int64_t j = 0; j < B * T * D; ++j)
        p[j] = 2.0f * (static_cast<float>(rng.next() >> 40) * (1.0f / 16777216.0f)) - 1.0f;
      data.emplace_back(x, torch::roll(x, {-1}, {1}));
    }

    double t_fwd = 0, t_bwd = 0, t_adam = 0, first_loss = 0, last_loss = 0, cpu_start = 0;
    std::string product_dtype;
    auto start = ltbench::Clock::now();
    for (int i = 0; i < warmup + steps; ++i) {
      if (i == warmup) start = ltbench::Clock::now(), cpu_start = ltbench::cpu_seconds();
      auto t = ltbench::Clock::now();
      torch::Tensor loss;
      {
        ltbench::Autocast autocast(precision == "bf16");
        loss = (model->forward(data[i].first) - data[i].second).pow(2).mean();
      }
      const double f = ltbench::since(t);
      t = ltbench::Clock::now();
      ltbench::drop_grads(params);
      loss.backward();
      const double bw = ltbench::since(t);
      t = ltbench::Clock::now();
      opt.step();
      const double ad = ltbench::since(t);
      last_loss = loss.item<double>();
      if (i == 0) first_loss = last_loss, product_dtype = c10::toString(model->product_dtype);
      if (!std::isfinite(last_loss)) throw std::runtime_error("libtorch_encoder: loss is not finite");
      if (i >= warmup) t_fwd += f, t_bwd += bw, t_adam += ad;
    }
    const double train_s = ltbench::since(start), train_cpu_s = ltbench::cpu_seconds() - cpu_start;
    const double tokens = static_cast<double>(steps) * B * T;
    std::ostringstream js;
    js << "{" << ltbench::json_head(precision) << ",\"config\":\"G\",\"model\":\"pre-LN encoder layer (torch::nn modules)\""
       << ",\"steps\":" << steps << ",\"warmup\":" << warmup << ",\"batch\":" << B << ",\"num_steps\":" << T
       << ",\"tokens\":" << ltbench::num(tokens) << ",\"tokens_per_sec\":" << ltbench::num(tokens / train_s)
       << ",\"sec_per_step\":" << ltbench::num(train_s / steps) << ",\"cpu_sec_per_step\":" << ltbench::num(train_cpu_s / steps)
       << ",\"loss_first\":" << ltbench::num(first_loss) << ",\"loss_last\":" << ltbench::num(last_loss)
       << ",\"decode_batch1_sents_per_sec\":0,\"decode_batch64_sents_per_sec\":0"
       << ",\"peak_rss_mib\":" << ltbench::num(ltbench::peak_rss_mib()) << ",\"parameters\":" << parameter_count
       << ",\"product_dtype\":\"" << product_dtype << "\"";
    if (args.flag("--profile"))
      js << ",\"profile_s\":{\"forward_and_loss\":" << ltbench::num(t_fwd) << ",\"backward\":" << ltbench::num(t_bwd)
         << ",\"adam\":" << ltbench::num(t_adam) << "}";
    js << "}";
    std::cout << js.str() << std::endl;
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
