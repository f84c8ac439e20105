// The IR printer. One Printer object prints one item (a function, a tensor
// program, an extern's signature) or one standalone expression, so names are
// disambiguated per item: two distinct variables that would print alike get
// suffixes (_1, _2, ...) in order of first appearance in the text.
#include "ir/printer.h"

#include <charconv>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "ir/error.h"
#include "ir/lexer.h"
#include "ir/op.h"

namespace relax {
namespace {

// ---- Spelling ---------------------------------------------------------------

// The shortest decimal text that reads back to `v` (finite), always with '.'
// or an exponent; integral values below 1e15 in fixed notation.
std::string format_float(double v) {
  char buf[64];
  std::string s;
  for (int p = 1; p <= 17; ++p) {
    auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, p);
    s.assign(buf, r.ptr);
    double back = 0;
    std::from_chars(s.data(), s.data() + s.size(), back);
    if (back == v) break;
  }
  if (s.find('e') != std::string::npos && v == std::floor(v) && std::fabs(v) < 1e15) {
    auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, 0);
    s.assign(buf, r.ptr);
  }
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

// Graph-level floats (attributes, prim values): non-finite as inf/-inf/nan.
std::string float_text(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  return format_float(v);
}

// An identifier made from any name: bad characters become '_'.
std::string sanitize(const std::string& name) {
  std::string s = name;
  for (char& c : s) {
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
    if (!ok) c = '_';
  }
  if (s.empty() || !is_identifier(s)) s = "_" + s;
  return s;
}

std::string global_ref(const std::string& name) { return "@" + (is_identifier(name) ? name : quote_string(name)); }

const char* binop_spelling(tir::BinOp op) {
  switch (op) {
#define X(k, s)       \
  case tir::BinOp::k: \
    return s;
    RELAX_TBINARY_OPS(X)
#undef X
  }
  return "?";
}

constexpr int kUnaryPrec = 11;
constexpr int kAtomPrec = 12;

// How tightly the text of a SymExpr binds (conservative: a sum counts as
// additive even when it prints as one term).
int sym_prec(const SymExpr& e) {
  switch (e.kind()) {
    case SymKind::Const:
      return e.const_value() < 0 ? kUnaryPrec : kAtomPrec;
    case SymKind::Var:
    case SymKind::Min:
    case SymKind::Max:
      return kAtomPrec;
    case SymKind::Sum:
      return 9;
    default:
      return 10;
  }
}

const char* intrinsic_spelling(tir::Intrinsic f) {
  switch (f) {
#define X(name, arity)       \
  case tir::Intrinsic::name: \
    return #name;
    RELAX_INTRINSICS(X)
#undef X
  }
  return "?";
}

const char* loop_spelling(tir::LoopKind k) {
  switch (k) {
#define X(k, s)          \
  case tir::LoopKind::k: \
    return s;
    RELAX_LOOP_KINDS(X)
#undef X
  }
  return "?";
}

const char* scope_spelling(tir::Scope s) {
  switch (s) {
    case tir::Scope::Global:
      return "global";
    case tir::Scope::Shared:
      return "shared";
    case tir::Scope::Local:
      return "local";
  }
  return "?";
}

template <typename T, typename F>
std::string join(const std::vector<T>& v, F f) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ", ";
    s += f(v[i]);
  }
  return s;
}

// ---- The printer --------------------------------------------------------------

class Printer {
 public:
  // Graph level.
  std::string function(const std::string* name, const Function& f);
  std::string expr(const Expr& e);
  std::string sinfo(const StructInfo& si);
  std::string attrs(const Attrs& a, const OpInfo* op);
  // Tensor programs.
  std::string program(const std::string& name, const tir::Program& p);
  std::string stmt_list(const tir::Stmt& s);
  std::string texpr(const tir::TExpr& e) { return tx(e).text; }
  void name_free_syms(const tir::Stmt& s);

 private:
  struct PText {
    std::string text;
    int prec;
  };

  std::string ind() const { return std::string(size_t(indent_) * 2, ' '); }
  bool taken(const std::string& n, const std::unordered_set<std::string>& used) const;
  std::string unique(const std::string& base, std::unordered_set<std::string>& used, bool avoid_ops = false);

