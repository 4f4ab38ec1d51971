// The test proxy's ZooKeeper frame parser on any byte stream: it never
// crashes, takes whole frames only, and splits a stream the same way however
// the bytes arrive (all at once, or in pieces as TCP delivers them).
#include <vector>

#include "fuzz/fuzz_check.hpp"
#include "support/zk_frames.hpp"

using namespace zkasio::test;

void fuzz_frames(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return;
  // The first byte chooses the size of the pieces the rest arrives in.
  std::size_t piece = data[0] % 16 + 1;
  const unsigned char* stream = data + 1;
  std::size_t length = size - 1;

  auto whole = split_frames(stream, length);
  FUZZ_CHECK(whole.consumed <= length);
  std::size_t total = 0;
  for (auto& f : whole.frames) {
    FUZZ_CHECK(f.size() >= 4);
    total += f.size();
    if (auto xid = frame_xid(f)) FUZZ_CHECK(f.size() >= 8);
    if (auto type = request_type(f)) FUZZ_CHECK(f.size() >= 12);
  }
  FUZZ_CHECK(total == whole.consumed);

  // As a reader would: append a piece, take the whole frames off, keep the rest.
  std::vector<unsigned char> pending;
  std::vector<frame> frames;
  bool stopped = false;
  for (std::size_t at = 0; at < length && !stopped; at += piece) {
    pending.insert(pending.end(), stream + at, stream + std::min(length, at + piece));
    auto split = split_frames(pending.data(), pending.size());
    frames.insert(frames.end(), split.frames.begin(), split.frames.end());
    pending.erase(pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(split.consumed));
    stopped = split.not_zookeeper;
  }
  FUZZ_CHECK(frames == whole.frames);
  FUZZ_CHECK(stopped == whole.not_zookeeper);
}

ZKASIO_FUZZ_TARGET(fuzz_frames)
