// End-to-end training and decoding throughput of the translators on synthetic data (issues 6, 15).
//
//   build/bin/bench_seq2seq --config A|B|C|T [--readout linear|maxout] [--threads N] [--steps N]
//                           [--warmup N] [--seed S] [--profile] [--only train|decode1|decode64]
//                           [--memory-trace] [--compact-grads on|off|auto] [--no-decode] [--cache-limit-mib M]
//   mpirun -np N build/bin/bench_seq2seq --config B --no-decode [--bucket-mib M]   (data parallel)
//
// Workloads (bench/pytorch_reference.py implements the same ones in PyTorch, with the same data):
//   A: d2l, embed 32, hidden 32, 2 layers, dropout 0.1, batch 64, num_steps 10, vocab 184 / 201
//   B: rnnsearch, embed 256, hidden 256, batch 64, num_steps 20, vocab 8000 / 8000, linear, no dropout
//   C: rnnsearch, embed 620, hidden 1000, batch 80, num_steps 30, vocab 30000 / 30000, linear|maxout
//   T: transformer (post-LN), d_model 256, 4 heads, ff 1024, 3 encoder + 3 decoder layers, dropout 0.1,
//      batch 64, num_steps 40, vocab 8000 / 8000; Adam(lr 1e-4, betas (0.9, 0.98), eps 1e-9)
// Data: per row, source and target valid lengths uniform in [3, num_steps] (T: [20, 40]), the last valid token
// <eos> = 3, padding <pad> = 1, other tokens uniform in [4, vocab). The generator is splitmix64 so
// the Python reference draws exactly the same batches. One step = teacher-forced forward,
// sequence_loss, backward, clip_grad_norm(1.0), Adam(lr 0.005; T as above). Every step uses a fresh batch.
// The previous step's gradients are dropped just before backward (A, B) or before the forward (C),
// as in the PyTorch reference; C also keeps its embedding and readout gradients compact
// (models::allow_compact_grads; --compact-grads on|off overrides). Both show in the JSON.
// tokens_per_sec counts valid target tokens (<eos> included) of the timed steps.
// Decoding: greedy_decode (eval mode, no grad, max_steps = num_steps, attention weights not kept,
// as in the PyTorch loop) of single sentences
// (batch 1) and of batches of 64, in sentences per second, on the freshly initialised model (T: each
// step runs one position through the decoder with the key/value cache)
// (before training, so that nearly every sentence runs num_steps steps in both frameworks);
// decode_batch*_avg_steps report the mean decoding steps per sentence actually run.
// Output: one JSON line on stdout; loss_first is the loss of the first (warm-up) step, on the
// freshly initialised model, for comparison with the references. cpu_sec_per_step is the process's user+system CPU time per
// timed step (all threads): on a shared, oversubscribed machine it is a load-robust companion to
// the wall-clock sec_per_step (with 1 thread it approximates the uncontended wall time). --profile adds per-phase seconds (forward, loss, backward,
// clip, adam, summed over the timed steps). alloc_*: the caching allocator (autograd/memory.h) at the
// end: peak MiB in use and in use + cached, MiB cached, and blocks it took from the system.
// parameters: the model's parameter count (16 bytes each for the weights, their gradients and
// Adam's two moments in float32; 12 when the gradients are compact). --only train|decode1|decode64 runs
// one part (for profilers); the fields of the other parts read 0. --memory-trace prints, to stderr,
// the bytes of live tensors, the allocator's in-use/cached bytes, the RSS and the peak RSS after
// zero_grad, the forward, the backward and Adam of every step (where a step's memory goes).
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/dist.h"
#include "autograd/memory.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_index.h"
#include "autograd/ops_matmul.h"
#include "autograd/ops_shape.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "autograd/tensor.h"
#include "bench/cpu_context.h"
#include "bench/process_stats.h"
#include "bench/workloads.h"
#include "models/decoding/decode.h"
#include "models/translators/seq2seq.h"
#include "nn/distributed.h"
#include "nn/optim.h"
#include "nn/utils.h"

