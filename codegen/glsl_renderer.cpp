#include <vkgrad/codegen/glsl_renderer.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <unordered_map>
#include <vector>

#include <vkgrad/codegen/glsl_declarations.hpp>
#include <vkgrad/codegen/glsl_syntax.hpp>
#include <vkgrad/core/error.hpp>
#include <vkgrad/core/scatter_combine.hpp>
#include <vkgrad/core/symbolic.hpp>

namespace vkg {

namespace {

bool is_pure(Ops op) {
  return is_alu(op) || op == Ops::CAST || op == Ops::BITCAST || op == Ops::GEP ||
         op == Ops::VECTORIZE || op == Ops::SHUFFLE;
}

bool is_acc(const UOp& u) { return u.op == Ops::DEFINE_ACC || u.op == Ops::ASSIGN; }
const UOp* acc_of(const UOp& u) { return u.op == Ops::ASSIGN ? u.src[0].get() : &u; }

std::string identifier(const std::string& name, std::size_t index) {
  bool ok = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0])) &&
            name.rfind("gl_", 0) != 0;
  for (const char c : name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
  return ok ? name : fmt::format("var{}", index);
}

class Renderer {
 public:
  Renderer(const Program& p, const GlslTarget& t) : p_(p), t_(t), layout_(arg_layout(p, t)) {}

  std::string render() {
    analyze();
    std::string body = prologue();
    for (std::size_t i = 0; i < ops_.size(); ++i) statement(i);
    body += body_;
    return header() + "void main() {  // " + p_.name + "\n" + body + "}\n";
  }

 private:
  [[noreturn]] void fail(std::size_t i, const std::string& what) const {
    throw Error(
        fmt::format("kernel '{}': uop {} ({}): {}", p_.name, i, op_name(ops_[i]->op), what));
  }

  std::size_t pos(const UOp* u) const { return pos_.at(u); }

  // ---- analysis: positions, uses, names, what to inline, what the device must do ----

