// The deletes each server of the chaos ensemble wrote to its transaction
// log: what tells a node ZooKeeper itself brought back from one a worker
// left. A delete logged by a majority of the servers was committed (ZAB
// commits a proposal once a quorum has logged it) and must never be undone;
// yet ZooKeeper 3.8.0, Debian's, can lose committed transactions when a
// leader is killed and its followers go on to elect another: a follower
// whose in-memory tree runs ahead of its log when its leader goes, and
// which then leads or syncs the others from its log (ZOOKEEPER-4712,
// ZOOKEEPER-4785, ZOOKEEPER-4646; the first two fixed upstream after
// 3.8.0). Seen here: a delete logged by two, or all three, servers, then
// the node back at its path, in its owner's live session, known to no one:
// every waiter behind it waits until that session ends. The chaos driver
// watches for such nodes as the run goes on (main.cpp) and, finding one,
// calls the run void: what it measures after is the ensemble's breakage,
// not the library's.
//
// No ZooKeeper code: the log's layout (FileTxnLog) read directly, so that
// the driver can read it every few seconds without a JVM.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace zkasio::chaos {

// What one pass over a part of a transaction log found: the paths deleted
// (a delete, or a delete inside a multi), and how many bytes it consumed:
// up to the first record not complete in `bytes` (the server may still be
// writing it, or the part read ends in it), where the next pass starts.
struct txn_log_scan {
  std::vector<std::string> deleted;
  std::size_t consumed = 0;
  bool at_zeros = false;  // it met the file's preallocated zeros: the end of what is written
};
// Scans `bytes`, which begin at a record (or, `file_start`, at the file's
// header).
txn_log_scan scan_txn_log(std::string_view bytes, bool file_start);

// The deletes of the servers 1..`servers` whose directories are DIR/s<i>
// (tests/support/zk_servers.hpp), read as their logs grow.
class logged_deletes {
 public:
  logged_deletes(std::filesystem::path dir, int servers) : dir_(std::move(dir)), servers_(servers) {}
  // Reads what the logs gained since the last call.
  void read_new();
  // How many servers logged a delete of `path`.
  int servers_logging(const std::string& path) const;
  int majority() const { return servers_ / 2 + 1; }

 private:
  std::filesystem::path dir_;
  int servers_;
  std::map<std::filesystem::path, std::size_t> read_to_;  // by log file: the next record's offset
  std::map<std::string, std::set<int>, std::less<>> deleted_by_;  // by path: the servers that logged its delete
};

}  // namespace zkasio::chaos
