#include <vkgrad/dist/mpi_group.hpp>

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <vkgrad/core/context.hpp>
#include <vkgrad/core/error.hpp>

namespace vkg::dist::detail {

namespace {

// A collective that timed out is still pending in MPI and still owns its buffer: both are kept
// until exit, where MPI_Finalize would otherwise wait on it forever.
struct Abandoned {
  MPI_Request request;
  std::vector<std::shared_ptr<const void>> keep;
};
std::vector<Abandoned>& abandoned() {
  static auto* list = new std::vector<Abandoned>;  // immortal: the exit hook reads it last
  return *list;
}

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  // A collective that timed out may still finish (a late rank); one that does not within a few
  // seconds means a rank is gone, and finishing would hang: Open MPI's abort ends the job.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (Abandoned& a : abandoned()) {
    for (int done = 0; !done;) {
      if (MPI_Test(&a.request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS ||
          std::chrono::steady_clock::now() > deadline) {
        MPI_Abort(MPI_COMM_WORLD, 1);
        return;
      }
      if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  MPI_Finalize();
}

// Ranks on one machine share its cores, but Lavapipe (llvmpipe) gives each Vulkan device as many
// threads as the machine has cores (LP_NUM_THREADS), so N local ranks ran N x cores threads that
// thrash: samples/data_parallel, 2 ranks on 2 cores, took 22-68 ms a step against 13-18 ms for one
// rank on the whole batch; with one thread each, 4.7 ms against 8.2 ms (load 7.5). Unless the user
// set it, each rank takes its share, for the devices it opens from now on. The launcher says how
// many ranks share the machine (Open MPI: OMPI_COMM_WORLD_LOCAL_SIZE; MPICH: MPI_LOCALNRANKS):
// asking MPI would be a collective, which a rank's first call here must not be.
void share_cores_between_local_ranks() {
  if (std::getenv("LP_NUM_THREADS")) return;
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (!local) local = std::getenv("MPI_LOCALNRANKS");
  const int ranks = local ? std::atoi(local) : 1;
  if (ranks <= 1) return;
  const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  setenv("LP_NUM_THREADS", std::to_string(std::max(1, cores / ranks)).c_str(), 0);
}

std::once_flag started;

void start() {
  std::call_once(started, [] {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      // Collectives are called from whichever thread trains, one at a time.
      if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
        throw Error("dist: MPI_Init_thread failed");
      std::atexit(finalize_at_exit);
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    share_cores_between_local_ranks();
  });
}

std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(text, size_t(len));
}

void check(int code, const std::string& what) {
  if (code != MPI_SUCCESS)
    throw Error("dist: " + what + " failed on rank " + std::to_string(mpi_rank()) + ": " +
                mpi_error(code));
}

double timeout_seconds() {
  const char* env = std::getenv("VKG_DIST_TIMEOUT");
  const double s = env && *env ? std::atof(env) : 120.0;
  return s > 0 ? s : 120.0;
}

// Polls `request` until it completes or the deadline passes. Open MPI moves a non-blocking
// collective on only inside MPI calls, so for its first second the loop only yields between
// tests (sleeping there made a 64 MiB all_reduce 2.4x slower than MPI_Allreduce); after that it
// naps up to 1 ms, so that waiting for a late rank does not spin a core.
void wait(MPI_Request request, const std::string& what,
          std::vector<std::shared_ptr<const void>> keep) {
  const double limit = timeout_seconds();
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::duration<double>(limit);
  const auto spin_until = start + std::chrono::seconds(1);
  auto nap = std::chrono::microseconds(20);
  for (;;) {
    int done = 0;
    check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), what);
    if (done) return;
    if (std::chrono::steady_clock::now() > deadline) {
      abandoned().push_back({request, std::move(keep)});
      throw Error("dist: " + what + " on rank " + std::to_string(mpi_rank()) + " of " +
                  std::to_string(mpi_world_size()) + " waited " + std::to_string(int(limit)) +
                  " s (VKG_DIST_TIMEOUT) for the other ranks: one has died or is not calling it; "
                  "the group may be out of step now");
    }
    if (std::chrono::steady_clock::now() < spin_until) {
      std::this_thread::yield();
      continue;
    }
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::microseconds(1000));
  }
}

MPI_Datatype mpi_type(DType d, const std::string& what) {
  if (d == dtypes::float32) return MPI_FLOAT;
  if (d == dtypes::float64) return MPI_DOUBLE;
  if (d == dtypes::int32) return MPI_INT32_T;
  if (d == dtypes::int64) return MPI_INT64_T;
  throw Error("dist: " + what + " of a " + d.name() +
              " tensor: float32, float64, int32 or int64 only");
}

int count_of(size_t n, const std::string& what) {
  if (n > size_t(INT32_MAX))
    throw Error("dist: " + what + " of " + std::to_string(n) +
                " elements: at most 2^31 - 1 per call");
  return int(n);
}

