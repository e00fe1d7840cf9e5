#include <vkgrad/core/multi.hpp>

#include <functional>
#include <numeric>
#include <optional>
#include <unordered_map>

#include <vkgrad/core/buffer.hpp>
#include <vkgrad/core/device.hpp>
#include <vkgrad/core/error.hpp>
#include <vkgrad/core/indexed_load.hpp>
#include <vkgrad/core/scatter_combine.hpp>
#include <vkgrad/core/symbolic_shape.hpp>
#include <vkgrad/core/tensor.hpp>

namespace vkg {

std::vector<std::string> split_devices(const std::string& device) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t comma; (comma = device.find(',', start)) != std::string::npos; start = comma + 1)
    out.push_back(device.substr(start, comma - start));
  out.push_back(device.substr(start));
  return out;
}

std::string join_devices(const std::vector<std::string>& devices) {
  std::string out;
  for (const auto& d : devices) out += (out.empty() ? "" : ",") + d;
  return out;
}

UOpPtr make_multi(const Sharded& s) {
  std::vector<UOpPtr> src{UOp::make(Ops::DEVICE, dtypes::void_, {}, join_devices(s.devices))};
  src.insert(src.end(), s.shards.begin(), s.shards.end());
  return UOp::make(Ops::MULTI, s.shards.at(0)->dtype, std::move(src), s.axis);
}

namespace {

int64_t product(const Shape& s, size_t from, size_t to) {
  return std::accumulate(s.begin() + std::ptrdiff_t(from), s.begin() + std::ptrdiff_t(to),
                         int64_t(1), std::multiplies<>());
}

UOpPtr device_node(const std::string& d) { return UOp::make(Ops::DEVICE, dtypes::void_, {}, d); }

// n cut to [lo, hi) along `axis` (n itself where that is all of it).
Tensor cut(const UOpPtr& n, int64_t axis, int64_t lo, int64_t hi) {
  std::vector<std::pair<int64_t, int64_t>> keep;
  for (int64_t s : *n->shape()) keep.emplace_back(0, s);
  keep[size_t(axis)] = {lo, hi};
  return Tensor(n).shrink(std::move(keep));
}

// The elements [lo, hi) along `axis` of the value x shards, on x's device i: the part of each
// shard that holds some of them, cut on its own device and copied to device i, joined by cat.
// Only what device i lacks moves: along x's own axis, the shards that overlap the range; along
// another axis, a slice of every other shard (an all-to-all); a replicated x is cut in place.
UOpPtr cut_on(const Sharded& x, int64_t axis, int64_t lo, int64_t hi, size_t i) {
  if (x.axis == -1) return cut(x.shards[i], axis, lo, hi).node();
  std::vector<Tensor> pieces;
  int64_t at = 0;
  for (const UOpPtr& shard : x.shards) {
    const int64_t n = (*shard->shape())[size_t(x.axis)];
    if (axis != x.axis)
      pieces.push_back(cut(shard, axis, lo, hi).to(x.devices[i]));
    else if (std::max(lo, at) < std::min(hi, at + n))
      pieces.push_back(
          cut(shard, axis, std::max(lo, at) - at, std::min(hi, at + n) - at).to(x.devices[i]));
    at += n;
  }
  // An empty range (of an axis of length 0) overlaps no shard: it is device i's own, empty.
  if (pieces.empty()) return cut(x.shards[i], axis, 0, 0).node();
  return pieces.size() == 1 ? pieces[0].node() : Tensor::cat(pieces, x.axis).node();
}

// x's whole value on each of its devices (an all-gather); x itself where it is replicated.
Sharded replicate(const Sharded& x) {
  if (x.axis == -1) return x;
  Sharded out{x.devices, {}, -1};
  int64_t n = 0;
  for (const UOpPtr& shard : x.shards) n += (*shard->shape())[size_t(x.axis)];
  for (size_t i = 0; i < x.devices.size(); ++i) out.shards.push_back(cut_on(x, x.axis, 0, n, i));
  return out;
}

class Lowering {
 public:
  Sharded lower(const UOpPtr& root) {
    std::optional<Sharded> s = visit(root);
    if (!s)
      throw Error("shard: " + std::string(op_name(root->op)) + " node is on one device (internal)");
    return *s;
  }

 private:
  std::unordered_map<const UOp*, std::optional<Sharded>> memo_;

  static std::string where(const UOp& n) {
    return std::string(op_name(n.op)) + " of a tensor of shape " +
           (n.shape() ? shape_str(*n.shape()) : std::string("?")) + " sharded over " +
           (n.device_node() ? n.device_node()->arg_as<std::string>() : std::string("?"));
  }