  std::string var_ref(const VarNode* v);
  std::string sym_name(const SymExpr& v);
  std::string sym(const SymExpr& e);
  std::string dims(const std::vector<SymExpr>& d);
  std::string attr_value(const AttrValue& v, bool typed);
  std::string call(const CallNode& c);
  std::string prim_value(const PrimValueNode& p);
  std::string seq_block(const SeqExpr& seq, bool with_return);
  std::string binding(const Binding& b);

  std::string buffer_name(const tir::Buffer& b);
  std::string buffer_type(const tir::Buffer& b);
  std::string define_scoped(const std::string& base);
  void stmts(const tir::Stmt& s, bool last_in_scope, std::string& out);
  void braced_stmts(const tir::Stmt& s, std::string& out);
  PText tx(const tir::TExpr& e);
  std::string imm(const tir::ImmNode& i);

  int indent_ = 0;
  std::unordered_map<const VarNode*, std::string> var_names_;
  std::unordered_set<std::string> used_vars_, used_df_;
  std::unordered_map<const SymNode*, std::string> sym_names_;
  std::unordered_set<std::string> used_syms_;  // programs: buffers too
  std::unordered_map<const tir::BufferNode*, std::string> buf_names_;
  std::vector<std::string> scoped_;  // programs: loop variables and allocations in scope
};

bool Printer::taken(const std::string& n, const std::unordered_set<std::string>& used) const {
  if (used.count(n) || is_reserved_word(n)) return true;
  for (const auto& s : scoped_)
    if (s == n) return true;
  return false;
}

std::string Printer::unique(const std::string& base, std::unordered_set<std::string>& used, bool avoid_ops) {
  std::string cand = base;
  for (int i = 1; taken(cand, used) || (avoid_ops && find_op(cand)); ++i) cand = base + "_" + std::to_string(i);
  used.insert(cand);
  return cand;
}

std::string Printer::var_ref(const VarNode* v) {
  bool df = v->kind == ExprKind::DataflowVar;
  auto it = var_names_.find(v);
  if (it == var_names_.end()) {
    std::string name;
    if (df) {
      // Dataflow names follow a sigil, so any text is fine (quoted if needed).
      name = v->name;
      for (int i = 1; used_df_.count(name); ++i) name = v->name + "_" + std::to_string(i);
      used_df_.insert(name);
    } else {
      name = unique(sanitize(v->name), used_vars_, /*avoid_ops=*/true);
    }
    it = var_names_.emplace(v, name).first;
  }
  if (!df) return it->second;
  return "%" + (is_identifier(it->second) ? it->second : quote_string(it->second));
}

std::string Printer::sym_name(const SymExpr& v) {
  auto it = sym_names_.find(v.get());
  if (it != sym_names_.end()) return it->second;
  std::string name = unique(sanitize(v.name()), used_syms_);
  sym_names_.emplace(v.get(), name);
  return name;
}

std::string Printer::sym(const SymExpr& e) {
  if (!e.defined()) return "?";
  return to_string(e, [this](const SymExpr& v) { return sym_name(v); });
}

std::string Printer::dims(const std::vector<SymExpr>& d) {
  std::string s = "(" + join(d, [this](const SymExpr& e) { return sym(e); });
  return s + (d.size() == 1 ? ",)" : ")");
}

// ---- Struct info and attributes ---------------------------------------------------

