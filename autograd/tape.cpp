#include "autograd/tape.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <stdexcept>
#include <string>

#include "autograd/compact_grad.h"
#include "autograd/kernels/elementwise.h"
#include "autograd/memory.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_shape.h"
#include "autograd/pending.h"

namespace tg {

namespace {

struct NodeInput {
  std::shared_ptr<AutogradMeta> meta;  // null when this input does not require grad
  Shape shape;
  DType dtype;
};

/// A tensor an op's backward reads (Saves), by the buffer it reads and that buffer's version when
/// the op was recorded. Weak: the closure keeps what it reads alive; a buffer nothing holds any
/// more cannot be changed either.
struct SavedVersion {
  std::weak_ptr<Storage> storage;
  std::uint32_t version = 0;
  std::int32_t slot = -1;  // the input's position, or -1: the output
};

// A node's inputs live in one array owned by the tape (first_input, num_inputs), so do the versions
// of the tensors it saved (first_saved, num_saved), and its closure inline in the node: recording
// allocates nothing once the tape's arrays have grown to a step's size (they keep their capacity
// when the tape empties).
struct Node {
  const char* name = "";
  BackwardFn backward;
  std::uint32_t first_input = 0, num_inputs = 0;
  std::uint32_t first_saved = 0, num_saved = 0;
  std::shared_ptr<AutogradMeta> output;
  bool alive = true;
};

struct Tape {
  std::vector<Node> nodes;
  std::vector<NodeInput> inputs;
  std::vector<SavedVersion> saved;
  std::vector<std::pair<std::size_t, std::string>> anomaly_sites;  // (node, AnomalyScope path), anomaly mode only
  std::uint64_t epoch = 1;
  std::size_t live = 0;