  // The [begin, end) of each shard along its axis.
  static std::vector<std::pair<int64_t, int64_t>> bounds(const Sharded& s) {
    std::vector<std::pair<int64_t, int64_t>> out;
    int64_t at = 0;
    for (const UOpPtr& x : s.shards) {
      const int64_t n = (*x->shape())[size_t(s.axis)];
      out.emplace_back(at, at + n);
      at += n;
    }
    return out;
  }

  // `v` split as `like` is: a replicated value is cut to each shard's slice; one sharded on
  // another axis is resharded (each device gathers its slice from every shard's part of it).
  static Sharded align(const Sharded& v, const Sharded& like, const UOp&) {
    if (v.axis == like.axis) return v;
    if (like.axis == -1) return replicate(v);
    Sharded out = like;
    const auto b = bounds(like);
    for (size_t i = 0; i < v.shards.size(); ++i)
      out.shards[i] = cut_on(v, like.axis, b[i].first, b[i].second, i);
    return out;
  }

  std::optional<Sharded> visit(const UOpPtr& n) {
    if (auto it = memo_.find(n.get()); it != memo_.end()) return it->second;
    std::optional<Sharded> out = visit_uncached(n);
    memo_.emplace(n.get(), out);
    return out;
  }

  std::optional<Sharded> visit_uncached(const UOpPtr& n) {
    const std::string device =
        n->device_node() ? n->device_node()->arg_as<std::string>() : std::string();
    if (n->op == Ops::MULTI) {
      Sharded s{
          split_devices(device), {n->src.begin() + 1, n->src.end()}, std::get<int64_t>(n->arg)};
      return s;
    }
    if (n->op == Ops::DEVICE || !is_multi_device(device)) return std::nullopt;
    const std::vector<std::string> devices = split_devices(device);
    if (n->op == Ops::CONST) {  // the same constant on every device
      Sharded s{devices, {}, -1};
      for (const auto& d : devices)
        s.shards.push_back(UOp::make(Ops::CONST, n->dtype, {device_node(d)}, n->arg));
      return s;
    }
    if (n->op == Ops::BUFFER) {  // host data made on the joined device: uploaded to each
      const Buffer& b = buffer_of(*n);
      if (!b.initial_data)
        throw Error(where(*n) +
                    ": a buffer on several devices has no data to replicate; make it on "
                    "one device and shard() it");
      Sharded s{devices, {}, -1};
      for (const auto& d : devices) {
        auto copy = std::make_shared<Buffer>(d, b.dtype(), b.count());
        copy->initial_data = b.initial_data;
        s.shards.push_back(UOp::make(Ops::BUFFER, n->dtype, {device_node(d)},
                                     std::shared_ptr<const ArgPayload>(copy)));
      }
      return s;
    }
    std::vector<std::optional<Sharded>> in;
    for (const UOpPtr& s : n->src) in.push_back(visit(s));
    if (is_movement(n->op)) return move(*n, *in.at(0));
    if (n->op == Ops::REDUCE_AXIS) return reduce(*n, *in.at(0));
    if (n->op == Ops::INDEX || n->op == Ops::SCATTER) {
      for (const auto& s : in)
        if (!s) throw Error(where(*n) + ": an operand is on one device (internal)");
      return n->op == Ops::INDEX ? index(*n, in) : scatter(*n, in);
    }
    if (n->op == Ops::ASSIGN) {
      Sharded target = *in.at(0);
      return per_shard(*n, {target, align(*in.at(1), target, *n)}, target);
    }
    const bool elementwise = is_alu(n->op) || n->op == Ops::CAST || n->op == Ops::BITCAST ||
                             n->op == Ops::CONTIGUOUS || n->op == Ops::DETACH;
    if (!elementwise)
      throw Error(where(*n) +
                  ": this op does not run on sharded tensors yet; gather with to() first");
    const Sharded* like = nullptr;
    for (const auto& s : in) {
      if (!s) throw Error(where(*n) + ": an operand is on one device (internal)");
      if (!like || (like->axis == -1 && s->axis != -1)) like = &*s;
    }
    std::vector<Sharded> aligned;
    for (const auto& s : in) aligned.push_back(align(*s, *like, *n));
    return per_shard(*n, aligned, *like);
  }

