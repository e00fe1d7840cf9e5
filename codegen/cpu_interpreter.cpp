#include <vkgrad/codegen/cpu_interpreter.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <vkgrad/codegen/cpu_alu.hpp>
#include <vkgrad/core/error.hpp>
#include <vkgrad/core/scatter_combine.hpp>

namespace vkg {

namespace {

using cpu::Cell;

// Which axis ("gidx1" -> 1) and kind a SPECIAL names.
struct SpecialName {
  char kind = 0;  // 'g' workgroup id, 'l' local id, 'i' global id
  int axis = 0;
};

SpecialName parse_special(const std::string& name) {
  SpecialName s;
  if (name.size() == 5 && name.compare(0, 4, "gidx") == 0)
    s.kind = 'g';
  else if (name.size() == 5 && name.compare(0, 4, "lidx") == 0)
    s.kind = 'l';
  else if (name.size() == 4 && name.compare(0, 3, "idx") == 0)
    s.kind = 'i';
  const char digit = name.empty() ? 0 : name.back();
  if (s.kind == 0 || digit < '0' || digit > '2')
    throw Error("SPECIAL '" + name + "' is none of gidx0..2, lidx0..2, idx0..2");
  s.axis = digit - '0';
  return s;
}

// IEEE 754-2019 maximum (or minimum): nan wins, +0.0 is above -0.0 (core/scatter_combine.hpp).
template <class T>
T extreme(T a, T b, bool max) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
    if (a == b) return std::signbit(a) == max ? b : a;  // equal: pick the zero of the right sign
  }
  return (max ? a > b : a < b) ? a : b;
}

template <class T>
Cell extreme_cell(Cell a, Cell b, bool max) {
  return cpu::to_cell(extreme(cpu::from_cell<T>(a), cpu::from_cell<T>(b), max));
}

// A scatter's store: `value` combined into `old`, one element of dtype d.
Cell combine(ScatterCombine c, DType d, Cell old, Cell value) {
  if (c == ScatterCombine::Sum || c == ScatterCombine::Prod) {
    const Cell* srcs[] = {&old, &value};
    Cell out = 0;
    cpu::eval_alu(c == ScatterCombine::Sum ? Ops::ADD : Ops::MUL, d, srcs, &out, 1);
    return out;
  }
  const bool max = c == ScatterCombine::Max;
  switch (d.scalar) {
    case Scalar::Float32:
      return extreme_cell<float>(old, value, max);
    case Scalar::Float64:
      return extreme_cell<double>(old, value, max);
    case Scalar::Int32:
      return extreme_cell<int32_t>(old, value, max);
    case Scalar::UInt32:
      return extreme_cell<uint32_t>(old, value, max);
    case Scalar::Int64:
      return extreme_cell<int64_t>(old, value, max);
    case Scalar::UInt64:
      return extreme_cell<uint64_t>(old, value, max);
    default:
      throw Error("a combining store of " + d.name() + " (32- and 64-bit dtypes only)");
  }
}

class Interpreter {
 public:
  Interpreter(const Program& p, std::span<const HostBuffer> buffers, std::span<const int64_t> vars)
      : p_(p), buffers_(buffers) {
    for (const int64_t n : p.local_size) lanes_ *= std::size_t(std::max<int64_t>(n, 0));
    prepare(vars);
  }

  void run() {
    const auto& g = p_.global_size;
    for (int64_t z = 0; z < g[2]; ++z)
      for (int64_t y = 0; y < g[1]; ++y)
        for (int64_t x = 0; x < g[0]; ++x) run_workgroup({x, y, z});
  }