std::string Printer::sinfo(const StructInfo& si) {
  if (!si) return "Object";
  switch (si->kind) {
    case SIKind::Object:
      return "Object";
    case SIKind::Prim: {
      auto* p = as<PrimSI>(si);
      std::string s = "Prim[" + p->dtype.str();
      if (p->value.defined()) s += ", " + sym(p->value);
      return s + "]";
    }
    case SIKind::Shape: {
      auto* p = as<ShapeSI>(si);
      if (p->values) return "Shape[" + dims(*p->values) + "]";
      if (p->ndim >= 0) return "Shape[ndim=" + std::to_string(p->ndim) + "]";
      return "Shape";
    }
    case SIKind::Tensor: {
      auto* t = as<TensorSI>(si);
      std::vector<std::string> parts;
      if (t->shape)
        parts.push_back(dims(*t->shape));
      else if (t->ndim >= 0)
        parts.push_back("ndim=" + std::to_string(t->ndim));
      if (!t->dtype.is_void()) parts.push_back(t->dtype.str());
      if (parts.empty()) return "Tensor";
      return "Tensor[" + join(parts, [](const std::string& x) { return x; }) + "]";
    }
    case SIKind::Tuple: {
      auto* t = as<TupleSI>(si);
      return "Tuple[" + join(t->fields, [this](const StructInfo& f) { return sinfo(f); }) + "]";
    }
    case SIKind::List: {
      const StructInfo& e = as<ListSI>(si)->elem;
      return e ? "List[" + sinfo(e) + "]" : "List";
    }
    case SIKind::Func: {
      auto* f = as<FuncSI>(si);
      std::string s = "Func[";
      if (f->params)
        s += "(" + join(*f->params, [this](const StructInfo& p) { return sinfo(p); }) + ")";
      else
        s += "...";
      s += " -> " + sinfo(f->ret);
      if (!f->pure) s += ", impure";
      return s + "]";
    }
  }
  return "Object";
}

// `typed`: the reader knows the declared type (an op's attribute), so
// symbolic values need no `sym(...)` marker.
std::string Printer::attr_value(const AttrValue& v, bool typed) {
  switch (attr_type_of(v)) {
    case AttrType::Bool:
      return std::get<bool>(v) ? "true" : "false";
    case AttrType::Int:
      return std::to_string(std::get<int64_t>(v));
    case AttrType::Float:
      return float_text(std::get<double>(v));
    case AttrType::String:
      return quote_string(std::get<std::string>(v));
    case AttrType::Ints:
      return "[" + join(std::get<std::vector<int64_t>>(v), [](int64_t x) { return std::to_string(x); }) + "]";
    case AttrType::Floats:
      return "[" + join(std::get<std::vector<double>>(v), float_text) + "]";
    case AttrType::Strings:
      return "[" + join(std::get<std::vector<std::string>>(v), [](const std::string& x) { return quote_string(x); }) +
             "]";
    case AttrType::DType:
      return std::get<DataType>(v).str();
    case AttrType::Sym: {
      std::string s = sym(std::get<SymExpr>(v));
      return typed ? s : "sym(" + s + ")";
    }
    case AttrType::Syms:
      return "[" +
             join(std::get<std::vector<SymExpr>>(v),
                  [&](const SymExpr& e) { return typed ? sym(e) : "sym(" + sym(e) + ")"; }) +
             "]";
  }
  return "?";
}

// `name=value, ...` without braces. With `op`, in the op's declared order
// (the order the parser gives them back, whatever order a frontend set them
// in: printed text is canonical), values of the declared type in their typed
// form, and those equal to the declared default not at all.
std::string Printer::attrs(const Attrs& a, const OpInfo* op) {
  std::vector<std::pair<std::string, const AttrValue*>> order;
  if (op)
    for (const AttrSpec& spec : op->attrs)
      if (const AttrValue* v = a.find(spec.name)) order.push_back({spec.name, v});
  for (const auto& [k, v] : a)
    if (!op || !op->find_attr(k)) order.push_back({k, &v});
  std::string s;
  for (const auto& [k, v] : order) {
    const AttrSpec* spec = op ? op->find_attr(k) : nullptr;
    bool typed = spec && spec->type == attr_type_of(*v);
    if (typed && spec->default_value && *spec->default_value == *v) continue;  // the parser fills it in
    if (!s.empty()) s += ", ";
    s += (is_identifier(k) ? k : quote_string(k)) + "=" + attr_value(*v, typed);
  }
  return s;
}

// ---- Graph expressions ---------------------------------------------------------------

std::string Printer::prim_value(const PrimValueNode& p) {
  DataType dt = p.dtype;
  if (dt.is_float()) return "prim(" + float_text(p.float_value) + ", " + dt.str() + ")";
  if (dt.is_bool() && p.int_value.is_const()) return p.int_value.const_value() ? "prim(true)" : "prim(false)";
  std::string v = p.int_value.defined() ? sym(p.int_value) : "0";
  if (dt == DataType::i64()) return "prim(" + v + ")";
  return "prim(" + v + ", " + dt.str() + ")";
}