  // n applied to shard i of each operand.
  static Sharded per_shard(const UOp& n, const std::vector<Sharded>& operands, const Sharded& like,
                           const std::vector<Arg>& args = {}) {
    Sharded out{like.devices, {}, like.axis};
    for (size_t i = 0; i < like.shards.size(); ++i) {
      std::vector<UOpPtr> src;
      for (const Sharded& o : operands) src.push_back(o.shards[i]);
      out.shards.push_back(
          UOp::make(n.op, n.dtype, std::move(src), args.empty() ? n.arg : args[i]));
    }
    return out;
  }

  static Sharded move(const UOp& n, const Sharded& x) {
    if (symbolic_arg(n))
      throw Error(where(n) + ": symbolic sizes on sharded tensors are not supported");
    const std::vector<int64_t>& a = *movement_values(n);
    const Shape& old_full = *n.src[0]->shape();
    if (x.axis == -1) return per_shard(n, {x}, x);
    const size_t axis = size_t(x.axis);
    const auto b = bounds(x);
    std::vector<Arg> args;
    Sharded out = x;
    switch (n.op) {
      case Ops::PERMUTE:
        for (size_t j = 0; j < a.size(); ++j)
          if (a[j] == x.axis) out.axis = int64_t(j);
        return per_shard(n, {x}, out);
      case Ops::EXPAND:
        if (a[axis] != old_full[axis])
          throw Error(where(n) + ": expanding the sharded axis " + std::to_string(axis));
        for (const auto& [lo, hi] : b) {
          std::vector<int64_t> s = a;
          s[axis] = hi - lo;
          args.emplace_back(s);
        }
        return per_shard(n, {x}, out, args);
      case Ops::RESHAPE: {
        // The sharded axis with everything after it regroups into new axis k with the dimensions
        // after k: each shard's block of rows stays one block of new rows.
        const Shape& new_full = a;
        const int64_t prefix = product(old_full, 0, axis);
        std::optional<size_t> k;
        for (size_t j = 0; j < new_full.size(); ++j)
          if (product(new_full, 0, j) == prefix && new_full[j] != 1) k = j;
        const int64_t old_suffix = product(old_full, axis + 1, old_full.size());
        const int64_t new_suffix = k ? product(new_full, *k + 1, new_full.size()) : 0;
        // (An empty tensor's new rows may have no size: every device reshapes it whole. So where
        // the axes before the sharded one hold nothing: rows of 0 elements say nothing of where
        // the shard's axis went, {0, 1, 0, 4} sharded on 2 to {0, 0, 4} gave {0, 0, 0}.)
        if (new_suffix == 0 || prefix == 0) k.reset();
        for (const auto& [lo, hi] : b)
          if (!k || (lo * old_suffix) % new_suffix || (hi * old_suffix) % new_suffix) k.reset();
        // One that mixes the sharded axis with others (flattening a tensor sharded on its
        // columns) has no per-shard form: every device reshapes the whole value.
        if (!k) {
          const Sharded whole = replicate(x);
          return per_shard(n, {whole}, whole);
        }
        out.axis = int64_t(*k);
        for (const auto& [lo, hi] : b) {
          std::vector<int64_t> s = new_full;
          s[*k] = (hi - lo) * old_suffix / new_suffix;
          args.emplace_back(s);
        }
        return per_shard(n, {x}, out, args);
      }
      case Ops::PAD:
      case Ops::SHRINK:
        return window(n, x, a);
      case Ops::FLIP: {
        if (!a[axis]) return per_shard(n, {x}, out);
        // Shard i of the result is the mirror of the input's range at the other end.
        const int64_t len = old_full[axis];
        for (size_t i = 0; i < b.size(); ++i)
          out.shards[i] =
              UOp::make(Ops::FLIP, n.dtype,
                        {cut_on(x, int64_t(axis), len - b[i].second, len - b[i].first, i)}, n.arg);
        return out;
      }
      default:
        throw Error(where(n) + ": not a movement op (internal)");
    }
  }