// `bytes` as MPI's int count of a datatype: MPI_BYTE while they fit an int, else one value of a
// datatype `bytes` long (blocks of up to 1 GiB, then the rest), so that a broadcast or all_gather
// of 2 GiB or more is one call. The datatype is freed here; MPI keeps it for a pending call.
// VKG_DIST_MAX_COUNT lowers the limit (tests take the blocked path on a few MiB).
struct ByteCount {
  MPI_Datatype type = MPI_BYTE;
  int count = 0;
  ByteCount(size_t bytes, const std::string& what) {
    const int64_t limit_setting = setting("VKG_DIST_MAX_COUNT");
    const size_t limit = limit_setting > 0 ? size_t(limit_setting) : size_t(INT32_MAX);
    if (bytes <= limit) {
      count = int(bytes);
      return;
    }
    const size_t block = std::min(limit, size_t(1) << 30), blocks = bytes / block;
    const size_t rest = bytes % block;
    if (blocks > size_t(INT32_MAX))
      throw Error("dist: " + what + " of " + std::to_string(bytes) + " bytes: too many for MPI");
    MPI_Datatype whole = MPI_DATATYPE_NULL;
    check(MPI_Type_contiguous(int(block), MPI_BYTE, &whole), what);
    if (rest == 0) {
      check(MPI_Type_contiguous(int(blocks), whole, &type), what);
    } else {
      int lengths[] = {int(blocks), int(rest)};
      MPI_Aint at[] = {0, MPI_Aint(blocks * block)};
      MPI_Datatype types[] = {whole, MPI_BYTE};
      MPI_Datatype joined = MPI_DATATYPE_NULL;
      check(MPI_Type_create_struct(2, lengths, at, types, &joined), what);
      // Exactly `bytes` apart in an all_gather's result (a struct's extent may be padded).
      check(MPI_Type_create_resized(joined, 0, MPI_Aint(bytes), &type), what);
      MPI_Type_free(&joined);
    }
    MPI_Type_free(&whole);
    check(MPI_Type_commit(&type), what);
    count = 1;
  }
  ~ByteCount() {
    if (type != MPI_BYTE) MPI_Type_free(&type);
  }
  ByteCount(const ByteCount&) = delete;
  ByteCount& operator=(const ByteCount&) = delete;
};

}  // namespace

int mpi_rank() {
  start();
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int mpi_world_size() {
  start();
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

void all_reduce_sum(const Bytes& data, DType dtype, const std::string& what) {
  start();
  const MPI_Datatype t = mpi_type(dtype, what);
  const int n = count_of(data->size() / size_t(dtype.itemsize()), what);
  MPI_Request r;
  check(MPI_Iallreduce(MPI_IN_PLACE, data->data(), n, t, MPI_SUM, MPI_COMM_WORLD, &r), what);
  wait(r, what, {data});
}

void all_reduce_sum(const std::byte* in, std::byte* out, size_t bytes, DType dtype,
                    std::vector<std::shared_ptr<const void>> keep, const std::string& what) {
  start();
  const MPI_Datatype t = mpi_type(dtype, what);
  const int n = count_of(bytes / size_t(dtype.itemsize()), what);
  MPI_Request r;
  check(MPI_Iallreduce(in, out, n, t, MPI_SUM, MPI_COMM_WORLD, &r), what);
  wait(r, what, std::move(keep));
}

void broadcast_bytes(const Bytes& data, int root, const std::string& what) {
  start();
  const ByteCount n(data->size(), what);
  MPI_Request r;
  check(MPI_Ibcast(data->data(), n.count, n.type, root, MPI_COMM_WORLD, &r), what);
  wait(r, what, {data});
}

void broadcast_bytes(const std::byte* in, std::byte* out, size_t bytes, int root,
                     std::vector<std::shared_ptr<const void>> keep, const std::string& what) {
  start();
  const bool sending = mpi_rank() == root;
  const ByteCount n(bytes, what);
  MPI_Request r;
  // MPI_Ibcast only reads the root's buffer (its signature predates const).
  check(MPI_Ibcast(sending ? const_cast<std::byte*>(in) : out, n.count, n.type, root,
                   MPI_COMM_WORLD, &r),
        what);
  // The root's own copy runs on a thread of its own while MPI sends (it only reads `in` too); a
  // small one runs here, as does any where no thread can be started (MPI_Ibcast is already in
  // flight: an error leaving now would lose its request). The jthread joins before an error
  // leaves.
  constexpr size_t kThreadFrom = size_t(1) << 20;
  std::jthread copier;
  bool on_thread = false;
  if (sending && bytes >= kThreadFrom) {
    try {
      copier = std::jthread([=] { std::memcpy(out, in, bytes); });
      on_thread = true;
    } catch (const std::exception&) {  // std::system_error, std::bad_alloc: copied below
    }
  }
  if (sending && !on_thread) std::memcpy(out, in, bytes);
  wait(r, what, std::move(keep));
}

Bytes all_gather_bytes(const Bytes& in, const std::string& what) {
  auto out = std::make_shared<std::vector<std::byte>>(in->size() * size_t(mpi_world_size()));
  all_gather_bytes(in->data(), in->size(), out->data(), {in, out}, what);
  return out;
}

void all_gather_bytes(const std::byte* in, size_t bytes, std::byte* out,
                      std::vector<std::shared_ptr<const void>> keep, const std::string& what) {
  start();
  const ByteCount n(bytes, what);
  MPI_Request r;
  check(MPI_Iallgather(in, n.count, n.type, out, n.count, n.type, MPI_COMM_WORLD, &r), what);
  wait(r, what, std::move(keep));
}

}  // namespace vkg::dist::detail