  void clear() {
    nodes.clear();  // keeps capacity: steady-state steps do not reallocate the node array
    inputs.clear();
    saved.clear();
    anomaly_sites.clear();
    live = 0;
    ++epoch;
  }
  /// Whether `meta` (an op output) still has its node on this tape.
  bool holds(const AutogradMeta& meta) const {
    return meta.tape == this && meta.epoch == epoch && meta.node >= 0 &&
           static_cast<std::size_t>(meta.node) < nodes.size() && nodes[meta.node].alive;
  }
  NodeInput* inputs_of(const Node& node) { return inputs.data() + node.first_input; }
  SavedVersion* saved_of(const Node& node) { return saved.data() + node.first_saved; }
};

thread_local Tape t_tape;
thread_local bool t_grad_enabled = true;
thread_local bool t_anomaly = false;
thread_local std::vector<std::string> t_anomaly_scopes;
thread_local std::uint64_t t_pass = 0;  // backward passes run on this thread (post-accumulate hooks)
std::atomic<bool> g_post_hooks_used{false};  // set by the first post-accumulate hook: backward schedules them

/// tg::grad's targets while its pass runs: their gradients go to `grads` instead of grad(), and
/// no other leaf's grad() changes.
struct GradCapture {
  const std::vector<AutogradMeta*>& targets;
  std::vector<Tensor>& grads;
  int index_of(const AutogradMeta* meta) const {
    for (std::size_t k = 0; k < targets.size(); ++k)
      if (targets[k] == meta) return static_cast<int>(k);
    return -1;
  }
};
thread_local GradCapture* t_capture = nullptr;
/// True while a backward with create_graph runs: gradients are added with recorded ops, never in place.
thread_local bool t_create_graph = false;

[[noreturn]] void throw_freed(const char* op) {
  throw std::runtime_error(std::string("backward: '") + op +
                           "' needs the gradient of a tensor whose graph was already freed: trying to backward "
                           "through the graph a second time (backward already ran through it, or tape::reset() "
                           "was called). Specify retain_graph = true on the first backward to walk it again, "
                           "or detach() values kept across steps.");
}

/// Whether nothing else holds `t` or its storage, so adding into it in place is invisible.
bool owns_buffer(const Tensor& t) { return t.impl_ptr().use_count() == 1 && t.impl()->storage.use_count() == 1; }

/// `grad` through the tensor's hooks, in order; a hook's defined result replaces it.
Tensor run_hooks(const AutogradMeta& meta, Tensor grad) {
  for (std::size_t k = 0; k < meta.hooks.size(); ++k) {  // by index: a hook may register another
    GradHook hook = meta.hooks[k].second;
    Tensor replaced = hook(grad);
    if (!replaced.defined()) continue;
    if (!(replaced.shape() == grad.shape()) || replaced.dtype() != grad.dtype())
      throw std::invalid_argument("register_hook: a hook returned a gradient of shape " + replaced.shape().str() + " " +
                                  std::string(dtype_name(replaced.dtype())) + " for a tensor of shape " + grad.shape().str() +
                                  " " + std::string(dtype_name(grad.dtype())));
    grad = std::move(replaced);
  }
  return grad;
}

/// Adds `grad` to `slot` (a result of tg::grad, which the caller owns).
void add_to_slot(Tensor& slot, Tensor grad) {
  if (t_create_graph) slot = slot.defined() ? tg::add(slot, grad) : std::move(grad);  // graph tensors: no in-place
  else if (!slot.defined()) slot = owns_buffer(grad) ? std::move(grad) : grad.clone();
  else kernels::add_inplace(slot, grad);
}

/// A second gradient for a leaf holding a compact one: continue densely.
void densify(AutogradMeta& meta) {
  if (!meta.compact) return;
  meta.grad = meta.compact->dense();
  meta.compact.reset();
}

/// Anomaly mode: throws if `grad`, which `node`'s backward produced for its input i, is not finite.
void check_anomaly(const Node& node, int i, const Tensor& grad) {
  if (!is_floating(grad.dtype())) return;
  bool nan = false, inf = false;
  const auto scan = [&](const auto* p) {
    for (std::int64_t k = 0; k < grad.numel() && !nan; ++k) {
      nan = nan || std::isnan(p[k]);
      inf = inf || std::isinf(p[k]);
    }
  };
  if (grad.dtype() == DType::f32) scan(grad.data<float>());
  else scan(grad.data<double>());
  if (!nan && !inf) return;
  const std::size_t index = static_cast<std::size_t>(&node - t_tape.nodes.data());
  std::string where = "no AnomalyScope was active when its forward was recorded";
  const auto& sites = t_tape.anomaly_sites;
  const auto it = std::lower_bound(sites.begin(), sites.end(), index, [](const auto& e, std::size_t n) { return e.first < n; });
  if (it != sites.end() && it->first == index && !it->second.empty()) where = "recorded in \"" + it->second + "\"";
  throw std::runtime_error(std::string("detect_anomaly: backward of '") + node.name + "' (tape node " +
                           std::to_string(index) + ", " + where + ") produced " + (nan ? "NaN" : "infinity") +
                           " in the gradient of input " + std::to_string(i) + " (shape " + grad.shape().str() + " " +
                           std::string(dtype_name(grad.dtype())) + ")");
}

[[noreturn, gnu::cold, gnu::noinline]] void throw_modified(const Node& node, const SavedVersion& saved,
                                                           std::uint32_t now, const Tensor& grad_output) {
  std::string what;
  if (saved.slot < 0) {
    what = "output 0 of '" + std::string(node.name) + "' (" + std::string(dtype_name(grad_output.dtype())) + " " +
           grad_output.shape().str() + ")";
  } else {
    const NodeInput& in = t_tape.inputs_of(node)[saved.slot];
    what = "input " + std::to_string(saved.slot) + " of '" + node.name + "' (" + std::string(dtype_name(in.dtype)) +
           " " + in.shape.str() + ")";
  }
  throw std::runtime_error("one of the variables needed for gradient computation has been modified by an inplace "
                           "operation: " + what + " is at version " + std::to_string(now) + "; expected version " +
                           std::to_string(saved.version) + " instead. The backward of '" + node.name +
                           "' reads it: change a clone() of it, or change it after backward");
}

/// Throws if a tensor `node` saved for its backward was changed in place since it was recorded.
inline void check_saved_versions(Tape& tape, const Node& node, const Tensor& grad_output) {
  const SavedVersion* saved = tape.saved_of(node);
  for (std::uint32_t k = 0; k < node.num_saved; ++k) {
    const std::shared_ptr<Storage> storage = saved[k].storage.lock();
    if (!storage) continue;  // freed: nothing can have changed it
    const std::uint32_t now = detail::storage_version(*storage);
    if (now != saved[k].version) throw_modified(node, saved[k], now, grad_output);
  }
}

/// Runs a leaf's post-accumulate-grad hooks if this pass added to its gradient.
void run_post_accumulate_hooks(AutogradMeta& meta) {
  PostAccumulateHooks& post = *meta.post_accumulate;
  if (post.accumulated_pass != t_pass) return;
  auto impl = post.tensor.lock();
  if (!impl) return;  // no handle to the leaf is left
  Tensor leaf(std::move(impl));
  for (std::size_t k = 0; k < post.hooks.size(); ++k) {  // a hook may register another
    PostAccumulateGradHook hook = post.hooks[k].second;
    hook(leaf);
  }
}

/// Input i of `node`, checked to exist.
NodeInput& input_of(Node& node, int i) {
  if (i < 0 || static_cast<std::uint32_t>(i) >= node.num_inputs)
    throw std::logic_error(std::string("internal error in backward of '") + node.name + "': input " +
                           std::to_string(i) + " does not exist");
  return t_tape.inputs_of(node)[i];
}

void accumulate_into(const char* op, int i, NodeInput& in, Tensor grad) {
  if (!(grad.shape() == in.shape) || grad.dtype() != in.dtype)
    throw std::logic_error(std::string("internal error in backward of '") + op + "': gradient for input " +
                           std::to_string(i) + " has shape " + grad.shape().str() + " " +
                           std::string(dtype_name(grad.dtype())) + ", expected " + in.shape.str() + " " +
                           std::string(dtype_name(in.dtype)));
  AutogradMeta& meta = *in.meta;
  if (!meta.is_leaf && !t_tape.holds(meta)) throw_freed(op);
  if (meta.is_leaf && !meta.requires_grad) return;  // requires_grad_(false) after its use, as torch's AccumulateGrad
  if (meta.is_leaf) {
    if (!meta.hooks.empty()) grad = run_hooks(meta, std::move(grad));
    if (t_capture) {
      if (const int k = t_capture->index_of(&meta); k >= 0) add_to_slot(t_capture->grads[k], std::move(grad));
      return;
    }
  }
  if (meta.post_accumulate) meta.post_accumulate->accumulated_pass = t_pass;
  densify(meta);
  if (t_create_graph) {  // recorded additions: the gradients are graph tensors another op may hold
    if (!meta.grad.defined()) meta.grad = (meta.is_leaf && !owns_buffer(grad)) ? grad.clone() : std::move(grad);
    else meta.grad = tg::add(meta.grad, grad);
    return;
  }
  if (!meta.grad.defined()) {
    // A leaf's gradient outlives the pass and may be scaled in place (clipping), so it must own
    // its buffer; an intermediate gradient is read once and dropped, so it can alias.
    meta.grad = (meta.is_leaf && !owns_buffer(grad)) ? grad.clone() : std::move(grad);
  } else if (meta.is_leaf || owns_buffer(meta.grad)) {
    kernels::add_inplace(meta.grad, grad);
  } else {
    meta.grad = kernels::add(meta.grad, grad);  // the buffer is another op's gradient too
  }
}

}  // namespace

bool GradMode::enabled() { return t_grad_enabled; }
void GradMode::set_enabled(bool enabled) { t_grad_enabled = enabled; }

bool is_anomaly_enabled() { return t_anomaly; }
void set_detect_anomaly(bool enabled) { t_anomaly = enabled; }

AnomalyScope::AnomalyScope(std::string label) {
  if (!t_anomaly) return;
  t_anomaly_scopes.push_back(std::move(label));
  pushed_ = true;
}
AnomalyScope::~AnomalyScope() {
  if (pushed_) t_anomaly_scopes.pop_back();
}

bool BackwardContext::needs_grad(int i) const {
  const Node& node = *static_cast<const Node*>(node_);
  return i >= 0 && static_cast<std::uint32_t>(i) < node.num_inputs && t_tape.inputs_of(node)[i].meta != nullptr;
}

void BackwardContext::accumulate(int i, Tensor grad) {
  Node& node = *static_cast<Node*>(node_);
  NodeInput& in = input_of(node, i);
  if (!in.meta) return;
  if (t_anomaly) check_anomaly(node, i, grad);
  accumulate_into(node.name, i, in, std::move(grad));
}

void BackwardContext::accumulate_term(int i, const detail::GradTermRef& term) {
  Node& node = *static_cast<Node*>(node_);
  NodeInput& in = input_of(node, i);
  if (!in.meta) return;
  AutogradMeta& meta = *in.meta;
  if (!meta.is_leaf && !t_tape.holds(meta)) throw_freed(node.name);
  // Anomaly mode checks each gradient as a tensor of its own: no compact or in-place paths.
  const bool plain_leaf = meta.is_leaf && meta.hooks.empty() && !t_capture && !t_anomaly;  // else: a dense tensor, below
  if (plain_leaf && meta.post_accumulate) meta.post_accumulate->accumulated_pass = t_pass;
  if (term.compact && plain_leaf && meta.allow_compact && !meta.grad.defined() && !meta.compact) {
    if (std::shared_ptr<CompactGrad> compact = term.compact(term.term)) {
      if (!(compact->shape() == in.shape) || compact->dtype() != in.dtype)
        throw std::logic_error(std::string("internal error in backward of '") + node.name +
                               "': compact gradient for input " + std::to_string(i) + " has shape " +
                               compact->shape().str() + ", expected " + in.shape.str());
      meta.compact = std::move(compact);
      return;
    }
  }
  densify(meta);
  // In place when the buffer is this input's alone (a leaf's, or an intermediate's nothing shares).
  if (term.add_into && meta.grad.defined() && !t_anomaly && (plain_leaf || (!meta.is_leaf && owns_buffer(meta.grad)))) {
    term.add_into(term.term, meta.grad);
    return;
  }
  Tensor grad;
  if (term.make) {
    grad = term.make(term.term);
  } else {
    grad = Tensor::zeros(in.shape, in.dtype);
    term.add_into(term.term, grad);
  }
  if (t_anomaly) check_anomaly(node, i, grad);
  accumulate_into(node.name, i, in, std::move(grad));
}

bool GradGraphContext::needs_grad(int i) const {
  const Node& node = t_tape.nodes[node_];
  return i >= 0 && static_cast<std::uint32_t>(i) < node.num_inputs && t_tape.inputs_of(node)[i].meta != nullptr;
}

int GradGraphContext::num_inputs() const { return static_cast<int>(t_tape.nodes[node_].num_inputs); }

Shape GradGraphContext::input_shape(int i) const { return input_of(t_tape.nodes[node_], i).shape; }

Tensor GradGraphContext::output(const Tensor& value) const {
  const Node& node = t_tape.nodes[node_];
  if (!value.defined())
    throw std::logic_error(std::string("internal error in double backward of '") + node.name + "': output() of nothing");
  auto impl = TensorImpl::make(*value.impl());
  impl->meta = node.output;
  return Tensor(std::move(impl));
}

Tensor GradGraphContext::input(int i, const Tensor& value) const {
  const Node& node = t_tape.nodes[node_];
  const NodeInput& in = input_of(const_cast<Node&>(node), i);
  if (!value.defined() || !(value.shape() == in.shape) || value.dtype() != in.dtype)
    throw std::logic_error(std::string("internal error in double backward of '") + node.name + "': input(" +
                           std::to_string(i) + ") given a tensor that does not match that input");
  auto impl = TensorImpl::make(*value.impl());
  impl->meta = in.meta;  // null when the input does not require grad: a constant
  return Tensor(std::move(impl));
}

void GradGraphContext::accumulate(int i, const Tensor& grad) {
  Node& node = t_tape.nodes[node_];
  NodeInput in = input_of(node, i);  // a copy: the additions below may grow the tape's arrays
  if (!in.meta) return;
  if (t_anomaly) check_anomaly(node, i, grad);
  accumulate_into(node.name, i, in, grad);
}

void GradGraphContext::accumulate_sum_to(int i, const Tensor& grad) {
  if (!needs_grad(i)) return;
  const Shape target = input_shape(i);
  if (grad.shape() == target) return accumulate(i, grad);
  // Sum the leading dims the broadcast added, then the size-1 dims it stretched (keepdim).
  const int lead = grad.dim() - target.size();
  std::vector<std::int64_t> axes;
  for (int d = 0; d < lead; ++d) axes.push_back(d);
  Tensor g = axes.empty() ? grad : tg::sum(grad, IntList(axes), false);
  axes.clear();
  for (int d = 0; d < target.size(); ++d)
    if (target[d] == 1 && g.shape()[d] != 1) axes.push_back(d);
  if (!axes.empty()) g = tg::sum(g, IntList(axes), true);
  accumulate(i, g);
}

void* BackwardFn::heap_allocate(std::size_t bytes) { return memory::allocate(bytes); }
void BackwardFn::heap_free(void* p, std::size_t bytes) noexcept { memory::deallocate(p, bytes); }

namespace tape {
void reset() { t_tape.clear(); }
std::size_t size() { return t_tape.live; }

std::vector<bool> reachable(const Tensor& root, const std::vector<Tensor>& leaves) {
  std::vector<bool> out(leaves.size(), false);
  if (!root.defined() || !root.requires_grad()) return out;
  auto mark_leaf = [&](const AutogradMeta* m) {
    for (std::size_t k = 0; k < leaves.size(); ++k)
      if (leaves[k].defined() && leaves[k].impl()->meta.get() == m) out[k] = true;
  };
  const AutogradMeta& rm = *root.impl()->meta;
  if (rm.is_leaf) {
    mark_leaf(&rm);
    return out;
  }
  Tape& tape = t_tape;
  if (!tape.holds(rm)) return out;  // graph already freed: backward would throw
  std::vector<const AutogradMeta*> found;
  std::vector<char> on_path(static_cast<std::size_t>(rm.node) + 1, 0);
  on_path[static_cast<std::size_t>(rm.node)] = 1;
  for (std::int64_t i = rm.node; i >= 0; --i) {
    const Node& node = tape.nodes[i];
    if (!on_path[static_cast<std::size_t>(i)] || !node.alive) continue;
    const NodeInput* in = tape.inputs_of(node);
    for (std::uint32_t k = 0; k < node.num_inputs; ++k) {
      const AutogradMeta* m = in[k].meta.get();
      if (!m) continue;
      if (m->is_leaf) found.push_back(m);
      else if (tape.holds(*m) && m->node < i) on_path[static_cast<std::size_t>(m->node)] = 1;
    }
  }
  std::sort(found.begin(), found.end());
  found.erase(std::unique(found.begin(), found.end()), found.end());
  for (std::size_t k = 0; k < leaves.size(); ++k)
    if (leaves[k].defined() && leaves[k].impl()->meta)
      out[k] = std::binary_search(found.begin(), found.end(), leaves[k].impl()->meta.get());
  return out;
}
}  // namespace tape

namespace detail {

void enable_post_accumulate_hooks() { g_post_hooks_used.store(true, std::memory_order_relaxed); }

bool should_record(const Tensor* inputs, std::size_t n) {
  if (!t_grad_enabled) return false;
  for (std::size_t i = 0; i < n; ++i)
    if (inputs[i].requires_grad()) return true;
  return false;
}

namespace {
void push_version(Tape& tape, const std::shared_ptr<Storage>& storage, std::int32_t slot) {
  if (storage) tape.saved.push_back({storage, detail::storage_version(*storage), slot});
}

/// Remembers the version of the buffer a backward that saved `x` reads: x's own, or, for a
/// transpose whose elements are not written yet, its source's (which matmul reads through a GEMM
/// flag; an in-place change to the source shows through, as through torch's transpose view).
void save_version(Tape& tape, const Tensor& x, std::int32_t slot) {
  if (!x.defined()) return;
  if (const PendingFill* pending = x.impl()->pending.get(); pending && !pending->done()) [[unlikely]] {
    if (const Tensor* source = pending->source()) return push_version(tape, source->impl()->storage, slot);
  }
  push_version(tape, x.impl()->storage, slot);
}
}  // namespace

BackwardFn& record_node(const char* name, Tensor& output, const Tensor* inputs, std::size_t n, Saves saves) {
  Tape& tape = t_tape;
  // The output gets fresh autograd state even if it shares storage with an input (a view).
  if (output.impl()->meta || output.impl_ptr().use_count() > 1) output = Tensor(TensorImpl::make(*output.impl()));
  auto meta = std::allocate_shared<AutogradMeta>(PoolAllocator<AutogradMeta>());
  meta->requires_grad = true;
  meta->is_leaf = false;
  meta->node = static_cast<std::int64_t>(tape.nodes.size());
  meta->epoch = tape.epoch;
  meta->tape = &tape;
  Node& node = tape.nodes.emplace_back();
  node.name = name;
  node.first_input = static_cast<std::uint32_t>(tape.inputs.size());
  node.num_inputs = static_cast<std::uint32_t>(n);
  for (std::size_t i = 0; i < n; ++i) {
    const Tensor& x = inputs[i];
    tape.inputs.push_back({x.requires_grad() ? x.impl()->meta : nullptr, x.shape(), x.dtype()});
  }
  if (!saves.empty()) {
    node.first_saved = static_cast<std::uint32_t>(tape.saved.size());
    for (std::size_t i = 0; i < n; ++i)
      if (saves.saves_input(i)) save_version(tape, inputs[i], static_cast<std::int32_t>(i));
    if (saves.saves_output()) save_version(tape, output, -1);
    node.num_saved = static_cast<std::uint32_t>(tape.saved.size()) - node.first_saved;
  }
  output.impl()->meta = meta;
  node.output = std::move(meta);
  ++tape.live;
  if (t_anomaly) {
    std::string path;
    for (const std::string& label : t_anomaly_scopes) path += (path.empty() ? "" : "/") + label;
    tape.anomaly_sites.emplace_back(tape.nodes.size() - 1, std::move(path));
  }
  return node.backward;
}

}  // namespace detail

class Engine {
  static void release(Tape& tape, Node& node) {
    node.backward = nullptr;  // frees what the closure saved
    NodeInput* in = tape.inputs_of(node);
    for (std::uint32_t i = 0; i < node.num_inputs; ++i) in[i].meta.reset();
    SavedVersion* saved = tape.saved_of(node);
    for (std::uint32_t k = 0; k < node.num_saved; ++k) saved[k].storage.reset();
    node.output.reset();
    node.alive = false;
    --tape.live;
  }

