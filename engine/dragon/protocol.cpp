#include "dragon/protocol.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace rag::dragon {

namespace {

void putLe(uint8_t* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint64_t getLe(const uint8_t* in, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(in[i]) << (8 * i);
  return v;
}

Status corrupt(std::string_view what, const std::string& why) {
  return Status::corrupt("malformed " + std::string(what) + " message: " + why);
}

void encodeDist(const SparseDist& d, ByteWriter& w) {
  w.u32(static_cast<uint32_t>(d.ids.size()));
  for (size_t i = 0; i < d.ids.size(); ++i) {
    w.u32(d.ids[i]);
    w.u16(floatToHalf(d.logp[i]));
  }
}

Status decodeDist(ByteReader& r, SparseDist& d, std::string_view what) {
  const uint32_t n = r.u32();
  if (!r.ok()) return r.finish();
  if (n == 0 || n > (1u << 22)) return corrupt(what, "distribution of " + std::to_string(n) + " entries");
  d.ids.resize(n);
  d.logp.resize(n);
  for (uint32_t i = 0; i < n && r.ok(); ++i) {
    d.ids[i] = r.u32();
    d.logp[i] = halfToFloat(r.u16());
    if (!r.ok()) break;  // reported as truncated by finish()
    if (i > 0 && d.ids[i] <= d.ids[i - 1]) return corrupt(what, "distribution ids are not ascending");
    if (!(d.logp[i] <= 0.0f)) return corrupt(what, "log-probability above 0 or NaN");
  }
  return Status::ok();
}

}  // namespace

uint16_t floatToHalf(float x) {
  uint32_t f;
  std::memcpy(&f, &x, 4);
  const uint32_t sign = (f >> 16) & 0x8000u;
  const uint32_t absf = f & 0x7FFFFFFFu;
  if (absf >= 0x7F800000u) return static_cast<uint16_t>(sign | 0x7C00u | (absf > 0x7F800000u ? 0x200u : 0u));
  if (absf >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds past 65504: inf
  if (absf < 0x38800000u) {  // below the smallest normal half: a multiple of 2^-24 (or 0)
    float a;
    std::memcpy(&a, &absf, 4);
    const auto h = static_cast<uint32_t>(std::nearbyint(a * 16777216.0f));  // exact scaling, ties to even
    return static_cast<uint16_t>(sign | h);  // 0x400 is the smallest normal: still right
  }
  uint32_t h = ((absf - 0x38000000u) >> 13);  // rebias the exponent 127 -> 15
  const uint32_t rem = absf & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // nearest, ties to even
  return static_cast<uint16_t>(sign | h);
}

float halfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu, mant = h & 0x3FFu;
  uint32_t f;
  if (exp == 0) {
    if (mant == 0) {
      f = sign;
    } else {  // subnormal: normalise
      int e = -1;
      uint32_t m = mant;
      do {
        ++e;
        m <<= 1;
      } while ((m & 0x400u) == 0);
      f = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((m & 0x3FFu) << 13);
    }
  } else if (exp == 31) {
    f = sign | 0x7F800000u | (mant << 13);
  } else {
    f = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float x;
  std::memcpy(&x, &f, 4);
  return x;
}

std::string_view msgTypeName(MsgType t) {
  switch (t) {
    case MsgType::Hello: return "hello";
    case MsgType::HelloAck: return "hello_ack";
    case MsgType::Ready: return "ready";
    case MsgType::Draft: return "draft";
    case MsgType::Verdict: return "verdict";
    case MsgType::Tokens: return "tokens";
    case MsgType::DocText: return "doc_text";
    case MsgType::SeqCandidate: return "seq_candidate";
    case MsgType::SeqScore: return "seq_score";
    case MsgType::Ping: return "ping";
    case MsgType::Pong: return "pong";
    case MsgType::Bye: return "bye";
    case MsgType::Error: return "error";
    case MsgType::KvChunk: return "kv_chunk";
  }
  return "unknown";
}

std::string_view sideName(Side s) { return s == Side::Device ? "device" : "cloud"; }

std::string_view methodName(Method m) {
  switch (m) {
    case Method::Dragon: return "dragon";
    case Method::DrdgTw: return "drdg_tw";
    case Method::DrdgSw: return "drdg_sw";
    case Method::DeviceOnly: return "device_only";
    case Method::CloudOnly: return "cloud_only";
    case Method::DrcgText: return "drcg_text";
    case Method::Score: return "score";
    case Method::DrcgKv: return "drcg_kv";
  }
  return "unknown";
}

Result<Method> parseMethod(std::string_view name) {
  for (Method m : {Method::Dragon, Method::DrdgTw, Method::DrdgSw, Method::DeviceOnly, Method::CloudOnly,
                   Method::DrcgText, Method::DrcgKv, Method::Score})
    if (methodName(m) == name) return m;
  return Status::invalidArgument(
      "unknown method '" + std::string(name) +
      "'; use dragon, drdg_tw, drdg_sw, device_only, cloud_only, drcg_text, drcg_kv or score");
}

std::string_view policyName(AggregatorPolicy p) {
  switch (p) {
    case AggregatorPolicy::Greedy: return "greedy";
    case AggregatorPolicy::Device: return "device";
    case AggregatorPolicy::Cloud: return "cloud";
    case AggregatorPolicy::Random: return "random";
  }
  return "unknown";
}

Result<AggregatorPolicy> parsePolicy(std::string_view name) {
  for (AggregatorPolicy p :
       {AggregatorPolicy::Greedy, AggregatorPolicy::Device, AggregatorPolicy::Cloud, AggregatorPolicy::Random})
    if (policyName(p) == name) return p;
  return Status::invalidArgument("unknown aggregator policy '" + std::string(name) +
                                 "'; use greedy, device, cloud or random");
}

void encodeHeader(const FrameHeader& h, uint8_t out[kHeaderBytes]) {
  putLe(out, kMagic, 4);
  putLe(out + 4, h.version, 2);
  out[6] = static_cast<uint8_t>(h.type);
  out[7] = h.flags;
  putLe(out + 8, h.length, 4);
  putLe(out + 12, h.sentNs, 8);
  putLe(out + 20, h.echoNs, 8);
  putLe(out + 28, h.holdUs, 4);
}

Result<FrameHeader> decodeHeader(const uint8_t in[kHeaderBytes]) {
  const auto magic = static_cast<uint32_t>(getLe(in, 4));
  if (magic != kMagic)
    return Status::corrupt("malformed frame: bad magic 0x" + [&] {
      char buf[16];
      std::snprintf(buf, sizeof buf, "%08x", magic);
      return std::string(buf);
    }() + " (the peer does not speak the DRAGON protocol)");
  FrameHeader h;
  h.version = static_cast<uint16_t>(getLe(in + 4, 2));
  if (h.version != kProtocolVersion)
    return Status::schemaMismatch("the peer speaks DRAGON protocol version " + std::to_string(h.version) +
                                  ", this build speaks " + std::to_string(kProtocolVersion) +
                                  "; run the same ragraph build on both sides");
  const uint8_t type = in[6];
  if (type == 0 || type >= kMsgTypeCount)
    return Status::corrupt("malformed frame: unknown message type " + std::to_string(type));
  h.type = static_cast<MsgType>(type);
  h.flags = in[7];
  h.length = static_cast<uint32_t>(getLe(in + 8, 4));
  if (h.length > kMaxPayloadBytes)
    return Status::corrupt("malformed frame: payload of " + std::to_string(h.length) + " bytes exceeds the limit of " +
                           std::to_string(kMaxPayloadBytes));
  h.sentNs = getLe(in + 12, 8);
  h.echoNs = getLe(in + 20, 8);
  h.holdUs = static_cast<uint32_t>(getLe(in + 28, 4));
  return h;
}

// ---- ByteWriter / ByteReader -------------------------------------------------------------------

void ByteWriter::u16(uint16_t v) {
  uint8_t b[2];
  putLe(b, v, 2);
  m_b.insert(m_b.end(), b, b + 2);
}
void ByteWriter::u32(uint32_t v) {
  uint8_t b[4];
  putLe(b, v, 4);
  m_b.insert(m_b.end(), b, b + 4);
}
void ByteWriter::u64(uint64_t v) {
  uint8_t b[8];
  putLe(b, v, 8);
  m_b.insert(m_b.end(), b, b + 8);
}
void ByteWriter::f32(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  u32(u);
}
void ByteWriter::f64(double v) {
  uint64_t u;
  std::memcpy(&u, &v, 8);
  u64(u);
}
void ByteWriter::raw(std::span<const uint8_t> b) { m_b.insert(m_b.end(), b.begin(), b.end()); }
void ByteWriter::str(std::string_view s) {
  u32(static_cast<uint32_t>(s.size()));
  m_b.insert(m_b.end(), s.begin(), s.end());
}

bool ByteReader::take(size_t n) {
  if (m_short || m_b.size() - m_pos < n) {
    m_short = true;
    return false;
  }
  return true;
}
uint8_t ByteReader::u8() { return take(1) ? m_b[m_pos++] : 0; }
uint16_t ByteReader::u16() {
  if (!take(2)) return 0;
  auto v = static_cast<uint16_t>(getLe(m_b.data() + m_pos, 2));
  m_pos += 2;
  return v;
}
uint32_t ByteReader::u32() {
  if (!take(4)) return 0;
  auto v = static_cast<uint32_t>(getLe(m_b.data() + m_pos, 4));
  m_pos += 4;
  return v;
}
uint64_t ByteReader::u64() {
  if (!take(8)) return 0;
  uint64_t v = getLe(m_b.data() + m_pos, 8);
  m_pos += 8;
  return v;
}
float ByteReader::f32() {
  uint32_t u = u32();
  float v;
  std::memcpy(&v, &u, 4);
  return v;
}
double ByteReader::f64() {
  uint64_t u = u64();
  double v;
  std::memcpy(&v, &u, 8);
  return v;
}
std::string ByteReader::str() {
  const uint32_t n = u32();
  if (!take(n)) return {};
  std::string s(reinterpret_cast<const char*>(m_b.data() + m_pos), n);
  m_pos += n;
  return s;
}
std::vector<uint8_t> ByteReader::raw(size_t n) {
  if (!take(n)) return {};
  std::vector<uint8_t> v(m_b.begin() + static_cast<std::ptrdiff_t>(m_pos), m_b.begin() + static_cast<std::ptrdiff_t>(m_pos + n));
  m_pos += n;
  return v;
}
Status ByteReader::finish() const {
  if (m_short) return corrupt(m_what, "payload is truncated");
  if (m_pos != m_b.size()) return corrupt(m_what, "payload has " + std::to_string(m_b.size() - m_pos) + " trailing bytes");
  return Status::ok();
}

double SparseDist::prob(uint32_t id) const {
  auto it = std::lower_bound(ids.begin(), ids.end(), id);
  if (it == ids.end() || *it != id) return 0.0;
  return std::exp(static_cast<double>(logp[static_cast<size_t>(it - ids.begin())]));
}

// ---- messages ----------------------------------------------------------------------------------

void encode(const Hello& m, ByteWriter& w) {
  w.u16(m.protocolVersion);
  w.u64(m.modelFingerprint);
  w.u8(static_cast<uint8_t>(m.method));
  w.u8(static_cast<uint8_t>(m.policy));
  w.u32(m.maxTokens);
  w.u32(m.docsPerSide);
  w.u32(m.maxAhead);
  w.u8(m.ignoreEos ? 1 : 0);
  w.f32(m.temperature);
  w.f32(m.topP);
  w.u64(m.seed);
  w.f64(m.latencyMs);
  w.f64(m.jitterMs);
  w.f64(m.bandwidthMbps);
  w.str(m.question);
  w.u8(static_cast<uint8_t>(m.scored));
  w.str(m.answer);
}
Result<Hello> decodeHello(std::span<const uint8_t> p) {
  ByteReader r(p, "hello");
  Hello m;
  m.protocolVersion = r.u16();
  m.modelFingerprint = r.u64();
  const uint8_t method = r.u8(), policy = r.u8();
  m.maxTokens = r.u32();
  m.docsPerSide = r.u32();
  m.maxAhead = r.u32();
  m.ignoreEos = r.u8() != 0;
  m.temperature = r.f32();
  m.topP = r.f32();
  m.seed = r.u64();
  m.latencyMs = r.f64();
  m.jitterMs = r.f64();
  m.bandwidthMbps = r.f64();
  m.question = r.str();
  const uint8_t scored = r.u8();
  m.answer = r.str();
  RAG_RETURN_IF_ERROR(r.finish());
  if (method > static_cast<uint8_t>(Method::DrcgKv)) return corrupt("hello", "unknown method " + std::to_string(method));
  if (scored != static_cast<uint8_t>(Method::Dragon) && scored != static_cast<uint8_t>(Method::DeviceOnly) &&
      scored != static_cast<uint8_t>(Method::CloudOnly))
    return corrupt("hello", "a score run scores dragon, device_only or cloud_only, not method " + std::to_string(scored));
  m.scored = static_cast<Method>(scored);
  if (policy > static_cast<uint8_t>(AggregatorPolicy::Random))
    return corrupt("hello", "unknown aggregator policy " + std::to_string(policy));
  if (!(m.topP > 0 && m.topP <= 1)) return corrupt("hello", "top-p outside (0, 1]");
  if (!(m.temperature >= 0) || !std::isfinite(m.temperature)) return corrupt("hello", "bad temperature");
  if (m.maxAhead < 1 || m.maxAhead > 64) return corrupt("hello", "max-ahead outside [1, 64]");
  if (!(m.latencyMs >= 0 && m.latencyMs <= 60000) || !(m.bandwidthMbps >= 0) || !std::isfinite(m.jitterMs))
    return corrupt("hello", "bad link settings");
  m.method = static_cast<Method>(method);
  m.policy = static_cast<AggregatorPolicy>(policy);
  return m;
}

void encode(const HelloAck& m, ByteWriter& w) {
  w.u8(m.accepted ? 1 : 0);
  w.u64(m.modelFingerprint);
  w.str(m.reason);
}
Result<HelloAck> decodeHelloAck(std::span<const uint8_t> p) {
  ByteReader r(p, "hello_ack");
  HelloAck m;
  m.accepted = r.u8() != 0;
  m.modelFingerprint = r.u64();
  m.reason = r.str();
  RAG_RETURN_IF_ERROR(r.finish());
  return m;
}

void encode(const Ready& m, ByteWriter& w) {
  w.u32(m.documents);
  w.f64(m.prefillMs);
  w.f64(m.decodeSlopeMs);
  w.f64(m.decodeInterceptMs);
}
Result<Ready> decodeReady(std::span<const uint8_t> p) {
  ByteReader r(p, "ready");
  Ready m;
  m.documents = r.u32();
  m.prefillMs = r.f64();
  m.decodeSlopeMs = r.f64();
  m.decodeInterceptMs = r.f64();
  RAG_RETURN_IF_ERROR(r.finish());
  return m;
}

void encode(const Draft& m, ByteWriter& w) {
  w.u8(static_cast<uint8_t>(m.side));
  w.u32(m.pos);
  w.u32(m.version);
  w.u32(m.token);
  w.f64(m.weight);
  w.f64(m.decodeMs);
  w.u32(m.contextLen);
  encodeDist(m.dist, w);
}
Result<Draft> decodeDraft(std::span<const uint8_t> p) {
  ByteReader r(p, "draft");
  Draft m;
  const uint8_t side = r.u8();
  m.pos = r.u32();
  m.version = r.u32();
  m.token = r.u32();
  m.weight = r.f64();
  m.decodeMs = r.f64();
  m.contextLen = r.u32();
  RAG_RETURN_IF_ERROR(decodeDist(r, m.dist, "draft"));
  RAG_RETURN_IF_ERROR(r.finish());
  if (side > 1) return corrupt("draft", "unknown side " + std::to_string(side));
  m.side = static_cast<Side>(side);
  if (m.dist.prob(m.token) <= 0) return corrupt("draft", "the draft token is outside its own distribution");
  return m;
}

void encode(const Verdict& m, ByteWriter& w) {
  w.u32(m.pos);
  w.u32(m.token);
  w.u8(static_cast<uint8_t>((m.accepted[0] ? 1 : 0) | (m.accepted[1] ? 2 : 0) | (m.done ? 4 : 0)));
  w.u8(static_cast<uint8_t>(m.nextAggregator));
}
Result<Verdict> decodeVerdict(std::span<const uint8_t> p) {
  ByteReader r(p, "verdict");
  Verdict m;
  m.pos = r.u32();
  m.token = r.u32();
  const uint8_t bits = r.u8(), next = r.u8();
  RAG_RETURN_IF_ERROR(r.finish());
  if (bits > 7 || next > 1) return corrupt("verdict", "bad flags");
  m.accepted[0] = bits & 1;
  m.accepted[1] = bits & 2;
  m.done = bits & 4;
  m.nextAggregator = static_cast<Side>(next);
  return m;
}

void encode(const TokenList& m, ByteWriter& w) {
  w.u32(m.firstPos);
  w.u8(m.done ? 1 : 0);
  w.u32(static_cast<uint32_t>(m.tokens.size()));
  for (uint32_t t : m.tokens) w.u32(t);
}
Result<TokenList> decodeTokenList(std::span<const uint8_t> p) {
  ByteReader r(p, "tokens");
  TokenList m;
  m.firstPos = r.u32();
  m.done = r.u8() != 0;
  const uint32_t n = r.u32();
  if (r.ok() && static_cast<size_t>(n) * 4 > p.size()) return corrupt("tokens", "count exceeds the payload");
  for (uint32_t i = 0; i < n && r.ok(); ++i) m.tokens.push_back(r.u32());
  RAG_RETURN_IF_ERROR(r.finish());
  return m;
}

void encode(const DocTexts& m, ByteWriter& w) {
  w.u32(static_cast<uint32_t>(m.texts.size()));
  for (size_t i = 0; i < m.texts.size(); ++i) {
    w.str(m.texts[i]);
    w.f64(m.scores[i]);
  }
}
Result<DocTexts> decodeDocTexts(std::span<const uint8_t> p) {
  ByteReader r(p, "doc_text");
  DocTexts m;
  const uint32_t n = r.u32();
  if (r.ok() && static_cast<size_t>(n) * 12 > p.size()) return corrupt("doc_text", "count exceeds the payload");
  for (uint32_t i = 0; i < n && r.ok(); ++i) {
    m.texts.push_back(r.str());
    m.scores.push_back(r.f64());
  }
  RAG_RETURN_IF_ERROR(r.finish());
  return m;
}

void encode(const SeqCandidate& m, ByteWriter& w) {
  w.f64(m.weight);
  w.u32(static_cast<uint32_t>(m.tokens.size()));
  for (size_t i = 0; i < m.tokens.size(); ++i) {
    w.u32(m.tokens[i]);
    w.f32(m.logp[i]);
  }
}
Result<SeqCandidate> decodeSeqCandidate(std::span<const uint8_t> p) {
  ByteReader r(p, "seq_candidate");
  SeqCandidate m;
  m.weight = r.f64();
  const uint32_t n = r.u32();
  if (r.ok() && static_cast<size_t>(n) * 8 > p.size()) return corrupt("seq_candidate", "count exceeds the payload");
  for (uint32_t i = 0; i < n && r.ok(); ++i) {
    m.tokens.push_back(r.u32());
    m.logp.push_back(r.f32());
  }
  RAG_RETURN_IF_ERROR(r.finish());
  return m;
}

void encode(const SeqScore& m, ByteWriter& w) {
  w.u32(static_cast<uint32_t>(m.logp.size()));
  for (float v : m.logp) w.f32(v);
}
Result<SeqScore> decodeSeqScore(std::span<const uint8_t> p) {
  ByteReader r(p, "seq_score");
  SeqScore m;
  const uint32_t n = r.u32();
  if (r.ok() && static_cast<size_t>(n) * 4 > p.size()) return corrupt("seq_score", "count exceeds the payload");
  for (uint32_t i = 0; i < n && r.ok(); ++i) m.logp.push_back(r.f32());
  RAG_RETURN_IF_ERROR(r.finish());
  return m;
}

void encode(const Bye& m, ByteWriter& w) { w.str(m.reason); }
Result<Bye> decodeBye(std::span<const uint8_t> p) {
  ByteReader r(p, "bye");
  Bye m;
  m.reason = r.str();
  RAG_RETURN_IF_ERROR(r.finish());
  return m;
}

void encode(const KvChunk& m, ByteWriter& w) {
  w.u32(m.passages);
  w.u32(m.totalTokens);
  w.u32(m.firstToken);
  w.u32(m.layers);
  w.u32(m.kvHeads);
  w.u32(m.headDim);
  w.u8(m.elementBytes);
  w.u32(static_cast<uint32_t>(m.tokens.size()));
  for (uint32_t t : m.tokens) w.u32(t);
  w.u32(static_cast<uint32_t>(m.data.size()));
  w.raw(m.data);
}
Result<KvChunk> decodeKvChunk(std::span<const uint8_t> p) {
  ByteReader r(p, "kv_chunk");
  KvChunk m;
  m.passages = r.u32();
  m.totalTokens = r.u32();
  m.firstToken = r.u32();
  m.layers = r.u32();
  m.kvHeads = r.u32();
  m.headDim = r.u32();
  m.elementBytes = r.u8();
  const uint32_t n = r.u32();
  if (r.ok() && static_cast<size_t>(n) * 4 > p.size()) return corrupt("kv_chunk", "token count exceeds the payload");
  for (uint32_t i = 0; i < n && r.ok(); ++i) m.tokens.push_back(r.u32());
  const uint32_t bytes = r.u32();
  if (r.ok() && bytes > p.size()) return corrupt("kv_chunk", "data length exceeds the payload");
  m.data = r.raw(bytes);
  RAG_RETURN_IF_ERROR(r.finish());
  if (m.elementBytes != 2 && m.elementBytes != 4)
    return corrupt("kv_chunk", "element size " + std::to_string(m.elementBytes) + " (2 or 4 expected)");
  if (m.layers == 0 || m.kvHeads == 0 || m.headDim == 0 || m.layers > 4096 || m.kvHeads > 4096 || m.headDim > 4096)
    return corrupt("kv_chunk", "bad KV shape");
  const bool emptySequence = n == 0 && m.totalTokens == 0 && m.firstToken == 0;  // the sender had no passages
  if ((n == 0 && !emptySequence) || static_cast<uint64_t>(m.firstToken) + n > m.totalTokens)
    return corrupt("kv_chunk", "tokens [" + std::to_string(m.firstToken) + ", +" + std::to_string(n) + ") outside the " +
                                   std::to_string(m.totalTokens) + " tokens of the sequence");
  const uint64_t expect = static_cast<uint64_t>(m.layers) * 2 * n * static_cast<uint64_t>(m.rowBytes());
  if (expect != bytes)
    return corrupt("kv_chunk", std::to_string(bytes) + " bytes of K/V for " + std::to_string(n) + " tokens of " +
                                   std::to_string(m.layers) + " layers × " + std::to_string(m.kvHeads) + " heads × " +
                                   std::to_string(m.headDim) + " × " + std::to_string(m.elementBytes) +
                                   " bytes (expected " + std::to_string(expect) + ")");
  return m;
}

}  // namespace rag::dragon