  // A pad or shrink: result position o along the sharded axis holds input position o + offset,
  // or zero outside the input. Every shard of the result gathers the input range it shows
  // (cut_on: from the shards that hold it) and pads or shrinks that. The result stays sharded,
  // in equal parts, where its length splits evenly over the devices; otherwise every device
  // holds all of it (replicated).
  static Sharded window(const UOp& n, const Sharded& x, const std::vector<int64_t>& a) {
    const size_t axis = size_t(x.axis);
    const bool pad = n.op == Ops::PAD;
    const int64_t len = (*n.src[0]->shape())[axis];
    const int64_t offset = pad ? -a[2 * axis] : a[2 * axis];
    const Shape& full = *n.shape();
    const int64_t out_len = full[axis], k = int64_t(x.shards.size());
    const bool stays = out_len > 0 && out_len % k == 0;
    Sharded out{x.devices, {}, stays ? x.axis : -1};
    for (size_t i = 0; i < x.shards.size(); ++i) {
      const int64_t lo = stays ? int64_t(i) * out_len / k : 0;
      const int64_t hi = stays ? (int64_t(i) + 1) * out_len / k : out_len;
      const int64_t in_lo = std::max<int64_t>(lo + offset, 0);
      const int64_t in_hi = std::min<int64_t>(hi + offset, len);
      if (in_lo >= in_hi) {  // all padding: the zeros a pad fills
        Shape s = full;
        s[axis] = hi - lo;
        out.shards.push_back(Tensor::full(s, 0, n.dtype, x.devices[i]).node());
        continue;
      }
      std::vector<int64_t> s = a;  // the other axes pad or shrink as before
      s[2 * axis] = pad ? in_lo - (lo + offset) : 0;
      s[2 * axis + 1] = pad ? (hi + offset) - in_hi : in_hi - in_lo;
      out.shards.push_back(
          UOp::make(n.op, n.dtype, {cut_on(x, x.axis, in_lo, in_hi, i)}, std::move(s)));
    }
    return out;
  }

  // Over the sharded axis: each device reduces its shard, then combines the others' partials,
  // copied to it (an all-reduce); the result is replicated.
  static Sharded reduce(const UOp& n, const Sharded& x) {
    const ReduceArg& r = n.arg_as<ReduceArg>();
    if (x.axis == -1 || std::find(r.axes.begin(), r.axes.end(), x.axis) == r.axes.end())
      return per_shard(n, {x}, x);
    return all_reduce(per_shard(n, {x}, x), r.op, n.dtype);
  }

  static Sharded all_reduce(const Sharded& partial, Ops op, DType dtype) {
    return all_reduce(partial, [op, dtype](const UOpPtr& a, const UOpPtr& b) {
      return UOp::make(op, dtype, {a, b});
    });
  }

  // The same with `combine` joining two partials on one device.
  static Sharded all_reduce(const Sharded& partial,
                            const std::function<UOpPtr(const UOpPtr&, const UOpPtr&)>& combine) {
    const DType dtype = partial.shards.at(0)->dtype;
    Sharded out{partial.devices, {}, -1};
    // Every device combines the partials in device order, so the replicas agree bit for bit.
    for (size_t d = 0; d < partial.devices.size(); ++d) {
      UOpPtr acc;
      for (size_t j = 0; j < partial.devices.size(); ++j) {
        UOpPtr p = j == d ? partial.shards[j]
                          : UOp::make(Ops::COPY, dtype,
                                      {partial.shards[j], device_node(partial.devices[d])},
                                      partial.devices[d]);
        acc = acc ? combine(acc, p) : p;
      }
      out.shards.push_back(acc);
    }
    return out;
  }

  // INDEX(src, idx...) (core/indexed_load.hpp): the result has the indices' shape and is split
  // as they are. A source sharded on an axis not indexed splits the result there (each device
  // reads its own rows, its indices resharded to them); one sharded on an indexed axis is
  // gathered to every device first, since any index may point into any shard.
  static Sharded index(const UOp& n, const std::vector<std::optional<Sharded>>& in) {
    const std::vector<int64_t>& axes = n.arg_as<std::vector<int64_t>>();
    auto indexed = [&](int64_t a) { return std::find(axes.begin(), axes.end(), a) != axes.end(); };
    Sharded src = *in[0];
    if (src.axis != -1 && indexed(src.axis)) src = replicate(src);
    Sharded like = src;
    for (size_t j = 1; j < in.size() && like.axis == -1; ++j)
      if (in[j]->axis != -1) like = *in[j];
    std::vector<Sharded> operands;
    // The source has the result's size on the axes not indexed, so it is cut there as the
    // result is; along an indexed axis each device keeps all of it.
    operands.push_back(like.axis == -1 || indexed(like.axis) ? src : align(src, like, n));
    for (size_t j = 1; j < in.size(); ++j) operands.push_back(align(*in[j], like, n));
    return per_shard(n, operands, like);
  }