std::string Printer::call(const CallNode& c) {
  std::string s;
  const OpInfo* op = nullptr;
  if (auto* r = as<OpRefNode>(c.callee)) {
    op = r->op;
    s = op ? op->name : "op(\"?\")";
  } else {
    s = expr(c.callee);
  }
  std::vector<std::string> parts;
  for (const Expr& a : c.args) parts.push_back(expr(a));
  std::string at = attrs(c.attrs, op);
  if (!at.empty()) parts.push_back(at);
  for (const StructInfo& si : c.sinfo_args) parts.push_back("out=" + sinfo(si));
  return s + "(" + join(parts, [](const std::string& x) { return x; }) + ")";
}

std::string Printer::expr(const Expr& e) {
  if (!e) return "<null>";
  switch (e->kind) {
    case ExprKind::Var:
    case ExprKind::DataflowVar:
      return var_ref(static_cast<const VarNode*>(e.get()));
    case ExprKind::GlobalVar:
      return global_ref(as<GlobalVarNode>(e)->name);
    case ExprKind::Constant: {
      auto* c = as<ConstantNode>(e);
      return "const(" + quote_string(c->name) + ", " + sinfo(c->sinfo) + ")";
    }
    case ExprKind::PrimValue:
      return prim_value(*as<PrimValueNode>(e));
    case ExprKind::StringImm:
      return quote_string(as<StringImmNode>(e)->value);
    case ExprKind::ShapeExpr:
      return "shape(" + join(as<ShapeExprNode>(e)->values, [this](const SymExpr& v) { return sym(v); }) + ")";
    case ExprKind::Tuple: {
      auto* t = as<TupleNode>(e);
      std::string s = "(" + join(t->fields, [this](const Expr& f) { return expr(f); });
      return s + (t->fields.size() == 1 ? ",)" : ")");
    }
    case ExprKind::TupleGetItem: {
      auto* t = as<TupleGetItemNode>(e);
      return expr(t->tuple) + "[" + std::to_string(t->index) + "]";
    }
    case ExprKind::Call:
      return call(*as<CallNode>(e));
    case ExprKind::If: {
      auto* i = as<IfNode>(e);
      std::string s = "if (" + expr(i->cond) + ") " + seq_block(i->then_branch, false);
      return s + " else " + seq_block(i->else_branch, false);
    }
    case ExprKind::SeqExpr:
      return seq_block(std::static_pointer_cast<const SeqExprNode>(e), false);
    case ExprKind::Function:
      return function(nullptr, std::static_pointer_cast<const FunctionNode>(e));
    case ExprKind::OpRef: {
      auto* r = as<OpRefNode>(e);
      return "op(" + quote_string(r->op ? r->op->name : "?") + ")";
    }
    case ExprKind::ExternFunc:
      return "extern(" + quote_string(as<ExternFuncNode>(e)->symbol) + ")";
  }
  return "<?>";
}

std::string Printer::binding(const Binding& b) {
  std::string s = ind() + (b.var ? var_ref(b.var.get()) : "<null>");
  StructInfo vsi = b.var ? b.var->sinfo : nullptr;
  if (b.is_match_cast()) {
    if (vsi && !struct_info_same(vsi, b.cast)) s += ": " + sinfo(vsi);
    return s + " = match_cast(" + expr(b.value) + ", " + sinfo(b.cast) + ")\n";
  }
  if (vsi) s += ": " + sinfo(vsi);
  return s + " = " + expr(b.value) + "\n";
}

std::string Printer::seq_block(const SeqExpr& seq, bool with_return) {
  std::string s = "{\n";
  ++indent_;
  if (seq) {
    for (const BindingBlock& block : seq->blocks) {
      if (!block.dataflow) {
        for (const Binding& b : block.bindings) s += binding(b);
        continue;
      }
      s += ind() + "dataflow {\n";
      ++indent_;
      for (const Binding& b : block.bindings) s += binding(b);
      --indent_;
      s += ind() + "}\n";
    }
    s += ind() + (with_return ? "return " : "") + expr(seq->body) + "\n";
  }
  --indent_;
  return s + ind() + "}";
}