 public:
  /// Runs node i's differentiable backward (create_graph).
  static void run_graph(Tape& tape, std::int64_t i, Tensor grad_output, bool retain_graph) {
    Node& node = tape.nodes[i];
    if (!node.backward.has_graph())
      throw std::runtime_error(std::string(node.name) +
                               ": double backward (create_graph) is not supported: this op has no differentiable "
                               "backward, so gradients of its gradient cannot be taken");
    // Moved out while it runs: the ops it records may grow (and move) the node array.
    BackwardFn fn = std::move(node.backward);
    struct Restore {
      Tape& tape;
      std::int64_t i;
      BackwardFn& fn;
      ~Restore() { tape.nodes[i].backward = std::move(fn); }
    } restore{tape, i, fn};
    GradGraphContext ctx(static_cast<std::size_t>(i), std::move(grad_output), tape.nodes.size(), retain_graph);
    fn.call_graph(ctx);
  }

  /// Walks nodes hi down to lo, each with a pending gradient passing it to its inputs.
  /// `post`: leaves whose post-accumulate hooks run once the walk passes below their last node
  /// (sorted by that node, ascending; run and popped here).
  static void walk(Tape& tape, std::int64_t hi, std::int64_t lo, bool retain_graph, bool create_graph,
                   GradCapture* capture, std::vector<std::shared_ptr<AutogradMeta>>* post = nullptr) {
    for (std::int64_t i = hi; i >= lo; --i) {
      while (post && !post->empty() && post->back()->post_accumulate->after > i) {
        run_post_accumulate_hooks(*post->back());
        post->pop_back();
      }
      Node& node = tape.nodes[i];
      if (!node.alive || !node.output->grad.defined()) continue;  // not on a path from a root
      AutogradMeta& out = *node.output;
      Tensor grad_output = std::move(out.grad);
      out.grad = Tensor();
      if (!out.hooks.empty()) grad_output = run_hooks(out, std::move(grad_output));
      if (out.retain_grad)  // a copy (the seed or a hook's tensor may change), added to an earlier backward's, as torch
        out.retained_grad = out.retained_grad.defined() ? tg::add(out.retained_grad, grad_output) : grad_output.clone();
      if (capture)
        if (const int k = capture->index_of(&out); k >= 0) add_to_slot(capture->grads[k], grad_output);
      if (tape.nodes[i].num_saved) check_saved_versions(tape, tape.nodes[i], grad_output);
      if (create_graph) {  // the hooks and the capture above may have recorded ops: look the node up again
        if (!tape.nodes[i].backward)
          throw std::logic_error(std::string("internal error: node '") + tape.nodes[i].name + "' has no backward closure");
        run_graph(tape, i, std::move(grad_output), retain_graph);
      } else {
        if (!node.backward)
          throw std::logic_error(std::string("internal error: node '") + node.name + "' has no backward closure");
        BackwardContext ctx(&node, std::move(grad_output), retain_graph);
        node.backward(ctx);
      }
      if (!retain_graph) release(tape, tape.nodes[i]);
    }
  }

