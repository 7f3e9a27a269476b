#include "dragon/transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "core/clock.h"

namespace rag::dragon {

namespace {

std::string errnoText(int e) { return std::strerror(e); }

void setNoDelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// Resolves host:port to an IPv4/IPv6 socket address list.
Result<addrinfo*> resolve(const std::string& host, uint16_t port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  const int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0)
    return Status::notFound("cannot resolve host '" + host + "': " + ::gai_strerror(rc) +
                            "; give an IP address or a resolvable name as HOST:PORT");
  return res;
}

uint64_t xorshift(uint64_t& s) {
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  return s;
}

}  // namespace

Result<std::pair<std::string, uint16_t>> parseAddress(const std::string& address) {
  const size_t colon = address.rfind(':');
  auto bad = [&] {
    return Status::invalidArgument("malformed address '" + address + "'; expected HOST:PORT, e.g. 127.0.0.1:7410");
  };
  if (colon == std::string::npos || colon + 1 >= address.size()) return bad();
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const std::string portText = address.substr(colon + 1);
  if (!std::all_of(portText.begin(), portText.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      portText.size() > 5)
    return bad();
  const long port = std::stol(portText);
  if (port > 65535) return bad();
  return std::pair<std::string, uint16_t>{host, static_cast<uint16_t>(port)};
}

int64_t LinkStats::bytesSent() const {
  int64_t n = 0;
  for (const TypeCounts& c : sent) n += c.bytes;
  return n;
}
int64_t LinkStats::bytesReceived() const {
  int64_t n = 0;
  for (const TypeCounts& c : received) n += c.bytes;
  return n;
}

// ---- Transport ---------------------------------------------------------------------------------

Transport::Transport(int fd, const LinkParams& link, std::string peer)
    : m_fd(fd), m_link(link), m_peer(std::move(peer)), m_rng(link.seed * 0x9E3779B97F4A7C15ull + 1) {
  if (m_link.jitterMs < 0) m_link.jitterMs = m_link.latencyMs / 5.0;
  setNoDelay(m_fd);
  m_sender = std::thread([this] { senderLoop(); });
  m_receiver = std::thread([this] { receiverLoop(); });
}

Transport::~Transport() { close(0); }

Result<std::unique_ptr<Transport>> Transport::connect(const std::string& address, const LinkParams& link,
                                                      int timeoutMs) {
  RAG_ASSIGN_OR_RETURN(auto hp, parseAddress(address));
  RAG_ASSIGN_OR_RETURN(addrinfo * res, resolve(hp.first, hp.second, false));
  Status last = Status::unavailable("no address to connect to for " + address);
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last = Status::ioError("socket(): " + errnoText(errno));
      continue;
    }
    const int flags = ::fcntl(fd, F_GETFL, 0);
    ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      rc = ::poll(&p, 1, timeoutMs);
      if (rc == 0) {
        ::close(fd);
        last = Status::unavailable("connecting to " + address + " timed out after " + std::to_string(timeoutMs) +
                                   " ms; check the address and that `ragraph dragon cloud --listen " + address +
                                   "` is running and reachable");
        continue;
      }
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      rc = err == 0 ? 0 : -1;
      errno = err;
    }
    if (rc != 0) {
      const int e = errno;
      ::close(fd);
      last = e == ECONNREFUSED
                 ? Status::unavailable("connection to " + address +
                                       " refused: nothing listens there; start `ragraph dragon cloud --listen " +
                                       address + "` first")
                 : Status::unavailable("cannot connect to " + address + ": " + errnoText(e));
      continue;
    }
    ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    ::freeaddrinfo(res);
    return std::make_unique<Transport>(fd, link, address);
  }
  ::freeaddrinfo(res);
  return last;
}

void Transport::fail(Status s) {
  std::lock_guard lk(m_mu);
  if (m_error.isOk()) m_error = std::move(s);
  m_sendCv.notify_all();
  m_recvCv.notify_all();
}

bool Transport::broken() const {
  std::lock_guard lk(m_mu);
  return !m_error.isOk();
}