namespace {

using namespace tg::bench;

// Rows [first, first + n) of a batch, as a batch of n sentences.
std::pair<tg::Tensor, tg::Tensor> rows(const Batch& b, std::int64_t first, std::int64_t n) {
  const std::int64_t T = b.src.size(1);
  const std::int64_t* s = b.src.data<std::int64_t>();
  const std::int64_t* l = b.src_len.data<std::int64_t>();
  std::vector<std::int64_t> src(s + first * T, s + (first + n) * T), len(l + first, l + first + n);
  return {tg::Tensor::from_vector(src, {n, T}), tg::Tensor::from_vector(len, {n})};
}

/// Resident set size now (/proc/self/statm), MiB; 0 where that file does not exist.
double rss_mib() {
  long pages = 0, resident = 0;
  if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

const auto num = json_number;

}  // namespace

// Data parallel (under mpirun, or --ddp in one process): every rank takes its consecutive rows of
// each global batch, scales its mean loss to its share of the batch's tokens, and
// nn::DistributedDataParallel exchanges the gradients (as models/training/trainer.cpp does).
// tokens_per_sec counts the global batch; rank 0 prints the JSON, with the communication
// figures in "ddp": bytes each rank sends per step, seconds per step spent waiting for transfers
// in synchronize() (communication not hidden by backward) and adding the ranks' contributions.

int main(int argc, char** argv) {
  tg::dist::Context mpi(&argc, &argv);
  CLI::App app{"tapegrad seq2seq training/decoding benchmark (issue 6 workloads)"};
  std::string config = "A", readout;
  int threads = 0, steps = -1, warmup = -1;
  std::uint64_t seed = 0;
  bool profile = false, no_decode = false, memory_trace = false;
  std::string compact_grads = "auto";
  app.add_option("--config", config, "workload: A | B | C | T")->check(CLI::IsMember({"A", "B", "C", "T"}));
  app.add_option("--readout", readout, "rnnsearch readout: linear | maxout (default linear)")
      ->check(CLI::IsMember(tg::models::option_names<tg::models::Readout>()));
  app.add_option("--threads", threads, "kernel threads (0 = all hardware threads)");
  app.add_option("--steps", steps, "timed training steps (default A 100, B 10, C 3, T 3)");
  app.add_option("--warmup", warmup, "untimed steps before (default A 10, B 2, C 1, T 1)");
  app.add_option("--seed", seed, "seed of the weights and of the data");
  double cache_limit_mib = -1;
  app.add_option("--cache-limit-mib", cache_limit_mib,
                 "the caching allocator's limit on in-use + cached MiB (tg::memory::set_cache_limit; default: its own)");
  app.add_flag("--profile", profile, "also report seconds per phase of a step");
  app.add_flag("--memory-trace", memory_trace,
               "print live tensor bytes, allocator state and peak RSS after each phase of each step to stderr");
  app.add_flag("--no-decode", no_decode, "skip the decoding measurements");
  bool ddp_flag = false;
  double bucket_mib = 4;
  app.add_flag("--ddp", ddp_flag, "train through DistributedDataParallel even in one process");
  app.add_option("--bucket-mib", bucket_mib, "DDP bucket size in MiB (default 4)");
  std::int64_t batch_override = 0;
  app.add_option("--batch", batch_override, "rows per batch instead of the workload's (e.g. one rank's share)");
  app.add_option("--compact-grads", compact_grads,
                 "embedding and readout gradients kept compact (models::allow_compact_grads): on | off | auto "
                 "(default: on for C, off for A and B)")
      ->check(CLI::IsMember({"on", "off", "auto"}));
  std::string only;
  app.add_option("--only", only, "run one part only, for profilers: train | decode1 | decode64")
      ->check(CLI::IsMember({"train", "decode1", "decode64"}));
  std::string precision = "f32";
  app.add_option("--precision", precision, "f32, or bf16: every step and decode under tg::autocast::Guard")
      ->check(CLI::IsMember({"f32", "bf16"}));
  CLI11_PARSE(app, argc, argv);

  try {
    // bf16: the whole run inside one autocast scope (the weight cache is renewed after each backward).
    std::optional<tg::autocast::Guard> autocast;
    if (precision == "bf16") autocast.emplace(tg::autocast::Precision::bf16);
    Workload w = workload(config, readout);
    if (batch_override > 0) w.batch = batch_override;
    const auto& c = w.config;
    if (steps < 0) steps = w.default_steps;
    if (warmup < 0) warmup = w.default_warmup;
    if (steps < 1) throw std::invalid_argument("--steps must be >= 1");
    tg::set_num_threads(threads);
    if (cache_limit_mib >= 0) tg::memory::set_cache_limit(static_cast<std::int64_t>(cache_limit_mib * (1 << 20)));

    tg::Generator gen(seed);
    auto model = tg::models::make_model(c, gen);
    if (compact_grads == "on" || (compact_grads == "auto" && w.compact_grads)) tg::models::allow_compact_grads(*model);
    tg::nn::Adam optimizer(model->named_parameters(), tg::nn::AdamOptions(w.lr).betas(0.9, w.beta2).eps(w.adam_eps));
    const auto params = model->parameters();
    std::int64_t parameter_count = 0;  // float32 parameters + gradients + Adam's two moments take 16 B each
    for (const auto& p : params) parameter_count += p.numel();

    SplitMix64 rng{seed * 0x632BE59BD9B4E019ULL + 12345};
    std::vector<Batch> batches;
    for (int i = 0; i < warmup + steps; ++i) batches.push_back(make_batch(rng, w.batch, c, w.min_len));

    // Greedy decoding of the freshly initialised model, before any training step, so that both
    // frameworks decode an untrained model: an argmax of <eos> is then rare and nearly every
    // sentence runs the full num_steps (a trained model would stop after a few tokens, making
    // sentences/s depend on what it learnt). The mean decoding steps per sentence are reported.
    // greedy_decode switches to eval mode and disables recording itself.
    double dec1 = 0, dec64 = 0, dec1_len = 0, dec64_len = 0;
    const bool run_dec1 = !no_decode && (only.empty() || only == "decode1");
    const bool run_dec64 = !no_decode && (only.empty() || only == "decode64");
    if (run_dec1 || run_dec64) {
      const Batch& b = batches.back();
      const std::int64_t B = b.src.size(0);
      std::vector<std::pair<tg::Tensor, tg::Tensor>> singles;
      for (std::int64_t r = 0; r < B; ++r) singles.push_back(rows(b, r, 1));
      const auto full = rows(b, 0, std::min<std::int64_t>(64, B));
      auto total_steps = [](const std::vector<tg::models::Translation>& out) {
        std::int64_t n = 0;
        for (const auto& t : out) n += t.steps();
        return n;
      };
      if (run_dec1) {
        tg::models::greedy_decode(*model, singles[0].first, singles[0].second, c.num_steps, false);  // warm-up
        std::int64_t n = 0, len = 0;
        const auto t = Clock::now();
        do {
          const auto& s = singles[n % B];
          len += total_steps(tg::models::greedy_decode(*model, s.first, s.second, c.num_steps, false));
          ++n;
        } while (since(t) < w.decode_min_time || n < 4);
        dec1 = static_cast<double>(n) / since(t);
        dec1_len = static_cast<double>(len) / static_cast<double>(n);
      }
      if (run_dec64) {
        tg::models::greedy_decode(*model, full.first, full.second, c.num_steps, false);  // warm-up
        std::int64_t n = 0, len = 0;
        const auto t = Clock::now();
        do {
          len += total_steps(tg::models::greedy_decode(*model, full.first, full.second, c.num_steps, false));
          n += full.first.size(0);
        } while (since(t) < w.decode_min_time);
        dec64 = static_cast<double>(n) / since(t);
        dec64_len = static_cast<double>(len) / static_cast<double>(n);
      }
    }
    if (!only.empty() && only != "train") steps = 0, warmup = 0;

    // Training.
    const int world = tg::dist::world_size(), rank = tg::dist::rank();
    std::unique_ptr<tg::nn::DistributedDataParallel> ddp;
    if (world > 1 || ddp_flag)
      ddp = std::make_unique<tg::nn::DistributedDataParallel>(
          model->named_parameters(),
          tg::nn::DDPOptions().average(false).bucket_bytes(static_cast<std::int64_t>(bucket_mib * (1 << 20))));
    double t_sync = 0;
    std::int64_t wire_start = 0;  // DDP's wire bytes after warm-up (the first step is always dense)
    model->train();
    double t_fwd = 0, t_bwd = 0, t_clip = 0, t_adam = 0, first_loss = 0, last_loss = 0;
    std::int64_t tokens = 0;
    Clock::time_point start;
    double cpu_start = 0;
    for (int i = 0; i < warmup + steps; ++i) {
      if (i == warmup) start = Clock::now(), cpu_start = cpu_seconds(), wire_start = ddp ? ddp->stats().wire_bytes : 0;
      const Batch& b = batches[i];
      auto mem = [&](const char* after) {
        if (!memory_trace) return;
        const auto cs = tg::memory::cache_stats();
        constexpr double kMiB = 1 << 20;
        std::fprintf(stderr, "step %d after %-9s live %8.1f  in_use %8.1f  cached %7.1f  peak_in_use %8.1f  rss %8.1f  peak_rss %8.1f MiB\n",
                     i, after, static_cast<double>(tg::memory::live_bytes()) / kMiB,
                     static_cast<double>(cs.in_use_bytes) / kMiB, static_cast<double>(cs.cached_bytes) / kMiB,
                     static_cast<double>(cs.peak_in_use_bytes) / kMiB, rss_mib(), peak_rss_mib());
      };
      auto t = Clock::now();
      if (w.zero_grad_before_forward) optimizer.zero_grad();
      mem("zero_grad");
      tg::Tensor src = b.src, src_len = b.src_len, tgt = b.tgt, tgt_len = b.tgt_len;
      double share = 1.0;
      if (ddp) {  // this rank's rows of the global batch
        const std::int64_t B = b.src.size(0), r0 = rank * B / world, r1 = (rank + 1) * B / world;
        src = tg::narrow(b.src, 0, r0, r1 - r0).clone();
        src_len = tg::narrow(b.src_len, 0, r0, r1 - r0).clone();
        tgt = tg::narrow(b.tgt, 0, r0, r1 - r0).clone();
        tgt_len = tg::narrow(b.tgt_len, 0, r0, r1 - r0).clone();
        std::int64_t mine = 0;
        for (std::int64_t k = 0; k < tgt_len.numel(); ++k) mine += tgt_len.data<std::int64_t>()[k];
        share = static_cast<double>(mine) / static_cast<double>(b.tokens);
      }
      const tg::Tensor dec_input = tg::models::teacher_forcing_input(tgt, kBos);
      // Forward and loss in one call: rnnsearch computes the readout only at valid positions.
      tg::Tensor loss = model->loss(src, src_len, dec_input, tgt, tgt_len);
      if (ddp) loss = loss * share;
      const double f = since(t);
      mem("forward");
      t = Clock::now();
      if (!w.zero_grad_before_forward) optimizer.zero_grad();
      if (ddp) ddp->backward(loss, true);
      else loss.backward();
      mem("backward");
      const double bw = since(t);
      if (ddp) {
        t = Clock::now();
        ddp->synchronize();
        if (i >= warmup) t_sync += since(t);
      }
      t = Clock::now();
      tg::nn::clip_grad_norm(params, 1.0);
      const double cl = since(t);
      t = Clock::now();
      optimizer.step();
      mem("adam");
      const double ad = since(t);
      last_loss = loss.item();
      if (i == 0) first_loss = last_loss;
      if (!std::isfinite(last_loss)) throw std::runtime_error("loss is not finite");
      if (i >= warmup) {
        tokens += b.tokens;
        t_fwd += f, t_bwd += bw, t_clip += cl, t_adam += ad;
      }
    }
    // --only decode*: no timed steps; the training fields then read 0.
    const double train_s = steps > 0 ? since(start) : 0.0;
    const double train_cpu_s = steps > 0 ? cpu_seconds() - cpu_start : 0.0;
    const double per_step = steps > 0 ? 1.0 / steps : 0.0;

    std::ostringstream js;
    js << "{\"framework\":\"tapegrad\",\"config\":\"" << w.name << "\",\"model\":\"" << c.model
       << "\",\"readout\":\"" << (c.model == "rnnsearch" ? to_string(c.readout) : "linear") << "\",\"precision\":\""
       << precision << (precision == "bf16" ? "\",\"bf16_path\":\"" : "")
       << (precision == "bf16" ? tg::autocast::bf16_path() : "")
       << "\",\"threads\":"
       << tg::num_threads() << ",\"steps\":" << steps << ",\"warmup\":" << warmup << ",\"batch\":" << w.batch
       << ",\"num_steps\":" << c.num_steps << ",\"tokens\":" << tokens
       << ",\"tokens_per_sec\":" << num(steps > 0 ? static_cast<double>(tokens) / train_s : 0.0)
       << ",\"sec_per_step\":" << num(train_s * per_step) << ",\"cpu_sec_per_step\":" << num(train_cpu_s * per_step) << ",\"loss_first\":" << num(first_loss) << ",\"loss_last\":" << num(last_loss)
       << ",\"decode_batch1_sents_per_sec\":" << num(dec1) << ",\"decode_batch64_sents_per_sec\":" << num(dec64)
       << ",\"decode_batch1_avg_steps\":" << num(dec1_len) << ",\"decode_batch64_avg_steps\":" << num(dec64_len)
       << ",\"peak_rss_mib\":" << num(peak_rss_mib()) << ",\"parameters\":" << parameter_count
       << ",\"compact_grads\":" << (model->parameter("decoder.dense.weight").allows_compact_grad() ? "true" : "false")
       << ",\"zero_grad_before_forward\":" << (w.zero_grad_before_forward ? "true" : "false")
       << tg::bench::cpu_json_fields();
    const auto cache = tg::memory::cache_stats();  // the caching allocator behind every tensor
    js << ",\"alloc_peak_in_use_mib\":" << num(static_cast<double>(cache.peak_in_use_bytes) / (1 << 20))
       << ",\"alloc_peak_reserved_mib\":" << num(static_cast<double>(cache.peak_reserved_bytes) / (1 << 20))
       << ",\"alloc_cached_mib\":" << num(static_cast<double>(cache.cached_bytes) / (1 << 20))
       << ",\"alloc_system_allocs\":" << cache.system_allocs << ",\"alloc_remaps\":" << cache.remaps;
    if (profile)
      js << ",\"profile_s\":{\"forward_and_loss\":" << num(t_fwd) << ",\"backward\":"
         << num(t_bwd) << ",\"clip\":" << num(t_clip) << ",\"adam\":" << num(t_adam) << "}";
    js << "}";
    if (ddp) {
      const auto& st = ddp->stats();
      const double n = static_cast<double>(st.steps);
      js.seekp(-1, std::ios_base::end);  // reopen the object
      js << ",\"ranks\":" << world << ",\"ddp\":{\"bytes_per_step\":" << ddp->bytes_per_step()
         << ",\"buckets\":" << ddp->num_buckets() << ",\"sync_s_per_step\":" << num(steps > 0 ? t_sync / steps : 0.0)
         << ",\"wait_s_per_step_all\":" << num(st.wait_seconds / n) << ",\"sum_s_per_step_all\":" << num(st.sum_seconds / n)
         << ",\"early_buckets\":" << st.early_buckets << ",\"late_buckets\":" << st.late_buckets
         << ",\"sparse_buckets\":" << st.sparse_buckets << ",\"wire_bytes_per_timed_step\":" << num(steps > 0 ? static_cast<double>(st.wire_bytes - wire_start) / steps : 0.0)
         << ",\"bytes_sent_per_step\":" << num(static_cast<double>(st.bytes_sent) / n) << "}}";
    }
    if (rank == 0) std::cout << js.str() << std::endl;
  } catch (const std::exception& e) {
    std::cerr << "bench_seq2seq: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