 public:
  /// Backward from roots[k] seeded with seeds[k]. With `capture`, the targets' gradients go there.
  static void run(const Tensor* roots, const Tensor* seeds, std::size_t n, bool retain_graph, bool create_graph,
                  GradCapture* capture) {
    struct Scope {  // capture target, create_graph flag and grad mode for this pass
      GradCapture* capture;
      bool create_graph, grad_mode;
      Scope(GradCapture* c, bool cg) : capture(t_capture), create_graph(t_create_graph), grad_mode(t_grad_enabled) {
        t_capture = c;
        t_create_graph = cg;
        t_grad_enabled = cg;  // the kernel closures compute with ops; none of that is recorded
      }
      ~Scope() {
        t_capture = capture;
        t_create_graph = create_graph;
        t_grad_enabled = grad_mode;
      }
    };
    Tape& tape = t_tape;
    std::int64_t start = -1;
    for (std::size_t k = 0; k < n; ++k) {
      const Tensor& root = roots[k];
      if (!root.requires_grad())
        throw std::runtime_error("backward: the tensor does not require grad (no input of the ops that made "
                                 "it requires grad, or it was made under NoGradGuard)");
      if (!is_floating(root.dtype())) throw std::runtime_error("backward: only floating tensors have gradients");
      if (!(seeds[k].shape() == root.shape()) ||
          (seeds[k].dtype() != root.dtype() && !(is_floating(seeds[k].dtype()) && is_floating(root.dtype()))))
        throw std::invalid_argument("backward: gradient " + seeds[k].shape().str() + " " + std::string(dtype_name(seeds[k].dtype())) +
                                    " does not match the tensor " + root.shape().str() + " " + std::string(dtype_name(root.dtype())));
      const AutogradMeta& meta = *root.impl()->meta;
      if (!meta.is_leaf && !tape.holds(meta))
        throw std::runtime_error("backward: trying to backward through the graph a second time: the graph of this "
                                 "tensor was already freed (backward already ran through it, or tape::reset() was "
                                 "called); specify retain_graph = true on the first backward to walk it again");
      if (!meta.is_leaf) start = std::max(start, meta.node);
    }
    Scope scope(capture, create_graph);
    const std::uint64_t pass = ++t_pass;
    // Leaves with post-accumulate hooks, by the lowest node that can add to them (ascending): a
    // leaf's hooks run once the walk has passed that node.
    std::vector<std::shared_ptr<AutogradMeta>> post;
    if (!capture && g_post_hooks_used.load(std::memory_order_relaxed))
      for (std::int64_t i = 0; i <= start; ++i) {
        const Node& node = tape.nodes[i];
        if (!node.alive) continue;
        const NodeInput* in = tape.inputs_of(node);
        for (std::uint32_t k = 0; k < node.num_inputs; ++k) {
          AutogradMeta* m = in[k].meta.get();
          if (!m || !m->is_leaf || !m->post_accumulate || m->post_accumulate->hooks.empty() ||
              m->post_accumulate->scheduled_pass == pass)
            continue;
          m->post_accumulate->scheduled_pass = pass;
          m->post_accumulate->after = i;
          post.push_back(in[k].meta);
        }
      }
    for (std::size_t k = 0; k < n; ++k) {
      NodeInput in{roots[k].impl()->meta, roots[k].shape(), roots[k].dtype()};
      // A seed of another floating dtype is converted to the root's, as torch does.
      const Tensor seed = seeds[k].dtype() == roots[k].dtype() ? seeds[k] : seeds[k].to(roots[k].dtype());
      if (in.meta->is_leaf) accumulate_into("backward", 0, in, seed);
      else if (!in.meta->grad.defined()) in.meta->grad = seed;
      else if (create_graph) in.meta->grad = tg::add(in.meta->grad, seed);  // a root twice
      else in.meta->grad = kernels::add(in.meta->grad, seed);
    }
    walk(tape, start, 0, retain_graph, create_graph, capture, post.empty() ? nullptr : &post);
    for (auto it = post.rbegin(); it != post.rend(); ++it) run_post_accumulate_hooks(**it);
    if (!capture)
      for (std::size_t k = 0; k < n; ++k) {  // a root that is itself a leaf and feeds no node
        AutogradMeta& m = *roots[k].impl()->meta;
        if (m.is_leaf && m.post_accumulate && !m.post_accumulate->hooks.empty() && m.post_accumulate->scheduled_pass != pass) {
          m.post_accumulate->scheduled_pass = pass;
          run_post_accumulate_hooks(m);
        }
      }
    if (retain_graph) return;
    // Dead branches: nodes off the root's path whose output no tensor and no live node refers to
    // any more (e.g. a value computed and dropped, or time steps an RNN skipped). Nothing can
    // backward through them, so they go now; reverse order lets a released consumer free its
    // producers in the same sweep. Without this the tape would keep them until tape::reset().
    for (std::size_t i = tape.nodes.size(); i-- > 0;) {
      Node& node = tape.nodes[i];
      if (node.alive && node.output.use_count() == 1) release(tape, node);
    }
    if (tape.live == 0) tape.clear();
  }

