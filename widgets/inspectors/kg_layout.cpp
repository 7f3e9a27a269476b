#include "inspectors/kg_layout.h"

#include <dlfcn.h>
#include <graphviz/gvc.h>

#include <algorithm>
#include <charconv>
#include <clocale>
#include <cmath>
#include <locale.h>
#include <mutex>
#include <string>
#include <unordered_map>

namespace ragwb {

namespace {

std::mutex& graphvizMutex() {
  static std::mutex m;
  return m;
}

// Graphviz's layout plugin, loaded with RTLD_DEEPBIND. Loaded the usual way (gvContext() and
// its config file) the plugin's calls to its own exported functions bind to whatever the process
// loaded first under the same name: the engine's dependencies bring librttopo, whose `normalize`
// then replaces neato's, and the layouts come out with boxes on top of each other. Deep binding
// makes the plugin find its own symbols first.
struct LayoutPlugin {
  lt_symlist_t builtins[2] = {{nullptr, nullptr}, {nullptr, nullptr}};
  std::string error;
};

const LayoutPlugin& layoutPlugin() {
  static const LayoutPlugin plugin = [] {
    LayoutPlugin p;
    const std::string path = std::string(RAGWB_GRAPHVIZ_PLUGIN_DIR) + "/libgvplugin_neato_layout.so." + RAGWB_GRAPHVIZ_PLUGIN_VERSION;
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!h) {
      const char* why = dlerror();
      p.error = "cannot load Graphviz's layout plugin " + path + " (" + (why ? why : "unknown error") +
                "); install libgvc6 (Debian: apt-get install libgraphviz-dev)";
      return p;
    }
    void* lib = dlsym(h, "gvplugin_neato_layout_LTX_library");
    if (!lib) {
      p.error = path + " has no gvplugin_neato_layout_LTX_library: not a Graphviz layout plugin of version " +
                RAGWB_GRAPHVIZ_PLUGIN_VERSION;
      return p;
    }
    p.builtins[0] = {"gvplugin_neato_layout_LTX_library", lib};
    return p;
  }();
  return plugin;
}

// Graphviz's C API takes char* for names it only reads.
char* cs(const char* s) { return const_cast<char*>(s); }

void setAttr(void* obj, const char* name, const std::string& value) {
  agsafeset(obj, cs(name), const_cast<char*>(value.c_str()), cs(""));
}

// "%.4f" in the C locale: Graphviz reads numbers with strtod, which follows the thread's locale.
std::string inches(double points) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, points / 72.0, std::chars_format::fixed, 4);
  return std::string(buf, r.ptr);
}

// The C numeric locale on this thread while it lives: a GUI application runs in the user's
// locale, where "1.6" may not be a number to strtod (Graphviz would read node sizes as whole
// inches and lay boxes over each other).
class CNumericLocale {
public:
  CNumericLocale() : m_c(newlocale(LC_NUMERIC_MASK, "C", duplocale(LC_GLOBAL_LOCALE))), m_old(uselocale(m_c)) {}
  ~CNumericLocale() {
    uselocale(m_old);
    freelocale(m_c);
  }
  CNumericLocale(const CNumericLocale&) = delete;
  CNumericLocale& operator=(const CNumericLocale&) = delete;

private:
  locale_t m_c;
  locale_t m_old;
};

// Where the segment from `inside` (a node's centre) to `outside` leaves the node's box.
QPointF borderPoint(QPointF centre, double w, double h, QPointF towards) {
  const QPointF d = towards - centre;
  if (d.isNull()) return centre;
  const double sx = d.x() != 0 ? (w / 2) / std::abs(d.x()) : 1e300;
  const double sy = d.y() != 0 ? (h / 2) / std::abs(d.y()) : 1e300;
  const double s = std::min({sx, sy, 1.0});
  return centre + d * s;
}

}  // namespace

