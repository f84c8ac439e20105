// Median latency of ONNX Runtime (npm onnxruntime-node) on one model and
// one set of inputs, for bench/bench_models.py.
//   node bench/ort_bench.js MODEL.onnx INPUTS.json RUNS THREADS
// INPUTS.json: [{"name", "dtype", "shape", "file"}] with raw little-endian data files.
const ort = require('onnxruntime-node');
const fs = require('fs');

const ctor = {float32: Float32Array, int64: BigInt64Array, int32: Int32Array, bool: Uint8Array, float64: Float64Array};

async function main() {
  const [model, inputsPath, runs, threads] = process.argv.slice(2);
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: Number(threads), interOpNumThreads: 1, executionMode: 'sequential',
    graphOptimizationLevel: 'all'});
  const feeds = {};
  for (const d of JSON.parse(fs.readFileSync(inputsPath))) {
    const buf = fs.readFileSync(d.file);
    const C = ctor[d.dtype];
    const data = new C(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength));
    feeds[d.name] = new ort.Tensor(d.dtype, data, d.shape);
  }
  await session.run(feeds);  // warm-up
  const ms = [];
  for (let i = 0; i < Number(runs); i++) {
    const t = process.hrtime.bigint();
    await session.run(feeds);
    ms.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  ms.sort((a, b) => a - b);
  const n = ms.length;
  console.log(JSON.stringify({median_ms: n % 2 ? ms[(n - 1) / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2}));
}
main().catch(e => { console.error(e.message); process.exit(1); });