  /// GradGraphContext::backward_through: the recomputed subgraph [ctx.first_new_, y's node] walked
  /// from y seeded with the op's gradient; its inputs' gradients land where the op's would.
  static void backward_through(GradGraphContext& ctx, const Tensor& y) {
    Tape& tape = t_tape;
    const Node& node = tape.nodes[ctx.node_];
    const std::string op = node.name;
    if (!y.defined() || !y.requires_grad() || y.is_leaf() || !tape.holds(*y.impl()->meta) ||
        y.impl()->meta->node < static_cast<std::int64_t>(ctx.first_new_))
      throw std::logic_error("internal error in double backward of '" + op +
                             "': backward_through needs the output recomputed inside the closure");
    if (!(y.shape() == ctx.grad_output_.shape()) || y.dtype() != ctx.grad_output_.dtype())
      throw std::logic_error("internal error in double backward of '" + op + "': the recomputed output has shape " +
                             y.shape().str() + ", the op's " + ctx.grad_output_.shape().str());
    AutogradMeta& meta = *y.impl()->meta;
    meta.grad = meta.grad.defined() ? tg::add(meta.grad, ctx.grad_output_) : ctx.grad_output_;
    walk(tape, meta.node, static_cast<std::int64_t>(ctx.first_new_), ctx.retain_graph_, true, t_capture);
  }
};

void GradGraphContext::backward_through(const Tensor& recomputed) { Engine::backward_through(*this, recomputed); }

namespace detail {
void run_backward(const Tensor& root, const Tensor& seed, bool retain_graph, bool create_graph) {
  Engine::run(&root, &seed, 1, retain_graph, create_graph, nullptr);
}
}  // namespace detail

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, const GradOptions& options) {
  const bool create_graph = options.create_graph;
  const bool retain_graph = options.retain_graph.value_or(create_graph);
  const bool allow_unused = options.allow_unused;
  if (outputs.empty()) throw std::invalid_argument("grad: no outputs");
  if (!grad_outputs.empty() && grad_outputs.size() != outputs.size())
    throw std::invalid_argument("grad: " + std::to_string(grad_outputs.size()) + " grad_outputs for " +
                                std::to_string(outputs.size()) + " outputs");
  std::vector<Tensor> seeds(outputs.size());
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    if (!outputs[k].defined()) throw std::invalid_argument("grad: output " + std::to_string(k) + " is undefined");
    if (k < grad_outputs.size() && grad_outputs[k].defined()) {
      seeds[k] = grad_outputs[k];
    } else {
      if (outputs[k].numel() != 1)
        throw std::invalid_argument("grad: output " + std::to_string(k) + " has shape " + outputs[k].shape().str() +
                                    "; a gradient is created implicitly only for one-element outputs (pass grad_outputs)");
      seeds[k] = Tensor::ones(outputs[k].shape(), outputs[k].dtype());
    }
  }
  std::vector<AutogradMeta*> targets(inputs.size());
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    if (!inputs[k].defined() || !inputs[k].requires_grad())
      throw std::invalid_argument("grad: input " + std::to_string(k) + " does not require grad");
    targets[k] = inputs[k].impl()->meta.get();
  }
  std::vector<Tensor> grads(inputs.size());
  GradCapture capture{targets, grads};
  Engine::run(outputs.data(), seeds.data(), outputs.size(), retain_graph, create_graph, &capture);
  for (std::size_t k = 0; k < grads.size(); ++k)  // an input listed again gets the first listing's gradient, as torch
    if (const int first = capture.index_of(targets[k]); first != static_cast<int>(k)) grads[k] = grads[first];
  for (std::size_t k = 0; k < grads.size(); ++k)
    if (!grads[k].defined() && !allow_unused)
      throw std::invalid_argument("grad: input " + std::to_string(k) + " (shape " + inputs[k].shape().str() +
                                  ") was not used to compute the outputs; pass allow_unused = true to get an "
                                  "undefined gradient for it");
  return grads;
}

}  // namespace tg