std::string Printer::function(const std::string* name, const Function& f) {
  std::string s = name ? "fn " + global_ref(*name) + "(" : "fn (";
  s += join(f->params, [this](const Var& p) { return var_ref(p.get()) + ": " + sinfo(p->sinfo); });
  s += ") -> " + sinfo(f->ret);
  if (!f->attrs.empty()) s += " attrs {" + attrs(f->attrs, nullptr) + "}";
  return s + " " + seq_block(f->body, true);
}

// ---- Tensor programs --------------------------------------------------------------------

std::string Printer::buffer_name(const tir::Buffer& b) {
  auto it = buf_names_.find(b.get());
  if (it != buf_names_.end()) return it->second;
  std::string n = unique(sanitize(b->name), used_syms_);
  buf_names_.emplace(b.get(), n);
  return n;
}

std::string Printer::buffer_type(const tir::Buffer& b) {
  std::string s = "Buffer[" + dims(b->shape) + ", " + b->dtype.str();
  if (b->scope != tir::Scope::Global) s += std::string(", ") + scope_spelling(b->scope);
  return s + "]";
}

// A name for a loop variable or an allocation: unique among the names in
// scope, free again after the enclosing braces.
std::string Printer::define_scoped(const std::string& base) {
  std::string cand = base;
  for (int i = 1; taken(cand, used_syms_); ++i) cand = base + "_" + std::to_string(i);
  scoped_.push_back(cand);
  return cand;
}

namespace {

void collect_texpr(const tir::TExpr& e, std::vector<SymExpr>& out) {
  if (!e) return;
  using namespace tir;
  switch (e->kind) {
    case TKind::Sym:
      collect_vars(as<SymNodeT>(e)->value, out);
      break;
    case TKind::Imm:
      break;
    case TKind::Load:
      for (const auto& i : as<LoadNode>(e)->indices) collect_texpr(i, out);
      break;
    case TKind::Binary:
      collect_texpr(as<BinaryNode>(e)->a, out);
      collect_texpr(as<BinaryNode>(e)->b, out);
      break;
    case TKind::Unary:
      collect_texpr(as<UnaryNode>(e)->a, out);
      break;
    case TKind::Call:
      for (const auto& a : as<CallNodeT>(e)->args) collect_texpr(a, out);
      break;
    case TKind::Cast:
      collect_texpr(as<CastNode>(e)->a, out);
      break;
    case TKind::Select:
      collect_texpr(as<SelectNode>(e)->cond, out);
      collect_texpr(as<SelectNode>(e)->a, out);
      collect_texpr(as<SelectNode>(e)->b, out);
      break;
  }
}

void collect_stmt(const tir::Stmt& s, std::vector<SymExpr>& out, std::unordered_set<const SymNode*>& loop_vars) {
  if (!s) return;
  using namespace tir;
  switch (s->kind) {
    case SKind::For: {
      auto* f = as<ForNode>(s);
      if (f->var.defined()) loop_vars.insert(f->var.get());
      if (f->extent.defined()) collect_vars(f->extent, out);
      collect_stmt(f->body, out, loop_vars);
      break;
    }
    case SKind::Store: {
      auto* st = as<StoreNode>(s);
      for (const auto& i : st->indices) collect_texpr(i, out);
      collect_texpr(st->value, out);
      break;
    }
    case SKind::Seq:
      for (const auto& c : as<SeqNode>(s)->stmts) collect_stmt(c, out, loop_vars);
      break;
    case SKind::IfThenElse: {
      auto* i = as<IfThenElseNode>(s);
      collect_texpr(i->cond, out);
      collect_stmt(i->then_case, out, loop_vars);
      collect_stmt(i->else_case, out, loop_vars);
      break;
    }
    case SKind::Allocate: {
      auto* a = as<AllocateNode>(s);
      if (a->buffer)
        for (const SymExpr& d : a->buffer->shape) collect_vars(d, out);
      collect_stmt(a->body, out, loop_vars);
      break;
    }
    case SKind::Barrier:
      break;
  }
}

}  // namespace

// Names, at program level, every symbolic variable of `s` that no loop binds.
void Printer::name_free_syms(const tir::Stmt& s) {
  std::vector<SymExpr> vars;
  std::unordered_set<const SymNode*> loop_vars;
  collect_stmt(s, vars, loop_vars);
  for (const SymExpr& v : vars)
    if (!loop_vars.count(v.get())) sym_name(v);
}