rag::Result<KgLayout> layOutKnowledgeGraph(const KgLayoutInput& input) {
  std::unordered_map<int32_t, size_t> index;
  for (size_t i = 0; i < input.nodes.size(); ++i)
    if (!index.emplace(input.nodes[i].id, i).second)
      return rag::Status::invalidArgument("node " + std::to_string(input.nodes[i].id) + " is in the layout twice");
  for (const KgLayoutInput::Edge& e : input.edges)
    if (!index.count(e.src) || !index.count(e.dst))
      return rag::Status::invalidArgument("edge " + std::to_string(e.src) + " -> " + std::to_string(e.dst) +
                                          " names a node the layout lacks");
  KgLayout out;
  out.engine = input.nodes.size() > 400 ? "sfdp" : "neato";
  if (input.nodes.empty()) return out;

  const LayoutPlugin& plugin = layoutPlugin();
  if (!plugin.error.empty()) return rag::Status::unavailable(plugin.error);
  std::lock_guard lock(graphvizMutex());
  const CNumericLocale cLocale;
  agseterr(AGERR);  // warnings (e.g. about overlap removal) are not the user's business
  GVC_t* gvc = gvContextPlugins(plugin.builtins, 0);  // only the deep-bound layout plugin
  Agraph_t* g = agopen(cs("kg"), Agdirected, nullptr);
  agattr(g, AGRAPH, cs("overlap"), cs("false"));
  agattr(g, AGRAPH, cs("splines"), cs("true"));
  agattr(g, AGRAPH, cs("sep"), cs("+8"));
  agattr(g, AGRAPH, cs("start"), cs("7"));  // a fixed seed: the same graph always looks the same
  agattr(g, AGNODE, cs("shape"), cs("box"));
  agattr(g, AGNODE, cs("fixedsize"), cs("true"));
  agattr(g, AGNODE, cs("label"), cs(""));
  agattr(g, AGEDGE, cs("len"), cs("1.6"));
  std::vector<Agnode_t*> nodes(input.nodes.size());
  for (size_t i = 0; i < input.nodes.size(); ++i) {
    const KgLayoutInput::Node& n = input.nodes[i];
    nodes[i] = agnode(g, const_cast<char*>(std::to_string(n.id).c_str()), 1);
    setAttr(nodes[i], "width", inches(n.width));
    setAttr(nodes[i], "height", inches(n.height));
  }
  std::vector<Agedge_t*> edges(input.edges.size(), nullptr);
  for (size_t i = 0; i < input.edges.size(); ++i) {
    const KgLayoutInput::Edge& e = input.edges[i];
    if (e.src == e.dst) continue;  // a self-loop has no place in a neighbourhood drawing
    edges[i] = agedge(g, nodes[index[e.src]], nodes[index[e.dst]], nullptr, 1);
  }
  auto fail = [&] {
    agclose(g);
    gvFreeContext(gvc);
    return rag::Status::internal("Graphviz could not lay out the graph (" + out.engine.toStdString() +
                                 "); is the libgvc layout plugin installed (libgvc6)?");
  };
  if (gvLayout(gvc, g, out.engine.toUtf8().constData()) != 0) return fail();
  // Should overlap removal (prism) leave two boxes overlapping, scale the layout instead, which
  // always separates them (and spreads the graph a little).
  auto overlapping = [&] {
    for (size_t a = 0; a < nodes.size(); ++a)
      for (size_t b = a + 1; b < nodes.size(); ++b) {
        const pointf pa = ND_coord(nodes[a]), pb = ND_coord(nodes[b]);
        if (std::abs(pa.x - pb.x) * 2 < input.nodes[a].width + input.nodes[b].width &&
            std::abs(pa.y - pb.y) * 2 < input.nodes[a].height + input.nodes[b].height)
          return true;
      }
    return false;
  };
  if (overlapping()) {
    gvFreeLayout(gvc, g);
    setAttr(g, "overlap", "scale");
    if (gvLayout(gvc, g, out.engine.toUtf8().constData()) != 0) return fail();
  }
  const boxf bb = GD_bb(g);
  auto toScene = [&](pointf p) { return QPointF(p.x - bb.LL.x, bb.UR.y - p.y); };  // y down
  out.bounds = QRectF(0, 0, bb.UR.x - bb.LL.x, bb.UR.y - bb.LL.y);
  std::vector<QPointF> centre(input.nodes.size());
  for (size_t i = 0; i < input.nodes.size(); ++i) {
    centre[i] = toScene(ND_coord(nodes[i]));
    out.nodes.push_back({input.nodes[i].id, centre[i]});
  }
  for (size_t i = 0; i < input.edges.size(); ++i) {
    const KgLayoutInput::Edge& e = input.edges[i];
    const size_t a = index[e.src], b = index[e.dst];
    const KgLayoutInput::Node& na = input.nodes[a];
    const KgLayoutInput::Node& nb = input.nodes[b];
    KgLayout::Edge le{.src = e.src, .dst = e.dst, .path = {}, .head = {}, .headFrom = {}};
    const splines* spl = edges[i] ? ED_spl(edges[i]) : nullptr;
    if (spl && spl->size > 0 && spl->list[0].size >= 4) {
      // One bezier per edge (no compound edges here): list = start, then (c1, c2, end) triples.
      const bezier& bz = spl->list[0];
      le.path.moveTo(toScene(bz.list[0]));
      for (int k = 1; k + 2 < bz.size; k += 3) le.path.cubicTo(toScene(bz.list[k]), toScene(bz.list[k + 1]), toScene(bz.list[k + 2]));
      le.headFrom = toScene(bz.list[bz.size - 2]);
      le.head = bz.eflag ? toScene(bz.ep) : toScene(bz.list[bz.size - 1]);
      if (bz.eflag) le.path.lineTo(le.head);
    } else {  // a self-loop or a layout without splines: a straight line between the borders
      const QPointF from = borderPoint(centre[a], na.width, na.height, centre[b]);
      le.head = borderPoint(centre[b], nb.width, nb.height, centre[a]);
      le.headFrom = from;
      le.path.moveTo(from);
      le.path.lineTo(le.head);
    }
    out.edges.push_back(std::move(le));
  }
  gvFreeLayout(gvc, g);
  agclose(g);
  gvFreeContext(gvc);
  return out;
}

}  // namespace ragwb
