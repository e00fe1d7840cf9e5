#include <vkgrad/nn/safetensors.hpp>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include <vkgrad/core/error.hpp>

namespace vkg::nn {

namespace {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

constexpr std::array<std::pair<Scalar, const char*>, 13> kDTypeNames{{
    {Scalar::Bool, "BOOL"},     {Scalar::UInt8, "U8"},   {Scalar::Int8, "I8"},   {Scalar::UInt16, "U16"},
    {Scalar::Int16, "I16"},     {Scalar::Float16, "F16"}, {Scalar::BFloat16, "BF16"}, {Scalar::UInt32, "U32"},
    {Scalar::Int32, "I32"},     {Scalar::Float32, "F32"}, {Scalar::UInt64, "U64"},  {Scalar::Int64, "I64"},
    {Scalar::Float64, "F64"},
}};

const char* safetensors_name(DType d) {
  for (auto& [s, name] : kDTypeNames)
    if (s == d.scalar) return name;
  throw Error("save_safetensors: dtype " + d.name() + " has no safetensors name");
}

DType dtype_named(const std::string& name, const std::string& path) {
  for (auto& [s, n] : kDTypeNames)
    if (name == n) return DType{s};
  throw Error("load_safetensors: " + path + ": unsupported dtype \"" + name + "\"");
}

// Largest header we accept (the reference reader's limit is 100 MB).
constexpr uint64_t kMaxHeader = 100'000'000;

struct Header {
  nlohmann::ordered_json json;
  uint64_t data_start = 0;
};

Header read_header(std::ifstream& in, const std::string& path) {
  if (!in) throw Error("load_safetensors: cannot open " + path);
  // An ifstream opens a directory on Linux and then fails to read it.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw Error("load_safetensors: " + path + " is a directory, not a file");
  uint64_t n = 0;
  if (!in.read(reinterpret_cast<char*>(&n), 8)) throw Error("load_safetensors: " + path + " is too short for a header");
  if (n > kMaxHeader) throw Error("load_safetensors: " + path + " declares a header of " + std::to_string(n) + " bytes");
  std::string text(n, '\0');
  if (!in.read(text.data(), std::streamsize(n)))
    throw Error("load_safetensors: " + path + " ends inside its " + std::to_string(n) + "-byte header");
  Header h;
  try {
    h.json = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error("load_safetensors: " + path + ": the header is not valid JSON (" + e.what() + ")");
  }
  if (!h.json.is_object()) throw Error("load_safetensors: " + path + ": the header is not a JSON object");
  h.data_start = 8 + n;
  return h;
}

// `path` plus this process's id, this thread's and a count: no two writers share a temp file.
std::string unique_temp_name(const std::string& path) {
  static std::atomic<uint64_t> serial{0};
  return path + "." + std::to_string(::getpid()) + "." +
         std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id())) + "." +
         std::to_string(serial++) + ".tmp";
}

}  // namespace

void save_safetensors(const std::string& path, const StateDict& tensors, const std::map<std::string, std::string>& metadata) {
  std::set<std::string> names;
  std::vector<Tensor> values;
  for (auto& [name, t] : tensors) {
    if (name.empty() || name == "__metadata__") throw Error("save_safetensors: bad tensor name \"" + name + "\"");
    if (!names.insert(name).second) throw Error("save_safetensors: the name " + name + " appears twice");
    safetensors_name(t.dtype());  // checks the dtype before anything is written
    values.push_back(t);
  }
  realize_all(values);

  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<std::vector<std::byte>> data;
  uint64_t offset = 0;
  for (auto& [name, t] : tensors) {
    data.push_back(t.bytes());
    const uint64_t size = data.back().size();
    header[name] = {{"dtype", safetensors_name(t.dtype())}, {"shape", t.shape()}, {"data_offsets", {offset, offset + size}}};
    offset += size;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned, as the reference writer does
  const uint64_t n = text.size();

  // Written whole under a name of its own, then renamed over `path`: a reader sees the old file
  // or the new one, and of two writers (threads or processes) the last rename wins whole.
  const std::string tmp = unique_temp_name(path);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error("save_safetensors: cannot write " + tmp);
    out.write(reinterpret_cast<const char*>(&n), 8);
    out.write(text.data(), std::streamsize(n));
    for (auto& d : data) out.write(reinterpret_cast<const char*>(d.data()), std::streamsize(d.size()));
    if (!out.flush()) {
      out.close();
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      throw Error("save_safetensors: writing " + tmp + " failed");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    throw Error("save_safetensors: cannot rename " + tmp + " to " + path);
  }
}

StateDict load_safetensors(const std::string& path, const std::string& device) {
  std::ifstream in(path, std::ios::binary);
  Header h = read_header(in, path);
  in.seekg(0, std::ios::end);
  const uint64_t file_size = uint64_t(in.tellg());
  if (file_size < h.data_start) throw Error("load_safetensors: " + path + " is shorter than its header says");
  const uint64_t data_size = file_size - h.data_start;

  StateDict out;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (auto& [name, info] : h.json.items()) {
    if (name == "__metadata__") continue;
    const std::string where = "load_safetensors: " + path + ": tensor " + name;
    DType dtype;
    Shape shape;
    uint64_t begin = 0, end = 0;
    try {
      dtype = dtype_named(info.at("dtype").get<std::string>(), path);
      shape = info.at("shape").get<Shape>();
      auto offsets = info.at("data_offsets").get<std::vector<uint64_t>>();
      if (offsets.size() != 2) throw Error(where + ": data_offsets needs two numbers");
      begin = offsets[0], end = offsets[1];
    } catch (const nlohmann::json::exception& e) {
      throw Error(where + ": malformed entry (" + e.what() + ")");
    }
    check_size(shape, dtype.itemsize(), where);
    const uint64_t count = uint64_t(vkg::prod(shape));
    if (end < begin || end > data_size || end - begin != count * uint64_t(dtype.itemsize()))
      throw Error(where + ": bytes [" + std::to_string(begin) + ", " + std::to_string(end) + ") do not hold " +
                  shape_str(shape) + " " + dtype.name() + " within the " + std::to_string(data_size) + " data bytes");
    std::vector<std::byte> bytes(end - begin);
    in.clear();
    in.seekg(std::streamoff(h.data_start + begin));
    if (!in.read(reinterpret_cast<char*>(bytes.data()), std::streamsize(bytes.size())))
      throw Error(where + ": reading its bytes failed");
    out.emplace_back(name, Tensor(bytes, size_t(count), dtype, shape, device));
    ranges.emplace_back(begin, end);
  }
  // The format forbids overlapping tensors (a byte belongs to at most one).
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second) throw Error("load_safetensors: " + path + ": tensors overlap");
  return out;
}

std::map<std::string, std::string> safetensors_metadata(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  Header h = read_header(in, path);
  std::map<std::string, std::string> out;
  if (!h.json.contains("__metadata__")) return out;
  try {
    for (auto& [k, v] : h.json["__metadata__"].items()) out[k] = v.get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    throw Error("load_safetensors: " + path + ": __metadata__ must map strings to strings (" + e.what() + ")");
  }
  return out;
}

}  // namespace vkg::nn