std::string Printer::imm(const tir::ImmNode& i) {
  DataType dt = i.dtype;
  if (dt.is_float()) {
    if (std::isnan(i.float_value)) return dt.str() + ".nan";
    if (std::isinf(i.float_value)) return (i.float_value < 0 ? "-" : "") + dt.str() + ".inf";
    return format_float(i.float_value) + dt.str();
  }
  if (dt.is_bool()) return i.int_value ? "true" : "false";
  if (dt.is_uint()) return std::to_string(uint64_t(i.int_value)) + dt.str();
  return std::to_string(i.int_value) + dt.str();
}

Printer::PText Printer::tx(const tir::TExpr& e) {
  using namespace tir;
  if (!e) return {"<null>", kAtomPrec};
  auto args = [this](const std::vector<TExpr>& v) { return join(v, [this](const TExpr& a) { return tx(a).text; }); };
  switch (e->kind) {
    case TKind::Sym: {
      const SymExpr& v = as<SymNodeT>(e)->value;
      return {sym(v), v.defined() ? sym_prec(v) : kAtomPrec};
    }
    case TKind::Imm: {
      auto* i = as<ImmNode>(e);
      std::string s = imm(*i);
      return {s, s[0] == '-' ? kUnaryPrec : kAtomPrec};
    }
    case TKind::Load: {
      auto* l = as<LoadNode>(e);
      return {buffer_name(l->buffer) + "[" + args(l->indices) + "]", kAtomPrec};
    }
    case TKind::Binary: {
      auto* b = as<BinaryNode>(e);
      if (b->op == BinOp::Min || b->op == BinOp::Max)
        return {std::string(binop_spelling(b->op)) + "(" + tx(b->a).text + ", " + tx(b->b).text + ")", kAtomPrec};
      int p = tir::binop_precedence(b->op);
      PText l = tx(b->a), r = tx(b->b);
      std::string ls = l.prec < p ? "(" + l.text + ")" : l.text;
      std::string rs = r.prec <= p ? "(" + r.text + ")" : r.text;
      return {ls + " " + binop_spelling(b->op) + " " + rs, p};
    }
    case TKind::Unary: {
      auto* u = as<UnaryNode>(e);
      PText a = tx(u->a);
      const char* op = u->op == UnOp::Neg ? "-" : u->op == UnOp::Not ? "!" : "~";
      return {op + (a.prec < kUnaryPrec ? "(" + a.text + ")" : a.text), kUnaryPrec};
    }
    case TKind::Call: {
      auto* c = as<CallNodeT>(e);
      return {std::string(intrinsic_spelling(c->fn)) + "(" + args(c->args) + ")", kAtomPrec};
    }
    case TKind::Cast:
      return {"cast(" + e->dtype.str() + ", " + tx(as<CastNode>(e)->a).text + ")", kAtomPrec};
    case TKind::Select: {
      auto* s = as<SelectNode>(e);
      return {"select(" + tx(s->cond).text + ", " + tx(s->a).text + ", " + tx(s->b).text + ")", kAtomPrec};
    }
  }
  return {"<?>", kAtomPrec};
}

void Printer::braced_stmts(const tir::Stmt& s, std::string& out) {
  ++indent_;
  size_t mark = scoped_.size();
  stmts(s, true, out);
  scoped_.resize(mark);
  --indent_;
}

