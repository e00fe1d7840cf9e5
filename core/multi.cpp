#include <vkgrad/core/multi.hpp>

#include <numeric>
#include <optional>
#include <unordered_map>

#include <vkgrad/core/buffer.hpp>
#include <vkgrad/core/device.hpp>
#include <vkgrad/core/error.hpp>
#include <vkgrad/core/symbolic_shape.hpp>

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

  // `v` split as `like` is: a replicated value is cut to each shard's slice.
  static Sharded align(const Sharded& v, const Sharded& like, const UOp& at) {
    if (v.axis == like.axis) return v;
    if (v.axis != -1)
      throw Error(where(at) + ": its operands are sharded on different axes (" +
                  std::to_string(v.axis) + " and " + std::to_string(like.axis) +
                  "); shard them alike, or gather one with to()");
    Sharded out = like;
    const auto b = bounds(like);
    for (size_t i = 0; i < v.shards.size(); ++i) {
      const Shape& full = *v.shards[i]->shape();
      std::vector<int64_t> pairs;
      for (size_t d = 0; d < full.size(); ++d) {
        const bool cut = int64_t(d) == like.axis;
        pairs.push_back(cut ? b[i].first : 0);
        pairs.push_back(cut ? b[i].second : full[d]);
      }
      out.shards[i] = UOp::make(Ops::SHRINK, v.shards[i]->dtype, {v.shards[i]}, pairs);
    }
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
        for (const auto& [lo, hi] : b)
          if (!k || (lo * old_suffix) % new_suffix || (hi * old_suffix) % new_suffix) k.reset();
        if (!k)
          throw Error(where(n) + ": reshaping to " + shape_str(new_full) +
                      " mixes the sharded axis " + std::to_string(axis) + " with others");
        out.axis = int64_t(*k);
        for (const auto& [lo, hi] : b) {
          std::vector<int64_t> s = new_full;
          s[*k] = (hi - lo) * old_suffix / new_suffix;
          args.emplace_back(s);
        }
        return per_shard(n, {x}, out, args);
      }
      case Ops::PAD:
      case Ops::SHRINK: {
        const bool whole = n.op == Ops::PAD ? a[2 * axis] == 0 && a[2 * axis + 1] == 0
                                            : a[2 * axis] == 0 && a[2 * axis + 1] == old_full[axis];
        if (!whole)
          throw Error(where(n) + ": a " + std::string(op_name(n.op)) + " across the sharded axis " +
                      std::to_string(axis));
        for (const auto& [lo, hi] : b) {
          std::vector<int64_t> s = a;
          if (n.op == Ops::SHRINK) s[2 * axis + 1] = hi - lo;
          args.emplace_back(s);
        }
        return per_shard(n, {x}, out, args);
      }
      case Ops::FLIP:
        if (a[axis]) throw Error(where(n) + ": flipping the sharded axis " + std::to_string(axis));
        return per_shard(n, {x}, out);
      default:
        throw Error(where(n) + ": not a movement op (internal)");
    }
  }

  // Over the sharded axis: each device reduces its shard, then combines the others' partials,
  // copied to it (an all-reduce); the result is replicated.
  static Sharded reduce(const UOp& n, const Sharded& x) {
    const ReduceArg& r = n.arg_as<ReduceArg>();
    if (x.axis == -1 || std::find(r.axes.begin(), r.axes.end(), x.axis) == r.axes.end())
      return per_shard(n, {x}, x);
    const Sharded partial = per_shard(n, {x}, x);
    Sharded out{x.devices, {}, -1};
    // Every device combines the partials in device order, so the replicas agree bit for bit.
    for (size_t d = 0; d < x.devices.size(); ++d) {
      UOpPtr acc;
      for (size_t j = 0; j < x.devices.size(); ++j) {
        UOpPtr p = j == d ? partial.shards[j]
                          : UOp::make(Ops::COPY, n.dtype,
                                      {partial.shards[j], device_node(x.devices[d])}, x.devices[d]);
        acc = acc ? UOp::make(r.op, n.dtype, {acc, p}) : p;
      }
      out.shards.push_back(acc);
    }
    return out;
  }
};

}  // namespace

Sharded lower_multi(const UOpPtr& node) { return Lowering().lower(node); }

}  // namespace vkg