Status Transport::send(MsgType type, std::span<const uint8_t> payload) {
  if (payload.size() > kMaxPayloadBytes)
    return Status::invalidArgument("a " + std::string(msgTypeName(type)) + " payload of " +
                                   std::to_string(payload.size()) + " bytes exceeds the frame limit");
  std::lock_guard lk(m_mu);
  if (!m_error.isOk()) return m_error;
  if (m_closing) return Status::cancelled("the link to " + m_peer + " is closing");
  const uint64_t now = nowNs();
  FrameHeader h;
  h.type = type;
  h.length = static_cast<uint32_t>(payload.size());
  h.sentNs = now;
  h.echoNs = m_lastPeerSentNs;
  if (m_lastPeerSentNs != 0)
    h.holdUs = static_cast<uint32_t>(std::min<uint64_t>((now - m_lastPeerRecvNs) / 1000, UINT32_MAX));
  Pending p;
  p.type = type;
  p.bytes.resize(kHeaderBytes + payload.size());
  encodeHeader(h, p.bytes.data());
  std::copy(payload.begin(), payload.end(), p.bytes.begin() + kHeaderBytes);
  // The delay line: half the added latency each way, jitter, order kept, a virtual wire.
  double delayMs = m_link.latencyMs / 2.0;
  if (m_link.jitterMs > 0) {
    const double u = static_cast<double>(xorshift(m_rng) >> 11) * 0x1.0p-53;  // [0, 1)
    delayMs += (u - 0.5) * m_link.jitterMs;
  }
  uint64_t release = now + static_cast<uint64_t>(std::max(0.0, delayMs) * 1e6);
  release = std::max(release, m_lastReleaseNs);
  if (m_link.bandwidthMbps > 0) {
    const double wireNs = static_cast<double>(p.bytes.size()) * 8.0 / (m_link.bandwidthMbps * 1e6) * 1e9;
    m_wireFreeNs = std::max(m_wireFreeNs, release) + static_cast<uint64_t>(wireNs);
    release = m_wireFreeNs;
  }
  m_lastReleaseNs = release;
  p.releaseNs = release;
  TypeCounts& c = m_stats.sent[static_cast<size_t>(type)];
  ++c.frames;
  c.bytes += static_cast<int64_t>(p.bytes.size());
  m_outbox.push_back(std::move(p));
  m_sendCv.notify_all();
  return Status::ok();
}

Status Transport::sendRawForTest(std::span<const uint8_t> bytes) {
  if (!writeAll(bytes.data(), bytes.size())) return Status::ioError("write failed");
  return Status::ok();
}

bool Transport::writeAll(const uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(m_fd, p, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

void Transport::senderLoop() {
  std::unique_lock lk(m_mu);
  for (;;) {
    if (!m_error.isOk()) return;
    if (m_outbox.empty()) {
      if (m_closing) return;
      m_sendCv.wait(lk);
      continue;
    }
    const uint64_t release = m_outbox.front().releaseNs;
    const uint64_t now = nowNs();
    if (now < release) {
      m_sendCv.wait_for(lk, std::chrono::nanoseconds(release - now));
      continue;
    }
    Pending p = std::move(m_outbox.front());
    m_outbox.pop_front();
    lk.unlock();
    const bool ok = writeAll(p.bytes.data(), p.bytes.size());
    const int e = errno;
    lk.lock();
    if (!ok) {
      if (m_error.isOk())
        m_error = e == EPIPE || e == ECONNRESET
                      ? Status::unavailable("the peer " + m_peer + " closed the connection")
                      : Status::ioError("writing to " + m_peer + ": " + errnoText(e));
      m_recvCv.notify_all();
      return;
    }
    m_sendCv.notify_all();  // close() waits for the outbox to drain
  }
}

void Transport::receiverLoop() {
  auto readAll = [&](uint8_t* p, size_t n) -> int {  // 1 ok, 0 EOF at a frame boundary, -1 error
    size_t got = 0;
    while (got < n) {
      const ssize_t r = ::recv(m_fd, p + got, n - got, 0);
      if (r == 0) return got == 0 ? 0 : -2;  // -2: EOF inside a frame
      if (r < 0) {
        if (errno == EINTR) continue;
        return -1;
      }
      got += static_cast<size_t>(r);
    }
    return 1;
  };
  for (;;) {
    uint8_t hb[kHeaderBytes];
    int rc = readAll(hb, kHeaderBytes);
    if (rc != 1) {
      const int e = errno;
      fail(rc == 0 ? Status::unavailable("the peer " + m_peer + " closed the connection")
           : rc == -2 ? Status::corrupt("malformed frame from " + m_peer + ": the connection ended inside a frame")
                      : Status::unavailable("reading from " + m_peer + ": " + errnoText(e)));
      return;
    }
    Result<FrameHeader> h = decodeHeader(hb);
    if (!h) {
      fail(h.status().withContext("from " + m_peer));
      ::shutdown(m_fd, SHUT_RDWR);
      return;
    }
    Frame f;
    f.header = *h;
    f.payload.resize(h->length);
    if (h->length > 0) {
      rc = readAll(f.payload.data(), h->length);
      if (rc != 1) {
        fail(Status::corrupt("malformed frame from " + m_peer + ": the connection ended inside a " +
                             std::string(msgTypeName(h->type)) + " payload"));
        return;
      }
    }
    f.receivedNs = nowNs();
    std::lock_guard lk(m_mu);
    TypeCounts& c = m_stats.received[static_cast<size_t>(h->type)];
    ++c.frames;
    c.bytes += static_cast<int64_t>(kHeaderBytes + h->length);
    m_lastPeerSentNs = h->sentNs;
    m_lastPeerRecvNs = f.receivedNs;
    if (h->echoNs != 0 && f.receivedNs > h->echoNs) {
      const double ms = (static_cast<double>(f.receivedNs - h->echoNs) - static_cast<double>(h->holdUs) * 1e3) * 1e-6;
      if (ms >= 0) {
        m_rtt.lastMs = ms;
        m_rtt.instantMs = m_rtt.samples == 0 ? ms : 0.5 * m_rtt.instantMs + 0.5 * ms;
        m_rtt.historicalMs = m_rtt.samples == 0 ? ms : 0.95 * m_rtt.historicalMs + 0.05 * ms;
        ++m_rtt.samples;
      }
    }
    m_inbox.push_back(std::move(f));
    m_recvCv.notify_all();
  }
}

Result<std::optional<Frame>> Transport::receive(int timeoutMs) {
  std::unique_lock lk(m_mu);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(0, timeoutMs));
  while (m_inbox.empty() && m_error.isOk())
    if (m_recvCv.wait_until(lk, deadline) == std::cv_status::timeout) break;
  if (!m_inbox.empty()) {
    Frame f = std::move(m_inbox.front());
    m_inbox.pop_front();
    return std::optional<Frame>(std::move(f));
  }
  if (!m_error.isOk()) return m_error;
  return std::optional<Frame>();
}

void Transport::close(int flushTimeoutMs) {
  {
    std::unique_lock lk(m_mu);
    if (m_fd < 0) return;
    m_closing = true;
    m_sendCv.notify_all();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(0, flushTimeoutMs));
    while (!m_outbox.empty() && m_error.isOk())
      if (m_sendCv.wait_until(lk, deadline) == std::cv_status::timeout) break;
    if (m_error.isOk()) m_error = Status::cancelled("the link to " + m_peer + " was closed");
    m_sendCv.notify_all();
    m_recvCv.notify_all();
  }
  ::shutdown(m_fd, SHUT_RDWR);
  if (m_sender.joinable()) m_sender.join();
  if (m_receiver.joinable()) m_receiver.join();
  ::close(m_fd);
  m_fd = -1;
}