// Appends `s` as statements at the current indentation. An allocation lives
// to the end of the enclosing braces, so one that is followed by more
// statements of its scope is wrapped in a bare block.
void Printer::stmts(const tir::Stmt& s, bool last_in_scope, std::string& out) {
  using namespace tir;
  if (!s) return;
  switch (s->kind) {
    case SKind::Seq: {
      const auto& v = as<SeqNode>(s)->stmts;
      for (size_t i = 0; i < v.size(); ++i) stmts(v[i], last_in_scope && i + 1 == v.size(), out);
      return;
    }
    case SKind::Allocate: {
      if (!last_in_scope) {
        out += ind() + "{\n";
        braced_stmts(s, out);
        out += ind() + "}\n";
        return;
      }
      auto* a = as<AllocateNode>(s);
      std::string n = define_scoped(sanitize(a->buffer->name));
      buf_names_[a->buffer.get()] = n;
      out += ind() + "alloc " + n + ": " + buffer_type(a->buffer) + "\n";
      stmts(a->body, true, out);
      return;
    }
    case SKind::For: {
      auto* f = as<ForNode>(s);
      std::string ext = sym(f->extent);  // before the variable is in scope
      std::string n = define_scoped(sanitize(f->var.defined() ? f->var.name() : "i"));
      if (f->var.defined()) sym_names_[f->var.get()] = n;
      size_t mark = scoped_.size();
      out += ind() + "for " + n + " in " + loop_spelling(f->loop_kind) + "(" + ext + ") {\n";
      braced_stmts(f->body, out);
      out += ind() + "}\n";
      scoped_.resize(mark - 1);
      return;
    }
    case SKind::Store: {
      auto* st = as<StoreNode>(s);
      std::string idx = join(st->indices, [this](const TExpr& i) { return tx(i).text; });
      out += ind() + buffer_name(st->buffer) + "[" + idx + "] = " + tx(st->value).text + "\n";
      return;
    }
    case SKind::IfThenElse: {
      auto* i = as<IfThenElseNode>(s);
      out += ind() + "if (" + tx(i->cond).text + ") {\n";
      braced_stmts(i->then_case, out);
      if (i->else_case) {
        out += ind() + "} else {\n";
        braced_stmts(i->else_case, out);
      }
      out += ind() + "}\n";
      return;
    }
    case SKind::Barrier:
      out += ind() + "barrier()\n";
      return;
  }
}

std::string Printer::stmt_list(const tir::Stmt& s) {
  std::string out;
  stmts(s, true, out);
  return out;
}

std::string Printer::program(const std::string& name, const tir::Program& p) {
  // Program-level names first, in the order the text shows them.
  auto param = [this](const tir::Buffer& b) {
    std::string n = buffer_name(b);
    std::string t = buffer_type(b);
    return n + ": " + t;
  };
  std::string ins = join(p->inputs, param);
  for (const SymExpr& v : p->sym_params) {
    if (!ins.empty()) ins += ", ";
    ins += (v.is_var() ? sym_name(v) : sym(v)) + ": i64";
  }
  std::string outs = join(p->outputs, param);
  name_free_syms(p->body);
  std::string s = "prog " + global_ref(name) + "(" + ins + ") -> (" + outs + ")";
  if (!p->attrs.empty()) s += " attrs {" + attrs(p->attrs, nullptr) + "}";
  s += " {\n";
  braced_stmts(p->body, s);
  return s + "}";
}

}  // namespace

std::string print_function(const std::string& name, const Function& f) {
  if (!f) return "fn " + global_ref(name) + "() -> Object {\n}\n";
  return Printer().function(&name, f) + "\n";
}

std::string print_program(const std::string& name, const tir::Program& p) {
  if (!p) return "prog " + global_ref(name) + "() -> () {\n}\n";
  return Printer().program(name, p) + "\n";
}

std::string print_module(const IRModule& mod) {
  std::vector<std::string> items;
  if (!mod.attrs.empty()) items.push_back("module_attrs {" + Printer().attrs(mod.attrs, nullptr) + "}\n");
  for (const auto& [name, item] : mod.items()) {
    if (auto* f = std::get_if<Function>(&item)) {
      items.push_back(print_function(name, *f));
    } else if (auto* p = std::get_if<tir::Program>(&item)) {
      items.push_back(print_program(name, *p));
    } else {
      const ExternDecl& d = std::get<ExternDecl>(item);
      std::string s = "extern " + global_ref(name);
      if (d.sinfo) s += ": " + Printer().sinfo(d.sinfo);
      items.push_back(s + "\n");
    }
  }
  std::string s;
  for (size_t i = 0; i < items.size(); ++i) s += (i ? "\n" : "") + items[i];
  return s;
}

std::string print_expr(const Expr& e) { return Printer().expr(e); }
std::string print_sinfo(const StructInfo& si) { return Printer().sinfo(si); }
std::string print_stmt(const tir::Stmt& s) {
  Printer p;
  p.name_free_syms(s);
  return p.stmt_list(s);
}
std::string print_texpr(const tir::TExpr& e) { return Printer().texpr(e); }

}  // namespace relax
