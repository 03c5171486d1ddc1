#include "scenario/rank_report.h"

#include <nlohmann/json.hpp>
#include <cstring>
#include <stdexcept>

#include "conformance/reference.h"

namespace collie::scenario {

namespace {

using json = nlohmann::json;

json tensor_json(const Tensor& t) {
  const auto* p = static_cast<const std::uint8_t*>(t.data());
  return json{{"dtype", static_cast<int>(t.dtype())},
              {"shape", t.shape()},
              {"data", json::binary(std::vector<std::uint8_t>(p, p + t.bytes()))}};
}

Tensor tensor_from(const json& j) {
  Tensor t(static_cast<DType>(j.at("dtype").get<int>()), j.at("shape").get<std::vector<std::int64_t>>());
  const auto& bytes = j.at("data").get_binary();
  if (bytes.size() != t.bytes()) throw std::runtime_error("a tensor's bytes do not match its shape");
  if (!bytes.empty()) std::memcpy(t.data(), bytes.data(), bytes.size());
  return t;
}

json tensors_json(const std::vector<Tensor>& v) {
  json a = json::array();
  for (const auto& t : v) a.push_back(tensor_json(t));
  return a;
}

std::vector<Tensor> tensors_from(const json& j) {
  std::vector<Tensor> v;
  for (const auto& t : j) v.push_back(tensor_from(t));
  return v;
}

json where_json(const Location& l) { return json{l.file, l.line, l.column}; }
Location where_from(const json& j) { return Location{j.at(0).get<std::string>(), j.at(1).get<int>(), j.at(2).get<int>()}; }

}  // namespace

std::vector<std::uint8_t> encode_report(const RankReport& r) {
  json j;
  j["rank"] = r.rank;
  j["finished"] = r.finished;
  j["failed"] = r.failed;
  j["error_text"] = r.error_text;
  j["error_kind"] = static_cast<int>(r.error_kind);
  j["error_is_collie"] = r.error_is_collie;
  j["end_time"] = r.end_time;
  j["output"] = json::array();
  for (const auto& o : r.output) j["output"].push_back(json{o.rank, o.time, o.text});
  j["failures"] = r.failures;
  j["enabled"] = r.rec.enabled;
  j["colls"] = json::array();
  for (const auto& [key, c] : r.rec.colls) {
    json cj{{"group", key.first}, {"seq", key.second}, {"kind", static_cast<int>(c.kind)}, {"where", where_json(c.where)},
            {"members", c.members}, {"root", c.root}, {"op", static_cast<int>(c.op)},
            {"issued", std::vector<int>(c.issued.begin(), c.issued.end())}};
    cj["inputs"] = json::array();
    for (const auto& [rank, v] : c.inputs) cj["inputs"].push_back(json{rank, tensors_json(v)});
    cj["outputs"] = json::array();
    for (const auto& [rank, v] : c.outputs) cj["outputs"].push_back(json{rank, tensors_json(v)});
    j["colls"].push_back(std::move(cj));
  }
  j["sends"] = json::array();
  for (const auto& [key, v] : r.rec.sends)
    j["sends"].push_back(json{std::get<0>(key), std::get<1>(key), std::get<2>(key), std::get<3>(key), tensors_json(v)});
  j["recvs"] = json::array();
  for (const auto& x : r.rec.recvs)
    j["recvs"].push_back(json{{"rank", x.rank}, {"group", x.group}, {"tag", x.tag}, {"source", x.source},
                              {"order", x.order}, {"data", tensor_json(x.data)}, {"where", where_json(x.where)}});
  return json::to_cbor(j);
}

RankReport decode_report(const std::vector<std::uint8_t>& bytes) {
  try {
    const json j = json::from_cbor(bytes);
    RankReport r;
    r.rank = j.at("rank").get<int>();
    r.finished = j.at("finished").get<bool>();
    r.failed = j.at("failed").get<bool>();
    r.error_text = j.at("error_text").get<std::string>();
    r.error_kind = static_cast<ErrorKind>(j.at("error_kind").get<int>());
    r.error_is_collie = j.at("error_is_collie").get<bool>();
    r.end_time = j.at("end_time").get<Nanos>();
    for (const auto& o : j.at("output")) r.output.push_back(OutputLine{o.at(0).get<int>(), o.at(1).get<Nanos>(), o.at(2).get<std::string>()});
    r.failures = j.at("failures").get<std::vector<std::string>>();
    r.rec.enabled = j.at("enabled").get<bool>();
    for (const auto& cj : j.at("colls")) {
      CollRecord c;
      c.kind = static_cast<StepKind>(cj.at("kind").get<int>());
      c.where = where_from(cj.at("where"));
      c.members = cj.at("members").get<std::vector<int>>();
      c.root = cj.at("root").get<int>();
      c.op = static_cast<ReduceOp>(cj.at("op").get<int>());
      for (int i : cj.at("issued")) c.issued.insert(i);
      for (const auto& e : cj.at("inputs")) c.inputs[e.at(0).get<int>()] = tensors_from(e.at(1));
      for (const auto& e : cj.at("outputs")) c.outputs[e.at(0).get<int>()] = tensors_from(e.at(1));
      r.rec.colls.emplace(std::make_pair(cj.at("group").get<std::string>(), cj.at("seq").get<std::uint64_t>()), std::move(c));
    }
    for (const auto& s : j.at("sends"))
      r.rec.sends[{s.at(0).get<int>(), s.at(1).get<int>(), s.at(2).get<std::string>(), s.at(3).get<int>()}] = tensors_from(s.at(4));
    for (const auto& x : j.at("recvs")) {
      RecvRecord rr;
      rr.rank = x.at("rank").get<int>();
      rr.group = x.at("group").get<std::string>();
      rr.tag = x.at("tag").get<int>();
      rr.source = x.at("source").get<int>();
      rr.order = x.at("order").get<std::uint64_t>();
      rr.data = tensor_from(x.at("data"));
      rr.where = where_from(x.at("where"));
      r.rec.recvs.push_back(std::move(rr));
    }
    return r;
  } catch (const json::exception& e) {
    throw std::runtime_error(std::string("malformed rank report: ") + e.what());
  }
}

namespace {

std::vector<Tensor> clone_all(const std::vector<Tensor>& v) {
  std::vector<Tensor> out;
  for (const auto& t : v) out.push_back(reference::clone(t));
  return out;
}

}  // namespace

void merge_records(Recorder& into, const Recorder& from) {
  for (const auto& [key, c] : from.colls) {
    auto [it, fresh] = into.colls.try_emplace(key);
    CollRecord& d = it->second;
    if (fresh) {
      d.kind = c.kind;
      d.where = c.where;
      d.members = c.members;
      d.root = c.root;
      d.op = c.op;
    }
    for (const auto& [r, v] : c.inputs) d.inputs[r] = clone_all(v);
    for (const auto& [r, v] : c.outputs) d.outputs[r] = clone_all(v);
    d.issued.insert(c.issued.begin(), c.issued.end());
  }
  for (const auto& [key, v] : from.sends) {
    auto& d = into.sends[key];
    for (const auto& t : v) d.push_back(reference::clone(t));
  }
  for (const auto& x : from.recvs) {
    RecvRecord c;
    c.rank = x.rank;
    c.group = x.group;
    c.tag = x.tag;
    c.source = x.source;
    c.order = x.order;
    c.data = reference::clone(x.data);
    c.where = x.where;
    into.recvs.push_back(std::move(c));
  }
}

}  // namespace collie::scenario
