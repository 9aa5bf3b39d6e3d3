#include "runtime/quantize_model.h"

#include <omp.h>

#include <cstring>
#include <exception>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/error.h"
#include "kernels/quant/quantize.h"
#include "kernels/threads/cores.h"
#include "runtime/atomic_file.h"

namespace qkv {

namespace {

int64_t first_int(const GGUFValue& v) {
  if (v.type == GGUFType::ARRAY) {
    QKV_CHECK(v.count > 0 && v.elem_type != GGUFType::STRING && v.elem_type != GGUFType::ARRAY,
              "a per-layer head count must be a non-empty array of integers");
    return v.element(0).as_int();
  }
  return v.as_int();
}

double mib(uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

std::string shape_text(const std::vector<uint64_t>& ne) {
  std::string s;
  for (uint64_t d : ne) s += (s.empty() ? "" : " x ") + std::to_string(d);
  return s;
}

// One tensor of the output: where its bytes come from and what it becomes.
struct Job {
  const GGUFTensorInfo* src;
  uint32_t type;        // ggml type written
  uint64_t n_bytes;     // bytes written
  bool convert;         // false: copied unchanged
  DType from;           // the source's type when converted
  TensorPlan plan;
};

// src's rows converted to `to` into out, rows split over threads.
void convert_tensor(const GGUFTensorInfo& src, DType from, DType to, int threads, std::vector<uint8_t>* out) {
  const size_t row = size_t(src.ne[0]);
  const int64_t rows = int64_t(src.n_elements / row);
  const size_t in_rb = dtype_row_bytes(from, row), out_rb = dtype_row_bytes(to, row);
  out->resize(size_t(rows) * out_rb);
  std::exception_ptr error;
#pragma omp parallel num_threads(threads)
  {
    std::vector<float> x(row);
#pragma omp for schedule(dynamic, 8)
    for (int64_t r = 0; r < rows; ++r) {
      try {
        const uint8_t* in = src.data + size_t(r) * in_rb;
        const float* values = x.data();
        if (from == DType::F32) {
          std::memcpy(x.data(), in, row * sizeof(float));  // the mapping need not be 4-byte aligned
        } else {
          decode_row(from, in, row, x.data());
        }
        quantize_row(to, values, row, out->data() + size_t(r) * out_rb);
      } catch (...) {
#pragma omp critical(qkv_quantize_error)
        if (!error) error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace

QuantModelInfo quant_model_info(const GGUFFile& g) {
  QuantModelInfo m;
  const GGUFValue* arch = g.find("general.architecture");
  QKV_CHECK(arch && arch->type == GGUFType::STRING, "'", g.path(),
            "' has no general.architecture: llama-quantize's plan needs the model's family");
  m.arch = arch->str;
  QKV_CHECK(m.arch != "falcon", "'", g.path(), "': Falcon models follow extra llama-quantize rules qkv does not have");
  if (const GGUFValue* e = g.find(m.arch + ".expert_count"); e && e->is_integer() && e->as_int() > 1) {
    fail("'", g.path(), "' is a mixture-of-experts model (", e->as_int(),
         " experts): qkv quantize plans dense models only");
  }
  if (const GGUFValue* s = g.find("split.count"); s && s->is_integer() && s->as_int() > 1) {
    fail("'", g.path(), "' is one part of a ", s->as_int(), "-part split model: merge it first (llama-gguf-split --merge)");
  }
  const GGUFValue* layers = g.find(m.arch + ".block_count");
  QKV_CHECK(layers && layers->is_integer() && layers->as_int() > 0, "'", g.path(), "' has no ", m.arch,
            ".block_count: llama-quantize's plan needs the layer count");
  m.n_layers = layers->as_int();
  if (const GGUFValue* h = g.find(m.arch + ".attention.head_count")) m.n_heads = first_int(*h);
  m.n_kv_heads = m.n_heads;
  if (const GGUFValue* h = g.find(m.arch + ".attention.head_count_kv")) m.n_kv_heads = first_int(*h);
  for (const GGUFTensorInfo& t : g.tensors()) {
    if (t.name.find("attn_v.weight") != std::string::npos || t.name.find("attn_qkv.weight") != std::string::npos ||
        t.name.find("attn_kv_b.weight") != std::string::npos) {
      ++m.n_attention_wv;
    } else if (t.name == "output.weight") {
      m.has_output = true;
    }
  }
  return m;
}

QuantizeSummary quantize_gguf(const std::string& in, const std::string& out, const QuantPreset& p,
                              const QuantizeOptions& options) {
  const GGUFFile g = GGUFFile::open(in);
  const QuantModelInfo info = quant_model_info(g);
  const int threads = threads_or_default(options.threads);
  FILE* log = options.log;

  GGUFWriter w(3, g.alignment());
  w.remove("general.alignment");  // copied below in the input's position, if it is there
  for (const auto& [key, value] : g.metadata()) {
    if (key == "general.quantization_version" || key == "general.file_type" || key.rfind("split.", 0) == 0) continue;
    w.set(key, value);
  }
  w.set("general.quantization_version", GGUFValue::u32(2));
  w.set("general.file_type", GGUFValue::u32(quant_preset_file_type(p)));

  // Plan every tensor before writing anything, so a tensor that cannot be
  // quantized fails before any output exists.
  std::vector<std::string> names;
  for (const GGUFTensorInfo& t : g.tensors()) names.push_back(t.name);
  std::vector<Job> jobs;
  bool requantizes = false;
  for (size_t i : llama_tensor_order(names)) {
    const GGUFTensorInfo& t = g.tensors()[i];
    Job job{&t, t.type, t.n_bytes, false, DType::F32, {}};
    if (quant_tensor_quantizable(t.name, t.ne)) {
      job.plan = plan_tensor(p, info, t.name, t.ne[0]);
      const TensorPlan& plan = job.plan;
      QKV_CHECK(!plan.refused, "tensor '", t.name, "' has rows of ", t.ne[0], " values, which ",
                dtype_info(plan.wanted).ggml_name, " cannot hold (it needs a multiple of ",
                dtype_block_values(plan.wanted), "), and llama-quantize has no fallback type for ",
                dtype_info(plan.wanted).ggml_name);
      job.type = dtype_ggml_id(plan.type);
      if (job.type != t.type) {
        DType& from = job.from;
        QKV_CHECK(dtype_from_ggml(t.type, &from), "tensor '", t.name, "' has type ", ggml_type_name(t.type),
                  ", which qkv cannot convert to ", dtype_info(plan.type).ggml_name);
        job.convert = true;
        job.n_bytes = t.n_elements / t.ne[0] * dtype_row_bytes(plan.type, size_t(t.ne[0]));
        requantizes = requantizes || dtype_is_quantized(from);
      }
    }
    QKV_CHECK(job.convert || t.n_bytes > 0 || t.n_elements == 0, "tensor '", t.name, "' has type ",
              ggml_type_name(t.type), ", whose layout qkv does not know, so it cannot be copied");
    w.add_tensor(t.name, job.type, t.ne, nullptr, job.n_bytes);
    jobs.push_back(job);
  }
  if (requantizes && log) {
    std::fprintf(log, "qkv quantize: warning: '%s' holds quantized tensors; they are dequantized to F32 and "
                 "quantized again, which adds the errors of both\n", in.c_str());
  }

  QuantizeSummary sum;
  AtomicFile file(out);
  const std::vector<uint8_t> head = w.header();
  file.write(head.data(), head.size());
  const std::vector<uint8_t> zeros(g.alignment(), 0);
  std::vector<uint8_t> buf;
  for (size_t k = 0; k < jobs.size(); ++k) {
    const Job& job = jobs[k];
    const GGUFTensorInfo& t = *job.src;
    const uint8_t* bytes = t.data;
    if (job.convert) {
      convert_tensor(t, job.from, job.plan.type, threads, &buf);
      bytes = buf.data();
      ++sum.quantized;
    }
    if (job.plan.fell_back) ++sum.fallbacks;
    file.write(bytes, job.n_bytes);
    file.write(zeros.data(), w.padding(job.n_bytes));
    sum.bytes_in += t.n_bytes;
    sum.bytes_out += job.n_bytes;
    if (log && options.progress) {
      std::fprintf(log, "[%4zu/%4zu] %-32s [%s] %s -> %s, %.3f -> %.3f MiB%s%s\n", k + 1, jobs.size(), t.name.c_str(),
                   shape_text(t.ne).c_str(), ggml_type_name(t.type).c_str(), ggml_type_name(job.type).c_str(),
                   mib(t.n_bytes), mib(job.n_bytes), job.convert ? "" : " (copied)",
                   job.plan.fell_back ? (std::string(" (fallback: rows of ") + std::to_string(t.ne[0]) + " do not fit " +
                                         dtype_info(job.plan.wanted).ggml_name + ")").c_str()
                                      : "");
    }
  }
  file.commit();
  sum.tensors = jobs.size();
  return sum;
}

}  // namespace qkv
