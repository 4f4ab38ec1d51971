#include "chaos/logged_deletes.hpp"

#include <algorithm>
#include <fstream>
#include <optional>

namespace zkasio::chaos {

namespace {

// The layout (ZooKeeper's FileTxnLog, jute's BinaryOutputArchive: big-endian):
// a file header (magic "ZKLG", version, database id: 16 bytes), then per
// transaction its checksum (8 bytes), its length (4) and that many bytes,
// then 'B'. The file is preallocated with zeros: a length of 0 ends it.
// A transaction: its header (client id 8, cxid 4, zxid 8, time 8, type 4),
// then its record; a delete's (type 2) is its path (length 4, then UTF-8);
// a multi's (type 14) is a count, then each operation's type (4) and record
// as a buffer (length 4, then bytes). Anything after (a digest) is skipped.
constexpr std::size_t file_header = 16;
constexpr std::size_t txn_header = 32;
constexpr std::int32_t delete_type = 2;
constexpr std::int32_t multi_type = 14;

class reader {
 public:
  explicit reader(std::string_view bytes) : bytes_(bytes) {}
  std::optional<std::int32_t> int32() {
    if (bytes_.size() < 4) return std::nullopt;
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(bytes_[static_cast<std::size_t>(i)]);
    bytes_.remove_prefix(4);
    return static_cast<std::int32_t>(v);
  }
  // A length-prefixed string or buffer.
  std::optional<std::string_view> buffer() {
    auto length = int32();
    if (!length || *length < 0 || static_cast<std::size_t>(*length) > bytes_.size()) return std::nullopt;
    auto b = bytes_.substr(0, static_cast<std::size_t>(*length));
    bytes_.remove_prefix(b.size());
    return b;
  }
  bool skip(std::size_t n) {
    if (bytes_.size() < n) return false;
    bytes_.remove_prefix(n);
    return true;
  }

 private:
  std::string_view bytes_;
};

// The paths a delete record (`type`) removes: one, or a multi's.
void collect_deletes(std::int32_t type, std::string_view record, std::vector<std::string>& deleted) {
  reader r(record);
  if (type == delete_type) {
    if (auto path = r.buffer()) deleted.emplace_back(*path);
    return;
  }
  if (type != multi_type) return;
  auto count = r.int32();
  for (std::int32_t i = 0; count && i < *count; ++i) {
    auto op_type = r.int32();
    auto op = r.buffer();
    if (!op_type || !op) return;
    collect_deletes(*op_type == multi_type ? -1 : *op_type, *op, deleted);  // (no multi nests another)
  }
}

}  // namespace

txn_log_scan scan_txn_log(std::string_view bytes, bool file_start) {
  txn_log_scan scan;
  std::size_t at = 0;
  if (file_start) {
    if (bytes.size() < file_header) return scan;
    at = scan.consumed = file_header;
  }
  while (at + 12 <= bytes.size()) {
    reader r(bytes.substr(at + 8));  // (past the checksum)
    auto length = r.int32();
    if (!length || *length <= 0) {  // the preallocated zeros: written so far
      scan.at_zeros = true;
      break;
    }
    auto size = static_cast<std::size_t>(*length);
    auto end = at + 12 + size + 1;  // (with its 'B')
    if (end > bytes.size()) break;  // still being written, or beyond what was read
    reader txn(bytes.substr(at + 12, size));
    if (size >= txn_header && txn.skip(txn_header - 4))
      if (auto type = txn.int32()) collect_deletes(*type, bytes.substr(at + 12 + txn_header, size - txn_header), scan.deleted);
    at = scan.consumed = end;
  }
  return scan;
}

void logged_deletes::read_new() {
  // (A log is preallocated in blocks of 64 MB: read from where the last
  // pass stopped, a chunk at a time, up to the zeros.)
  constexpr std::size_t chunk = 4 << 20;
  for (int i = 1; i <= servers_; ++i) {
    auto logs = dir_ / ("s" + std::to_string(i)) / "data" / "version-2";
    std::error_code ec;
    for (auto& entry : std::filesystem::directory_iterator(logs, ec)) {
      if (!entry.path().filename().string().starts_with("log.")) continue;
      std::ifstream in(entry.path(), std::ios::binary);
      auto& from = read_to_[entry.path()];
      for (std::string bytes(chunk, '\0');;) {
        in.seekg(static_cast<std::streamoff>(from));
        in.read(bytes.data(), static_cast<std::streamsize>(chunk));
        auto got = static_cast<std::size_t>(std::max<std::streamsize>(in.gcount(), 0));
        in.clear();
        auto scan = scan_txn_log(std::string_view(bytes.data(), got), from == 0);
        for (auto& path : scan.deleted) deleted_by_[path].insert(i);
        from += scan.consumed;
        if (got < chunk || scan.at_zeros || scan.consumed == 0) break;
      }
    }
  }
}

int logged_deletes::servers_logging(const std::string& path) const {
  auto it = deleted_by_.find(path);
  return it == deleted_by_.end() ? 0 : static_cast<int>(it->second.size());
}

}  // namespace zkasio::chaos