LinkStats Transport::stats() const {
  std::lock_guard lk(m_mu);
  return m_stats;
}

LinkParams Transport::link() const {
  std::lock_guard lk(m_mu);
  return m_link;
}

void Transport::setLink(const LinkParams& link) {
  std::lock_guard lk(m_mu);
  m_link = link;
  if (m_link.jitterMs < 0) m_link.jitterMs = m_link.latencyMs / 5.0;
  m_rng = link.seed * 0x9E3779B97F4A7C15ull + 1;
}

RttEstimate Transport::rtt() const {
  std::lock_guard lk(m_mu);
  return m_rtt;
}

// ---- Listener ----------------------------------------------------------------------------------

Listener::Listener(Listener&& o) noexcept : m_fd(o.m_fd), m_address(std::move(o.m_address)) { o.m_fd = -1; }
Listener& Listener::operator=(Listener&& o) noexcept {
  if (this != &o) {
    if (m_fd >= 0) ::close(m_fd);
    m_fd = o.m_fd;
    m_address = std::move(o.m_address);
    o.m_fd = -1;
  }
  return *this;
}
Listener::~Listener() {
  if (m_fd >= 0) ::close(m_fd);
}

Result<Listener> Listener::listen(const std::string& address) {
  RAG_ASSIGN_OR_RETURN(auto hp, parseAddress(address));
  RAG_ASSIGN_OR_RETURN(addrinfo * res, resolve(hp.first, hp.second, true));
  Status last = Status::unavailable("no address to listen on for " + address);
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd, 4) != 0) {
      const int e = errno;
      ::close(fd);
      last = Status::unavailable("cannot listen on " + address + ": " + errnoText(e) +
                                 (e == EADDRINUSE ? " (another process holds the port; pick another)" : ""));
      continue;
    }
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
    char host[NI_MAXHOST], serv[NI_MAXSERV];
    ::getnameinfo(reinterpret_cast<sockaddr*>(&ss), len, host, sizeof host, serv, sizeof serv,
                  NI_NUMERICHOST | NI_NUMERICSERV);
    Listener l;
    l.m_fd = fd;
    std::string bound;
    if (ss.ss_family == AF_INET6) bound.append("[").append(host).append("]");
    else bound.append(host);
    l.m_address = bound.append(":").append(serv);
    ::freeaddrinfo(res);
    return l;
  }
  ::freeaddrinfo(res);
  return last;
}

Result<std::unique_ptr<Transport>> Listener::accept(int timeoutMs, const LinkParams& link) {
  pollfd p{m_fd, POLLIN, 0};
  const int rc = ::poll(&p, 1, timeoutMs);
  if (rc == 0)
    return Status::cancelled("no device connected to " + m_address + " within " + std::to_string(timeoutMs) + " ms");
  if (rc < 0) return Status::ioError("waiting for a connection on " + m_address + ": " + errnoText(errno));
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  const int fd = ::accept4(m_fd, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_CLOEXEC);
  if (fd < 0) return Status::ioError("accepting on " + m_address + ": " + errnoText(errno));
  char host[NI_MAXHOST], serv[NI_MAXSERV];
  ::getnameinfo(reinterpret_cast<sockaddr*>(&ss), len, host, sizeof host, serv, sizeof serv,
                NI_NUMERICHOST | NI_NUMERICSERV);
  return std::make_unique<Transport>(fd, link, std::string(host) + ":" + serv);
}

std::string Listener::address() const { return m_address; }

}  // namespace rag::dragon
