// A tensor's storage: one allocation of `count` elements of `dtype` on one device, the unit that
// kernels read and write. A BUFFER UOp carries one as its argument. Two BUFFER nodes are one node
// only when they name the same storage, so buffers compare by a process-unique id, never by
// contents.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <vkgrad/core/dtype.hpp>
#include <vkgrad/core/uop.hpp>

namespace vkg {

class Allocation;

class Buffer final : public ArgPayload {
 public:
  Buffer(std::string device, DType dtype, int64_t count);

  // The storage of `written` under a new id: what an in-place assign leaves its tensor at. A
  // BUFFER node names one version of a storage's contents, so graphs built after the write are
  // new nodes and never meet a result the realized-node cache computed from the old contents.
  // Both share one allocation (made once, for the first version).
  static std::shared_ptr<const Buffer> next_version(const std::shared_ptr<const Buffer>& written);
  // The same for a buffer of symbolic size read under another binding: a version of `written`'s
  // storage holding `count` elements (at most what the storage's memory holds).
  static std::shared_ptr<const Buffer> next_version(const std::shared_ptr<const Buffer>& written,
                                                    int64_t count);

  int64_t id() const { return id_; }
  // The first version of this buffer's storage (itself unless next_version made it); buffers
  // with one storage share their memory.
  const Buffer& storage() const { return storage_ ? *storage_ : *this; }
  int64_t storage_id() const { return storage().id(); }
  const std::string& device() const { return device_; }
  DType dtype() const { return dtype_; }
  int64_t count() const { return count_; }
  size_t nbytes() const { return size_t(count_) * size_t(dtype_.itemsize()); }

  // A buffer of symbolic size (a tensor shaped by bound variables) holds `count` elements for
  // this binding and at most max_count() for any binding; a plain one has max_count() == count().
  int64_t max_count() const { return max_count_; }
  void set_max_count(int64_t max_count);  // before it is shared: the scheduler, on creation
  // What its memory holds: count(), or max_count() once reserve_max() asked for room for every
  // binding (vkg::Jit's capture, whose replays rebind the variables). By the storage.
  int64_t capacity() const { return storage().capacity_; }
  size_t capacity_bytes() const { return size_t(capacity()) * size_t(dtype_.itemsize()); }
  // Before the storage is allocated: its memory will hold max_count() elements.
  void reserve_max() const;

  // Bytes to copy in when the buffer is first allocated (a tensor made from C++ data); empty for
  // buffers whose contents a kernel produces, and dropped once uploaded (the device holds them).
  mutable std::shared_ptr<const std::vector<std::byte>> initial_data;
  // For host data that must be new on every run of a captured step (the random generator's
  // counter): makes the next contents. A JIT replay uploads its result before the kernels run.
  std::function<std::vector<std::byte>()> regenerate;

  // The device memory holding the buffer, once the realize engine has allocated it
  // (core/device.hpp's ensure_allocated). Set once, under the engine's lock.
  mutable std::shared_ptr<Allocation> allocation;

  size_t hash() const override;
  bool equals(const ArgPayload& other) const override;
  std::string repr() const override;  // Buffer(id=3, device='VK', dtype=float32, count=6)

 private:
  int64_t id_;
  std::shared_ptr<const Buffer> storage_;  // null for a first version
  std::string device_;
  DType dtype_;
  int64_t count_;
  int64_t max_count_;
  mutable int64_t capacity_;
};

// The Buffer a BUFFER node carries.
const Buffer& buffer_of(const UOp& buffer_node);

}  // namespace vkg
