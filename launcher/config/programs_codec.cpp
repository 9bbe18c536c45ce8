#include "launcher/config/programs_codec.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

namespace dlaunch::launcher {

namespace {

constexpr size_t kMaxDocument = size_t{1} << 20;
constexpr size_t kMaxGroups = 1024;
constexpr size_t kMaxNodes = 65536;
constexpr std::int64_t kMaxCount = 1 << 20;

boost::json::array Strings(const std::vector<std::string>& list) {
  boost::json::array a;
  for (const std::string& s : list) a.emplace_back(s);
  return a;
}

// Reads what EncodePrograms wrote: a failure names the field.
struct Reader {
  std::string where;

  Status Bad(std::string_view what) const {
    return Status::InvalidArgument(fmt::format("{}: {}: {}", kProgramsVar, where, what));
  }
  Result<std::string> String(const boost::json::object& o, const char* key) const {
    const boost::json::value* v = o.if_contains(key);
    if (v == nullptr || !v->is_string()) return Bad(fmt::format("'{}' is not a string", key));
    return std::string(v->as_string());
  }
  Result<std::int64_t> Number(const boost::json::object& o, const char* key, std::int64_t lo, std::int64_t hi) const {
    const boost::json::value* v = o.if_contains(key);
    if (v == nullptr || !v->is_int64() || v->as_int64() < lo || v->as_int64() > hi)
      return Bad(fmt::format("'{}' is not a whole number from {} to {}", key, lo, hi));
    return v->as_int64();
  }
  Result<bool> Bool(const boost::json::object& o, const char* key) const {
    const boost::json::value* v = o.if_contains(key);
    if (v == nullptr || !v->is_bool()) return Bad(fmt::format("'{}' is not true or false", key));
    return v->as_bool();
  }
  Result<std::vector<std::string>> Strings(const boost::json::object& o, const char* key) const {
    const boost::json::value* v = o.if_contains(key);
    if (v == nullptr || !v->is_array()) return Bad(fmt::format("'{}' is not a list", key));
    std::vector<std::string> out;
    for (const boost::json::value& s : v->as_array()) {
      if (!s.is_string()) return Bad(fmt::format("'{}' holds something other than strings", key));
      out.emplace_back(s.as_string());
    }
    return out;
  }
};

Result<envmap::ProgramGroup> GroupFrom(const boost::json::value& v, size_t index) {
  Reader r{fmt::format("group {}", index + 1)};
  const boost::json::object* o = v.if_object();
  if (o == nullptr) return r.Bad("not an object");
  envmap::ProgramGroup g;
  Result<std::string> role = r.String(*o, "role");
  Result<std::string> line = r.String(*o, "line");
  Result<std::vector<std::string>> argv = r.Strings(*o, "argv");
  Result<std::vector<std::string>> gpus = r.Strings(*o, "gpus");
  Result<std::int64_t> at = r.Number(*o, "local_rank_arg_at", 0, kMaxCount);
  Result<bool> expand = r.Bool(*o, "expand");
  for (const Status& s : {role.status(), line.status(), argv.status(), gpus.status(), at.status(), expand.status()})
    if (!s.ok()) return s;
  if (role->empty() || argv->empty()) return r.Bad("no role or no command");
  g.role = *role;
  g.line = *line;
  g.argv = std::move(*argv);
  g.gpus = std::move(*gpus);
  g.local_rank_arg_at = static_cast<size_t>(*at);
  g.expand = *expand;
  for (auto [key, flag] : {std::pair{"ompi", &g.ompi}, {"azure", &g.azure}, {"horovod", &g.horovod}}) {
    Result<bool> b = r.Bool(*o, key);
    if (!b.ok()) return b.status();
    *flag = *b;
  }
  const boost::json::value* env = o->if_contains("env");
  if (env == nullptr || !env->is_array()) return r.Bad("'env' is not a list");
  for (const boost::json::value& pair : env->as_array()) {
    const boost::json::array* kv = pair.if_array();
    if (kv == nullptr || kv->size() != 2 || !(*kv)[0].is_string() || !(*kv)[1].is_string())
      return r.Bad("'env' holds something other than [NAME, VALUE] pairs");
    g.env.emplace_back(std::string((*kv)[0].as_string()), std::string((*kv)[1].as_string()));
  }
  return g;
}

}  // namespace

std::string EncodePrograms(const envmap::ProgramPlan& programs) {
  boost::json::array groups;
  for (const envmap::ProgramGroup& g : programs.groups) {
    boost::json::array env;
    for (const auto& [name, value] : g.env) env.push_back(boost::json::array{name, value});
    groups.push_back(boost::json::object{{"role", g.role},
                                         {"line", g.line},
                                         {"argv", Strings(g.argv)},
                                         {"local_rank_arg_at", g.local_rank_arg_at},
                                         {"expand", g.expand},
                                         {"env", std::move(env)},
                                         {"ompi", g.ompi},
                                         {"azure", g.azure},
                                         {"horovod", g.horovod},
                                         {"gpus", Strings(g.gpus)}});
  }
  boost::json::array nodes;
  for (const std::vector<int>& counts : programs.node_counts) {
    boost::json::array row;
    for (int c : counts) row.push_back(c);
    nodes.push_back(std::move(row));
  }
  boost::json::array per_node;
  for (int c : programs.per_node) per_node.push_back(c);
  boost::json::array restarts;
  for (const auto& [role, n] : programs.restarts) restarts.push_back(boost::json::array{role, n});
  return boost::json::serialize(boost::json::object{{"groups", std::move(groups)},
                                                    {"per_node", std::move(per_node)},
                                                    {"node_counts", std::move(nodes)},
                                                    {"restarts", std::move(restarts)},
                                                    {"tf", programs.tf}});
}

Result<envmap::ProgramPlan> DecodePrograms(std::string_view text) {
  Reader r{"the groups"};
  if (text.size() > kMaxDocument) return r.Bad(fmt::format("over {} bytes", kMaxDocument));
  boost::system::error_code ec;
  boost::json::parse_options opts;
  opts.max_depth = 5;
  boost::json::value v = boost::json::parse(text, ec, {}, opts);
  if (ec) return r.Bad(fmt::format("not JSON ({})", ec.message()));
  const boost::json::object* o = v.if_object();
  const boost::json::value* groups = o != nullptr ? o->if_contains("groups") : nullptr;
  if (groups == nullptr || !groups->is_array() || groups->as_array().empty() || groups->as_array().size() > kMaxGroups)
    return r.Bad(fmt::format("'groups' is not a list of 1 to {} groups", kMaxGroups));
  envmap::ProgramPlan plan;
  for (size_t i = 0; i < groups->as_array().size(); ++i) {
    Result<envmap::ProgramGroup> g = GroupFrom(groups->as_array()[i], i);
    if (!g.ok()) return g.status();
    plan.groups.push_back(std::move(*g));
  }
  const size_t n = plan.groups.size();
  auto counts = [&](const boost::json::value* list, std::vector<int>& out) -> Status {
    if (list == nullptr || !list->is_array() || list->as_array().size() != n)
      return r.Bad(fmt::format("a row of counts is not {} whole numbers", n));
    for (const boost::json::value& c : list->as_array()) {
      if (!c.is_int64() || c.as_int64() < 0 || c.as_int64() > kMaxCount)
        return r.Bad(fmt::format("a count is not a whole number from 0 to {}", kMaxCount));
      out.push_back(static_cast<int>(c.as_int64()));
    }
    return Status::Ok();
  };
  if (Status s = counts(o->if_contains("per_node"), plan.per_node); !s.ok()) return s;
  const boost::json::value* nodes = o->if_contains("node_counts");
  if (nodes == nullptr || !nodes->is_array() || nodes->as_array().size() > kMaxNodes)
    return r.Bad(fmt::format("'node_counts' is not a list of at most {} nodes", kMaxNodes));
  for (const boost::json::value& row : nodes->as_array()) {
    plan.node_counts.emplace_back();
    if (Status s = counts(&row, plan.node_counts.back()); !s.ok()) return s;
  }
  const boost::json::value* restarts = o->if_contains("restarts");
  if (restarts == nullptr || !restarts->is_array()) return r.Bad("'restarts' is not a list");
  for (const boost::json::value& pair : restarts->as_array()) {
    const boost::json::array* kv = pair.if_array();
    if (kv == nullptr || kv->size() != 2 || !(*kv)[0].is_string() || !(*kv)[1].is_int64() || (*kv)[1].as_int64() < 0 ||
        (*kv)[1].as_int64() > kMaxCount)
      return r.Bad("'restarts' holds something other than [ROLE, N] pairs");
    plan.restarts.emplace_back(std::string((*kv)[0].as_string()), static_cast<int>((*kv)[1].as_int64()));
  }
  Result<bool> tf = r.Bool(*o, "tf");
  if (!tf.ok()) return tf.status();
  plan.tf = *tf;
  return plan;
}

}  // namespace dlaunch::launcher