 private:
  struct Local {
    std::vector<Cell> cells;
    std::vector<int> writer;  // lane that stored each element since the last BARRIER, or -1
  };

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(fmt::format("kernel '{}': {}", p_.name, what));
  }
  [[noreturn]] void fail_at(std::size_t pc, const std::string& what) const {
    fail(fmt::format("uop {} ({}): {}", pc, op_name(ops_[pc]->op), what));
  }

  int pos(const UOpPtr& u) const { return pos_.at(u.get()); }
  std::vector<Cell>& value(std::size_t pc) { return values_[storage_[pc]]; }
  std::vector<Cell>& value(const UOpPtr& u) { return value(std::size_t(pos(u))); }

  void prepare(std::span<const int64_t> vars) {
    if (buffers_.size() != p_.buffers.size())
      fail(fmt::format("takes {} buffers, got {}", p_.buffers.size(), buffers_.size()));
    if (vars.size() != p_.vars.size())
      fail(fmt::format("takes {} variables, got {}", p_.vars.size(), vars.size()));
    const std::size_t n = p_.uops.size();
    ops_.resize(n);
    storage_.resize(n);
    match_.assign(n, -1);
    acc_resets_.resize(n);
    std::vector<int> open;  // RANGE and IF positions not yet closed
    for (std::size_t i = 0; i < n; ++i) {
      const UOp* u = p_.uops[i].get();
      ops_[i] = u;
      if (!pos_.emplace(u, int(i)).second) fail_at(i, "the node appears twice");
      for (const UOpPtr& s : u->src)
        if (!pos_.count(s.get()) && !(u->op == Ops::DEFINE_ACC && s->op == Ops::RANGE))
          fail_at(i, "a source is not defined before its use");
      if (u->op == Ops::RANGE || u->op == Ops::IF) open.push_back(int(i));
      if (u->op == Ops::ENDRANGE || u->op == Ops::ENDIF) {
        const Ops opener = u->op == Ops::ENDRANGE ? Ops::RANGE : Ops::IF;
        if (open.empty() || ops_[open.back()] != u->src.at(0).get() || u->src[0]->op != opener)
          fail_at(i, "does not close the innermost open block");
        match_[i] = open.back();
        match_[open.back()] = int(i);
        open.pop_back();
      }
      storage_[i] = int(i);
      if (u->op == Ops::ASSIGN) {
        if (u->src.size() != 2 || u->src[0]->op != Ops::DEFINE_ACC)
          fail_at(i, "ASSIGN needs (DEFINE_ACC, value)");
        storage_[i] = storage_[pos(u->src[0])];
      }
    }
    if (!open.empty()) fail_at(std::size_t(open.back()), "is never closed");

    // A DEFINE_ACC is (re)initialized when its outermost listed RANGE is entered.
    for (std::size_t i = 0; i < n; ++i) {
      if (ops_[i]->op != Ops::DEFINE_ACC) continue;
      int outer = -1;
      for (std::size_t k = 1; k < ops_[i]->src.size(); ++k) {
        auto it = pos_.find(ops_[i]->src[k].get());
        if (it == pos_.end()) fail_at(i, "lists a RANGE that is not in the program");
        if (outer < 0 || it->second < outer) outer = it->second;
      }
      if (outer >= 0) acc_resets_[std::size_t(outer)].push_back(int(i));
    }

    values_.resize(n);
    for (std::size_t i = 0; i < n; ++i)
      if (storage_[i] == int(i)) values_[i].assign(lanes_ * std::size_t(ops_[i]->dtype.count), 0);
    for (std::size_t i = 0; i < n; ++i) prepare_uniform(i, vars);
  }

  // Values that are the same in every lane of every workgroup, computed once.
  void prepare_uniform(std::size_t i, std::span<const int64_t> vars) {
    const UOp& u = *ops_[i];
    switch (u.op) {
      case Ops::CONST:
        std::fill(values_[i].begin(), values_[i].end(), cpu::const_cell(u));
        break;
      case Ops::DEFINE_VAR: {
        const VarArg& v = u.arg_as<VarArg>();
        auto it = std::find(p_.vars.begin(), p_.vars.end(), v);
        if (it == p_.vars.end()) fail_at(i, "variable '" + v.name + "' is not in Program::vars");
        const int64_t x = vars[std::size_t(it - p_.vars.begin())];
        if (x < v.min || x > v.max)
          fail(fmt::format("variable '{}' = {} is outside [{}, {}]", v.name, x, v.min, v.max));
        std::fill(values_[i].begin(), values_[i].end(), cpu::to_cell(int32_t(x)));
        break;
      }
      case Ops::DEFINE_GLOBAL: {
        const int64_t slot = u.arg_as<int64_t>();
        if (slot < 0 || std::size_t(slot) >= buffers_.size())
          fail_at(i, fmt::format("slot {} has no buffer", slot));
        break;
      }
      case Ops::DEFINE_LOCAL: {
        const auto& a = u.arg_as<std::vector<int64_t>>();
        if (a.size() != 2 || a[1] < 0) fail_at(i, "DEFINE_LOCAL needs arg {id, count}");
        Local& l = locals_[&u];
        l.cells.assign(std::size_t(a[1]), 0);
        l.writer.assign(std::size_t(a[1]), -1);
        break;
      }
      case Ops::SPECIAL: {
        const SpecialName s = parse_special(u.arg_as<std::string>());
        const int64_t size = u.src.at(0)->const_int();
        const int64_t g = p_.global_size[s.axis], l = p_.local_size[s.axis];
        const int64_t capacity = s.kind == 'g' ? g : s.kind == 'l' ? l : g * l;
        if (size > capacity)
          fail_at(i, fmt::format("{} of size {} exceeds the launch's {}", u.arg_as<std::string>(),
                                 size, capacity));
        specials_.push_back({int(i), s});
        break;
      }
      default:
        break;
    }
  }

  void run_workgroup(std::array<int64_t, 3> wg) {
    active_.assign(lanes_, 1);
    for (const auto& [at, s] : specials_) {
      const int64_t size = ops_[std::size_t(at)]->src.at(0)->const_int();
      std::vector<Cell>& v = values_[std::size_t(at)];
      for (std::size_t l = 0; l < lanes_; ++l) {
        const int64_t lid = lane_id(l, s.axis);
        const int64_t x = s.kind == 'g'   ? wg[s.axis]
                          : s.kind == 'l' ? lid
                                          : wg[s.axis] * p_.local_size[s.axis] + lid;
        v[l] = cpu::to_cell(int32_t(x));
        if (x >= size) active_[l] = 0;  // the renderer guards these invocations off
      }
    }
    base_active_ = active_;
    for (auto& [node, l] : locals_) std::fill(l.writer.begin(), l.writer.end(), -1);
    mask_stack_.clear();
    loop_end_.assign(ops_.size(), 0);
    for (std::size_t pc = 0; pc < ops_.size(); ++pc) pc = step(pc);
  }

  int64_t lane_id(std::size_t lane, int axis) const {
    const int64_t x = int64_t(lane) % p_.local_size[0];
    if (axis == 0) return x;
    const int64_t y = int64_t(lane) / p_.local_size[0] % p_.local_size[1];
    if (axis == 1) return y;
    return int64_t(lane) / (p_.local_size[0] * p_.local_size[1]);
  }

  bool any_active() const { return std::find(active_.begin(), active_.end(), 1) != active_.end(); }

  void init_acc(std::size_t at) {
    const std::vector<Cell>& init = value(ops_[at]->src.at(0));
    std::vector<Cell>& acc = value(at);
    if (init.size() != acc.size()) fail_at(at, "init has the wrong width");
    acc = init;
  }

  // Executes ops_[pc]; returns the position of the last op done (the loop adds one).
  std::size_t step(std::size_t pc) {
    const UOp& u = *ops_[pc];
    switch (u.op) {
      case Ops::CONST:
      case Ops::DEFINE_VAR:
      case Ops::SPECIAL:
      case Ops::DEFINE_GLOBAL:
      case Ops::DEFINE_LOCAL:
      case Ops::INDEX:
        return pc;
      case Ops::DEFINE_ACC:
        if (u.src.size() == 1) init_acc(pc);
        return pc;
      case Ops::RANGE: {
        for (const int at : acc_resets_[pc]) init_acc(std::size_t(at));
        const std::vector<Cell>& end = value(u.src.at(0));
        int64_t e = 0;
        bool first = true;
        for (std::size_t l = 0; l < lanes_; ++l) {
          if (!active_[l]) continue;
          const int64_t x = cpu::from_cell<int32_t>(end[l]);
          if (!first && x != e)
            fail_at(pc, "the loop bound differs across the lanes of a workgroup");
          e = x;
          first = false;
        }
        std::fill(value(pc).begin(), value(pc).end(), cpu::to_cell(int32_t(0)));
        loop_end_[pc] = e;
        return (first || e <= 0) ? std::size_t(match_[pc]) : pc;
      }
      case Ops::ENDRANGE: {
        const std::size_t r = std::size_t(match_[pc]);
        std::vector<Cell>& counter = value(r);
        const int32_t next = cpu::from_cell<int32_t>(counter[0]) + 1;
        if (next >= loop_end_[r]) return pc;
        std::fill(counter.begin(), counter.end(), cpu::to_cell(next));
        return r;
      }
      case Ops::IF: {
        mask_stack_.push_back(active_);
        const std::vector<Cell>& cond = value(u.src.at(0));
        for (std::size_t l = 0; l < lanes_; ++l)
          active_[l] = active_[l] && cpu::from_cell<bool>(cond[l]);
        return any_active() ? pc
                            : std::size_t(match_[pc]) - 1;  // skip the body, still pop at ENDIF
      }
      case Ops::ENDIF:
        active_ = mask_stack_.back();
        mask_stack_.pop_back();
        return pc;
      case Ops::BARRIER:
        if (active_ != base_active_)
          fail_at(pc, "BARRIER reached by only some lanes of the workgroup");
        for (auto& [node, l] : locals_) std::fill(l.writer.begin(), l.writer.end(), -1);
        return pc;
      case Ops::LOAD:
        load(pc);
        return pc;
      case Ops::STORE:
        store(pc);
        return pc;
      case Ops::ASSIGN: {
        const std::vector<Cell>& v = value(u.src.at(1));
        std::vector<Cell>& acc = value(pc);
        const std::size_t w = u.dtype.count;
        if (v.size() != acc.size()) fail_at(pc, "value and accumulator differ in width");
        for (std::size_t l = 0; l < lanes_; ++l)
          if (active_[l])
            std::copy_n(v.begin() + std::ptrdiff_t(l * w), w, acc.begin() + std::ptrdiff_t(l * w));
        return pc;
      }
      case Ops::VECTORIZE: {
        std::vector<Cell>& out = value(pc);
        const std::size_t w = u.src.size();
        if (w != u.dtype.count) fail_at(pc, "needs one source per lane");
        for (std::size_t k = 0; k < w; ++k) {
          const std::vector<Cell>& s = value(u.src[k]);
          for (std::size_t l = 0; l < lanes_; ++l) out[l * w + k] = s[l];
        }
        return pc;
      }
      case Ops::SHUFFLE: {
        // Lanes are local invocation ids: the lowerer makes SHUFFLE kernels' workgroups one
        // subgroup. Reading a lane that has returned is undefined on a device: an error here.
        const int64_t k = u.arg_as<int64_t>();
        if (k < 0 || std::size_t(k) >= lanes_ || !active_[std::size_t(k)])
          fail_at(pc, fmt::format("shuffle from lane {}, which is not running", k));
        const std::size_t w = u.dtype.count;
        const std::vector<Cell>& s = value(u.src.at(0));
        std::vector<Cell>& out = value(pc);
        for (std::size_t l = 0; l < lanes_; ++l)
          if (active_[l]) std::copy_n(s.begin() + std::ptrdiff_t(std::size_t(k) * w), w, out.begin() + std::ptrdiff_t(l * w));
        return pc;
      }
      case Ops::GEP: {
        const auto& idx = u.arg_as<std::vector<int64_t>>();
        const std::size_t n = u.src.at(0)->dtype.count, w = u.dtype.count;
        if (idx.size() != w) fail_at(pc, "needs one index per result lane");
        const std::vector<Cell>& s = value(u.src[0]);
        std::vector<Cell>& out = value(pc);
        for (std::size_t k = 0; k < w; ++k) {
          if (idx[k] < 0 || std::size_t(idx[k]) >= n) fail_at(pc, "lane index out of range");
          for (std::size_t l = 0; l < lanes_; ++l) out[l * w + k] = s[l * n + std::size_t(idx[k])];
        }
        return pc;
      }
      case Ops::CAST:
      case Ops::BITCAST: {
        const UOp& s = *u.src.at(0);
        if (s.dtype.count != u.dtype.count) fail_at(pc, "changes the vector width");
        try {
          (u.op == Ops::CAST ? cpu::eval_cast : cpu::eval_bitcast)(
              s.dtype, u.dtype, value(u.src[0]).data(), value(pc).data(), value(pc).size());
        } catch (const Error& e) {
          fail_at(pc, e.what());
        }
        return pc;
      }
      default:
        if (!is_alu(u.op)) fail_at(pc, "is not part of the linear program form");
        alu(pc);
        return pc;
    }
  }

  void alu(std::size_t pc) {
    const UOp& u = *ops_[pc];
    std::vector<const Cell*> srcs;
    for (const UOpPtr& s : u.src) {
      if (s->dtype.count != u.dtype.count) fail_at(pc, "operands differ in vector width");
      srcs.push_back(value(s).data());
    }
    const DType operand = u.op == Ops::WHERE ? u.src.at(1)->dtype : u.src.at(0)->dtype;
    try {
      cpu::eval_alu(u.op, operand, srcs, value(pc).data(), value(pc).size());
    } catch (const Error& e) {
      fail_at(pc, e.what());
    }
  }

  // Where a LOAD or STORE goes: its INDEX's buffer, per-lane index, and valid mask (or none).
  struct Access {
    const UOp* buffer;
    const std::vector<Cell>* index;
    const std::vector<Cell>* valid = nullptr;
    DType element;
  };

  Access access(std::size_t pc, const UOpPtr& index, DType value_dtype) {
    if (index->op != Ops::INDEX || index->src.size() < 2)
      fail_at(pc, "needs an INDEX as its address");
    Access a{index->src[0].get(), &value(index->src[1]), nullptr, index->src[0]->dtype.base()};
    if (index->src.size() > 2) a.valid = &value(index->src[2]);
    if (a.buffer->op != Ops::DEFINE_GLOBAL && a.buffer->op != Ops::DEFINE_LOCAL)
      fail_at(pc, "INDEX of something that is not a buffer");
    if (a.element.scalar != value_dtype.scalar)
      fail_at(pc,
              fmt::format("{} access to a {} buffer", value_dtype.name(), a.buffer->dtype.name()));
    return a;
  }

  // The element position of lane l's access, checked against the buffer; nullptr-free bounds.
  std::byte* global_at(std::size_t pc, const Access& a, int64_t i, int width, const char* what) {
    const int64_t slot = a.buffer->arg_as<int64_t>();
    const HostBuffer& b = buffers_[std::size_t(slot)];
    const int64_t size = a.element.scalar_size(), count = int64_t(b.size()) / size;
    if (i < 0 || i + width > count)
      fail_at(pc,
              fmt::format("{} at index {} of buffer {} (data{}) is out of bounds [0, {})", what,
                          width > 1 ? fmt::format("{}..{}", i, i + width - 1) : std::to_string(i),
                          slot, slot, count));
    return b.data() + i * size;
  }

  Local& local_at(std::size_t pc, const Access& a, int64_t i, int width, const char* what) {
    Local& l = locals_.at(a.buffer);
    if (i < 0 || i + width > int64_t(l.cells.size()))
      fail_at(pc, fmt::format("{} at index {} of local {} is out of bounds [0, {})", what, i,
                              a.buffer->arg_as<std::vector<int64_t>>()[0], l.cells.size()));
    return l;
  }

  void load(std::size_t pc) {
    const UOp& u = *ops_[pc];
    const Access a = access(pc, u.src.at(0), u.dtype);
    // LOAD(INDEX, [alt], [BARRIER]): a load of local memory lists the BARRIER it waits for last.
    const bool has_alt = u.src.size() > 1 && u.src[1]->op != Ops::BARRIER;
    if (a.valid && !has_alt) fail_at(pc, "a masked LOAD needs an alt value");
    const std::vector<Cell>* alt = has_alt ? &value(u.src[1]) : nullptr;
    std::vector<Cell>& out = value(pc);
    const int w = u.dtype.count;
    for (std::size_t l = 0; l < lanes_; ++l) {
      if (!active_[l]) continue;
      Cell* dst = &out[l * std::size_t(w)];
      if (a.valid && !cpu::from_cell<bool>((*a.valid)[l])) {
        std::copy_n(&(*alt)[l * std::size_t(w)], w, dst);
        continue;
      }
      const int64_t i = cpu::from_cell<int32_t>((*a.index)[l]);
      if (a.buffer->op == Ops::DEFINE_GLOBAL) {
        const std::byte* at = global_at(pc, a, i, w, "load");
        for (int k = 0; k < w; ++k)
          dst[k] = cpu::read_element(a.element, at + k * a.element.scalar_size());
      } else {
        Local& m = local_at(pc, a, i, w, "load");
        for (int k = 0; k < w; ++k) {
          const int writer = m.writer[std::size_t(i + k)];
          if (writer >= 0 && writer != int(l))
            fail_at(pc,
                    fmt::format(
                        "lane {} reads local element {} that lane {} wrote with no BARRIER between",
                        l, i + k, writer));
          dst[k] = m.cells[std::size_t(i + k)];
        }
      }
    }
  }

  void store(std::size_t pc) {
    const UOp& u = *ops_[pc];
    if (u.src.size() != 2) fail_at(pc, "STORE needs (INDEX, value)");
    const DType vd = u.src[1]->dtype;
    const Access a = access(pc, u.src[0], vd);
    const std::vector<Cell>& v = value(u.src[1]);
    const int w = vd.count;
    // A scatter's store combines (codegen/program.hpp); lanes run in order, so the CPU device
    // combines the values of one element in the order of their invocations.
    std::optional<ScatterCombine> combined;
    if (const auto* c = std::get_if<int64_t>(&u.arg);
        c && ScatterCombine(*c) != ScatterCombine::Assign) {
      if (a.buffer->op != Ops::DEFINE_GLOBAL) fail_at(pc, "a combining STORE to local memory");
      combined = ScatterCombine(*c);
    }
    for (std::size_t l = 0; l < lanes_; ++l) {
      if (!active_[l] || (a.valid && !cpu::from_cell<bool>((*a.valid)[l]))) continue;
      const Cell* src = &v[l * std::size_t(w)];
      const int64_t i = cpu::from_cell<int32_t>((*a.index)[l]);
      if (a.buffer->op == Ops::DEFINE_GLOBAL) {
        std::byte* at = global_at(pc, a, i, w, "store");
        for (int k = 0; k < w; ++k) {
          std::byte* e = at + k * a.element.scalar_size();
          try {
            cpu::write_element(
                a.element,
                combined ? combine(*combined, vd.base(), cpu::read_element(a.element, e), src[k])
                         : src[k],
                e);
          } catch (const Error& err) {
            fail_at(pc, err.what());
          }
        }
      } else {
        Local& m = local_at(pc, a, i, w, "store");
        for (int k = 0; k < w; ++k) {
          m.cells[std::size_t(i + k)] = src[k];
          m.writer[std::size_t(i + k)] = int(l);
        }
      }
    }
  }

  const Program& p_;
  std::span<const HostBuffer> buffers_;
  std::size_t lanes_ = 1;
  std::vector<const UOp*> ops_;
  std::unordered_map<const UOp*, int> pos_;
  std::vector<int> storage_;                  // value slot of each op (ASSIGN shares its acc's)
  std::vector<std::vector<Cell>> values_;     // per slot: lanes x vector width
  std::vector<int> match_;                    // RANGE <-> ENDRANGE, IF <-> ENDIF
  std::vector<std::vector<int>> acc_resets_;  // at a RANGE: the accumulators it initializes
  std::vector<std::pair<int, SpecialName>> specials_;
  std::unordered_map<const UOp*, Local> locals_;
  std::vector<uint8_t> active_, base_active_;
  std::vector<std::vector<uint8_t>> mask_stack_;
  std::vector<int64_t> loop_end_;
};

}  // namespace

void run_program(const Program& program, std::span<const HostBuffer> buffers,
                 std::span<const int64_t> var_values) {
  Interpreter(program, buffers, var_values).run();
}

}  // namespace vkg
