// The link between the device and the cloud: real TCP sockets (POSIX), frames of protocol.h,
// and a delay line that stands in for a slow network.
//
//   RAG_ASSIGN_OR_RETURN(Listener l, Listener::listen("127.0.0.1:0"));      // port 0: any free port
//   // other process / thread:
//   RAG_ASSIGN_OR_RETURN(auto t, Transport::connect(l.address(), {.latencyMs = 100}, 5000));
//   RAG_ASSIGN_OR_RETURN(auto peer, l.accept(5000, {.latencyMs = 100}));
//   RAG_RETURN_IF_ERROR(t->send(MsgType::Ping, {}));
//   RAG_ASSIGN_OR_RETURN(std::optional<Frame> f, peer->receive(1000));  // nullopt: timed out
//
// TCP_NODELAY is set on every socket: DRAGON sends one small frame per token and waits on the
// answer, the pattern where Nagle's algorithm holds a frame back until the previous one is
// acknowledged (about 40 ms with the peer's delayed ACK), which would add a hidden latency far
// above the decode time of a token.
//
// Delay line: the kernel's netem qdisc is not available on these machines, so the delay is
// added inside the transport, on the real sockets. send() stamps a frame and queues it; a sender
// thread writes it to the socket at
//     release = max(previous release, sentNs + latency/2 + jitter) (+ size / bandwidth)
// so each direction adds half the configured latency (the round trip gains `latencyMs`),
// jitter is uniform in ±jitterMs/2 per frame from a seeded generator, frames keep their order
// (as TCP would), and a bandwidth limit serialises frames on a virtual wire. The RTT this
// produces is measured by the in-band echo of protocol.h (rtt()) and by ping frames (session.h),
// not assumed.
//
// Threading: send(), receive(), rtt() and stats() may be called from any thread. Every wait has
// a timeout. When the socket fails or the peer closes it, receive() returns the reason (once the
// frames that arrived before it are consumed) and send() fails with it.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "dragon/protocol.h"
#include "rag/status.h"

namespace rag::dragon {

struct LinkParams {
  double latencyMs = 0;       // added to the round trip (half each way)
  double jitterMs = -1;       // width of the per-frame jitter; < 0: latencyMs / 5 (the paper's setting)
  double bandwidthMbps = 0;   // 0: unlimited
  uint64_t seed = 1;          // jitter generator
};

struct Frame {
  FrameHeader header;
  std::vector<uint8_t> payload;
  uint64_t receivedNs = 0;  // our clock, when the receiver thread had the whole frame
};

struct TypeCounts {
  int64_t frames = 0;
  int64_t bytes = 0;  // header + payload
};

struct LinkStats {
  std::array<TypeCounts, kMsgTypeCount> sent{};      // indexed by MsgType
  std::array<TypeCounts, kMsgTypeCount> received{};
  int64_t bytesSent() const;
  int64_t bytesReceived() const;
};

// Two moving averages of the round trip (the profiler's "instant" and "historical" estimates),
// fed by every frame that echoes one of ours.
struct RttEstimate {
  double lastMs = 0;
  double instantMs = 0;     // EMA, weight 0.5 on a new sample
  double historicalMs = 0;  // EMA, weight 0.05
  int64_t samples = 0;
};

class Transport {
public:
  // "HOST:PORT". Errors name the address and the likely fix: a malformed address, a name that
  // does not resolve, a refused connection (no cloud listening), a timeout.
  static Result<std::unique_ptr<Transport>> connect(const std::string& address, const LinkParams& link,
                                                    int timeoutMs);
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  // Queues a frame for the delay line. Fails once the link is closed or broken.
  Status send(MsgType type, std::span<const uint8_t> payload);
  // The next frame, nullopt after timeoutMs without one, or the link's error once it broke
  // (Unavailable "the peer closed the connection", Corrupt for a malformed frame, IoError).
  Result<std::optional<Frame>> receive(int timeoutMs);
  // Waits for everything queued to be written (up to timeoutMs), then shuts the socket down.
  void close(int flushTimeoutMs = 1000);
  bool broken() const;

  LinkStats stats() const;
  RttEstimate rtt() const;
  LinkParams link() const;
  // Changes the delay line for frames sent from now on (a run's link settings).
  void setLink(const LinkParams& link);
  std::string peer() const { return m_peer; }

  // Test hook: raw bytes written to the socket as they are (no framing), for malformed-input tests.
  Status sendRawForTest(std::span<const uint8_t> bytes);

  // Internal: takes an open, connected socket.
  Transport(int fd, const LinkParams& link, std::string peer);

private:
  struct Pending {
    uint64_t releaseNs;
    std::vector<uint8_t> bytes;  // header + payload
    MsgType type;
  };
  void senderLoop();
  void receiverLoop();
  void fail(Status s);
  bool writeAll(const uint8_t* p, size_t n);

  int m_fd = -1;
  LinkParams m_link;
  std::string m_peer;

  mutable std::mutex m_mu;
  std::condition_variable m_sendCv;
  std::condition_variable m_recvCv;
  std::deque<Pending> m_outbox;
  std::deque<Frame> m_inbox;
  Status m_error;  // first failure; ok while the link works
  bool m_closing = false;
  uint64_t m_lastReleaseNs = 0;
  uint64_t m_wireFreeNs = 0;
  uint64_t m_rng;  // xorshift state for jitter
  uint64_t m_lastPeerSentNs = 0;   // echo state: the peer's latest frame
  uint64_t m_lastPeerRecvNs = 0;
  LinkStats m_stats;
  RttEstimate m_rtt;
  std::thread m_sender;
  std::thread m_receiver;
};

class Listener {
public:
  // Binds and listens on "HOST:PORT" (port 0: a free port, see address()). Errors name the
  // address: malformed, in use, not local.
  static Result<Listener> listen(const std::string& address);
  Listener(Listener&& o) noexcept;
  Listener& operator=(Listener&& o) noexcept;
  ~Listener();
  // Waits up to timeoutMs for one connection (Cancelled on timeout).
  Result<std::unique_ptr<Transport>> accept(int timeoutMs, const LinkParams& link);
  std::string address() const;  // the bound HOST:PORT

private:
  Listener() = default;
  int m_fd = -1;
  std::string m_address;
};

// "HOST:PORT" -> (host, port); InvalidArgument naming the expected form.
Result<std::pair<std::string, uint16_t>> parseAddress(const std::string& address);

}  // namespace rag::dragon
