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
// are cut into buckets of about bucket_bytes() of one dtype. A post-accumulate-grad hook on every
// parameter (Tensor::register_post_accumulate_grad_hook) fires once per backward, as soon as that
// parameter's gradient for the pass is complete; the gradient is then copied into its bucket, and a bucket whose
// parameters are all in starts a non-blocking exchange (buckets start in index order, the same on
// every rank, so a bucket also waits for the ones before it).
//
// Unused parameters (no gradient in a step): before backward, a walk of the graph
// (tape::reachable) marks the parameters the loss cannot reach as ready, so they do not hold their
// buckets back (PyTorch's find_unused_parameters=True; DDPOptions::find_unused_parameters(false)
// skips the walk, and such a bucket then leaves when backward returns). A parameter reachable but
// given no gradient by its ops is also final when backward returns. Either way the result is
// right: a parameter no shard of any rank reached ends with no gradient, one that some rank
// reached gets the sum (zeros from the others).
//
// Several backward calls in one step: backward(loss, last = false) is a local shard (gradient
// accumulation), kept apart and summed with the same tree as the ranks (below). Gradients a plain
// loss.backward() accumulated before DDP's backward are part of the next shard DDP runs. A
// parameter still holding the gradient of the last synchronize() when the next step's backward
// starts (zero_grad() forgotten: it would be counted again) is an error (std::logic_error).
//
// A bucket's exchange is a reduce-scatter then an allgather, built from an all-to-all of fixed
// chunks: rank r receives chunk r of every rank's bucket, adds them in the fixed pairwise order
// of dist::tree_sum over ranks (never in message-arrival order), and allgathers its sum. Each rank
// sends 2 (N-1)/N of the gradient bytes per step, as with a ring allreduce; every rank gets the
// same bits and two runs give the same parameters. A step over S local shards (S a power of two)
// gives the same bits on any power-of-two number of ranks that divides S, because the tree over S
// shards is the tree over each rank's block of shards.
//
// Compact gradients (autograd/compact_grad.h): a parameter that allows them and is 2-D is a bucket
// of its own. Row-sparse gradients (an embedding's) travel as rows when, in the previous step,
// every rank sent it as rows (or, in a dense exchange, every rank's gradient of it was row-sparse)
// and sending the rows is cheaper than the dense exchange ((N-1) x the largest rank's rows against
// 2 (N-1)/N x the table): an allgather of each
// rank's row count, then of its row ids and rows; every rank adds the ranks' rows in the same
// tree, with zeros where a rank has no row, so the result has the dense exchange's bits
// (DDPOptions::sparse_transfer(false) turns it off). A rank whose gradient is dense in such a step
// sends its rows that are not all +0.0 (an embedding looked up twice: still the rows it used). Other compact gradients (low rank) are converted to
// dense once, when their bucket is filled.
#include <cstdint>
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
  /// Target bucket size in bytes (default 4 MiB, PyTorch's bucket_cap_mb is 25: smaller buckets
  /// start their transfer earlier in backward, and a parameter larger than this is a bucket alone).
  DDPOptions& bucket_bytes(std::int64_t v) { bucket_bytes_ = v; return *this; }
  /// true (default): the gradient handed to the optimizer is the mean over all shards of the step
  /// (ranks × backward() calls per rank), right when each shard's loss is a mean over its own
  /// examples; false: the sum, right when each shard's loss is already scaled to the global batch.
  DDPOptions& average(bool v) { average_ = v; return *this; }
  /// Broadcast rank 0's parameter values at construction (default true).
  DDPOptions& broadcast_parameters(bool v) { broadcast_ = v; return *this; }
  /// Walk the graph before the last shard's backward to release the buckets of parameters the loss
  /// cannot reach (default true; false: such a bucket waits for backward to return). PyTorch's
  /// default is false and then raises an error at the next step; true costs one walk per step and
  /// is right either way.
  DDPOptions& find_unused_parameters(bool v) { find_unused_ = v; return *this; }
  /// Send row-sparse gradients as rows when that is smaller (default true; see the file comment).
  DDPOptions& sparse_transfer(bool v) { sparse_ = v; return *this; }
  std::int64_t bucket_bytes() const { return bucket_bytes_; }
  bool average() const { return average_; }
  bool broadcast_parameters() const { return broadcast_; }
  bool find_unused_parameters() const { return find_unused_; }
  bool sparse_transfer() const { return sparse_; }

 private:
  std::int64_t bucket_bytes_ = 4 << 20;
  bool average_ = true;
  bool broadcast_ = true;
  bool find_unused_ = true;
  bool sparse_ = true;
};

/// Counters of the communication so far (see DistributedDataParallel::stats()).
struct DDPStats {
  std::int64_t steps = 0;            ///< synchronize() calls
  std::int64_t bytes_sent = 0;       ///< gradient bytes exchanged, all steps: dense buckets' sizes (the wire carries 2 (N-1)/N of it per rank), and this rank's rows for buckets sent as rows
  std::int64_t wire_bytes = 0;       ///< bytes this rank sent to the other ranks, all steps (gradients, padding, row ids, control messages)
  std::int64_t early_buckets = 0;    ///< buckets started while backward was still running
  std::int64_t late_buckets = 0;     ///< buckets started after backward returned
  std::int64_t sparse_buckets = 0;   ///< bucket exchanges that sent rows instead of the dense gradient
  std::int64_t unused_parameters = 0;  ///< parameters found unreachable before a last shard's backward (summed over steps)
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
  /// parameters' grad() cleared). An undefined `loss` stands for a shard with no examples (it
  /// contributes zeros). Throws std::logic_error for a second last shard before synchronize(), or
  /// a parameter still holding the last synchronize()'s gradient at the start of a step.
  void backward(const Tensor& loss, bool last = true);
  /// Waits for every bucket (at most dist::timeout() each), sums the ranks' contributions in rank
  /// order, averages if the options say so, and sets each parameter's grad(): the same on every
  /// rank. A parameter this rank's shards did not reach contributes zeros; when some rank reached
  /// it, every rank gets the reduced gradient, and when no rank did, none. The gradients of a dense
  /// bucket are views of one buffer the allgather wrote (nothing is copied); every step gathers
  /// into a new buffer, so a gradient kept from an earlier step does not change.
  void synchronize();

  const DDPStats& stats() const { return stats_; }
  int num_buckets() const;
  /// Gradient bytes one rank sends per step (the sum of the bucket sizes).
  std::int64_t bytes_per_step() const;

 private:
  struct Param;
  struct Bucket;
  void on_final(std::size_t i);
  void start_step();
  void write_contribution(std::size_t i);
  void write_rows(std::size_t i);
  void launch_ready();
  void launch(std::size_t b);
  void reduce_chunk(std::size_t b);
  void advance(bool block);
  void finish_sparse(std::size_t b, double divisor);

  DDPOptions options_;
  std::vector<Param> params_;
  std::vector<Bucket> buckets_;
  std::vector<HookHandle> hooks_;
  bool in_last_ = false;
  bool last_done_ = false;        // this step's last shard has run; synchronize() is next
  int local_shards_ = 0;
  std::size_t next_launch_ = 0;   // buckets whose all-to-all has started
  std::size_t next_reduce_ = 0;   // buckets whose chunk is summed and allgather started
  DDPStats stats_;
};

}  // namespace tg::nn
