#pragma once
// Data-parallel training over tg::dist (autograd/dist.h), like torch.nn.parallel.DistributedDataParallel:
//
//   tg::dist::Context mpi(&argc, &argv);
//   tg::nn::DistributedDataParallel ddp(model.named_parameters());   // rank 0's weights everywhere
//   for (...) {
//     ddp.backward(model_loss_on_this_ranks_shard);   // buckets leave while backward still runs
//     ddp.synchronize();                              // the same averaged gradients on every rank
//     optimizer.step(); optimizer.zero_grad();
//   }
//
// Buckets: the parameters, in reverse registration order (the order backward tends to reach them),
// are cut into buckets of about bucket_bytes() of one dtype. A gradient hook on every parameter
// counts the gradients it receives; when a parameter has received as many as it did in the last
// backward with the same graph key (backward()'s `graph_key`: a graph of the same shape uses each
// parameter the same number of times), its gradient is final and is copied into its bucket; a
// full bucket starts a non-blocking allgather (buckets start in index order, the same on every
// rank). A graph key seen for the first time starts every bucket after backward (no overlap). If
// a parameter receives more gradients than expected (a key that does not determine the graph),
// the step is detected on every rank and its gradients are exchanged again after backward:
// always correct, only slower. (A post-accumulate-grad hook on leaves would make the counting
// unnecessary.)
//
// A bucket's exchange is a reduce-scatter then an allgather, built from an all-to-all of fixed
// chunks: rank r receives chunk r of every rank's bucket, adds them in the fixed pairwise order
// of dist::tree_sum over ranks (never in message-arrival order), and allgathers its sum. Each rank
// sends 2 (N-1)/N of the gradient bytes per step, as with a ring allreduce; every rank gets the
// same bits and two runs give the same parameters. Several backward() calls per step
// (local shards, e.g. gradient accumulation) are kept apart and summed with the same tree: a step
// over S shards (S a power of two) gives the same bits on any power-of-two number of ranks that
// divides S, because the tree over S shards is the tree over each rank's block of shards.
//
// Compact gradients (autograd/compact_grad.h): a parameter with a hook always receives dense
// gradients, so under DDP allow_compact_grad() has no effect and gradients are dense (and travel
// densely); the memory saving of compact gradients is not available with DDP.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "autograd/dist.h"
#include "autograd/tensor.h"
#include "nn/module.h"

namespace tg::nn {

/// Options of DistributedDataParallel. Chainable setters; validated when it is built.
class DDPOptions {
 public:
  /// Target bucket size in bytes (default 4 MiB; a parameter larger than this is a bucket alone).
  DDPOptions& bucket_bytes(std::int64_t v) { bucket_bytes_ = v; return *this; }
  /// true (default): the gradient handed to the optimizer is the mean over all shards of the step
  /// (ranks × backward() calls per rank), right when each shard's loss is a mean over its own
  /// examples; false: the sum, right when each shard's loss is already scaled to the global batch.
  DDPOptions& average(bool v) { average_ = v; return *this; }
  /// Broadcast rank 0's parameter values at construction (default true).
  DDPOptions& broadcast_parameters(bool v) { broadcast_ = v; return *this; }
  std::int64_t bucket_bytes() const { return bucket_bytes_; }
  bool average() const { return average_; }
  bool broadcast_parameters() const { return broadcast_; }

 private:
  std::int64_t bucket_bytes_ = 4 << 20;
  bool average_ = true;
  bool broadcast_ = true;
};

/// Counters of the communication so far (see DistributedDataParallel::stats()).
struct DDPStats {
  std::int64_t steps = 0;            ///< synchronize() calls
  std::int64_t bytes_sent = 0;       ///< gradient bytes exchanged (bucket sizes), all steps; the wire carries 2 (N-1)/N of it per rank
  std::int64_t early_buckets = 0;    ///< buckets started while backward was still running
  std::int64_t late_buckets = 0;     ///< buckets started after backward returned
  std::int64_t redone_steps = 0;     ///< steps whose gradients were exchanged again (a miscounted graph)
  double wait_seconds = 0.0;         ///< time synchronize() waited for transfers (communication not hidden)
  double sum_seconds = 0.0;          ///< time spent adding the ranks' chunks (in hooks and synchronize())
};

/// The data-parallel wrapper of a set of parameters (see the file comment). Not copyable; keeps
/// hooks on the parameters until destroyed. Every rank must make the same calls in the same order.
class DistributedDataParallel {
 public:
  /// Registers hooks on every parameter that requires grad and, if the options say so, broadcasts
  /// rank 0's values to every rank. Throws std::invalid_argument ("DistributedDataParallel: ...")
  /// for bad options or a parameter that is not f32/f64.
  explicit DistributedDataParallel(NamedTensors params, const DDPOptions& options = DDPOptions());
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  /// loss.backward() for one shard of this step. `last` marks this rank's final shard of the step:
  /// during its backward the buckets start. Earlier shards' gradients are set aside (and the
  /// parameters' grad() cleared). `graph_key` identifies the graph's shape (e.g. the batch's
  /// sequence lengths); 0 when it never changes. An undefined `loss` stands for a shard with no
  /// examples (it contributes zeros).
  void backward(const Tensor& loss, bool last = true, std::uint64_t graph_key = 0);
  /// Waits for every bucket (at most dist::timeout() each), sums the ranks' contributions in rank
  /// order, averages if the options say so, and sets each parameter's grad(): the same on every
  /// rank. A parameter no shard reached gets a zero gradient on every rank when any rank reached
  /// it, and none when no rank did.
  void synchronize();

  const DDPStats& stats() const { return stats_; }
  int num_buckets() const;
  /// Gradient bytes one rank sends per step (the sum of the bucket sizes).
  std::int64_t bytes_per_step() const;

 private:
  struct Param;
  struct Bucket;
  void on_gradient(std::size_t i, const Tensor& g);
  void write_contribution(std::size_t i, const Tensor* pending);
  void launch_ready();
  void launch(std::size_t b);
  void reduce_chunk(std::size_t b);
  void advance(bool block);
  void exchange_all_again();

  DDPOptions options_;
  std::vector<Param> params_;
  std::vector<Bucket> buckets_;
  std::vector<HookHandle> hooks_;
  std::map<std::uint64_t, std::vector<int>> expected_;  // graph key -> gradients per parameter
  const std::vector<int>* expect_ = nullptr;           // this backward's, or null (key not seen)
  bool in_last_ = false;
  bool miscounted_ = false;
  int local_shards_ = 0;
  std::size_t next_launch_ = 0;   // buckets whose all-to-all has started
  std::size_t next_reduce_ = 0;   // buckets whose chunk is summed and allgather started
  DDPStats stats_;
};

}  // namespace tg::nn