  // SCATTER(dest, values, idx...) with arg {combine, axes...}: the values and their indices
  // split alike. Along an axis not indexed each value lands in its own row, so dest splits there
  // too and the result stays sharded. Along an indexed axis a value may land anywhere: each
  // device scatters its values into the combine's identity (device 0 into dest), and the partial
  // results are all-reduced with the combine itself, replicated: sum (the backward of an indexed
  // load), prod, and max and min as IEEE's, so the result is the one-device scatter's.
  static Sharded scatter(const UOp& n, const std::vector<std::optional<Sharded>>& in) {
    const std::vector<int64_t>& arg = n.arg_as<std::vector<int64_t>>();
    auto indexed = [&](int64_t a) { return std::find(arg.begin() + 1, arg.end(), a) != arg.end(); };
    Sharded like = *in[1];
    for (size_t j = 2; j < in.size() && like.axis == -1; ++j)
      if (in[j]->axis != -1) like = *in[j];
    std::vector<Sharded> operands{replicate(*in[0])};
    for (size_t j = 1; j < in.size(); ++j) operands.push_back(align(*in[j], like, n));
    if (like.axis == -1) return per_shard(n, operands, like);
    const size_t axis = size_t(like.axis);
    if (!indexed(like.axis)) {
      if ((*n.shape())[axis] != (*n.src[1]->shape())[axis])
        throw Error(where(n) + ": values sharded on axis " + std::to_string(axis) +
                    " fill only part of it; gather them with to() first");
      operands[0] = align(*in[0], like, n);
      return per_shard(n, operands, like);
    }
    // Never Assign: Tensor::scatter is a max of positions (core/tensor_scatter.cpp), which
    // keeps the last value's order across devices.
    const auto combine = ScatterCombine(arg[0]);
    for (size_t i = 1; i < operands[0].shards.size(); ++i)
      operands[0].shards[i] =
          Tensor::full(*n.shape(), scatter_identity(combine, n.dtype), n.dtype, like.devices[i])
              .clone()
              .node();
    return all_reduce(per_shard(n, operands, like), [combine](const UOpPtr& a, const UOpPtr& b) {
      return scatter_combined(Tensor(a), Tensor(b), combine).node();
    });
  }
};

}  // namespace

Sharded lower_multi(const UOpPtr& node) { return Lowering().lower(node); }

UOpPtr split_like(const Tensor& g, const Sharded& like) {
  Sharded out{like.devices, {}, like.axis};
  int64_t at = 0;
  for (size_t i = 0; i < like.shards.size(); ++i) {
    if (like.axis == -1) {
      out.shards.push_back(g.to(like.devices[i]).node());
      continue;
    }
    const int64_t n = (*like.shards[i]->shape())[size_t(like.axis)];
    out.shards.push_back(cut(g.node(), like.axis, at, at + n).to(like.devices[i]).node());
    at += n;
  }
  return make_multi(out);
}

std::vector<std::optional<Tensor>> multi_gradient(const UOp& multi, const Tensor& g) {
  const Sharded x = lower_multi(multi.ptr());
  if (g.device() != multi.device_node()->arg_as<std::string>())
    throw Error("backward: the gradient of a tensor sharded over " +
                multi.device_node()->arg_as<std::string>() + " is on " + g.device() +
                " (internal)");
  const Sharded gs = lower_multi(g.node());
  std::vector<std::optional<Tensor>> out{std::nullopt};  // the DEVICE source
  const int64_t axis = x.axis;
  if (axis != -1) {  // each shard's slice of g, resharded where g is split otherwise
    int64_t at = 0;
    for (size_t i = 0; i < x.shards.size(); ++i) {
      const int64_t n = (*x.shards[i]->shape())[size_t(axis)];
      out.emplace_back(cut_on(gs, axis, at, at + n, i));
      at += n;
    }
    return out;
  }
  if (gs.axis == -1) {  // replicated: the first device's copy is all of it
    out.emplace_back(gs.shards[0]);
    for (size_t i = 1; i < x.shards.size(); ++i) out.emplace_back(std::nullopt);
    return out;
  }
  // Each device's part of g, padded to the whole shape with -0.0 (the identity of the sum at
  // the source, which keeps a -0.0 gradient -0.0).
  int64_t at = 0;
  const int64_t len = g.shape()[size_t(gs.axis)];
  for (size_t i = 0; i < x.shards.size(); ++i) {
    const Tensor part(gs.shards[i]);
    const int64_t n = part.shape()[size_t(gs.axis)];
    std::vector<std::pair<int64_t, int64_t>> pads(size_t(part.ndim()), {0, 0});
    pads[size_t(gs.axis)] = {at, len - at - n};
    out.emplace_back(part.pad(pads, part.dtype().is_float() ? -0.0 : 0.0));
    at += n;
  }
  return out;
}

}  // namespace vkg
