// CPU backend: what it refuses, with messages naming the program and the
// construct; and the shape of the object it writes.
#include <doctest/doctest.h>
#include <elf.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cpu_test_util.h"

namespace relax::cpu::test {
namespace {

std::string compile_error(const std::vector<tir::Program>& progs, const CpuOptions& opts = {}) {
  try {
    compile_programs(progs, opts);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST_CASE("cpu: a variable bound by neither a buffer dim nor sym_params is an error naming both") {
  SymExpr n = SymExpr::var("n"), m = SymExpr::var("m"), i = SymExpr::var("i");
  tir::Buffer x = tir::make_buffer("x", DataType::f32(), {n});
  tir::Buffer y = tir::make_buffer("y", DataType::f32(), {n});
  tir::Stmt body =
      tir::make_for(i, m, tir::LoopKind::Serial, tir::make_store(y, {tir::sym(i)}, tir::load(x, {tir::sym(i)})));
  std::string msg = compile_error({tir::make_program("unbound_prog", {x}, {y}, {}, body)});
  CHECK(msg.find("@unbound_prog") != std::string::npos);
  CHECK(msg.find("'m'") != std::string::npos);
  // The same program with m as a sym_param compiles.
  CHECK(compile_error({tir::make_program("bound_prog", {x}, {y}, {m}, body)}) == "");
}

TEST_CASE("cpu: GPU loop kinds are an error naming the program and the loop") {
  std::string msg = compile_error(corpus_programs("32_tir_loop_kinds.relax"));
  CHECK(msg.find("@loop_kinds") != std::string::npos);
  CHECK(msg.find("blockIdx.x") != std::string::npos);
  CHECK(msg.find("'bx'") != std::string::npos);
  msg = compile_error(corpus_programs("33_tir_shared_barrier.relax"));
  CHECK(msg.find("@row_sum") != std::string::npos);
}

TEST_CASE("cpu: an unknown cpu name and a bad opt level are errors") {
  CHECK(compile_error(programs_of(R"(
prog @p(x: Buffer[(1,), f32]) -> (y: Buffer[(1,), f32]) {
  y[0] = x[0]
}
)"),
                      {"pentium-9000", 3})
            .find("unknown cpu 'pentium-9000'") != std::string::npos);
  CHECK_THROWS_AS(emit_llvm_ir({}, {"host", 7}), Error);
}

TEST_CASE("cpu: the object is an x86-64 ELF shared object needing libm.so.6") {
  CpuArtifact a = compile_programs(corpus_programs("36_tir_intrinsics.relax"), {});
  const std::string& so = a.shared_object;
  REQUIRE(so.size() > sizeof(Elf64_Ehdr));
  auto* eh = reinterpret_cast<const Elf64_Ehdr*>(so.data());
  CHECK(std::string(so.data(), 4) ==
        "\x7f"
        "ELF");
  CHECK(eh->e_type == ET_DYN);
  CHECK(eh->e_machine == EM_X86_64);
  CHECK(so.find("libm.so.6") != std::string::npos);
  CHECK(so.find("relax_k_math") != std::string::npos);
  // Empty program lists still give a loadable object with the ABI globals.
  Library lib(compile_programs({}, {}));
  CHECK(lib.hooks != nullptr);
}

TEST_CASE("cpu: compiling from several threads at once") {
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&] {
      CpuArtifact a = compile_programs(corpus_programs("26_call_tir.relax"), {"x86-64", 2});
      if (a.shared_object.size() > 1000 && a.kernels.size() == 2) ok++;
    });
  for (auto& th : threads) th.join();
  CHECK(ok == 3);
}

}  // namespace
}  // namespace relax::cpu::test

TEST_CASE("an LLVM fatal error ends the process with status 1 and a line naming the task, not an abort") {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {  // the child: stderr into the pipe, then LLVM's fatal error
    dup2(fds[1], 2);
    close(fds[0]);
    relax::llvmgen::LlvmTask task("compiling 3 kernels to PTX for sm_80");
    relax::llvmgen::llvm_fatal_error_for_test("Cannot select: i1 = mul");
  }
  close(fds[1]);
  std::string err;
  char buf[512];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) err.append(buf, size_t(n));
  close(fds[0]);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  INFO(err);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 1);
  CHECK(err.find("error: LLVM failed while compiling 3 kernels to PTX for sm_80: Cannot select: i1 = mul") !=
        std::string::npos);
  CHECK(err.find("please report it") != std::string::npos);
}
