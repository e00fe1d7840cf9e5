#include <vkgrad/core/buffer.hpp>

#include <algorithm>
#include <atomic>
#include <functional>

#include <vkgrad/core/error.hpp>

namespace vkg {

namespace {
std::atomic<int64_t> next_buffer_id{1};
}

Buffer::Buffer(std::string device, DType dtype, int64_t count)
    : id_(next_buffer_id++),
      device_(std::move(device)),
      dtype_(dtype),
      count_(count),
      max_count_(count),
      capacity_(count) {
  if (count < 0) throw Error("a buffer cannot hold " + std::to_string(count) + " elements");
}

std::shared_ptr<const Buffer> Buffer::next_version(const std::shared_ptr<const Buffer>& written) {
  auto next = std::make_shared<Buffer>(written->device_, written->dtype_, written->count_);
  next->max_count_ = written->max_count_;
  next->storage_ = written->storage_ ? written->storage_ : written;
  next->allocation = written->storage().allocation;  // null until the storage is allocated
  return next;
}

std::shared_ptr<const Buffer> Buffer::next_version(const std::shared_ptr<const Buffer>& written,
                                                   int64_t count) {
  const Buffer& storage = written->storage();
  if (count > storage.capacity())
    throw Error("a version of " + storage.repr() + " cannot hold " + std::to_string(count) +
                " elements: its memory holds " + std::to_string(storage.capacity()));
  auto next = std::make_shared<Buffer>(written->device_, written->dtype_, count);
  next->max_count_ = written->max_count_;
  next->storage_ = written->storage_ ? written->storage_ : written;
  next->allocation = storage.allocation;
  return next;
}

void Buffer::set_max_count(int64_t max_count) {
  if (max_count < count_)
    throw Error("a buffer of " + std::to_string(count_) + " elements cannot have a maximum of " +
                std::to_string(max_count));
  max_count_ = max_count;
}

void Buffer::reserve_max() const {
  const Buffer& s = storage();
  if (!s.allocation) s.capacity_ = std::max(s.capacity_, max_count_);
}

size_t Buffer::hash() const { return std::hash<int64_t>{}(id_); }

bool Buffer::equals(const ArgPayload& other) const {
  return id_ == static_cast<const Buffer&>(other).id_;
}

std::string Buffer::repr() const {
  return "Buffer(id=" + std::to_string(id_) + ", device='" + device_ + "', dtype=" + dtype_.name() +
         ", count=" + std::to_string(count_) + ")";
}

const Buffer& buffer_of(const UOp& node) {
  const auto* payload = std::get_if<std::shared_ptr<const ArgPayload>>(&node.arg);
  const auto* buffer = payload ? dynamic_cast<const Buffer*>(payload->get()) : nullptr;
  if (node.op != Ops::BUFFER || !buffer)
    throw Error("expected a BUFFER node, got " + std::string(op_name(node.op)));
  return *buffer;
}

}  // namespace vkg
