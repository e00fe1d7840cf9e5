// A kernel as a linear program: the output of lowering and linearizing, the input of every
// renderer (GLSL) and of the CPU reference interpreter. The program is a list of UOps in execution
// order; each UOp's sources appear before it. Loops open with RANGE and close with ENDRANGE; the
// sources of a node say what it reads, so a renderer emits one statement per node in order.
//
// The kernel-level ops and their exact forms (every renderer and the interpreter accept exactly
// these; anything else in a program is a bug in the code that built it):
//
//   DEFINE_GLOBAL  dtype T.ptr()           arg int64 slot          a buffer argument (slot 0..n-1)
//   DEFINE_VAR     dtype int32             arg VarArg              a symbolic integer argument
//   DEFINE_LOCAL   dtype T.ptr(Local)      arg vector{id, count}   workgroup-shared array of count T
//   SPECIAL        dtype int32             arg string name         src (CONST int32 size): one of
//                  "gidx0".."gidx2": workgroup id on axis d; "lidx0".."lidx2": invocation id within
//                  the workgroup; "idx0".."idx2": global invocation id (gidx*local_size + lidx).
//                  The value lies in [0, size); the renderer guards invocations past `size` when
//                  the launch rounds up, so a program never sees them.
//   RANGE          dtype int32             arg int64 id            src (end): for (r = 0; r < end; ++r)
//   ENDRANGE       dtype void                                      src (RANGE): closes that loop
//   IF             dtype void                                      src (bool cond): if (cond) {
//   ENDIF          dtype void                                      src (IF)
//   DEFINE_ACC     dtype T                 arg int64 id            src (init CONST, RANGE...): a
//                  register, set to init each time the outermost listed RANGE opens (the node
//                  itself may sit inside that loop, after its RANGE, as sources come first)
//   ASSIGN         dtype T                                         src (DEFINE_ACC, value): acc = value;
//                  the node's value is the new accumulator value
//   INDEX          dtype T.ptr() (as buffer) src (buffer, int32 index [, bool valid]): an address
//   LOAD           dtype T                 src (INDEX [, alt]): the element at INDEX. With a valid
//                  operand, reads alt (a CONST) where valid is false, and must not touch memory
//                  there: the raw index may be out of bounds.
//   STORE          dtype void              src (INDEX, value): writes unless INDEX's valid is false.
//                  With arg int64 combine (core/scatter_combine.hpp; a scalar 32- or 64-bit value
//                  to a global buffer): combines the value into the element atomically.
//   BARRIER        dtype void              src (the local STOREs it orders): workgroup barrier,
//                  reached by every invocation of the workgroup
//   CONST          dtype T                 arg bool / int64 / double (as UOp::const_ stores it); a
//                  vector dtype means the value in every lane
//   VECTORIZE      dtype Tx n              src (n scalars of T)
//   GEP            dtype T (or Tx k)       arg vector{lane...}     src (vector): those lanes
//   CAST, BITCAST  dtype T                 src (x): value conversion / bit reinterpretation
//   ALU ops (core/ops.hpp unary, binary, ternary families), with C semantics: IDIV and MOD
//   truncate toward zero; comparisons give bool; WHERE is (cond ? a : b); shifts by in-range amounts.
//
// Vector dtypes (count 2..4: GLSL has no wider ones) appear in LOAD/STORE of contiguous upcast
// elements, VECTORIZE, GEP and elementwise ALU ops over equal-width operands. A LOAD of Tx n
// through INDEX(buf, i) reads elements i .. i+n-1 of a buffer of T (likewise STORE); i need not be
// a multiple of n.
//
// Values, exactly as the CPU interpreter computes them (codegen/cpu_alu.hpp) and the renderers
// must match: integers wrap at their width; float16 and bfloat16 round after every op; MAX
// propagates nan from either side; CMPNE is IEEE (x != x is isnan); bool is one byte in buffers
// (nonzero reads as true); THREEFRY is threefry2x32 (20 rounds) on uint64 (x, key). Left
// undefined, as devices leave them: x / 0, x % 0, float -> int conversion out of range or of nan,
// and shifts by the width or more.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <vkgrad/core/uop.hpp>

namespace vkg {

// One buffer argument of a kernel, by slot.
struct BufferParam {
  int slot = 0;
  DType dtype;            // element dtype (not the pointer)
  int64_t count = 0;      // elements the kernel may touch; the buffer is at least this large
  bool written = false;   // the kernel stores to it (otherwise it only loads)
};

struct Program {
  std::string name;                      // tinygrad-style: E_4_4, r_2, r_32_16_4
  std::vector<UOpPtr> uops;              // the linear program, in execution order
  std::vector<BufferParam> buffers;      // by slot, 0..n-1
  std::vector<VarArg> vars;              // DEFINE_VARs, in argument order
  std::array<int64_t, 3> global_size{1, 1, 1};  // workgroups per axis
  // For a kernel over symbolic sizes, whose global_size is for the variables' maxima: the
  // workgroups axis 0 needs under a binding, an int32 expression over its DEFINE_VARs (null
  // when global_size[0] is always needed). Invocations past the bound size are guarded anyway;
  // this only spares launching workgroups that would do nothing (see launch_dims).
  UOpPtr groups_needed;
  std::array<int64_t, 3> local_size{1, 1, 1};   // invocations per workgroup per axis
  // Estimates for DEBUG=2 lines: arithmetic ops and bytes moved by one launch.
  int64_t flops = 0;
  int64_t bytes = 0;
};

}  // namespace vkg