  void analyze() {
    const std::size_t n = p_.uops.size();
    ops_.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      ops_[i] = p_.uops[i].get();
      if (!pos_.emplace(ops_[i], i).second) fail(i, "the node appears twice");
    }
    loop_of_.assign(n, -1);
    std::vector<int> loops;
    users_.assign(n, {});
    for (std::size_t i = 0; i < n; ++i) {
      const UOp& u = *ops_[i];
      for (const UOpPtr& s : u.src) {
        auto it = pos_.find(s.get());
        const bool later_range = u.op == Ops::DEFINE_ACC && s->op == Ops::RANGE;
        if (it == pos_.end() || (it->second > i && !later_range))
          fail(i, "a source is not defined before its use");
        if (!later_range) users_[it->second].push_back(i);
      }
      if (u.op == Ops::ENDRANGE) {
        if (loops.empty() || ops_[std::size_t(loops.back())] != u.src.at(0).get())
          fail(i, "closes no open RANGE");
        loops.pop_back();
      }
      loop_of_[i] = loops.empty() ? -1 : loops.back();
      if (u.op == Ops::RANGE) loops.push_back(int(i));
      if (u.op == Ops::ASSIGN) assigns_[acc_of(u)].push_back(i);
      if (u.op == Ops::STORE && !u.src.empty() && !u.src[0]->src.empty())
        stored_.insert(u.src[0]->src[0].get());
      try {
        collect_needs(i);
      } catch (const Error& e) {
        if (std::string(e.what()).rfind("kernel '", 0) == 0) throw;
        fail(i, e.what());
      }
    }
    if (!loops.empty()) fail(std::size_t(loops.back()), "is never closed");
    // Every buffer is declared, also one no uop reads any more (its loads folded away, as x < x
    // is): its element type needs its storage extension all the same.
    for (const auto& b : p_.buffers) {
      if (emulated(b.dtype))
        needs_.storage_16bit = needs_.storage_16bit || !glsl::packed16(b.dtype, t_);
      else
        needs_.buffer(b.dtype.base());
    }
    glsl::check_target(needs_, t_, p_.name);
    // A DEFINE_ACC is declared (and set to its init) just before its outermost RANGE opens.
    for (std::size_t i = 0; i < n; ++i) {
      if (ops_[i]->op != Ops::DEFINE_ACC || ops_[i]->src.size() < 2) continue;
      std::size_t outer = n;
      for (std::size_t k = 1; k < ops_[i]->src.size(); ++k)
        outer = std::min(outer, pos(ops_[i]->src[k].get()));
      acc_at_range_[outer].push_back(i);
    }
    force_names();
    landing_.assign(n, 0);
    inline_.assign(n, false);
    for (std::size_t i = n; i-- > 0;) decide_inline(i);
  }

  void collect_needs(std::size_t i) {
    const UOp& u = *ops_[i];
    if (u.op == Ops::DEFINE_GLOBAL) {
      const int64_t slot = u.arg_as<int64_t>();
      if (slot < 0 || std::size_t(slot) >= p_.buffers.size() ||
          p_.buffers[std::size_t(slot)].slot != slot ||
          p_.buffers[std::size_t(slot)].dtype.scalar != u.dtype.scalar)
        fail(i, fmt::format("slot {} does not match Program::buffers", slot));
      if (emulated(u.dtype))  // uint16_t elements (or uint words), converted by integer arithmetic
        needs_.storage_16bit = needs_.storage_16bit || !glsl::packed16(u.dtype, t_);
      else
        needs_.buffer(u.dtype.base());
      return;
    }
    if (u.op == Ops::DEFINE_LOCAL) {
      needs_.value(reg(u.dtype.base()));
      return;
    }
    if (u.dtype.scalar != Scalar::Void && !u.dtype.is_ptr()) needs_.value(reg(u.dtype));
    // A native float16's bits pass through uint16_t on their way to or from an emulated type.
    if (u.op == Ops::BITCAST && (emulated(u.dtype) || emulated(u.src.at(0)->dtype)) &&
        (u.dtype.scalar == Scalar::Float16 || u.src[0]->dtype.scalar == Scalar::Float16))
      needs_.int16 = needs_.int16 || !emulated(u.dtype) || !emulated(u.src[0]->dtype);
    // The float64 fmod helper divides 53-bit significands in uint64_t (glsl_helpers_arithmetic.cpp).
    if ((u.op == Ops::FMOD || u.op == Ops::REMAINDER) && u.dtype.scalar == Scalar::Float64)
      needs_.int64 = true;
    if (u.op == Ops::SHUFFLE) check_shuffle(i);
    if ((u.op == Ops::LOAD || u.op == Ops::STORE) && u.src.at(0)->op == Ops::INDEX) {
      const UOp& buffer = *u.src[0]->src.at(0);
      const DType value = u.op == Ops::LOAD ? u.dtype : u.src.at(1)->dtype;
      if (value.scalar != buffer.dtype.scalar)
        fail(i, fmt::format("{} access to a {} buffer", value.name(), buffer.dtype.name()));
      // Emulated 16-bit floats are read and written lane by lane (load_expr, store).
      const int width = emulated(value) ? 1 : value.count;
      if (buffer.op == Ops::DEFINE_GLOBAL) pointer_types_.insert({value.scalar, width});
      if (buffer.op == Ops::DEFINE_GLOBAL && width > 1)
        bound_vectors_.insert({buffer.arg_as<int64_t>(), value.count});
      if (u.op == Ops::STORE && combine_of(u) != ScatterCombine::Assign) need_combine(i, value);
    }
  }

  // A combining STORE's arg (codegen/program.hpp); Assign for a plain one.
  static ScatterCombine combine_of(const UOp& store) {
    const auto* c = std::get_if<int64_t>(&store.arg);
    return c ? ScatterCombine(*c) : ScatterCombine::Assign;
  }

  // What a combining store needs: 32- or 64-bit scalars in a global buffer; a float one works on
  // the element's bits, through an alias of the buffer as uint (or uint64_t).
  void need_combine(std::size_t i, DType d) {
    const UOp& buffer = *ops_[i]->src[0]->src[0];
    if (buffer.op != Ops::DEFINE_GLOBAL || d.count != 1 || d.is_bool() ||
        (d.scalar_size() != 4 && d.scalar_size() != 8))
      fail(i, fmt::format("a combining store of {} (32- and 64-bit scalars to a global buffer "
                          "only)",
                          d.name()));
    if (d.scalar_size() == 8) {
      needs_.int64_atomics = true;
      needs_.value(dtypes::uint64);
    }
    if (!d.is_float()) return;
    const DType bits = d.scalar_size() == 8 ? dtypes::uint64 : dtypes::uint32;
    if (layout_.bound)
      bound_bits_.insert(buffer.arg_as<int64_t>());
    else
      pointer_types_.insert({bits.scalar, 1});
  }

  // SHUFFLE(x, k) reads lane k of the subgroup; the lowerer numbers lanes by the local id, which
  // is the subgroup lane when the workgroup is one full subgroup (1-D, subgroup_size wide).
  void check_shuffle(std::size_t i) {
    const UOp& u = *ops_[i];
    const int64_t lanes = p_.local_size[0] * p_.local_size[1] * p_.local_size[2];
    if (!t_.subgroup_shuffle)
      fail(i, "the device has no subgroupShuffle (VK_SUBGROUP_FEATURE_SHUFFLE_BIT)");
    if (p_.local_size[1] != 1 || p_.local_size[2] != 1 || lanes != int64_t(t_.subgroup_size))
      fail(i, fmt::format("SHUFFLE needs a workgroup of one {}-wide subgroup, not {} x {} x {}",
                          t_.subgroup_size, p_.local_size[0], p_.local_size[1], p_.local_size[2]));
    const int64_t k = u.arg_as<int64_t>();
    if (k < 0 || k >= lanes) fail(i, fmt::format("lane {} is outside the subgroup", k));
    if (u.dtype.is_bool() || u.dtype.scalar_size() != 4)
      fail(i, fmt::format("SHUFFLE of {} (32-bit types only)", u.dtype.name()));
    shuffles_ = true;
  }

  // Operands that appear more than once in the text of their user get a name of their own.
  void force_names() {
    for (std::size_t i = 0; i < ops_.size(); ++i) {
      const UOp& u = *ops_[i];
      // The other operand of a product or sum with a zero-masked load is written twice.
      if (const UOp* m = zero_masked_operand(u))
        for (const UOpPtr& s : u.src)
          if (s.get() != m && s->op != Ops::CONST) forced_.insert(s.get());
      if (u.op != Ops::LOAD && u.op != Ops::STORE) continue;
      const UOp& index = *u.src.at(0);
      if (index.op != Ops::INDEX || index.src.size() < 2) fail(i, "needs an INDEX as its address");
      const bool vector = (u.op == Ops::LOAD ? u.dtype : u.src.at(1)->dtype).count > 1;
      if (index.src.size() > 2) forced_.insert(index.src[2].get());  // valid: masks and clamps
      if (users_[pos(&index)].size() > 1) forced_.insert(index.src[1].get());
      if (vector && index.src[0]->op == Ops::DEFINE_LOCAL) {
        forced_.insert(index.src[1].get());
        if (u.op == Ops::STORE) forced_.insert(u.src[1].get());
      }
    }
  }

  // Walked from the end, so a node's users are decided before it is.
  void decide_inline(std::size_t i) {
    const UOp& u = *ops_[i];
    landing_[i] = i;
    if (u.op == Ops::CONST || u.op == Ops::INDEX) {
      inline_[i] = true;
      if (!users_[i].empty()) landing_[i] = landing_[users_[i].front()];
      return;
    }
    if (!is_pure(u.op) || users_[i].size() != 1 || forced_.count(&u)) return;
    const std::size_t land = landing_[users_[i].front()];
    // Moving a computation into a loop would repeat it on every iteration.
    if (loop_of_[land] != loop_of_[i]) return;
    // An accumulator read must not move past an ASSIGN to it.
    for (const UOpPtr& s : u.src) {
      if (!is_acc(*s)) continue;
      for (const std::size_t a : assigns_[acc_of(*s)])
        if (a > i && a < land) return;
    }
    inline_[i] = true;
    landing_[i] = land;
  }

  // ---- names and expressions ----

  std::string fresh(const std::string& stem) {
    return fmt::format("{}{}", stem, counters_[stem]++);
  }

  std::string unique(std::string name) {
    std::string candidate = name;
    for (int k = 1; !taken_.insert(candidate).second; ++k)
      candidate = fmt::format("{}_{}", name, k);
    return candidate;
  }

  const std::string& name_of(const UOp* u) {
    auto it = names_.find(u);
    if (it != names_.end()) return it->second;
    std::string n;
    switch (u->op) {
      case Ops::DEFINE_GLOBAL:
        n = fmt::format("data{}", u->arg_as<int64_t>());
        break;
      case Ops::DEFINE_VAR:
        n = var_name(*u);
        break;
      case Ops::DEFINE_LOCAL:
        n = fmt::format("temp{}", u->arg_as<std::vector<int64_t>>().at(0));
        break;
      case Ops::SPECIAL:
        n = u->arg_as<std::string>();
        break;
      case Ops::RANGE:
        n = fmt::format("ridx{}", u->arg_as<int64_t>());
        break;
      case Ops::DEFINE_ACC:
        n = fmt::format("acc{}", u->arg_as<int64_t>());
        break;
      case Ops::ASSIGN:
        return name_of(u->src[0].get());
      case Ops::LOAD:
        n = fresh("val");
        break;
      case Ops::CAST:
      case Ops::BITCAST:
        n = fresh("cast");
        break;
      case Ops::GEP:
        n = fresh("gep");
        break;
      case Ops::VECTORIZE:
        n = fresh("vecz");
        break;
      default:
        n = fresh("alu");
        break;
    }
    return names_[u] = unique(n);
  }

  std::string var_name(const UOp& u) {
    const VarArg& v = u.arg_as<VarArg>();
    auto it = std::find(p_.vars.begin(), p_.vars.end(), v);
    if (it == p_.vars.end())
      throw Error(
          fmt::format("kernel '{}': variable '{}' is not in Program::vars", p_.name, v.name));
    return identifier(v.name, std::size_t(it - p_.vars.begin()));
  }

  // The push-constant member of Program::vars[k]: its DEFINE_VAR's name, if the kernel has one.
  std::string var_member(std::size_t k) {
    for (const UOp* u : ops_)
      if (u->op == Ops::DEFINE_VAR && u->arg_as<VarArg>() == p_.vars[k]) return name_of(u);
    return unique(identifier(p_.vars[k].name, k));
  }

  std::string expr(const UOpPtr& s) {
    const UOp* u = s.get();
    const std::size_t i = pos(u);
    if (!inline_[i]) return name_of(u);
    if (u->op == Ops::CONST) {
      if (!emulated(u->dtype)) return glsl::literal(*u);
      // The value is one of the 16-bit type's, so the float literal is exact (and a +0 as opaque
      // as literal() makes it: a padded bfloat16 row's +0 * inf gave 0, fuzzer seed 970233).
      const std::string f = glsl::literal(*UOp::const_(dtypes::float32, u->const_value()));
      return u->dtype.count == 1 ? f : fmt::format("{}({})", glsl::type_name(reg(u->dtype)), f);
    }
    return value_expr(i);
  }

  bool emulated(DType d) const { return glsl::emulated(d, t_); }
  DType reg(DType d) const { return glsl::register_dtype(d, t_); }

  // Lane k of a vector expression (the expression itself for a scalar).
  static std::string lane(DType d, const std::string& x, int k) {
    return d.count == 1 ? x : fmt::format("{}.{}", x, "xyzw"[k]);
  }

  // A CAST with an emulated 16-bit float on either side: through float32, rounded into the
  // 16-bit type, as the CPU device converts (integers and float64 reach bfloat16 via float).
  std::string cast_emulated(DType from, DType to, const std::string& x) {
    const DType f32{Scalar::Float32, to.count};
    if (!emulated(to)) return glsl::cast_expr(reg(from), to, x, helpers_);
    const std::string wide = reg(from) == f32 ? x : glsl::cast_expr(reg(from), f32, x, helpers_);
    return glsl::half_round(to, wide, helpers_);
  }

  // A BITCAST to or from an emulated 16-bit float: its bits, as a uint, lane by lane.
  std::string bitcast_emulated(DType from, DType to, const std::string& x) {
    std::string lanes;
    for (int k = 0; k < to.count; ++k) {
      const std::string in = lane(from, x, k);
      const std::string bits =
          emulated(from) ? glsl::half_bits(from.base(), in, helpers_)
                         : fmt::format("(uint({}) & 0xffffu)",
                                       glsl::bitcast_expr(from.base(), dtypes::uint16, in));
      const std::string v = emulated(to) ? glsl::half_value(to.base(), bits, helpers_)
                                         : glsl::bitcast_expr(dtypes::uint16, to.base(),
                                                              fmt::format("uint16_t({})", bits));
      lanes += (k ? ", " : "") + v;
    }
    return to.count == 1 ? lanes : fmt::format("{}({})", glsl::type_name(reg(to)), lanes);
  }

  // The expression of a pure node in terms of its sources.
  std::string value_expr(std::size_t i) {
    const UOp& u = *ops_[i];
    std::vector<std::string> args;
    for (const UOpPtr& s : u.src) args.push_back(expr(s));
    try {
      switch (u.op) {
        case Ops::CAST:
          if (emulated(u.src.at(0)->dtype) || emulated(u.dtype))
            return cast_emulated(u.src[0]->dtype, u.dtype, args[0]);
          return glsl::cast_expr(u.src.at(0)->dtype, u.dtype, args[0], helpers_);
        case Ops::BITCAST:
          if (emulated(u.src.at(0)->dtype) || emulated(u.dtype))
            return bitcast_emulated(u.src[0]->dtype, u.dtype, args[0]);
          return glsl::bitcast_expr(u.src.at(0)->dtype, u.dtype, args[0]);
        case Ops::VECTORIZE: {
          if (args.size() != u.dtype.count) fail(i, "needs one source per lane");
          std::string list;
          for (const std::string& a : args) list += (list.empty() ? "" : ", ") + a;
          return fmt::format("{}({})", glsl::type_name(reg(u.dtype)), list);
        }
        case Ops::SHUFFLE:
          return fmt::format("subgroupShuffle({}, {}u)", args[0], u.arg_as<int64_t>());
        case Ops::GEP: {
          std::string lanes;
          for (const int64_t k : u.arg_as<std::vector<int64_t>>()) {
            if (k < 0 || k >= u.src.at(0)->dtype.count) fail(i, "lane index out of range");
            lanes += "xyzw"[k];
          }
          return fmt::format("{}.{}", args[0],
                             lanes);  // expressions come parenthesized or as calls
        }
        default: {
          if (std::string guarded = zero_guarded(u, args); !guarded.empty()) return guarded;
          const DType operand = u.src.at(u.op == Ops::WHERE ? 1 : 0)->dtype;
          if (!emulated(operand)) return glsl::alu_expr(u.op, u.dtype, u.src, args, helpers_);
          // In float32, then rounded to the 16-bit type where the op makes a new value (MAX,
          // WHERE and NEG pick or flip one; comparisons give bools).
          const std::string x =
              glsl::alu_expr(u.op, reg(u.dtype), u.src, args, helpers_, reg(operand));
          const bool exact = u.op == Ops::MAX || u.op == Ops::WHERE || u.op == Ops::NEG;
          return exact || !emulated(u.dtype) ? x : glsl::half_round(u.dtype, x, helpers_);
        }
      }
    } catch (const Error& e) {
      if (std::string(e.what()).rfind("kernel '", 0) == 0) throw;
      fail(i, e.what());
    }
  }

  // ---- memory ----

  // Whether a vector of d at `index` of a bound buffer can be read as one element of an aliased
  // vector array: std430 arrays of 2- and 4-wide vectors have no padding, and the index must be
  // a multiple of the width (3-wide vectors are 16 bytes apart in std430: never).
  static bool aligned_vector(const UOp* index, DType d) { return aligned_vector_index(index, d); }

  // A load of a buffer read through texel views (ArgLayout::texel): its 32-bit words as uint,
  // cast back bit for bit. A vector at an aligned index is one texel of the view of its width.
  std::string texel_element(const UOp& buffer, const std::string& index, DType d,
                            const UOp* index_node) {
    const std::string& b = name_of(&buffer);
    const auto slot = size_t(buffer.arg_as<int64_t>());
    const uint8_t views = layout_.texel[slot];
    // A buffer the kernel also writes names its views dataNt, dataNtx4 (dataN, dataNx4 are its
    // storage buffer).
    const std::string b1 = layout_.texel_written(slot) ? b + "t" : b;
    const std::string cast = d.is_float()      ? "uintBitsToFloat"
                             : d.is_unsigned() ? ""
                                               : glsl::type_name(d);
    if (d.count == 1) return fmt::format("{}(texelFetch({}, {}).x)", cast, b1, index);
    if ((views & d.count) && aligned_vector(index_node, d))
      return fmt::format("{}(texelFetch({}x{}, ({})>>{}).{})", cast, b1, d.count, index,
                         d.count == 4 ? 2 : 1, d.count == 4 ? "xyzw" : "xy");
    std::string lanes;
    for (int k = 0; k < d.count; ++k)
      lanes += fmt::format("{}texelFetch({}, {}+{}).x", k ? ", " : "", b1, index, k);
    return fmt::format("{}(uvec{}({}))", cast, d.count, lanes);
  }

  // The element(s) at `index` of `buffer`, as an lvalue-ish expression of dtype d. `index_node`
  // is the index's UOp where the text is that index (bound buffers read vectors by it).
  // `load`: for reading (a texel view where the layout has one), else for storing.
  std::string element(const UOp& buffer, const std::string& index, DType d,
                      const UOp* index_node = nullptr, bool load = false) {
    const std::string& b = name_of(&buffer);
    if (load && buffer.op == Ops::DEFINE_GLOBAL &&
        layout_.texel_read(size_t(buffer.arg_as<int64_t>())))
      return texel_element(buffer, index, d, index_node);
    if (layout_.bound && buffer.op == Ops::DEFINE_GLOBAL && d.count > 1) {
      // The index is a multiple of the width, so a shift divides exactly (negative too) and costs
      // less than a signed division, which rounds toward zero.
      if (aligned_vector(index_node, d))
        return fmt::format("{}x{}.v[({})>>{}]", b, d.count, index, d.count == 4 ? 2 : 1);
      std::string lanes;
      for (int k = 0; k < d.count; ++k)
        lanes += fmt::format("{}{}.v[{}+{}]", k ? ", " : "", b, index, k);
      // An 8- or 16-bit vector is built from a 32-bit one: with only the storage extensions its
      // constructor takes vectors, not scalars (a bool max pool's windows failed to compile).
      const DType s = d.is_bool() ? DType{Scalar::UInt8, d.count} : d;
      if (s.scalar_size() < 4) {
        const Scalar wide = s.is_float()      ? Scalar::Float32
                            : s.is_unsigned() ? Scalar::UInt32
                                              : Scalar::Int32;
        return fmt::format("{}({}({}))", glsl::storage_type_name(d),
                           glsl::type_name(DType{wide, d.count}), lanes);
      }
      return fmt::format("{}({})", glsl::storage_type_name(d), lanes);
    }
    if (buffer.op == Ops::DEFINE_LOCAL) {
      if (d.count == 1) return fmt::format("{}[{}]", b, index);
      std::string lanes;
      for (int k = 0; k < d.count; ++k)
        lanes += fmt::format("{}{}[{}+{}]", k ? ", " : "", b, index, k);
      return fmt::format("{}({})", glsl::type_name(d), lanes);
    }
    if (d.count == 1) return fmt::format("{}.v[{}]", b, index);
    vector_access_ = true;
    return fmt::format("{}(element_address(uvec2({}), {}, {}u)).v", glsl::pointer_type_name(d), b,
                       index, d.base().scalar_size());
  }

  // x * m or x + m where m is a masked load whose alt is +0: (valid ? x op m : x op +0), the
  // second through the bit helpers of a +0 operand (glsl_alu.cpp). Lavapipe unrolls short loops,
  // where a mask becomes a constant, and then folds x * 0.0 to 0 and x + 0.0 to x whatever the
  // shader asks: a padded row times a column holding inf lost its nan, and a sum of such
  // products its sign of zero. x is given a name (force_names), so it is not written twice.
  // Also a sum of two loads under one mask (a fused padded value, a partial sum plus a bias: fuzzer
  // seed 20565, a conv3d of a padded conv3d): +0 + +0 where the mask is false, folded the same.
  // Also a vector product or sum (the LaneVectorizer's) and an operand that reads the load
  // through GEPs of its lanes and a VECTORIZE of them (the lowerer's unrolled_vector): a vector
  // load has one mask for all its lanes, and Lavapipe folds a lane of a constant vector as well.
  static const UOp* zero_masked_operand(const UOp& u) {
    if ((u.op != Ops::MUL && u.op != Ops::ADD) || !u.dtype.is_float()) return nullptr;
    for (const UOpPtr& m : u.src)
      if (zero_mask(m.get())) return m.get();
    return nullptr;
  }

  // The mask under which operand `m` is +0 when it is false: that of a masked load whose alt is
  // +0 that m reads (the load itself, a GEP of it, or a VECTORIZE of such lanes under one mask),
  // or one both operands of a float sum share; nullptr for none.
  static const UOp* zero_mask(const UOp* m) {
    if (m->op == Ops::VECTORIZE) {
      const UOp* mask = m->src.empty() ? nullptr : zero_mask(m->src[0].get());
      for (const UOpPtr& s : m->src)
        if (!mask || s->op == Ops::VECTORIZE || zero_mask(s.get()) != mask) return nullptr;
      return mask;
    }
    if (m->op == Ops::GEP && m->src.size() == 1) m = m->src[0].get();
    if (m->op == Ops::LOAD && m->src.size() >= 2 && m->src[0]->src.size() > 2 &&
        m->src[0]->src[2]->op != Ops::CONST && m->src[1]->op == Ops::CONST &&
        m->src[1]->const_value() == 0 && !std::signbit(m->src[1]->const_value()))
      return m->src[0]->src[2].get();
    if (m->op == Ops::ADD && m->dtype.is_float() && m->dtype.count == 1) {
      const UOp* a = zero_mask(m->src[0].get());
      return a && a == zero_mask(m->src[1].get()) ? a : nullptr;
    }
    return nullptr;
  }

  std::string zero_guarded(const UOp& u, const std::vector<std::string>& args) {
    const UOp* m = zero_masked_operand(u);
    if (!m) return "";
    const int k = u.src[0].get() == m ? 0 : 1;
    std::vector<UOpPtr> src = u.src;
    std::vector<std::string> x = args;
    src[k] = UOp::const_(u.dtype, 0.0);
    x[k] = "0.0";
    return fmt::format("(({})?{}:{})", name_of(zero_mask(m)), render_alu(u, u.src, args),
                       render_alu(u, src, x));
  }

  std::string render_alu(const UOp& u, const std::vector<UOpPtr>& src,
                         const std::vector<std::string>& args) {
    const DType operand = src.at(0)->dtype;
    if (!emulated(operand)) return glsl::alu_expr(u.op, u.dtype, src, args, helpers_);
    return glsl::half_round(
        u.dtype, glsl::alu_expr(u.op, reg(u.dtype), src, args, helpers_, reg(operand)), helpers_);
  }

  std::string load_expr(std::size_t i) {
    const UOp& u = *ops_[i];
    const UOp& index = *u.src[0];
    const UOp& buffer = *index.src[0];
    std::string idx = expr(index.src[1]);
    const UOp* valid = index.src.size() > 2 ? index.src[2].get() : nullptr;
    if (valid && valid->op == Ops::CONST) {
      if (!valid->const_int()) return expr(u.src.at(1));
      valid = nullptr;
    }
    // LOAD(INDEX, [alt], [BARRIER]): a load of local memory lists the BARRIER it waits for.
    if (valid && (u.src.size() < 2 || u.src[1]->op == Ops::BARRIER))
      fail(i, "a masked LOAD needs an alt value");
    // Clamped, because a compiler may turn the select below into a load on every lane.
    const std::string at = valid ? fmt::format("({}?{}:0)", name_of(valid), idx) : idx;
    std::string v;
    if (emulated(u.dtype) && buffer.op == Ops::DEFINE_GLOBAL) {
      // 16 bits per element, to float32 lane by lane (never the vector element: its pointer type
      // and element_address would be declared for nothing).
      for (int k = 0; k < u.dtype.count; ++k) {
        const std::string at_k = k ? fmt::format("{}+{}", at, k) : at;
        std::string bits;
        if (glsl::packed16(u.dtype, t_)) {
          // A neighbour may atomically store the other half of this word while we read it (an
          // in-place update): a plain read of it would be a data race under the Vulkan memory
          // model, so a kernel that also stores into the buffer reads the word atomically.
          std::string word =
              element(buffer, fmt::format("({})>>1", at_k), u.dtype.base(), nullptr, true);
          if (stored_.count(&buffer)) word = fmt::format("atomicOr({}, 0u)", word);
          bits = fmt::format("(({} >> (uint(({})&1)<<4)) & 0xffffu)", word, at_k);
        } else {
          bits = "uint(" + element(buffer, at_k, u.dtype.base(), nullptr, true) + ")";
        }
        v += (k ? ", " : "") + glsl::half_value(u.dtype.base(), bits, helpers_);
      }
      if (u.dtype.count > 1) v = fmt::format("{}({})", glsl::type_name(reg(u.dtype)), v);
    } else {
      v = element(buffer, at, u.dtype, index.src[1].get(), true);
      if (u.dtype.is_bool() && buffer.op == Ops::DEFINE_GLOBAL)
        v = glsl::bool_from_storage(u.dtype, v);
    }
    if (valid) v = fmt::format("({}?{}:{})", name_of(valid), v, expr(u.src[1]));
    return v;
  }

  void store(std::size_t i) {
    const UOp& u = *ops_[i];
    const UOp& index = *u.src[0];
    const UOp& buffer = *index.src[0];
    const DType d = u.src.at(1)->dtype;
    const std::string idx = expr(index.src[1]);
    std::string value = expr(u.src[1]);
    std::string guard;
    if (index.src.size() > 2) {
      const UOp& valid = *index.src[2];
      if (valid.op == Ops::CONST && !valid.const_int()) return;
      if (valid.op != Ops::CONST) guard = fmt::format("if ({}) ", name_of(&valid));
    }
    if (combine_of(u) != ScatterCombine::Assign) {
      combining_store(combine_of(u), buffer, idx, d, value, guard);
      return;
    }
    if (emulated(d) && buffer.op == Ops::DEFINE_GLOBAL) {
      for (int k = 0; k < d.count; ++k) {
        const std::string at = k ? fmt::format("{}+{}", idx, k) : idx;
        const std::string bits = glsl::half_bits(d.base(), lane(d, value, k), helpers_);
        if (!glsl::packed16(d, t_)) {
          line(fmt::format("{}{} = uint16_t({});", guard, element(buffer, at, d.base()), bits));
          continue;
        }
        const std::string word = element(buffer, fmt::format("({})>>1", at), d.base());
        line(
            fmt::format("{}{{ uint half16 = uint(({})&1)<<4; atomicAnd({}, ~(0xffffu << half16)); "
                        "atomicOr({}, {} << half16); }}",
                        guard, at, word, word, bits));
      }
      return;
    }
    const bool lanes =
        buffer.op == Ops::DEFINE_LOCAL || (layout_.bound && !aligned_vector(index.src[1].get(), d));
    if (lanes && d.count > 1) {
      if (buffer.op == Ops::DEFINE_GLOBAL && d.is_bool()) value = glsl::bool_to_storage(d, value);
      const std::string array = name_of(&buffer) + (buffer.op == Ops::DEFINE_GLOBAL ? ".v" : "");
      for (int k = 0; k < d.count; ++k)
        line(fmt::format("{}{}[{}+{}] = {}.{};", guard, array, idx, k, value, "xyzw"[k]));
      return;
    }
    if (d.is_bool() && buffer.op == Ops::DEFINE_GLOBAL) value = glsl::bool_to_storage(d, value);
    line(fmt::format("{}{} = {};", guard, element(buffer, idx, d, index.src[1].get()), value));
  }

  // A scatter's store (core/scatter_combine.hpp): integer sums, maxima and minima by the atomic
  // of that name; products and every float combine by a compare-and-swap loop on the element
  // (a float's on its bits; max and min compare those bits as order-preserving integer keys, which
  // makes them IEEE's maximum and minimum exactly: nan wins, +0.0 is above -0.0).
  void combining_store(ScatterCombine c, const UOp& buffer, const std::string& idx, DType d,
                       const std::string& value, const std::string& guard) {
    const std::string& b = name_of(&buffer);
    const bool wide = d.scalar_size() == 8;
    if (!d.is_float() && c != ScatterCombine::Prod) {
      const char* fn = c == ScatterCombine::Sum   ? "atomicAdd"
                       : c == ScatterCombine::Max ? "atomicMax"
                                                  : "atomicMin";
      line(fmt::format("{}{}({}.v[{}], {});", guard, fn, b, idx, value));
      return;
    }
    const std::string bits = wide ? "uint64_t" : "uint";
    const std::string elem =
        !d.is_float() ? fmt::format("{}.v[{}]", b, idx)
        : layout_.bound
            ? fmt::format("{}b.v[{}]", b, idx)
            : fmt::format("{}({}).v[{}]",
                          glsl::pointer_type_name(wide ? dtypes::uint64 : dtypes::uint32), b, idx);
    const std::string word = d.is_float() ? bits : glsl::type_name(d);
    const std::string o = fresh("old"), n = fresh("next"), w = fresh("seen"), v = fresh("val");
    line(fmt::format("{}{{", guard));
    ++indent_;
    line(fmt::format("{} {} = {};", glsl::type_name(d), v, value));
    line(fmt::format("{} {} = {};", word, o, elem));
    line("while (true) {");
    ++indent_;
    if (!d.is_float()) {
      line(fmt::format("{} {} = {} * {};", word, n, o, v));
    } else {
      const std::string to_bits = wide ? "doubleBitsToUint64" : "floatBitsToUint";
      const std::string from_bits = wide ? "uint64BitsToDouble" : "uintBitsToFloat";
      const std::string vb = fmt::format("{}({})", to_bits, v),
                        a = fmt::format("{}({})", from_bits, o);
      if (c == ScatterCombine::Sum || c == ScatterCombine::Prod) {
        line(fmt::format("{} {} = {}({} {} {});", word, n, to_bits, a,
                         c == ScatterCombine::Sum ? '+' : '*', v));
      } else {
        // In integer space, not float compares: a driver may flush subnormals in a float compare
        // (nothing declares DenormPreserve), which would make 0x3 and 0x5 equal. nan first (it
        // wins), then an order-preserving unsigned key (negatives' bits flipped, positives' sign
        // bit set), which also puts +0.0 above -0.0.
        const std::string abs = wide ? "0x7fffffffffffffffUL" : "0x7fffffffu";
        const std::string inf = wide ? "0x7ff0000000000000UL" : "0x7f800000u";
        const std::string sign = wide ? "0x8000000000000000UL" : "0x80000000u";
        const std::string zero = wide ? "0UL" : "0u";
        auto key = [&](const std::string& x) {
          return fmt::format("(({0} & {1}) != {2} ? ~{0} : ({0} | {1}))", x, sign, zero);
        };
        const std::string kb = fresh("key");
        line(fmt::format("{} {} = {};", word, kb, key(vb)));
        line(fmt::format(
            "{0} {1} = ({2} & {3}) > {4} ? {2} : ({5} & {3}) > {4} ? {5} : "
            "{6} {7} {8} ? {5} : {2};",
            word, n, o, abs, inf, vb, kb, c == ScatterCombine::Max ? '>' : '<', key(o)));
        line(fmt::format("if ({} == {}) break;", n, o));  // max and min only grow one way
      }
    }
    line(fmt::format("{} {} = atomicCompSwap({}, {}, {});", word, w, elem, o, n));
    line(fmt::format("if ({} == {}) break;", w, o));
    line(fmt::format("{} = {};", o, w));
    --indent_;
    line("}");
    --indent_;
    line("}");
  }

  // ---- statements ----

  void line(const std::string& s) {
    body_ += std::string(2 * std::size_t(indent_), ' ') + s + "\n";
  }

  void declare(std::size_t i, const std::string& value) {
    line(fmt::format("{} {} = {};", glsl::type_name(reg(ops_[i]->dtype)), name_of(ops_[i]), value));
  }

  void statement(std::size_t i) {
    const UOp& u = *ops_[i];
    switch (u.op) {
      case Ops::CONST:
      case Ops::DEFINE_GLOBAL:
      case Ops::DEFINE_VAR:
      case Ops::DEFINE_LOCAL:
      case Ops::SPECIAL:
      case Ops::INDEX:
        return;
      case Ops::DEFINE_ACC:
        if (u.src.size() == 1) declare(i, expr(u.src[0]));
        return;
      case Ops::RANGE:
        for (const std::size_t a : acc_at_range_[i]) declare(a, expr(ops_[a]->src.at(0)));
        line(fmt::format("for (int {0} = 0; {0} < {1}; {0}++) {{", name_of(&u), expr(u.src.at(0))));
        ++indent_;
        return;
      case Ops::ENDRANGE:
      case Ops::ENDIF:
        --indent_;
        line("}");
        return;
      case Ops::IF:
        line(fmt::format("if ({}) {{", expr(u.src.at(0))));
        ++indent_;
        return;
      case Ops::BARRIER:
        // In a compute shader glslang gives barrier() workgroup-memory acquire/release semantics,
        // so shared stores before it are visible to loads after it.
        line("barrier();");
        return;
      case Ops::LOAD:
        declare(i, load_expr(i));
        return;
      case Ops::STORE:
        store(i);
        return;
      case Ops::ASSIGN:
        if (u.src.at(1).get() != u.src[0].get())
          line(fmt::format("{} = {};", name_of(&u), expr(u.src[1])));
        return;
      default:
        if (!is_pure(u.op)) fail(i, "is not part of the linear program form");
        if (!inline_[i]) declare(i, value_expr(i));
        return;
    }
  }

  // gidx/lidx/idx values (and their guards) come first: they depend on nothing else, and a
  // guard must return before anything is stored.
  std::string prologue() {
    std::string out;
    auto add = [&](const std::string& s) { out += "  " + s + "\n"; };
    if (layout_.spilled) {
      if (!layout_.bound)
        for (const BufferParam& b : p_.buffers)
          add(fmt::format("{0} data{1} = args.data{1};", glsl::pointer_type_name(b.dtype.base()),
                          b.slot));
      for (const UOp* u : ops_)
        if (u->op == Ops::DEFINE_VAR) add(fmt::format("int {0} = args.{0};", name_of(u)));
    }
    const bool folded = folds_grid(p_, t_);
    const auto& g = p_.global_size;
    const auto& l = p_.local_size;
    if (folded) {
      launch_dims(p_, t_);  // throws if even the folded grid does not fit
      add(fmt::format(
          "// {} x {} x {} workgroups exceed the device's grid: the dispatch is one folded line",
          g[0], g[1], g[2]));
      add("uint wg = gl_WorkGroupID.x + gl_NumWorkGroups.x * (gl_WorkGroupID.y + "
          "gl_NumWorkGroups.y * gl_WorkGroupID.z);");
      add(fmt::format("if (wg >= {}u) return;", g[0] * g[1] * g[2]));
    }
    auto group_id = [&](int d) -> std::string {
      if (!folded) return fmt::format("int(gl_WorkGroupID.{})", "xyz"[d]);
      const int64_t below = d == 0 ? 1 : d == 1 ? g[0] : g[0] * g[1];
      std::string x = below == 1 ? "wg" : fmt::format("(wg / {}u)", below);
      if (d < 2) x = fmt::format("({} % {}u)", x, g[d]);
      return fmt::format("int{}", x.front() == '(' ? x : "(" + x + ")");
    };
    for (std::size_t i = 0; i < ops_.size(); ++i) {
      const UOp& u = *ops_[i];
      if (u.op != Ops::SPECIAL) continue;
      const std::string& n = u.arg_as<std::string>();
      const int d = n.empty() ? -1 : n.back() - '0';
      const int64_t size = u.src.at(0)->const_int();
      std::string value;
      int64_t capacity = 0;
      if (n.rfind("gidx", 0) == 0 && n.size() == 5 && d >= 0 && d < 3) {
        value = group_id(d);
        capacity = g[d];
      } else if (n.rfind("lidx", 0) == 0 && n.size() == 5 && d >= 0 && d < 3) {
        value = fmt::format("int(gl_LocalInvocationID.{})", "xyz"[d]);
        capacity = l[d];
      } else if (n.rfind("idx", 0) == 0 && n.size() == 4 && d >= 0 && d < 3) {
        value = folded
                    ? fmt::format("{}*{}+int(gl_LocalInvocationID.{})", group_id(d), l[d], "xyz"[d])
                    : fmt::format("int(gl_GlobalInvocationID.{})", "xyz"[d]);
        capacity = g[d] * l[d];
      } else {
        fail(i, "SPECIAL '" + n + "' is none of gidx0..2, lidx0..2, idx0..2");
      }
      if (size > capacity)
        fail(i, fmt::format("{} of size {} exceeds the launch's {}", n, size, capacity));
      add(fmt::format("int {} = {};  /* {} */", name_of(&u), value, size));
      if (size < capacity) add(fmt::format("if ({} >= {}) return;", name_of(&u), size));
    }
    return out;
  }

  std::string header() {
    glsl::Declarations d;
    d.needs = needs_;
    d.pointer_types = pointer_types_;
    d.bound_vectors = bound_vectors_;
    d.bound_bits = bound_bits_;
    d.vector_access = vector_access_;
    d.shuffles = shuffles_;
    for (std::size_t k = 0; k < p_.vars.size(); ++k) d.var_members.push_back(var_member(k));
    for (const UOp* u : ops_)
      if (u->op == Ops::DEFINE_LOCAL)
        d.shared.push_back({glsl::type_name(reg(u->dtype.base())), name_of(u),
                            u->arg_as<std::vector<int64_t>>().at(1)});
    d.helpers = helpers_.definitions();
    return glsl::declarations(p_, t_, layout_, d);
  }

  const Program& p_;
  const GlslTarget& t_;
  const ArgLayout layout_;
  std::vector<const UOp*> ops_;
  std::unordered_map<const UOp*, std::size_t> pos_;
  std::vector<std::vector<std::size_t>> users_;
  std::vector<int> loop_of_;  // innermost RANGE open at each position, -1 outside loops
  std::map<const UOp*, std::vector<std::size_t>> assigns_;
  std::map<std::size_t, std::vector<std::size_t>> acc_at_range_;  // RANGE -> DEFINE_ACCs it opens
  std::set<const UOp*> forced_;
  std::set<const UOp*> stored_;  // the buffers the kernel stores into
  std::vector<std::size_t>
      landing_;  // where a node's text ends up: itself, or its user's statement
  std::vector<bool> inline_;
  glsl::Needs needs_;
  std::set<std::pair<Scalar, int>> pointer_types_;
  std::set<std::pair<int64_t, int>> bound_vectors_;  // (slot, width) of vector accesses
  std::set<int64_t> bound_bits_;  // slots a float scatter reaches as bits (need_combine)
  glsl::Helpers helpers_{t_.float64, t_.exact_sqrt, t_.float_of_double_division};
  bool vector_access_ = false;
  bool shuffles_ = false;
  std::unordered_map<const UOp*, std::string> names_;
  std::set<std::string> taken_;
  std::map<std::string, int> counters_;
  std::string body_;
  int indent_ = 1;
};

}  // namespace

std::string render_glsl(const Program& program, const GlslTarget& target) {
  return Renderer(program, target).render();
}

}  // namespace vkg
