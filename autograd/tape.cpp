#include "autograd/tape.h"

#include <stdexcept>
#include <string>

#include "autograd/compact_grad.h"
#include "autograd/kernels/elementwise.h"
#include "autograd/memory.h"

namespace tg {

namespace {

struct NodeInput {
  std::shared_ptr<AutogradMeta> meta;  // null when this input does not require grad
  Shape shape;
  DType dtype;
};

// A node's inputs live in one array owned by the tape (first_input, num_inputs), and its closure
// inline in the node: recording allocates nothing once the tape's arrays have grown to a step's
// size (they keep their capacity when the tape empties).
struct Node {
  const char* name = "";
  BackwardFn backward;
  std::uint32_t first_input = 0, num_inputs = 0;
  std::shared_ptr<AutogradMeta> output;
  bool alive = true;
};

struct Tape {
  std::vector<Node> nodes;
  std::vector<NodeInput> inputs;
  std::uint64_t epoch = 1;
  std::size_t live = 0;

  void clear() {
    nodes.clear();  // keeps capacity: steady-state steps do not reallocate the node array
    inputs.clear();
    live = 0;
    ++epoch;
  }
  /// Whether `meta` (an op output) still has its node on this tape.
  bool holds(const AutogradMeta& meta) const {
    return meta.tape == this && meta.epoch == epoch && meta.node >= 0 &&
           static_cast<std::size_t>(meta.node) < nodes.size() && nodes[meta.node].alive;
  }
  NodeInput* inputs_of(const Node& node) { return inputs.data() + node.first_input; }
};

thread_local Tape t_tape;
thread_local bool t_grad_enabled = true;

[[noreturn]] void throw_freed(const char* op) {
  throw std::runtime_error(std::string("backward: '") + op +
                           "' needs the gradient of a tensor whose graph was already freed (backward "
                           "already ran through it, or tape::reset() was called). detach() values kept "
                           "across steps.");
}

/// Whether nothing else holds `t` or its storage, so adding into it in place is invisible.
bool owns_buffer(const Tensor& t) { return t.impl_ptr().use_count() == 1 && t.impl()->storage.use_count() == 1; }

void accumulate_into(const char* op, int i, NodeInput& in, Tensor grad) {
  if (!(grad.shape() == in.shape) || grad.dtype() != in.dtype)
    throw std::logic_error(std::string("internal error in backward of '") + op + "': gradient for input " +
                           std::to_string(i) + " has shape " + grad.shape().str() + " " +
                           std::string(dtype_name(grad.dtype())) + ", expected " + in.shape.str() + " " +
                           std::string(dtype_name(in.dtype)));
  AutogradMeta& meta = *in.meta;
  if (!meta.is_leaf && !t_tape.holds(meta)) throw_freed(op);
  if (meta.compact) {  // a second gradient for this leaf: continue densely
    meta.grad = meta.compact->dense();
    meta.compact.reset();
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

bool BackwardContext::needs_grad(int i) const {
  const Node& node = *static_cast<const Node*>(node_);
  return i >= 0 && static_cast<std::uint32_t>(i) < node.num_inputs && t_tape.inputs_of(node)[i].meta != nullptr;
}

void BackwardContext::accumulate(int i, Tensor grad) {
  Node& node = *static_cast<Node*>(node_);
  if (i < 0 || static_cast<std::uint32_t>(i) >= node.num_inputs)
    throw std::logic_error(std::string("internal error in backward of '") + node.name + "': input " +
                           std::to_string(i) + " does not exist");
  NodeInput& in = t_tape.inputs_of(node)[i];
  if (!in.meta) return;
  accumulate_into(node.name, i, in, std::move(grad));
}

void BackwardContext::accumulate_term(int i, const detail::GradTermRef& term) {
  Node& node = *static_cast<Node*>(node_);
  if (i < 0 || static_cast<std::uint32_t>(i) >= node.num_inputs)
    throw std::logic_error(std::string("internal error in backward of '") + node.name + "': input " +
                           std::to_string(i) + " does not exist");
  NodeInput& in = t_tape.inputs_of(node)[i];
  if (!in.meta) return;
  AutogradMeta& meta = *in.meta;
  if (!meta.is_leaf && !t_tape.holds(meta)) throw_freed(node.name);
  if (term.compact && meta.is_leaf && meta.allow_compact && !meta.grad.defined() && !meta.compact) {
    if (std::shared_ptr<CompactGrad> compact = term.compact(term.term)) {
      if (!(compact->shape() == in.shape) || compact->dtype() != in.dtype)
        throw std::logic_error(std::string("internal error in backward of '") + node.name +
                               "': compact gradient for input " + std::to_string(i) + " has shape " +
                               compact->shape().str() + ", expected " + in.shape.str());
      meta.compact = std::move(compact);
      return;
    }
  }
  if (meta.compact) {  // a second gradient for this leaf: continue densely
    meta.grad = meta.compact->dense();
    meta.compact.reset();
  }
  // In place when the buffer is this input's alone (a leaf's, or an intermediate's nothing shares).
  if (term.add_into && meta.grad.defined() && (meta.is_leaf || owns_buffer(meta.grad))) {
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
  accumulate_into(node.name, i, in, std::move(grad));
}

void* BackwardFn::heap_allocate(std::size_t bytes) { return memory::allocate(bytes); }
void BackwardFn::heap_free(void* p, std::size_t bytes) noexcept { memory::deallocate(p, bytes); }

namespace tape {
void reset() { t_tape.clear(); }
std::size_t size() { return t_tape.live; }
}  // namespace tape

namespace detail {

bool should_record(const Tensor* inputs, std::size_t n) {
  if (!t_grad_enabled) return false;
  for (std::size_t i = 0; i < n; ++i)
    if (inputs[i].requires_grad()) return true;
  return false;
}

BackwardFn& record_node(const char* name, Tensor& output, const Tensor* inputs, std::size_t n) {
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
  output.impl()->meta = meta;
  node.output = std::move(meta);
  ++tape.live;
  return node.backward;
}

}  // namespace detail

class Engine {
  static void release(Tape& tape, Node& node) {
    node.backward = nullptr;  // frees what the closure saved
    NodeInput* in = tape.inputs_of(node);
    for (std::uint32_t i = 0; i < node.num_inputs; ++i) in[i].meta.reset();
    node.output.reset();
    node.alive = false;
    --tape.live;
  }

 public:
  static void run(const Tensor& root, const Tensor& seed) {
    if (!root.requires_grad())
      throw std::runtime_error("backward: the tensor does not require grad (no input of the ops that made "
                               "it requires grad, or it was made under NoGradGuard)");
    if (!is_floating(root.dtype())) throw std::runtime_error("backward: only floating tensors have gradients");
    AutogradMeta& root_meta = *root.impl()->meta;
    if (root_meta.is_leaf) {
      NodeInput leaf{root.impl()->meta, root.shape(), root.dtype()};
      accumulate_into("backward", 0, leaf, seed);
      return;
    }
    Tape& tape = t_tape;
    if (!tape.holds(root_meta))
      throw std::runtime_error("backward: the graph of this tensor was already freed (backward already ran "
                               "through it, or tape::reset() was called)");
    NoGradGuard no_grad;  // backward closures compute with ops; none of that is recorded
    root_meta.grad = seed;
    for (std::int64_t i = root_meta.node; i >= 0; --i) {
      Node& node = tape.nodes[i];
      if (!node.alive || !node.output->grad.defined()) continue;  // not on a path from the root
      Tensor grad_output = std::move(node.output->grad);
      node.output->grad = Tensor();
      if (!node.backward)
        throw std::logic_error(std::string("internal error: node '") + node.name + "' has no backward closure");
      {
        BackwardContext ctx(&node, std::move(grad_output));
        node.backward(ctx);
      }
      release(tape, node);
    }
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
};

namespace detail {
void run_backward(const Tensor& root, const Tensor& seed) { Engine::run(root, seed); }
}  // namespace detail

}  // namespace tg
